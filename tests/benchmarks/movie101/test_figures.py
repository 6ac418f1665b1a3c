"""Movie101's pictures on hand-made rows: TNG's spans on the movie timeline, MCN's
narrations with the role pointer's names highlighted."""

from __future__ import annotations

import pathlib

import numpy as np

from vnr.benchmarks.movie101 import figures, mcn
from vnr.reports import plots


def test_highlight() -> None:
    got = figures.highlight("Ann Lee meets Ann at the door", ["Ann", "Ann Lee", ""])
    assert got == [("Ann Lee", True), (" meets ", False), ("Ann", True),
                   (" at the door", False)]
    assert figures.highlight("王明走进房间。", ["王明"]) == [("王明", True), ("走进房间。", False)]


def test_decode_tokens_flags_the_pointer_names() -> None:
    words = ["<pad>", "<bos>", "<eos>", "<unk>", "opens", "the", "door", "Ann"]
    ids = np.array([len(words) + 1, 4, 5, 6, 7, 2, 4])  # pointer to cast 1, ..., EOS
    assert mcn.decode_tokens(ids, words, ["Bo", "Ann Lee"]) == [
        ("Ann Lee", True), ("opens", False), ("the", False), ("door", False), ("Ann", False)]
    assert mcn.decode_text(ids, words, ["Bo", "Ann Lee"]) == "Ann Lee opens the door Ann"


def test_narrations_colour_only_the_highlighted_names(tmp_path: pathlib.Path) -> None:
    rows = [figures.Narrated("m1 74-79 s", figures.highlight("Zoka opens it.", ["Zoka"]),
                             [("Zoka", True), (" opens the door", False)]),
            figures.Narrated("m2 3-10 s", [("Vinos talks.", False)], [])]
    fig = figures.narrations(rows, "test")
    texts = fig.axes[0].texts
    red = [t.get_text() for t in texts if t.get_color() == figures.NAME]
    assert red == ["Zoka", "Zoka"]  # REF's cast name, HYP's pointer name
    assert [t.get_text() for t in texts].count("(empty)") == 1  # an empty HYP is shown
    assert plots.report(tmp_path / "n.png", lambda: fig).stat().st_size > 3000


def test_grounding_draws_truth_top_spans_and_window(tmp_path: pathlib.Path) -> None:
    rows = [figures.Grounded("Zoka opens the window.", (74.0, 79.0),
                             [(70.0, 80.0), (60.0, 66.0)], (50.0, 110.0), window=(60, 100)),
            figures.Grounded("Vinos talks.", (400.0, 420.0), [(100.0, 120.0)], (0.0, 1800.0),
                             hits=[(400.0, 420.0), (420.0, 440.0)])]
    fig = figures.grounding(rows, "test")
    a, b = fig.axes
    assert [tuple(line.get_xdata()) for line in a.lines] == [(70.0, 80.0), (60.0, 66.0)]
    assert [t.get_text() for t in a.texts] == [" 1", " 2"]  # ranks
    assert a.get_xlim() == (50.0, 110.0) and b.get_xlim() == (0.0, 1800.0)
    truth = a.collections[-1].get_paths()[0].get_extents()
    assert (truth.x0, truth.x1) == (74.0, 79.0)
    assert len(b.collections) == 3  # two hit shots and the truth
    assert plots.report(tmp_path / "g.png", lambda: fig).stat().st_size > 3000
