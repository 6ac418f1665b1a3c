"""PNG reports: learning curves, and clips laid out in true vs predicted order."""

from __future__ import annotations

import pathlib
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from vnr.reports.writer import read_jsonl  # noqa: E402


def _save(fig: plt.Figure, out: str | pathlib.Path, dpi: int) -> pathlib.Path:
    """Lays out, writes (creating the folder) and closes ``fig``; returns the path."""
    fig.tight_layout()
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def learning_curves(jsonl: str | pathlib.Path, out: str | pathlib.Path) -> pathlib.Path | None:
    """One panel per train/val metric, value against step."""
    rows = read_jsonl(jsonl)
    names = sorted({k for r in rows for k in r if "/" in k})
    # Train and val series only: test splits are one point each (see results.json).
    wanted = [n for n in names if n.split("/", 1)[0] in ("train", "val") and n.split("/", 1)[1]
              in ("loss", "pair_acc", "os2", "os3", "lsd", "examples_per_sec", "grad_norm")]
    if not wanted:
        return None
    cols = min(3, len(wanted))
    nrows = -(-len(wanted) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, wanted):
        # After a resume, steps repeat: the later row wins (the run that continued).
        pts = sorted({r["step"]: r[name] for r in rows if name in r}.items())
        ax.plot(*zip(*pts), marker="." if len(pts) < 30 else None)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(wanted):]:
        ax.axis("off")
    return _save(fig, out, dpi=90)


def order_examples(batch: dict[str, np.ndarray], pred: np.ndarray, gt: np.ndarray,
                   out: str | pathlib.Path, title: str = "",
                   subtitles: list[list[str]] | None = None) -> pathlib.Path:
    """For each clip: a row of frames in true order, then a row in predicted order.

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
    return _save(fig, out, dpi=100)
