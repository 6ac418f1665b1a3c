"""Collects finished MoviePuzzle runs into the paper's Table 1 or Table 3 layout (Markdown + CSV).

    python -m vnr.benchmarks.moviepuzzle.tables --workdirs DIR [DIR ...] [--csv table1.csv] \
        [--splits test_in_domain,test_out_domain] [--layout table1|table3]

Each workdir is a `vnr.train` run: `config.json` (what ran) and `results.json` (split ->
metric -> value, written when the run finished). Rows are runs in the given order; the
columns are, for each split, LSD, LMD, SD, SSD (lower is better), OS2, OS3 (higher is
better) with `table1`; with `table3` (accumulation error) the shot clustering IoU (in %,
as the paper prints it), the shot-stage OS2/OS3 ("shot" rows) and the final OS2/OS3
("frame" rows) of HCMC runs. A workdir without `results.json` (still running, crashed,
never started) is listed as missing instead of stopping the table; a split or metric a run
lacks is "-".
"""

from __future__ import annotations

import csv
import json
import pathlib
import sys
from typing import Any

from absl import flags

from vnr import cli
from vnr.benchmarks.moviepuzzle.order_metrics import METRICS

LAYOUTS = {"table1": METRICS, "table3": ("shot_iou", "shot_os2", "shot_os3", "os2", "os3")}
ARROWS = {"lsd": "↓", "lmd": "↓", "sd": "↓", "ssd": "↓", "os2": "↑", "os3": "↑",
          "shot_iou": "↑", "shot_os2": "↑", "shot_os3": "↑"}
SCALE = {"shot_iou": 100.0}  # results hold the IoU in [0, 1]; Table 3 prints percent
SHORT = {"test_in_domain": "in", "test_out_domain": "out"}


def describe(cfg: dict[str, Any]) -> str:
    """A short model description from a run's config.json."""
    m = cfg.get("model", {})
    task, kind = cfg.get("task", "?"), m.get("kind", "pair")
    mods = m.get("modalities", ["vision", "text"])
    mod = "+".join("V" if x == "vision" else "T" for x in mods)
    if task in ("moviepuzzle.pairwise", "moviepuzzle"):  # as older runs name it (vnr.task)
        return f"pair model ({mod}, late fusion; main job)"
    if task == "moviepuzzle.video_pairs":
        return f"video pair {m.get('head', 'nsp').upper()}-style ({m.get('encoder', '?')})"
    if kind == "random":
        return "random"
    if kind == "text_pair":
        return f"text pair {m.get('head', '?').upper()}-style ({_encoder(m.get('encoder', '?'))})"
    if kind == "pair":
        return f"pair model ({mod}, {m.get('fusion', 'late')} fusion)"
    parts = ["HCMC " + "+".join(m.get("levels", ["frame"]))]
    if mod != "V+T":
        parts.append(f"{mod} only")
    if not cfg.get("use_cl", True):
        parts.append("w/o CL")
    elif cfg.get("cl_lambda", 1.0) != 1.0:  # Table 1/2 rows use λ = 1 (Table 10's row)
        parts.append(f"λ={cfg['cl_lambda']:g}")
    if m.get("separate"):
        parts.append(f"separate {m.get('pair_arch', 'transformer')}")
    e = cfg.get("eval", {})
    if e.get("distance", "euclidean") != "euclidean":
        parts.append(e["distance"])
    if e.get("cluster_count", "gt") != "gt":
        parts.append(f"{e['cluster_count']} counts")
    if m.get("image_encoder", "small") != "small":
        enc = _encoder(m["image_encoder"])
        frozen = cfg.get("frozen") or []
        parts.append(f"{enc}, frozen" if frozen else enc)
    return ", ".join(parts)


def _encoder(name: str) -> str:
    """`scratch:clip-tiny` -> `clip-tiny`; a checkpoint directory -> its basename."""
    if name.startswith("scratch:"):
        return name.removeprefix("scratch:")
    return pathlib.PurePath(name.rstrip("/")).name or name


def load_run(workdir: pathlib.Path) -> dict[str, Any]:
    """{name, model, results or None, note} for one workdir; never raises on a bad run."""
    row: dict[str, Any] = {"name": workdir.name, "model": "?", "steps": "?", "results": None,
                           "note": ""}
    try:
        cfg = json.loads((workdir / "config.json").read_text())
        row["model"] = describe(cfg)
        row["steps"] = str(cfg.get("total_steps", "?"))
    except FileNotFoundError:
        row["note"] = "no config.json"
    except (json.JSONDecodeError, AttributeError, TypeError) as e:
        row["note"] = f"unreadable config.json ({e})"
    try:
        row["results"] = json.loads((workdir / "results.json").read_text())
    except FileNotFoundError:
        row["note"] = row["note"] or "missing (no results.json: running, failed or not run)"
    except json.JSONDecodeError as e:
        row["note"] = f"unreadable results.json ({e})"
    return row


def _cell(results: dict | None, split: str, metric: str) -> str:
    v = (results or {}).get(split, {}).get(metric)
    return "-" if v is None else f"{float(v) * SCALE.get(metric, 1.0):.2f}"


def table(rows: list[dict[str, Any]], splits: list[str],
          metrics: tuple[str, ...] = METRICS) -> tuple[list[str], list[list[str]]]:
    head = ["run", "model", "steps"] + [f"{SHORT.get(s, s)} {k.upper()}{ARROWS[k]}"
                               for s in splits for k in metrics]
    body = []
    for r in rows:
        if r["results"] is None:
            body.append([r["name"], f"{r['model']} — {r['note']}", r["steps"]] + ["missing"] * (
                len(head) - 3))
        else:
            body.append([r["name"], r["model"], r["steps"]] + [_cell(r["results"], s, k)
                                                   for s in splits for k in metrics])
    return head, body


def markdown(head: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_multi_string("workdirs", None, "run directories, one per row (several after "
                              "one --workdirs)", required=True, flag_values=fv)
    flags.DEFINE_string("csv", "table1.csv", "CSV output path", flag_values=fv)
    flags.DEFINE_string("splits", "test_in_domain,test_out_domain", "comma-separated result "
                        "splits (column groups)", flag_values=fv)
    flags.DEFINE_enum("layout", "table1", sorted(LAYOUTS), "table1: LSD..OS3; table3: shot "
                      "IoU, shot-stage OS, final OS", flag_values=fv)


def main(argv: list[str] | None = None) -> int:
    a = cli.parse(argv, "python -m vnr.benchmarks.moviepuzzle.tables", __doc__, _flags)
    splits = [s for s in a.splits.split(",") if s]
    rows = [load_run(pathlib.Path(w)) for w in a.workdirs]
    names = [r["name"] for r in rows]
    for r, w in zip(rows, a.workdirs, strict=True):  # same basename twice: add the parent
        if names.count(r["name"]) > 1:
            r["name"] = f"{pathlib.Path(w).absolute().parent.name}/{r['name']}"
    head, body = table(rows, splits, LAYOUTS[a.layout])
    print(markdown(head, body))
    missing = [r["name"] for r in rows if r["results"] is None]
    if missing:
        print(f"\n{len(missing)} run(s) without results: {', '.join(missing)}", file=sys.stderr)
    out = pathlib.Path(a.csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        w.writerows(body)
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
