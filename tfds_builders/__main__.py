"""Build the project's TFDS datasets without tensorflow (`tfds build` needs it; this does not).

    python -m tfds_builders build <name> --config <cfg> [--manual_dir DIR] --data_dir OUT
                                 [--rebuild] [--embedder module:function]
                                 [--candidate_embedder module:function]
                                 [--feature_embedder module:function]
                                 [--expert name=module:function ...]

A thin wrapper over `download_and_prepare`: imports `tfds_builders.<name>`, builds the config
and prints the build summary (examples per split, skipped inputs by reason). A dataset already
built under `--data_dir` is reused only when it was built from the same source (the files of
`--manual_dir`, the builder options and the functions named by `--embedder` and the other
model flags, `tfds_builders/fingerprint.py`); another source stops
with one line, and `--rebuild` builds it again from the source given. Builders that
embed their inputs with a model (Sc2St keyframes) take the embedding function as an argument;
`--embedder` names it (Sc2St: `vnr.benchmarks.sc2st.embedders:clip_embedder`; a builder that
needs one and gets none stops with one line), so no builder imports the model code itself.
`--candidate_embedder` names the optional image model that ranks similar candidates (Sc2St
§4.1.3); `--feature_embedder` the image model whose embeddings are the stored features of a
config naming a `feature_encoder` (Sc2St `lsmdc_paper`: Inception-v3, Appendix A.1); each
`--expert` one MoEE expert of the config (Sc2St §4.3.2, `*_experts` configs).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import tensorflow_datasets as tfds
from absl import flags

from tfds_builders import common, data_dir, fingerprint, progress


def find_builder(name: str) -> type:
    """The builder class of `tfds_builders.<name>` (its `Builder`, or its only DatasetBuilder)."""
    try:
        module = importlib.import_module(f"tfds_builders.{name}")
    except ModuleNotFoundError as e:
        if e.name in (f"tfds_builders.{name}", "tfds_builders"):
            raise SystemExit(
                f"error: no builder named {name!r} (no module tfds_builders.{name})"
            ) from None
        raise
    cls = getattr(module, "Builder", None)
    if cls is None:
        found = [
            v
            for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, tfds.core.DatasetBuilder)
        ]
        if len(found) != 1:
            raise SystemExit(f"error: tfds_builders.{name} must define `Builder`")
        cls = found[0]
    return cls


def load_function(spec: str) -> Any:
    """The function `module:function` names (SystemExit with one line when there is none)."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise SystemExit(f"error: --embedder {spec!r}: use module:function")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise SystemExit(f"error: --embedder {spec!r}: {e}") from None


def build(
    name: str,
    config: str | None,
    data_dir: str,
    manual_dir: str | None = None,
    download_dir: str | None = None,
    overwrite: bool = False,
    embedder: str | None = None,
    candidate_embedder: str | None = None,
    experts: list[str] | None = None,
    feature_embedder: str | None = None,
) -> dict[str, Any]:
    """Builds `name`/`config` (if needed) and returns its summary dict."""
    cls = find_builder(name)
    if (embedder or candidate_embedder or feature_embedder) and not hasattr(
            cls, "DEFAULT_EMBEDDER"):
        raise SystemExit(f"error: {name} takes no --embedder / --candidate_embedder / "
                         "--feature_embedder")
    spec = embedder or getattr(cls, "DEFAULT_EMBEDDER", None)
    extra = {"embedder": load_function(spec)} if spec else {}
    if candidate_embedder:
        extra["candidate_embedder"] = load_function(candidate_embedder)
    if feature_embedder:
        extra["feature_embedder"] = load_function(feature_embedder)
    if experts:
        pairs = [e.partition("=") for e in experts]
        if any(not n or not f for n, _, f in pairs):
            raise SystemExit(f"error: --expert {experts}: use name=module:function")
        extra["experts"] = {n: load_function(f) for n, _, f in pairs}
    configs = [c.name for c in getattr(cls, "BUILDER_CONFIGS", [])]
    if config is None and configs:
        config = getattr(cls, "DEFAULT_CONFIG_NAME", None) or configs[0]
    if configs and config not in configs:
        raise SystemExit(f"error: {name} has no config {config!r}; choose one of {configs}")
    if hasattr(cls, "check_inputs"):  # the builder's own one-line check of its inputs
        cls.check_inputs(config, manual_dir)
    elif manual_dir is not None and not os.path.isdir(manual_dir):
        raise common.ManualDirError(f"manual_dir {manual_dir} does not exist")
    builder = (cls(config=config, data_dir=data_dir, **extra) if configs
               else cls(data_dir=data_dir, **extra))
    reused = progress.is_built(builder) and not overwrite
    if reused:  # only if built from this source (a SourceChanged line otherwise)
        fingerprint.check(builder, manual_dir)
    mode = (
        tfds.download.GenerateMode.REUSE_CACHE_IF_EXISTS
        if overwrite
        else tfds.download.GenerateMode.REUSE_DATASET_IF_EXISTS
    )
    builder.download_and_prepare(
        download_dir=download_dir,
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir, download_mode=mode),
    )
    summary = common.read_summary(builder)
    summary["reused"] = reused
    return summary


PROG = "python -m tfds_builders"
HELP = ("--help", "-h", "--helpshort", "--helpfull", "-?")


def build_flags() -> flags.FlagValues:
    """The flags of `build`, on their own FlagValues (absl, as vnr's tools; builders do not
    import vnr, so this is not `vnr/cli.py`)."""
    fv = flags.FlagValues()
    flags.DEFINE_string("config", None, "builder config (default: the builder's default)",
                        flag_values=fv)
    flags.DEFINE_string("data_dir", None, "where the built dataset is written", required=True,
                        flag_values=fv)
    flags.DEFINE_string("manual_dir", None, "input files for configs that need them",
                        flag_values=fv)
    flags.DEFINE_string("download_dir", None, "default: <data_dir>/downloads", flag_values=fv)
    flags.DEFINE_bool("rebuild", False, "build again even if already built (e.g. from another "
                      "manual_dir)", flag_values=fv)
    flags.DEFINE_alias("overwrite", "rebuild", flag_values=fv)
    flags.DEFINE_string("embedder", None, "module:function making the builder's embedder "
                        "(Sc2St keyframes: vnr.benchmarks.sc2st.embedders:clip_embedder)",
                        flag_values=fv)
    flags.DEFINE_string("candidate_embedder", None, "module:function making the image model "
                        "that ranks similar candidates (Sc2St §4.1.3; optional)", flag_values=fv)
    flags.DEFINE_string("feature_embedder", None, "module:function making the image model of "
                        "the stored features, for a config naming a feature_encoder (Sc2St "
                        "lsmdc_paper: vnr.benchmarks.sc2st.embedders:image_embedder)",
                        flag_values=fv)
    flags.DEFINE_multi_string("expert", None, "name=module:function, one per MoEE expert the "
                              "config stores (Sc2St: scene=vnr.benchmarks.sc2st.embedders:"
                              "scene_expert, object=..., character=...)", flag_values=fv)
    flags.DEFINE_bool("verify", False, "record the release files' contents (sha256) when "
                      "building, and compare them when reusing: for releases edited in place "
                      "at the same sizes and times (reads every byte of the release)",
                      flag_values=fv)
    flags.DEFINE_bool("verbose", False, "show TFDS's own log lines", short_name="v",
                      flag_values=fv)
    return fv


def _usage_error(message: str) -> int:
    print(f"error: {message} ({PROG} --help describes the command line)", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    fv = build_flags()
    if not argv or argv[0] in HELP or (argv[0] == "build" and any(a in HELP for a in argv)):
        lines = fv.get_help(prefix="", include_special_flags=False).splitlines()
        print(f"{__doc__.strip()}\n\nusage: {PROG} build <name> [flags]\n\nflags:")
        print("\n".join(line for line in lines if line.startswith(" ")))
        return 0 if argv else 2
    if argv[0] != "build":
        return _usage_error(f"unknown command {argv[0]!r}; the command is build")
    try:
        names = fv([PROG, *argv[1:]])[1:]
    except flags.Error as e:
        return _usage_error(str(e))
    if len(names) != 1:
        return _usage_error(f"build takes one builder name (a module under tfds_builders/), "
                            f"got {names or 'none'}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    if not fv.verbose:
        logging.getLogger("absl").setLevel(logging.ERROR)
    fingerprint.VERIFY = fv.verify
    try:
        data_dir.check(fv.data_dir)  # before any input is read
        summary = build(names[0], fv.config, fv.data_dir, fv.manual_dir, fv.download_dir,
                        fv.rebuild, fv.embedder, fv.candidate_embedder, fv.expert,
                        fv.feature_embedder)
    except (common.ManualDirError, FileNotFoundError,  # inputs or model weights missing
            fingerprint.SourceChanged, fingerprint.SpecialFile, data_dir.DataDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a data_dir the build cannot write into (else not ours: raised)
        if (line := data_dir.failed_write(e, fv.data_dir)) is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    if summary.pop("reused"):
        print("already built from this source; reusing it (pass --rebuild to build again)")
    print(common.format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
