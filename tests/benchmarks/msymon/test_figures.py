"""M-SyMoN's picture (`figures.alignment`) on hand-made outputs: the predicted path, the
ground truth and the dropped clips and sentences are where the arrays put them."""

from __future__ import annotations

import pathlib

import numpy as np

from vnr.benchmarks.msymon import figures
from vnr.reports import plots


def _outputs() -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(0)
    b, c, s = 3, 12, 6
    labels = np.repeat(np.arange(s), 2)[None].repeat(b, 0).astype(np.int32)
    labels[:, 5] = -1  # a clip without a sentence
    labels[:, 11] = -2  # ignored (crop edge)
    sim = rng.normal(0, 0.2, (b, c, s))
    out = {"sim": sim, "clip_mask": np.ones((b, c), bool), "sent_mask": np.ones((b, s), bool),
           "labels": labels}
    out["clip_mask"][1, 10:] = False
    out["sent_mask"][1, 5:] = False
    pred = np.where(labels >= 0, labels, -1)
    pred[:, 3] = -1  # dropped by the prediction
    pred[:, 4:6] = 1  # sentence 2 taken by no clip
    return out, pred


def _offsets(ax, label: str) -> np.ndarray:
    (points,) = [c for c in ax.collections if c.get_label() == label]
    return np.asarray(points.get_offsets())


def test_alignment_marks_path_truth_and_drops(tmp_path: pathlib.Path) -> None:
    out, pred = _outputs()
    scores = {"clip_accuracy": np.array([0.8, 0.5, 0.1]),
              "sentence_iou": np.array([0.7, 0.4, 0.1])}
    fig = figures.alignment(out, pred, "en_test", "Drop-DTW", scores)
    assert len(fig.axes) == 2 * figures.VIDEOS  # the panels, then their colour bars
    axes = fig.axes[:figures.VIDEOS]
    ax = axes[0]
    path = ax.lines[0]
    np.testing.assert_array_equal(path.get_xdata(), np.flatnonzero(pred[0] >= 0))
    np.testing.assert_array_equal(path.get_ydata(), pred[0][pred[0] >= 0])
    assert _offsets(ax, "dropped (Drop-DTW)")[:, 0].tolist() == [3, 11]
    assert _offsets(ax, "without a match (truth)")[:, 0].tolist() == [5]
    left = [c for c in ax.collections if c.get_label().startswith("_")]  # the left strip
    assert [np.asarray(c.get_offsets())[:, 1].tolist() for c in left[-2:]] == [[], [2]]
    assert "clip accuracy 80 %" in ax.get_title()
    assert axes[1].get_xlim()[1] == 9.5  # video 1 has 10 real clips
    assert plots.report(tmp_path / "en_test_alignment.png", lambda: fig).stat().st_size > 5000
