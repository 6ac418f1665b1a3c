"""Reference: the TNG evaluation rule of Movie101's RNL code (yuezih/Movie101,
Movie101v1/baseline/CNCLIP+RNL/RNL/criteria.py), restated step by step in plain Python
lists and floats, one query at a time, so `vnr.benchmarks.movie101.grounding_metrics` (NumPy,
vectorised) can be checked against it. Not imported by the project.

The rule:
  * IoU of index boxes (a, b) with both ends included: the union runs from the smaller
    first index to the larger last index, the intersection from the larger first index to
    the smaller last index; IoU = (inter_last - inter_first + 1) / (union_last -
    union_first + 1); 0 if the union is empty (negative length) or the IoU is negative.
  * NMS with threshold `overlap`: order the candidates by ascending score with a stable
    sort and repeatedly take the LAST one; stop after the 7th pick; every remaining
    candidate whose overlap with the pick is at most `overlap` survives, where overlap =
    intersection / (length_pick + length_other - intersection), lengths and intersection
    measured as last - first (intersection floored at 0); a 0/0 overlap is not "at most".
  * For each IoU threshold m in (0.1, 0.3, 0.5, 0.7): NMS at m - 0.05; for top-n in (1, 5)
    the query counts 1 when one of the first n picks has IoU >= m with the ground truth.
"""

from __future__ import annotations

import math


def iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    union_first, union_last = min(a[0], b[0]), max(a[1], b[1])
    inter_first, inter_last = max(a[0], b[0]), min(a[1], b[1])
    if union_last - union_first < -1e-5:
        return 0.0
    value = (inter_last - inter_first + 1.0) / (union_last - union_first + 1.0)
    return value if value >= 0.0 else 0.0


def nms(scores: list[float], boxes: list[tuple[float, float]], overlap: float) -> list[int]:
    remaining = [i for i, _ in sorted(enumerate(scores), key=lambda p: p[1])]
    picks: list[int] = []
    while remaining:
        best = remaining[-1]
        picks.append(best)
        if len(picks) > 6:
            break
        kept = []
        for other in remaining[:-1]:
            inter = max(0.0, min(boxes[best][1], boxes[other][1])
                        - max(boxes[best][0], boxes[other][0]))
            den = (boxes[best][1] - boxes[best][0]) + (boxes[other][1] - boxes[other][0]) - inter
            lap = inter / den if den != 0 else (math.nan if inter == 0 else math.inf)
            if lap <= overlap:
                kept.append(other)
        remaining = kept
    return picks


def recall(scores: list[float], boxes: list[tuple[float, float]], gt: tuple[float, float],
           ns: tuple[int, ...] = (1, 5), ms: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7)
           ) -> dict[str, int]:
    out = {}
    for m in ms:
        picks = nms(scores, boxes, m - 0.05)
        for n in ns:
            out[f"R@{n},IoU@{m}"] = int(any(iou(gt, boxes[p]) >= m for p in picks[:n]))
    return out
