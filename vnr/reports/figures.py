"""Figures more than one benchmark draws (benchmarks do not import each other).

* `alignment`: a video's clip x sentence similarity with a predicted alignment (the
  Drop-DTW path of M-SyMoN, the argmax rule of YMS transfer), the ground truth and what is
  left without a match (M-SyMoN / YMS pictures).
* `text_lines`: lines of styled text pieces, each piece drawn where the last one ends, so a
  name can be coloured inside a sentence (Movie101 narrations, SYMON retrieval queries).

Written through `plots.report`, like every figure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.lines import Line2D

from vnr.reports.plots import plt


@dataclasses.dataclass(frozen=True)
class AlignedVideo:
    """One video of the alignment picture."""

    sim: np.ndarray  # [C, S] similarity of its real clips and sentences
    truth: np.ndarray  # [C] annotated sentence per clip, -1 none, -2 ignored
    pred: np.ndarray  # [C] predicted sentence per clip, -1 none (dropped)
    title: str


def alignment(videos: Sequence[AlignedVideo], title: str, how: str) -> plt.Figure:
    """One panel per video: sentences (y) x clips (x, time order), the `how` alignment as
    dots joined in clip order, the truth as open squares; strips under the matrix (clips)
    and left of it (sentences) mark what has no match: in the truth (grey), in the
    prediction (red x: dropped)."""
    fig, axes = plt.subplots(1, len(videos), figsize=(5.2 * len(videos), 4.6), squeeze=False)
    for ax, video in zip(axes[0], videos):
        c, s = video.sim.shape
        im = ax.imshow(np.asarray(video.sim, np.float32).T, cmap="viridis", aspect="auto",
                       extent=(-0.5, c - 0.5, s - 0.5, -0.5))
        gt, got = np.asarray(video.truth), np.asarray(video.pred)
        clips, sents = np.arange(c), np.arange(s)
        on, hit = gt >= 0, got >= 0
        ax.scatter(clips[on], gt[on], marker="s", s=60, facecolors="none",
                   edgecolors="white", linewidths=1.4)
        ax.plot(clips[hit], got[hit], "-o", color="#ff7f0e", ms=4, lw=1.2, label=how)
        ax.scatter(clips[gt == -1], np.full((gt == -1).sum(), s + 0.1), marker="o", s=18,
                   color="0.5", label="without a match (truth)")
        ax.scatter(clips[~hit], np.full((~hit).sum(), s + 0.9), marker="x", s=22,
                   color="red", label=f"dropped ({how})")
        unlabelled, untaken = ~np.isin(sents, gt[on]), ~np.isin(sents, got[hit])
        ax.scatter(np.full(unlabelled.sum(), -1.1), sents[unlabelled], marker="o", s=18,
                   color="0.5")
        ax.scatter(np.full(untaken.sum(), -1.9), sents[untaken], marker="x", s=22, color="red")
        ax.set_xlim(-2.5, c - 0.5)
        ax.set_ylim(s + 1.5, -0.5)
        step = max(1, s // 8)
        ax.set_yticks([*range(0, s, step), s + 0.1, s + 0.9],
                      [*map(str, range(0, s, step)), "truth", "dropped"])
        ax.set_xticks(range(0, c, max(1, c // 10)))
        ax.set_xlabel("clip (time order); left of the matrix: dropped, truth", fontsize=8)
        ax.set_ylabel("sentence", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_title(video.title, fontsize=8)
        bar = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
        bar.set_label("similarity", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    truth = Line2D([], [], ls="", marker="s", mfc="none", mec="black", label="ground truth")
    handles = [truth, *axes[0, 0].get_legend_handles_labels()[0]]
    axes[0, 0].legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, -0.13), ncol=2,
                      fontsize=7, frameon=False)
    fig.suptitle(f"{title}: clip x sentence similarity with the {how} alignment and the "
                 "ground truth", fontsize=9)
    return fig


Piece = tuple[str, dict[str, Any]]  # text and its text properties (color, weight, ...)


def text_lines(lines: Sequence[Sequence[Piece]], title: str, width: float = 8.0
               ) -> plt.Figure:
    """One line per entry (an empty one is a gap), its pieces one after the other."""
    fig = plt.figure(figsize=(width, 0.5 + 0.2 * len(lines)))
    fig.set_layout_engine(PlaceHolderLayoutEngine(False, False))  # placed by hand: no layout
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    step = 1 / (len(lines) + 2)
    ax.text(0.01, 1 - 0.5 * step, title, fontsize=7, va="center")
    for i, pieces in enumerate(lines):
        anchor = None
        for text, style in pieces:  # each piece starts where the last one ends
            props = {"fontsize": 7, **style}
            anchor = ax.text(0.01, 1 - (i + 1.5) * step, text, va="center", **props) \
                if anchor is None else ax.annotate(text, xycoords=anchor, xy=(1, 0),
                                                   va="bottom", **props)
    return fig


def wrap(pieces: Sequence[Piece], width: int) -> list[list[Piece]]:
    """Pieces cut into lines of at most `width` characters (a piece may be split; a
    continued line starts with its first word)."""
    lines: list[list[Piece]] = [[]]
    used = 0
    for text, style in pieces:
        while text:
            if used >= width:
                lines.append([])
                used = 0
            part = text[:width - used]
            lines[-1].append((part, style))
            used += len(part)
            text = text[len(part):]
    lines = [line for line in lines if line]
    for line in lines[1:]:
        line[0] = (line[0][0].lstrip(), line[0][1])
    return lines
