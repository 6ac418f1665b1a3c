"""SYMON pictures, written by the evaluations into `reports/`.

* `<split>_order.png` (`order.py`): how sure the model is that the segment shown first is
  the earlier one, over all cut pairs of the split (by the truth), then a few pairs: the two
  segments' feature rows (what the model sees: the records hold features, not pixels), the
  narration, the prediction and the truth, right in green and wrong in red.
* `<split>_retrieval.png` (`retrieval.py`): a few text queries with their top-5 clips
  (video, time, score, the clip's own text), the correct ones marked; the rank of the first
  correct clip when none is in the top 5.
* YMS transfer (`yms_transfer.py`): `<split>_alignment.png`, `vnr.reports.figures.alignment`.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence

import numpy as np

from vnr.reports import figures
from vnr.reports.plots import plt

RIGHT, WRONG = "#2ca02c", "#d62728"


@dataclasses.dataclass(frozen=True)
class OrderPair:
    """One cut pair as the model saw it."""

    seg_a: np.ndarray  # [frames, D] features of the segment shown first
    seg_b: np.ndarray
    narration: str
    where: str  # video and cut time
    p_first: float  # P(seg_a is the earlier one)
    a_first: bool  # the truth


def order_pairs(pairs: Sequence[OrderPair], p_first: np.ndarray, a_first: np.ndarray,
                title: str) -> plt.Figure:
    """A histogram of `p_first` over the split by the truth `a_first`, then one row per
    pair: its two segments' features, the narration, prediction and truth."""
    fig = plt.figure(figsize=(8.5, 1.6 + 0.95 * len(pairs)))
    grid = fig.add_gridspec(len(pairs) + 1, 3, width_ratios=(1, 1, 5),
                            height_ratios=(1.6, *[1] * len(pairs)))
    hist = fig.add_subplot(grid[0, :])
    bins = np.linspace(0, 1, 21)
    hist.hist(p_first[a_first], bins, alpha=0.6, color="#1f77b4", label="truth: first earlier")
    hist.hist(p_first[~a_first], bins, alpha=0.6, color="#ff7f0e",
              label="truth: second earlier")
    hist.axvline(0.5, color="0.3", lw=0.8, ls="--")
    hist.set_xlabel("P(the segment shown first is the earlier one)", fontsize=7)
    hist.set_ylabel("pairs", fontsize=7)
    hist.tick_params(labelsize=6)
    hist.legend(fontsize=6, frameon=False)
    right = (p_first > 0.5) == a_first
    hist.set_title(f"{title}: {right.sum()} of {len(right)} pairs ordered right", fontsize=8)
    for i, pair in enumerate(pairs):
        ok = (pair.p_first > 0.5) == pair.a_first
        colour = RIGHT if ok else WRONG
        for j, (seg, name) in enumerate(((pair.seg_a, "shown 1st"), (pair.seg_b, "shown 2nd"))):
            ax = fig.add_subplot(grid[i + 1, j])
            ax.imshow(np.asarray(seg, np.float32).T[:48], aspect="auto", cmap="magma",
                      interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_xlabel(name, fontsize=6, labelpad=1)
            for spine in ax.spines.values():
                spine.set_edgecolor(colour)
                spine.set_linewidth(2)
        ax = fig.add_subplot(grid[i + 1, 2])
        ax.axis("off")
        said = "1st" if pair.p_first > 0.5 else "2nd"
        truth = "1st" if pair.a_first else "2nd"
        ax.text(0, 0.95, f"{pair.where}: P(1st earlier) = {pair.p_first:.2f}, predicted the "
                f"{said} earlier, truth the {truth}: {'right' if ok else 'wrong'}",
                fontsize=7, color=colour, weight="bold", va="top", transform=ax.transAxes)
        ax.text(0, 0.6, textwrap.fill(pair.narration or "(no narration)", 95)[:300],
                fontsize=6.5, va="top", transform=ax.transAxes)
    fig.text(0.01, 0.005, "segments: feature rows (time, left to right) x first 48 feature "
             "dimensions; the records hold features, not pixels", fontsize=6, color="0.4")
    return fig


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A retrieved clip."""

    where: str  # video and time
    text: str  # the clip's own text
    score: float
    correct: bool


@dataclasses.dataclass(frozen=True)
class Query:
    """A text query with its best clips and the rank of its first correct clip."""

    text: str
    where: str
    top: Sequence[Candidate]
    first_correct: int  # rank (1-based), 0 when it has no correct clip in its pool


def retrieval_queries(queries: Sequence[Query], title: str, width: int = 105) -> plt.Figure:
    """One block per query: the query, then its top clips, correct in green."""
    lines: list[list[figures.Piece]] = []
    for q in queries:
        rank = f"first correct clip at rank {q.first_correct}" if q.first_correct else \
            "no correct clip in its pool"
        lines += [[("query ", {"color": "0.4"}), (f"{q.where}: ", {"weight": "bold"}),
                   (rank, {"color": "0.4"})]]
        lines += [[("   ", {}), *part] for part in figures.wrap([(q.text, {})], width)][:2]
        for i, c in enumerate(q.top):
            mark = {"color": RIGHT if c.correct else WRONG, "weight": "bold"}
            head = (f"   {i + 1}. {'correct' if c.correct else 'wrong  '} ", mark)
            where = (f"{c.where}, score {c.score:.2f}: ", {"color": "0.3"})
            room = max(width - len(head[0]) - len(where[0]), 10)
            lines.append([head, where, (textwrap.shorten(c.text or "(no text)", room,
                                                          placeholder=" ..."), {})])
        lines.append([])
    return figures.text_lines(lines, f"{title}: text queries and their top {len(queries[0].top)}"
                              f" clips (correct: one of the query's own nearest clips)"
                              if queries else title)
