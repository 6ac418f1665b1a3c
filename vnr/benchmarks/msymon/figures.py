"""M-SyMoN / YMS picture: a video's clip x sentence similarity with its alignments.

`<split>_alignment.png` (written by `alignment.evaluate` into `reports/`): for the first
videos of the split, the cosine similarity of every clip (x, in time order) with every
sentence (y), the predicted alignment (the Drop-DTW path, or the argmax rule) as dots
joined in clip order, the ground-truth alignment as open squares, and what is dropped:
clips the prediction leaves without a sentence (red x in the strip under the matrix, next
to the clips the ground truth leaves without one) and sentences no clip takes (red x in the
column left of the matrix, next to the sentences no clip is annotated with).
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from vnr.reports.plots import plt

VIDEOS = 2  # videos drawn per split


def alignment(out: dict[str, np.ndarray], pred: np.ndarray, title: str, how: str,
              scores: dict[str, np.ndarray], videos: int = VIDEOS) -> plt.Figure:
    """The first `videos` videos of `out` (the evaluation's outputs: `sim` [B, C, S],
    `clip_mask`, `sent_mask`, `labels` [B, C] with -1 no sentence, -2 ignored) and `pred`
    [B, C] (sentence per clip, -1 dropped); `scores`: per-video `clip_accuracy` and
    `sentence_iou`, shown in each panel's title."""
    n = min(videos, len(pred))
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.6), squeeze=False)
    for v, ax in enumerate(axes[0]):
        c = int(out["clip_mask"][v].sum())
        s = int(out["sent_mask"][v].sum())
        sim = np.asarray(out["sim"][v, :c, :s], np.float32).T  # [S, C]: sentences as rows
        im = ax.imshow(sim, cmap="viridis", aspect="auto",
                       extent=(-0.5, c - 0.5, s - 0.5, -0.5))
        gt, got = out["labels"][v, :c], pred[v, :c]
        clips, sents = np.arange(c), np.arange(s)
        on, hit = gt >= 0, got >= 0
        ax.scatter(clips[on], gt[on], marker="s", s=60, facecolors="none",
                   edgecolors="white", linewidths=1.4)
        ax.plot(clips[hit], got[hit], "-o", color="#ff7f0e", ms=4, lw=1.2, label=how)
        # The strips: clips without a sentence (under the matrix), sentences without a clip
        # (left of it); the ground truth's in grey, the prediction's (dropped) in red.
        ax.scatter(clips[gt == -1], np.full((gt == -1).sum(), s + 0.1), marker="o", s=18,
                   color="0.5", label="without a match (truth)")
        ax.scatter(clips[~hit], np.full((~hit).sum(), s + 0.9), marker="x", s=22,
                   color="red", label=f"dropped ({how})")
        unlabelled = ~np.isin(sents, gt[on])
        untaken = ~np.isin(sents, got[hit])
        ax.scatter(np.full(unlabelled.sum(), -1.1), sents[unlabelled], marker="o", s=18,
                   color="0.5")
        ax.scatter(np.full(untaken.sum(), -1.9), sents[untaken], marker="x", s=22, color="red")
        ax.set_xlim(-2.5, c - 0.5)
        ax.set_ylim(s + 1.5, -0.5)
        ax.set_yticks([*range(0, s, max(1, s // 8)), s + 0.1, s + 0.9],
                      [*map(str, range(0, s, max(1, s // 8))), "truth", "dropped"])
        ax.set_xticks(range(0, c, max(1, c // 10)))
        ax.set_xlabel("clip (time order); left of the matrix: dropped, truth", fontsize=8)
        ax.set_ylabel("sentence", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_title(f"video {v}: clip accuracy {100 * scores['clip_accuracy'][v]:.0f} %, "
                     f"sentence IoU {100 * scores['sentence_iou'][v]:.0f} %", fontsize=8)
        bar = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
        bar.set_label("cosine", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    truth = Line2D([], [], ls="", marker="s", mfc="none", mec="black", label="ground truth")
    handles = [truth, *axes[0, 0].get_legend_handles_labels()[0]]
    axes[0, 0].legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, -0.13), ncol=2,
                      fontsize=7, frameon=False)
    fig.suptitle(f"{title}: clip x sentence cosine similarity with the {how} alignment and "
                 "the ground truth", fontsize=9)
    return fig
