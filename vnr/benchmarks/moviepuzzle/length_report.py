"""Figures 9-11 as tables: OS by clip length, by frames per shot and by frames per scene.

Every MoviePuzzle evaluation with a report directory writes `<workdir>/reports/
<split>_clips.jsonl`, one line per clip (`write_clips`): its frame, shot and scene counts
and its OS2/OS3. This module reads those files back:

    python -m vnr.benchmarks.moviepuzzle.length_report WORKDIR [WORKDIR ...] [--by frames]

prints, per run and split, the mean OS2/OS3 (%) for each value of `--by`: `frames` (clip
length, Figures 9 and 10), `shot_len` (mean frames per shot, rounded: Figure 11a) or
`scene_len` (mean frames per scene, rounded: Figure 11b). The paper's figures are plots
of the same quantities; the paper gives no numbers to compare with.
"""

from __future__ import annotations

import collections
import json
import pathlib
from typing import Any

import numpy as np
from absl import flags

from vnr import cli
from vnr.benchmarks.moviepuzzle.order_metrics import ordering_score

KEYS = ("frames", "shot_len", "scene_len")


def clip_rows(pred: np.ndarray, gt: np.ndarray, mask: np.ndarray, shot_id: np.ndarray,
              scene_id: np.ndarray) -> list[dict[str, Any]]:
    """One dict per clip: frames, shots, scenes, shot_len, scene_len, os2, os3 (%)."""
    mask = np.asarray(mask, bool)
    n = mask.sum(1)
    os2 = 100.0 * np.asarray(ordering_score(pred, gt, 2, mask))
    ok3 = n >= 3
    os3 = np.full(len(n), np.nan)
    if ok3.any():
        os3[ok3] = 100.0 * np.asarray(ordering_score(pred[ok3], gt[ok3], 3, mask[ok3]))
    rows = []
    for b in range(len(n)):
        shots = len(set(np.asarray(shot_id)[b][mask[b]].tolist()))
        scenes = len(set(np.asarray(scene_id)[b][mask[b]].tolist()))
        rows.append({"frames": int(n[b]), "shots": shots, "scenes": scenes,
                     "shot_len": round(n[b] / max(shots, 1)),
                     "scene_len": round(n[b] / max(scenes, 1)),
                     "os2": float(os2[b]), "os3": None if np.isnan(os3[b]) else float(os3[b])})
    return rows


def write_clips(path: pathlib.Path, rows: list[dict[str, Any]]) -> None:
    """One JSON line per clip; an unwritable folder is one warning (`plots.written`)."""
    from vnr.reports import plots

    plots.written(path, "".join(json.dumps(r) + "\n" for r in rows))


def by_value(rows: list[dict[str, Any]], key: str) -> dict[int, tuple[int, float, float]]:
    """{value of key: (clips, mean OS2, mean OS3)} in increasing order of the value."""
    if key not in KEYS:
        raise ValueError(f"by={key!r}: use one of {KEYS}")
    groups: dict[int, list[dict]] = collections.defaultdict(list)
    for r in rows:
        groups[int(r[key])].append(r)
    out = {}
    for v in sorted(groups):
        g = groups[v]
        os3 = [r["os3"] for r in g if r["os3"] is not None]
        out[v] = (len(g), float(np.mean([r["os2"] for r in g])),
                  float(np.mean(os3)) if os3 else float("nan"))
    return out


def main(argv: list[str] | None = None) -> None:
    a = cli.parse(argv, "python -m vnr.benchmarks.moviepuzzle.length_report", __doc__,
                  lambda fv: flags.DEFINE_enum("by", "frames", KEYS, "what the rows group by",
                                               flag_values=fv), operands="WORKDIR ...")
    if not a.operands:
        cli.fail("name one or more finished runs: WORKDIR ...")
    for wd in a.operands:
        files = sorted(pathlib.Path(wd, "reports").glob("*_clips.jsonl"))
        if not files:
            print(f"{wd}: no reports/*_clips.jsonl (a finished evaluation writes them)")
            continue
        for f in files:
            rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            print(f"\n{wd} {f.name.removesuffix('_clips.jsonl')} (by {a.by})")
            print(f"| {a.by} | clips | OS2 | OS3 |\n|---|---|---|---|")
            for v, (count, os2, os3) in by_value(rows, a.by).items():
                print(f"| {v} | {count} | {os2:.2f} | {os3:.2f} |")


if __name__ == "__main__":
    main()
