"""MoviePuzzle's picture (`figures.order_examples`) on hand-made clips: each row's frames in
true or predicted order, true positions above them (red where misplaced), subtitles below."""

from __future__ import annotations

import pathlib

import numpy as np

from vnr.benchmarks.moviepuzzle import figures
from vnr.reports import plots


def test_rows_show_the_frames_in_each_order(tmp_path: pathlib.Path) -> None:
    n, s = 4, 6
    frames = np.zeros((2, n, s, s, 3), np.uint8)
    frames[:, :, :, :, 0] = (np.arange(n) * 50 + 10)[None, :, None, None]  # red = input slot
    mask = np.array([[True] * n, [True, True, True, False]])
    position = np.array([[2, 0, 3, 1], [1, 2, 0, 0]])  # input slot -> true position
    gt = np.array([[1, 3, 0, 2], [2, 0, 1, 3]])  # true order: input slots by position
    pred = np.array([[1, 0, 3, 2], [2, 1, 0, 3]])
    subtitles = [["a", "b", "", "d"], ["e", "f", "g", ""]]
    fig = figures.order_examples({"frames": frames, "mask": mask, "position": position},
                                 pred, gt, "test", subtitles)
    assert len(fig.axes) == 4  # true, predicted for each clip

    def row(ax) -> tuple[list[int], list[str], list[str]]:
        image = ax.images[0].get_array()
        step = s + max(1, round(figures.GAP * s))  # a frame and the blank after it
        assert image.shape == (s, step * n - (step - s), 3)
        slots = [int(image[0, p * step, 0]) for p in range(n)]
        labels = [t for t in ax.texts if t.get_text().startswith("#")]
        return ([(v - 10) // 50 if v != 255 else -1 for v in slots],
                [t.get_text() for t in labels], [t.get_color() for t in labels])

    slots, labels, colors = row(fig.axes[0])
    assert slots == [1, 3, 0, 2] and labels == ["#0", "#1", "#2", "#3"]
    assert set(colors) == {"green"}
    slots, labels, colors = row(fig.axes[1])
    assert slots == [1, 0, 3, 2] and labels == ["#0", "#2", "#1", "#3"]
    assert colors == ["green", "red", "red", "green"]
    slots, labels, _ = row(fig.axes[3])  # a clip of 3 frames: the 4th place is blank
    assert slots == [2, 1, 0, -1] and labels == ["#0", "#2", "#1"]
    below = [t.get_text() for t in fig.axes[1].texts if not t.get_text().startswith(("#", "clip"))]
    assert below == ["b", "a", "d", "-"]  # an empty subtitle shows as "-"
    assert plots.report(tmp_path / "o.png", lambda: fig).stat().st_size > 3000
