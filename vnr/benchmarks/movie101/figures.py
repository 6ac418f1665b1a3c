"""Movie101 pictures, written by the evaluations into `reports/`.

* `<split>_grounding.png` (TNG, `tng.py`): a few narrations, one row each, on the movie
  timeline (seconds): the true span (green), the model's top-k spans (orange, numbered by
  rank), and the window the local stage searched (grey) or, for global shot retrieval, the
  shots that count as a hit (light green).
* `<split>_narrations.png` (MCN, `mcn.py`): a few clips with their reference and generated
  narrations; the names the role pointer wrote are highlighted in the generated one, the
  cast's names in the reference (next to `<split>_narrations.txt`, which holds more).
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence

from matplotlib.patches import Patch

from vnr.reports import figures
from vnr.reports.plots import plt

TRUTH, PRED, WINDOW, HIT = "#2ca02c", "#ff7f0e", "0.85", "#b7e4b0"
NAME = "#d62728"  # highlighted names


@dataclasses.dataclass(frozen=True)
class Grounded:
    """One narration of the TNG picture, in movie seconds."""

    label: str  # the narration (its text, movie)
    truth: tuple[float, float]
    top: Sequence[tuple[float, float]]  # the model's spans, best first
    extent: tuple[float, float]  # the x range drawn
    window: tuple[float, float] | None = None  # the local stage's search window
    hits: Sequence[tuple[float, float]] = ()  # global retrieval: the shots that count


def grounding(rows: Sequence[Grounded], title: str) -> plt.Figure:
    """One row per narration: the true span, the top-k spans and the window or hits."""
    fig, axes = plt.subplots(len(rows), 1, figsize=(8, 0.45 + 1.05 * len(rows)),
                             squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        if row.window is not None:
            ax.axvspan(*row.window, color=WINDOW, zorder=0)
        for lo, hi in row.hits:
            ax.broken_barh([(lo, hi - lo)], (0.55, 0.4), color=HIT, zorder=1)
        lo, hi = row.truth
        ax.broken_barh([(lo, hi - lo)], (0.6, 0.3), color=TRUTH, zorder=2)
        for rank, (lo, hi) in enumerate(row.top):
            y = 0.4 - 0.3 * rank / max(len(row.top), 1)
            ax.plot([lo, hi], [y, y], color=PRED, lw=3, solid_capstyle="butt", zorder=3)
            ax.text(hi, y, f" {rank + 1}", va="center", fontsize=6, color=PRED)
        ax.set_xlim(*row.extent)
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.tick_params(labelsize=6)
        ax.set_title(textwrap.shorten(row.label, 110, placeholder=" ..."), fontsize=7,
                     loc="left")
    axes[-1, 0].set_xlabel("movie time (s)", fontsize=7)
    legend = [Patch(color=TRUTH, label="true span"), Patch(color=PRED, label="top spans (rank)")]
    if any(r.window is not None for r in rows):
        legend.append(Patch(color=WINDOW, label="searched window"))
    if any(r.hits for r in rows):
        legend.append(Patch(color=HIT, label="shots counted as hits"))
    axes[0, 0].legend(handles=legend, loc="lower right", bbox_to_anchor=(1.0, 1.25), ncol=4,
                      fontsize=6, frameon=False)
    fig.suptitle(title, fontsize=8, x=0.01, ha="left")
    return fig


Pieces = Sequence[tuple[str, bool]]  # text pieces, True where highlighted


@dataclasses.dataclass(frozen=True)
class Narrated:
    """One clip of the MCN picture: where it is, its reference and generated narration."""

    clip: str
    ref: Pieces
    hyp: Pieces


def narrations(rows: Sequence[Narrated], title: str, width: int = 95) -> plt.Figure:
    """One block per clip: its name, REF and HYP lines with the highlighted names."""
    head = {"family": "monospace", "color": "0.4"}
    lines: list[list[figures.Piece]] = []
    for row in rows:
        lines.append([(row.clip, {"weight": "bold"})])
        for what, pieces in (("REF", row.ref), ("HYP", row.hyp)):
            styled = [(t, {"color": NAME, "weight": "bold"} if named else {})
                      for t, named in pieces] or [("(empty)", {"color": "0.4"})]
            lines += [[(f"  {what} ", head), *part] for part in figures.wrap(styled, width)]
        lines.append([])
    return figures.text_lines(lines, f"{title}   (names in red: written by the role pointer "
                              "in HYP, the cast's names in REF)")


def highlight(text: str, names: Sequence[str]) -> Pieces:
    """`text` cut into pieces, the occurrences of `names` (longest first) highlighted."""
    names = sorted({n for n in names if n}, key=len, reverse=True)
    pieces: list[tuple[str, bool]] = []
    i = start = 0
    while i < len(text):
        name = next((n for n in names if text.startswith(n, i)), None)
        if name is None:
            i += 1
            continue
        if start < i:
            pieces.append((text[start:i], False))
        pieces.append((name, True))
        i = start = i + len(name)
    if start < len(text):
        pieces.append((text[start:], False))
    return pieces
