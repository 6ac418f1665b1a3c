"""Sc2St's picture (`figures.storyboard`) on hand-made keyframes: the history, the query and
the candidates, the right one framed green; pixels drawn when a keyframe id is a frame file
under data.manual_dir (`task._pixels`)."""

from __future__ import annotations

import pathlib

import numpy as np
from PIL import Image

from vnr.benchmarks.sc2st import figures, task
from vnr.reports import plots


def test_storyboard_marks_the_right_candidate(tmp_path: pathlib.Path) -> None:
    image = np.zeros((8, 12, 3), np.uint8)
    history = [figures.Keyframe(f"k{i}", f"SOMEONE does {i}.", image if i == 0 else None,
                                f"#{i + 1}") for i in range(3)]
    candidates = [figures.Keyframe(f"c{i}", "", None, f"rank {i + 1}", i == 1)
                  for i in range(3)]
    fig = figures.storyboard(history, "SOMEONE opens the door.", candidates, "test")
    top, bottom = fig.axes[:4], fig.axes[4:]
    assert [ax.get_title() for ax in top[:3]] == ["#1", "#2", "#3"]
    assert len(top[0].images) == 1 and not top[1].images  # pixels, else the id
    assert "c0" in [t.get_text() for t in bottom[1].texts]
    assert " ".join(bottom[0].texts[0].get_text().split()).startswith("query (keyframe 4): ")
    edges = [ax.spines["top"].get_edgecolor()[:3] for ax in bottom[1:4]]
    red, green = (0.839, 0.153, 0.157), (0.173, 0.627, 0.173)
    assert [tuple(round(c, 3) for c in e) for e in edges] == [red, green, red]
    assert "(no sentence)" in [t.get_text() for t in bottom[1].texts]
    assert plots.report(tmp_path / "s.png", lambda: fig).stat().st_size > 3000


def test_pixels_only_for_frame_files_under_manual_dir(tmp_path: pathlib.Path) -> None:
    frame = tmp_path / "frames" / "m" / "c" / "f.jpg"
    frame.parent.mkdir(parents=True)
    Image.new("RGB", (320, 240), (200, 10, 10)).save(frame)
    got = task._pixels(str(tmp_path), "frames/m/c/f.jpg")  # noqa: SLF001
    assert got.shape == (120, 160, 3) and np.abs(got[60, 80] - [200, 10, 10]).max() < 8  # JPEG
    assert task._pixels(str(tmp_path), "features/m/c.npy#0") is None  # noqa: SLF001
    assert task._pixels("", "frames/m/c/f.jpg") is None  # noqa: SLF001
    assert task._pixels(str(tmp_path), "frames/m/c/missing.jpg") is None  # noqa: SLF001
