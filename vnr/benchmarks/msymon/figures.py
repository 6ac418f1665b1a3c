"""M-SyMoN / YMS picture: a video's clip x sentence similarity with its alignments.

`<split>_alignment.png` (written by `alignment.eval_metrics` into `reports/`): for the first
videos of the split, the cosine similarity of every clip with every sentence, the predicted
alignment (the Drop-DTW path, or the argmax rule), the ground truth and the clips and
sentences left without a match (`vnr.reports.figures.alignment`).
"""

from __future__ import annotations

import numpy as np

from vnr.reports import figures
from vnr.reports.plots import plt

VIDEOS = 2  # videos drawn per split


def alignment(out: dict[str, np.ndarray], pred: np.ndarray, title: str, how: str,
              scores: dict[str, np.ndarray], videos: int = VIDEOS) -> plt.Figure:
    """The first `videos` videos of `out` (the evaluation's outputs: `sim` [B, C, S],
    `clip_mask`, `sent_mask`, `labels` [B, C] with -1 no sentence, -2 ignored) and `pred`
    [B, C] (sentence per clip, -1 dropped); `scores`: per-video `clip_accuracy` and
    `sentence_iou`, shown in each panel's title."""
    drawn = []
    for v in range(min(videos, len(pred))):
        c, s = int(out["clip_mask"][v].sum()), int(out["sent_mask"][v].sum())
        drawn.append(figures.AlignedVideo(
            out["sim"][v, :c, :s], out["labels"][v, :c], pred[v, :c],
            f"video {v}: clip accuracy {100 * scores['clip_accuracy'][v]:.0f} %, sentence "
            f"IoU {100 * scores['sentence_iou'][v]:.0f} %"))
    return figures.alignment(drawn, title, how)
