"""`vnr.reports.plots.report`, the one way figures are written: an unwritable folder, a
font without the text's characters or a failing drawing is one warning line, never the end
of the run."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest

from vnr.reports import figures, plots
from vnr.reports.plots import plt


def _figure(title: str = "clips") -> plt.Figure:
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [1, 0])
    ax.set_title(title)
    return fig


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def test_unwritable_folder_is_one_warning(tmp_path: pathlib.Path,
                                          capfd: pytest.CaptureFixture) -> None:
    blocked = tmp_path / "reports"
    blocked.write_text("a file where the folder should be")
    assert plots.report(blocked / "test_orders.png", _figure) is None
    assert plots.written(blocked / "test_clips.jsonl", "{}\n") is None
    assert plots.report(blocked / "curves.png", _figure) is None
    (line,) = _warnings(capfd.readouterr().err)  # the folder is named once
    assert line.startswith(f"warning: report {blocked / 'test_orders.png'} not written: ")
    assert line.endswith(f"(nothing more is written to {blocked})")
    assert plt.get_fignums() == []  # the figures were closed
    assert plots.written(tmp_path / "r" / "t.txt", "REF 王\n").read_text("utf-8") == "REF 王\n"


def test_failing_drawing_is_one_warning(tmp_path: pathlib.Path,
                                        capfd: pytest.CaptureFixture) -> None:
    def broken() -> plt.Figure:
        raise IndexError("index 3 is out of bounds\nfor axis 0")

    assert plots.report(tmp_path / "x.png", broken) is None
    assert _warnings(capfd.readouterr().err) == [
        f"warning: report {tmp_path / 'x.png'} not written: IndexError: index 3 is out of "
        "bounds for axis 0"]


def test_missing_font_is_one_warning_per_run_and_the_figures_are_written(
        tmp_path: pathlib.Path, capfd: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "CJK_FONTS", ())  # as on a machine without a CJK font
    plots.new_run()
    for run in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the glyph warnings are not passed on
            outs = [plots.report(tmp_path / f"r{run}" / f"{split}_narrations.png", _figure,
                                 f"他走进房间 {split}") for split in ("val", "test", "extra")]
        assert all(out is not None and out.stat().st_size > 500 for out in outs)
        (line,) = _warnings(capfd.readouterr().err)  # three figures, one line
        assert line.startswith(f"warning: report {outs[0]}: no installed font has 5 of its "
                               "characters") and "Noto Sans CJK" in line, line
        plots.new_run()  # the next run names it again


def test_other_warnings_of_a_drawing_are_passed_on(tmp_path: pathlib.Path) -> None:
    def noisy() -> plt.Figure:
        warnings.warn("a drawing's own warning", UserWarning, stacklevel=1)
        return _figure()

    with pytest.warns(UserWarning, match="a drawing's own warning"):
        assert plots.report(tmp_path / "x.png", noisy) == tmp_path / "x.png"


def test_wrap_cuts_styled_pieces_into_lines() -> None:
    red = {"color": "red"}
    pieces = [("Ann Lee", red), (" meets ", {}), ("Ann", red), (" at the door", {})]
    lines = figures.wrap(pieces, 12)
    assert ["".join(t for t, _ in line) for line in lines] == [
        "Ann Lee meet", "s Ann at the", "door"]  # a continued line loses its leading space
    assert lines[1] == [("s ", {}), ("Ann", red), (" at the", {})]


def test_text_lines_draw_each_piece_after_the_last(tmp_path: pathlib.Path) -> None:
    fig = figures.text_lines([[("REF ", {"color": "0.4"}), ("Ann", {"color": "red"}),
                               (" opens it", {})], [], [("next", {})]], "title")
    texts = fig.axes[0].texts
    assert [t.get_text() for t in texts] == ["title", "REF ", "Ann", " opens it", "next"]
    assert texts[2].get_color() == "red" and texts[2].xycoords is texts[1]  # chained
    out = plots.report(tmp_path / "t.png", lambda: fig)
    assert out is not None and out.stat().st_size > 1000


def test_alignment_marks_path_truth_and_drops() -> None:
    truth = np.array([0, 0, 1, -1, 2, -2])
    pred = np.array([0, -1, 1, 1, 1, -1])
    video = figures.AlignedVideo(np.random.default_rng(0).normal(size=(6, 4)), truth, pred,
                                 "video 0")
    fig = figures.alignment([video, video], "en_test", "Drop-DTW")
    ax = fig.axes[0]
    assert len(fig.axes) == 4  # two panels, two colour bars
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [0, 2, 3, 4])
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), [0, 1, 1, 1])

    def xs(label: str) -> list[float]:
        (points,) = [c for c in ax.collections if c.get_label() == label]
        return np.asarray(points.get_offsets())[:, 0].tolist()

    assert xs("dropped (Drop-DTW)") == [1, 5] and xs("without a match (truth)") == [3]
    left = [np.asarray(c.get_offsets())[:, 1].tolist() for c in ax.collections
            if c.get_label().startswith("_")][-2:]
    assert left == [[3], [2, 3]]  # sentence 3 has no clip in the truth; 2, 3 none predicted
    assert ax.get_title() == "video 0"
