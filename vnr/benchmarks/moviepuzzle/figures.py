"""MoviePuzzle's picture: clips laid out in true vs predicted order."""

from __future__ import annotations

import textwrap

import numpy as np

from vnr.reports.plots import plt


def order_examples(batch: dict[str, np.ndarray], pred: np.ndarray, gt: np.ndarray,
                   title: str = "", subtitles: list[list[str]] | None = None) -> plt.Figure:
    """For each clip: a row of frames in true order, then a row in predicted order (written
    by `plots.report`).

    Args:
      batch: a host batch (frames [B, N, S, S, 3], mask, position, tokens).
      pred, gt: orders [K, N] for the first K clips of the batch.
      subtitles: optional per-clip per-input-frame strings shown under frames.
    """
    k, n_max = pred.shape
    n_real = batch["mask"][:k].sum(-1)
    width = int(n_real.max())
    fig, axes = plt.subplots(2 * k, width, figsize=(1.25 * width, 2.9 * k), squeeze=False)
    for c in range(k):
        n = int(n_real[c])
        for r, (label, order) in enumerate((("true", gt[c]), ("predicted", pred[c]))):
            for pos in range(width):
                ax = axes[2 * c + r, pos]
                ax.axis("off")
                if pos >= n:
                    continue
                i = int(order[pos])
                ax.imshow(batch["frames"][c, i])
                true_pos = int(batch["position"][c, i])
                color = "green" if r == 0 or true_pos == pos else "red"
                ax.set_title(f"#{true_pos}", fontsize=7, color=color)
                if subtitles is not None:
                    ax.text(0.5, -0.08, textwrap.fill(subtitles[c][i] or "-", 18)[:80],
                            transform=ax.transAxes, ha="center", va="top", fontsize=5)
            axes[2 * c + r, 0].text(-0.15, 0.5, f"clip {c}\n{label}", transform=axes[
                2 * c + r, 0].transAxes, ha="right", va="center", fontsize=7)
    fig.suptitle(f"{title}: frames in true order (top) vs predicted order (bottom); "
                 "#k = true position, red = misplaced", fontsize=8)
    return fig
