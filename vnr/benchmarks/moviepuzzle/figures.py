"""MoviePuzzle's picture: clips laid out in true vs predicted order."""

from __future__ import annotations

import textwrap

import numpy as np

from vnr.reports.plots import plt

GAP = 0.08  # blank between two frames of a row, as a fraction of a frame's width


def order_examples(batch: dict[str, np.ndarray], pred: np.ndarray, gt: np.ndarray,
                   title: str = "", subtitles: list[list[str]] | None = None) -> plt.Figure:
    """For each clip: a row of frames in true order, then a row in predicted order (written
    by `plots.report`). A row is one image of its frames side by side: one axes per row,
    since a figure of an axes per frame takes seconds to lay out and save.

    Args:
      batch: a host batch (frames [B, N, S, S, 3], mask, position, tokens).
      pred, gt: orders [K, N] for the first K clips of the batch.
      subtitles: optional per-clip per-input-frame strings shown under frames.
    """
    k = len(pred)
    n_real = batch["mask"][:k].sum(-1)
    width = int(n_real.max())
    frames = np.asarray(batch["frames"][:k], np.uint8)  # the pipeline's uint8 pixels
    h, w = frames.shape[2:4]
    step = w + max(1, round(GAP * w))
    fig, axes = plt.subplots(2 * k, 1, figsize=(1.25 * width, 2.9 * k), squeeze=False)
    for c in range(k):
        n = int(n_real[c])
        for r, (label, order) in enumerate((("true", gt[c]), ("predicted", pred[c]))):
            ax = axes[2 * c + r, 0]
            ax.axis("off")
            row = np.full((h, step * width - (step - w), 3), 255, np.uint8)
            for pos in range(n):
                i = int(order[pos])
                row[:, pos * step:pos * step + w] = frames[c, i]
                true_pos = int(batch["position"][c, i])
                color = "green" if r == 0 or true_pos == pos else "red"
                x = pos * step + w / 2
                ax.text(x, -1, f"#{true_pos}", fontsize=7, color=color, ha="center",
                        va="bottom")
                if subtitles is not None:
                    ax.text(x, h + 1, textwrap.fill(subtitles[c][i] or "-", 18)[:80],
                            ha="center", va="top", fontsize=5)
            ax.imshow(row, aspect="equal")
            ax.text(-0.01, 0.5, f"clip {c}\n{label}", transform=ax.transAxes, ha="right",
                    va="center", fontsize=7)
    fig.suptitle(f"{title}: frames in true order (top) vs predicted order (bottom); "
                 "#k = true position, red = misplaced", fontsize=8)
    return fig
