"""Table 3 (and 14): every §5.2 training regime, chained as the paper does, F1 per language.

    python -m vnr.benchmarks.msymon.tools table3_generate --out DIR [--dim 32]
    python -m vnr.benchmarks.msymon.tools table3 --manual_dir RELEASE \
        --translated_dir RELEASE_EN --workdir RUNS [--config_args synthetic] \
        [--set total_steps=150 ...] [--finetune_set total_steps=60 ...]

`generate` writes the generated corpus twice in the release layout (val.json empty for all
languages but ru, test.json everywhere, weak subtitles, movies.json): `DIR/original` and
`DIR/translated` (the same videos with every sentence in English: a perfect translation).
`run` trains, in order: multilingual, individual:<l>, translate, two_stage:<l> (from
translate), translate_supervision (from translate), two_stage_supervision:<l> (from
two_stage:<l>), each with `configs/msymon/main.py:<regime>[,<config_args>]` and the `--set`
overrides (`--finetune_set` for the runs that start from another run), and prints the rows
of Table 3 (F1) and Table 14 (clip accuracy / sentence IoU) with the chosen (d_v, d_t).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

from absl import flags

from vnr import config as config_lib

LANGS = ("en", "ch", "es", "fr", "pt", "hi", "ru")
ROWS = ("multilingual", "individual", "translate", "two_stage", "translate_supervision",
        "two_stage_supervision")


def generate(out: pathlib.Path, dim: int, sizes: dict[str, int], seed: int = 0) -> None:
    from tfds_builders.msymon import write_synthetic

    write_synthetic(out / "original", seed=seed, dim=dim, sizes=sizes, release_layout=True)
    write_synthetic(out / "translated", seed=seed, dim=dim, sizes=sizes, release_layout=True,
                    translate_to="en")


def _config(get_config: Callable, regime: str, args: Any, translated: bool,
            init_from: str = ""):
    c = get_config(",".join(x for x in (regime, args.config_args) if x))
    root = args.translated_dir if translated else args.manual_dir
    data_dir = pathlib.Path(args.workdir) / ("tfds_translated" if translated else "tfds")
    c.data.update(manual_dir=str(root), data_dir=str(data_dir))
    if c.model.get("encoder", "features") == "features":  # `cclm` reads the videos instead
        c.data.update(config="features", dim=args.dim)
    config_lib.override(c, args.set)
    if init_from:
        c.init_from = init_from
        config_lib.override(c, args.finetune_set)
    return c


def run_all(args: Any, get_config: Callable, run: Callable
            ) -> dict[str, dict[str, dict[str, float]]]:
    """{row: {lang: test metrics}}; each run's workdir is `<workdir>/<regime>[_<lang>]`.
    `get_config`: configs/msymon/main.py's; `run`: the trainer's `vnr.train.run`."""
    base = pathlib.Path(args.workdir)
    table: dict[str, dict[str, dict[str, float]]] = {r: {} for r in ROWS}
    langs = args.languages.split(",")

    def go(name: str, regime: str, translated: bool, init: str = "") -> str:
        wd = base / name
        res = run(_config(get_config, regime, args, translated, init), str(wd))
        row = regime.split(":")[0]
        for split, metrics in res.items():
            lang = split.removesuffix("_test")
            if split.endswith("_test") and lang in langs:
                table[row][lang] = metrics
        (base / "table3.json").write_text(json.dumps(table, indent=1))
        return str(wd)

    go("multilingual", "multilingual", False)
    for lang in langs:
        go(f"individual_{lang}", f"individual:{lang}", False)
    tr = go("translate", "translate", True)
    for lang in langs:
        ts = go(f"two_stage_{lang}", f"two_stage:{lang}", False, tr)
        go(f"two_stage_supervision_{lang}", f"two_stage_supervision:{lang}", False, ts)
    go("translate_supervision", "translate_supervision", True, tr)
    return table


def markdown(table: dict, metric: str = "f1") -> str:
    head = "| " + metric + " | " + " | ".join(LANGS) + " | average |"
    lines = [head, "|" + "---|" * (len(LANGS) + 2)]
    for row in ROWS:
        vals = [table.get(row, {}).get(lang, {}).get(metric) for lang in LANGS]
        have = [v for v in vals if v is not None]
        avg = f"{100 * sum(have) / len(have):.1f}" if have else "-"
        lines.append(f"| {row} | " + " | ".join(
            "-" if v is None else f"{100 * v:.1f}" for v in vals) + f" | {avg} |")
    return "\n".join(lines)


def _generate_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("out", None, "where the two corpora go", required=True, flag_values=fv)
    flags.DEFINE_integer("dim", 32, "feature width", flag_values=fv)
    flags.DEFINE_string("sizes", "train=6,val=3,test=4,weak=12", "videos per split",
                        flag_values=fv)


def _run_flags(fv: flags.FlagValues) -> None:
    for name, what in (("manual_dir", "the release"), ("translated_dir", "the translated "
                       "release"), ("workdir", "where every run goes")):
        flags.DEFINE_string(name, None, what, required=True, flag_values=fv)
    flags.DEFINE_integer("dim", 512, "feature width", flag_values=fv)
    flags.DEFINE_string("config_args", "", "e.g. synthetic (generated-corpus sizes)",
                        flag_values=fv)
    flags.DEFINE_string("languages", ",".join(LANGS), "comma-separated", flag_values=fv)
    flags.DEFINE_multi_string("set", [], "config overrides key=value (several after one "
                              "--set, or --set repeated)", flag_values=fv)
    flags.DEFINE_multi_string("finetune_set", [], "overrides for runs that start from "
                              "another run", flag_values=fv)


COMMANDS = {"table3_generate": ("the generated corpus, original and translated",
                                _generate_flags),
            "table3": ("train every §5.2 regime and print Table 3", _run_flags)}


def command(args: Any, get_config: Callable, run: Callable) -> int:
    """Runs `table3_generate` or `table3` (`args`: `vnr.cli.parse`'s)."""
    if args.command == "table3_generate":
        sizes = {k: int(v) for k, v in (x.split("=") for x in args.sizes.split(","))}
        generate(pathlib.Path(args.out), args.dim, sizes)
        return 0
    table = run_all(args, get_config, run)
    for metric in ("f1", "clip_accuracy", "sentence_iou", "transcript_f1"):
        print(markdown(table, metric), end="\n\n")
    return 0
