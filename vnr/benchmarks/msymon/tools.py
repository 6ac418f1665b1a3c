"""M-SyMoN / YMS command-line tools (not the trainer; never imported by a task).

    python -m vnr.benchmarks.msymon.tools baseline --data_dir D [--manual_dir RELEASE]
    python -m vnr.benchmarks.msymon.tools evaluate --config configs/msymon/yms.py:zeroshot \
        --init_from RUN [--step selected|best|last|N] [--data_dir D] [--manual_dir YMS]
    python -m vnr.benchmarks.msymon.tools punctuate --run RUN --encoder XLMR --src RELEASE \
        --lang hi [--step ...]
    python -m vnr.benchmarks.msymon.tools punctuate --run RUN --encoder XLMR \
        --corpus CORPUS.txt --show 4
    python -m vnr.benchmarks.msymon.tools punctuation_corpus --manual_dir RELEASE \
        --data_dir D --lang ch --out CORPUS.txt
    python -m vnr.benchmarks.msymon.tools scratch_encoder --corpus CORPUS.txt --out ENC
    python -m vnr.benchmarks.msymon.tools crosslingual --config configs/msymon/main.py \
        --workdirs en=DIR ch=DIR ... [--split test] [--step ...]

`baseline`: the transcript-only baseline per language (no video); `evaluate`: a trained
run's model on every `data.test_splits` split (zero-shot transfer, re-scoring);
`crosslingual`: Figure 4's 7x7 matrix from per-language runs; `table3_generate` / `table3`:
every §5.2 regime chained and Table 3 printed (`table3.py`); `punctuate`: Appendix C's
punctuation restoration on `subtitles/<lang>/` with a `main.py:punctuation` run, or with
`--show N` printed for the first N held-out lines of its corpus (the line, its stripped
input, every word's or character's predicted label, the restored text);
`punctuation_corpus` / `scratch_encoder`: a corpus and a random small encoder for a scratch
punctuation run where no XLM-R checkpoint is at hand (`punctuation_scratch.py`). Each run
is read at `--step` (config `init_step`; `selected`, the default, is the step its
results.json reports, i.e. its model selected by validation), through the trainer's
`pretrained` hook and `vnr.evaluate`, with one line naming the step and why.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Any

import numpy as np
from absl import flags

from vnr import cli, evaluate, evaluation, progress, train
from vnr import config as config_lib
from vnr import task as task_lib
from vnr.benchmarks.msymon import alignment, data, table3
from vnr.reports import results

MAIN_CONFIG = str(pathlib.Path(__file__).resolve().parents[3] / "configs/msymon/main.py")


def baseline(data_cfg: Any, splits: list[str], languages: tuple[str, ...] = data.LANGUAGES
             ) -> dict[str, dict[str, float]]:
    """Transcript-only baseline per `<lang>_<split>` that exists: {split: metrics}."""
    have = set(alignment.split_names(data_cfg))
    results = {}
    for split in splits:
        for lang in languages:
            name = f"{lang}_{split}"
            if name not in have:
                continue
            outs = list(data.eval_dataset(data_cfg, name, 8))
            out = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
            res = alignment.score(out, alignment.transcript_alignment(out))
            res["videos"] = float(len(out["labels"]))
            res["narration_from_subtitles"] = float(out["narr_known"][out["sent_mask"]].mean())
            results[name] = res
    return results


def crosslingual(config: Any, workdirs: dict[str, str], split: str, metric: str = "f1",
                 step: str = "selected") -> tuple[dict[tuple[str, str], float], str]:
    """Figure 4: a model trained on language r (row), read at `step`, evaluated on
    `<c>_<split>` (column).

    Returns ({(row, col): value}, a Markdown 7x7 table; "-" where there is no checkpoint
    or no such split)."""
    have = set(alignment.split_names(config.data))
    cells: dict[tuple[str, str], float] = {}
    for row, wd in workdirs.items():
        cfg = config.copy_and_resolve_references()
        cfg.unlock()
        cfg.init_from, cfg.init_step = wd, step
        model = evaluate.from_config(cfg)  # the run's weights in this config's model
        for col in data.LANGUAGES:
            if f"{col}_{split}" in have:
                cells[row, col] = evaluation.evaluate(alignment, cfg, f"{col}_{split}",
                                                      model.predict, model.setup.mesh)[metric]
    head = "| train \\ eval | " + " | ".join(data.LANGUAGES) + " |"
    rows = [head, "|" + "---|" * (len(data.LANGUAGES) + 1)]
    for r in data.LANGUAGES:
        rows.append(f"| {r} | " + " | ".join(
            f"{100 * cells[r, c]:.1f}" if (r, c) in cells else "-" for c in data.LANGUAGES)
            + " |")
    return cells, "\n".join(rows)


def evaluate_run(config: Any) -> dict[str, dict[str, float]]:
    """Evaluation only (zero-shot transfer, or re-scoring a run): the model of
    `config.init_from` through this config's final evaluators (`vnr.evaluate`);
    {split: metrics}."""
    if not config.get("init_from"):
        raise ValueError("evaluation needs init_from=<workdir of a trained alignment run>")
    results = evaluate.final_results(evaluate.from_config(config))
    return {k: v for k, v in results.items() if k != "selection"}


def _restorer(config: Any) -> tuple[Any, Any]:
    """(tokenizer, predict_words) of the punctuation run `config.init_from`."""
    from vnr.benchmarks.msymon import punctuation

    s = train.setup(config)
    fn = functools.partial(s.predict_fn, s.state)
    b = config.eval_batch_size

    def predict_words(ids: np.ndarray) -> np.ndarray:
        rows = evaluation.global_rows({"ids": ids, "labels": np.zeros_like(ids, np.int32)}, b)
        return np.asarray(evaluation.predict_split(rows, fn, s.mesh, name="punctuate")["pred"])

    return punctuation._tokenizer(config), predict_words  # noqa: SLF001


def show_punctuation(config: Any, corpus: pathlib.Path, n: int) -> list[str]:
    """Printable restoration of the first `n` lines of `corpus` in the punctuation task's
    test split (`punctuation.split_of`: lines the run did not train on), `punctuation.show`
    per line."""
    from vnr.benchmarks.msymon import punctuation

    lines = [ln.strip() for ln in corpus.read_text(encoding="utf-8").splitlines()]
    held = [ln for ln in lines if ln and punctuation.split_of(ln) == "test"][:n]
    if not held:
        raise ValueError(f"--corpus {corpus}: no line in the punctuation test split")
    tok, predict_words = _restorer(config)
    out = []
    for i, line in enumerate(held, 1):
        out += [f"[{i}/{len(held)}]", *punctuation.show(tok, predict_words, line,
                                                        config.data.max_tokens), ""]
    return out


def punctuate(config: Any, src: pathlib.Path, lang: str, out: pathlib.Path | None = None
              ) -> dict[str, int]:
    """Appendix C: restores punctuation in `src/subtitles/<lang>/*.json` with the
    punctuation run `config.init_from` (written to `out`, default in place); counts."""
    import json
    import sys

    from vnr.benchmarks.msymon import punctuation

    tok, predict_words = _restorer(config)
    counts = {"files": 0, "sentences": 0, "bad_subtitles": 0}
    dest = (out or src) / "subtitles" / lang
    dest.mkdir(parents=True, exist_ok=True)
    files, every = sorted((src / "subtitles" / lang).glob("*.json")), progress.Every()
    for i, path in enumerate(files):
        every.tick(f"punctuate {lang}: {i} of {len(files)} files")
        try:
            subs = json.loads(path.read_text(encoding="utf-8"))
            texts = [str(e["text"]) for e in subs]
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as e:
            counts["bad_subtitles"] += 1
            print(f"skipped {path}: bad_subtitles ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        new = [punctuation.restore(tok, predict_words, t, config.data.max_tokens) for t in texts]
        (dest / path.name).write_text(json.dumps([{**e, "text": t} for e, t in zip(
            subs, new, strict=True)], ensure_ascii=False, indent=0), encoding="utf-8")
        counts["files"] += 1
        counts["sentences"] += len(new)
    progress.say(f"punctuate {lang}: {counts['files']} files, {counts['sentences']} sentences "
                 f"in {every.took()}")
    return counts


def _baseline_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("data_dir", None, "where the TFDS dataset is (or goes)", required=True,
                        flag_values=fv)
    flags.DEFINE_string("manual_dir", "", "the M-SyMoN release (to build it)", flag_values=fv)
    flags.DEFINE_string("builder_config", "text_only", "msymon builder config",
                        flag_values=fv)
    flags.DEFINE_string("splits", "val,train", "comma-separated: val,train,test",
                        flag_values=fv)
    flags.DEFINE_float("clip_seconds", 3.0, "clip length", flag_values=fv)


def _config_flags(fv: flags.FlagValues, example: str) -> None:
    cli.config_flag(fv, f"Config file: path.py[:args], e.g. {example}; --config.key=value "
                        "overrides it.")
    flags.mark_flag_as_required("config", flag_values=fv)
    flags.DEFINE_string("data_dir", None, "the config's data.data_dir instead", flag_values=fv)
    flags.DEFINE_string("manual_dir", None, "the config's data.manual_dir instead",
                        flag_values=fv)


def _step_flag(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("step", "selected", "the step of each run read: selected (what its "
                        "results.json reports), best, last or a step number", flag_values=fv)


def _evaluate_flags(fv: flags.FlagValues) -> None:
    _config_flags(fv, "configs/msymon/yms.py:zeroshot")
    flags.DEFINE_string("init_from", None, "workdir of the trained run", required=True,
                        flag_values=fv)
    _step_flag(fv)


def _crosslingual_flags(fv: flags.FlagValues) -> None:
    _config_flags(fv, "configs/msymon/main.py")
    flags.DEFINE_multi_string("workdirs", None, "lang=WORKDIR ... (one per row)",
                              required=True, flag_values=fv)
    flags.DEFINE_string("split", "test", "evaluated split of every language", flag_values=fv)
    flags.DEFINE_enum("metric", "f1", alignment.METRICS, "the metric of each cell",
                      flag_values=fv)
    _step_flag(fv)


def _punctuate_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("run", None, "workdir of a main.py:punctuation run", required=True,
                        flag_values=fv)
    flags.DEFINE_string("encoder", None, "the run's model.encoder checkpoint", required=True,
                        flag_values=fv)
    flags.DEFINE_string("src", None, "the release folder (restore its subtitles)",
                        flag_values=fv)
    flags.DEFINE_enum("lang", None, data.LANGUAGES, "the subtitles' language", flag_values=fv)
    flags.DEFINE_string("out", None, "another release folder (default: in place)",
                        flag_values=fv)
    _step_flag(fv)
    flags.DEFINE_integer("show", 0, "print the restoration of this many held-out lines of "
                         "--corpus instead of restoring subtitles", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_string("corpus", None, "the run's data.corpus (with --show)", flag_values=fv)


def _corpus_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("manual_dir", None, "the M-SyMoN release", required=True,
                        flag_values=fv)
    flags.DEFINE_string("data_dir", None, "where its text_only TFDS build is (or goes)",
                        required=True, flag_values=fv)
    flags.DEFINE_enum("lang", None, data.LANGUAGES, "the language", required=True,
                      flag_values=fv)
    flags.DEFINE_string("out", None, "the corpus file to write", required=True, flag_values=fv)


def _scratch_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("corpus", None, "the corpus (its units are the vocabulary)",
                        required=True, flag_values=fv)
    flags.DEFINE_string("out", None, "the encoder directory to write", required=True,
                        flag_values=fv)
    flags.DEFINE_integer("width", 128, "hidden size", lower_bound=8, flag_values=fv)
    flags.DEFINE_integer("layers", 2, "transformer layers", lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("max_tokens", 128, "the longest data.max_tokens it serves",
                         lower_bound=4, flag_values=fv)
    flags.DEFINE_integer("seed", 0, "weight seed", flag_values=fv)


COMMANDS = {
    "baseline": ("transcript-only baseline per language (no video)", _baseline_flags),
    "evaluate": ("evaluate a trained run (e.g. zero-shot on YMS)", _evaluate_flags),
    "crosslingual": ("fill the 7x7 matrix from per-language runs", _crosslingual_flags),
    **table3.COMMANDS,
    "punctuate": ("restore punctuation in subtitles (Appendix C)", _punctuate_flags),
    "punctuation_corpus": ("a language's annotated sentences as a punctuation corpus",
                           _corpus_flags),
    "scratch_encoder": ("a random small XLM-R-shaped encoder for a scratch punctuation run",
                        _scratch_flags),
}


def _main_config(arg: str) -> Any:
    return config_lib.load(f"{MAIN_CONFIG}:{arg}")


def main(argv: list[str] | None = None) -> int:
    import json

    args = cli.parse(argv, "python -m vnr.benchmarks.msymon.tools", __doc__, COMMANDS)
    if args.command in ("punctuation_corpus", "scratch_encoder"):
        from vnr.benchmarks.msymon import punctuation_scratch as scratch

        try:
            res = (scratch.corpus(args.data_dir, args.manual_dir, args.lang,
                                  pathlib.Path(args.out))
                   if args.command == "punctuation_corpus" else
                   scratch.scratch_encoder(pathlib.Path(args.corpus), pathlib.Path(args.out),
                                           args.width, args.layers, max_tokens=args.max_tokens,
                                           seed=args.seed))
        except (OSError, ValueError) as e:
            cli.fail(f"{args.command}: {e}")
        print(json.dumps(res))
        return 0
    if args.command == "punctuate":
        if args.show and not args.corpus:
            cli.fail("--show prints held-out lines of --corpus: give --corpus")
        if not args.show and not (args.src and args.lang):
            cli.fail("punctuate restores --src's subtitles of --lang (or give --show N "
                     "--corpus FILE)")
        cfg = _main_config("punctuation")
        cfg.update({"init_from": args.run, "init_step": args.step, "total_steps": 0})
        cfg.model.encoder = args.encoder
        if args.show:
            try:
                print("\n".join(show_punctuation(cfg, pathlib.Path(args.corpus), args.show)))
            except (OSError, ValueError) as e:
                cli.fail(f"{e}")
            return 0
        try:
            res = punctuate(cfg, pathlib.Path(args.src), args.lang,
                            pathlib.Path(args.out) if args.out else None)
        except (train.ConfigError, ValueError, FileNotFoundError) as e:
            cli.fail(f"{e}")
        print(json.dumps(res))
        return 0
    if args.command.startswith("table3"):
        return table3.command(args, _main_config, train.run)
    if args.command == "baseline":
        import ml_collections

        cfg = ml_collections.ConfigDict(dict(
            builder="msymon", config=args.builder_config, data_dir=args.data_dir,
            manual_dir=args.manual_dir, features=args.builder_config != "text_only", dim=512,
            fps=1.0, clip_seconds=args.clip_seconds, max_tokens=4, vocab_size=64,
            num_workers=0))
        try:
            res = baseline(cfg, args.splits.split(","))
        except (OSError, ValueError) as e:  # a manual_dir that is not the release, ...
            cli.fail(f"baseline: {e}")
        print(json.dumps(res, indent=2))
        print("| split | videos | clip accuracy | sentence IoU | F1 | narration from subtitles |")
        print("|---|---|---|---|---|---|")
        for k, v in res.items():
            cells = " | ".join(f"{100 * v[m]:.1f}" for m in alignment.METRICS)
            print(f"| {k} | {v['videos']:.0f} | {cells} | "
                  f"{100 * v['narration_from_subtitles']:.0f}% |")
        return 0
    cfg = args.config
    for k in ("data_dir", "manual_dir"):
        if getattr(args, k) is not None:
            cfg.data[k] = getattr(args, k)
    bad = [w for w in (args.workdirs if args.command == "crosslingual" else [])
           if "=" not in w or w.split("=")[0] not in data.LANGUAGES]
    if bad:
        cli.fail(f"--workdirs takes lang=DIR with lang in {data.LANGUAGES}: {bad}")
    try:
        if args.command == "evaluate":
            cfg.init_from, cfg.init_step = args.init_from, args.step
            res = evaluate_run(cfg)
            print(json.dumps(res, indent=2))
            print(results.markdown(res, task_lib.columns(alignment, cfg, res)))
            return 0
        _, table = crosslingual(cfg, dict(w.split("=", 1) for w in args.workdirs),
                                args.split, args.metric, args.step)
    except (evaluate.EvaluateError, train.ConfigError, ValueError, FileNotFoundError) as e:
        cli.fail(f"{e}")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
