"""Sc2St picture: a storyboard's history keyframes, then the top-5 candidates of a round.

`<split>_storyboard.png` (written by `task.eval_metrics` into `reports/`): the first
storyboard of the split at its last round t: keyframes 1..t-1 with their sentences (the
history), then the sentence of keyframe t (the query) and the model's five best candidates
with their rank and score, the right one marked (added as a last tile, with its rank, when
it is not among them). The records hold keyframe ids and features, not pixels: a keyframe
is drawn from its JPEG when its id is a frame file under `data.manual_dir` (LSMDC frames/
input), else as a grey tile naming the keyframe (generated data, features/ input).
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence

import numpy as np

from vnr.reports.plots import plt

RIGHT, WRONG = "#2ca02c", "#d62728"


@dataclasses.dataclass(frozen=True)
class Keyframe:
    """One tile: its name (frame id, movie), sentence, pixels if any and caption."""

    name: str
    sentence: str = ""  # "" when unknown (an isolated keyframe)
    pixels: np.ndarray | None = None
    caption: str = ""  # above the tile: position, or rank and score
    right: bool | None = None  # candidates: whether this is the right one


def storyboard(history: Sequence[Keyframe], query: str, candidates: Sequence[Keyframe],
               title: str) -> plt.Figure:
    """Row 1: the history; row 2: the query sentence, then the candidates."""
    cols = max(len(history), len(candidates) + 1, 2)
    fig, axes = plt.subplots(2, cols, figsize=(1.45 * cols, 4.6), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, frame in zip(axes[0], history):
        _tile(ax, frame)
    q = axes[1, 0]
    q.text(0.5, 0.5, textwrap.fill(f"query (keyframe {len(history) + 1}): {query}", 18),
           ha="center", va="center", fontsize=7, transform=q.transAxes,
           bbox={"boxstyle": "round", "fc": "#fff3cd", "ec": "0.6"})
    for ax, frame in zip(axes[1, 1:], candidates):
        _tile(ax, frame)
    fig.suptitle(f"{title}\nhistory keyframes (top), the query sentence and the best "
                 f"candidates (bottom; green = the right one)", fontsize=8)
    return fig


def _tile(ax: plt.Axes, frame: Keyframe) -> None:
    """A keyframe: its pixels or a grey box naming it, the caption above, the sentence
    below; candidates framed green (right) or red."""
    ax.axis("on")
    ax.set_xticks([])
    ax.set_yticks([])
    if frame.pixels is not None:
        ax.imshow(frame.pixels)
    else:
        ax.set_facecolor("0.88")
        name = "\n".join(textwrap.fill(part, 17) for part in frame.name.split("\n"))
        ax.text(0.5, 0.5, name[:160], ha="center", va="center", fontsize=5, color="0.3",
                transform=ax.transAxes)
    colour = "0.5" if frame.right is None else RIGHT if frame.right else WRONG
    for spine in ax.spines.values():
        spine.set_edgecolor(colour)
        spine.set_linewidth(1 if frame.right is None else 2.5)
    ax.set_title(frame.caption, fontsize=7, color=colour if frame.right else "black")
    ax.text(0.5, -0.04, textwrap.fill(frame.sentence or "(no sentence)", 20)[:90],
            ha="center", va="top", fontsize=5.5, transform=ax.transAxes)
