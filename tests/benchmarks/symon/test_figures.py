"""SYMON's pictures on hand-made rows: ordering pairs right / wrong, retrieval queries with
their top clips."""

from __future__ import annotations

import pathlib

import numpy as np

from vnr.benchmarks.symon import figures
from vnr.reports import plots


def test_order_pairs_colour_right_and_wrong(tmp_path: pathlib.Path) -> None:
    seg = np.random.default_rng(0).normal(size=(8, 64))
    pairs = [figures.OrderPair(seg, seg, "Anna opens the door.", "video v1, cut at 9.0 s",
                               0.8, True),
             figures.OrderPair(seg, seg, "", "video v1, cut at 17.0 s", 0.7, False)]
    p = np.array([0.8, 0.7, 0.2, 0.4])
    truth = np.array([True, False, False, True])
    fig = figures.order_pairs(pairs, p, truth, "test")
    assert fig.axes[0].get_title() == "test: 2 of 4 pairs ordered right"
    heads = [ax.texts[0] for ax in fig.axes[1:] if ax.texts]
    assert [t.get_color() for t in heads] == [figures.RIGHT, figures.WRONG]
    assert heads[1].get_text().endswith("predicted the 1st earlier, truth the 2nd: wrong")
    assert fig.axes[1].images[0].get_array().shape == (48, 8)  # 48 dims x 8 rows
    assert plots.report(tmp_path / "o.png", lambda: fig).stat().st_size > 5000


def test_retrieval_queries_mark_the_correct_clips(tmp_path: pathlib.Path) -> None:
    top = [figures.Candidate("video v2 0-8 s", "Someone runs. " * 20, 5.1, False),
           figures.Candidate("video v1 9-17 s", "Anna opens the door.", 3.2, True)]
    queries = [figures.Query("Anna opens the door.", "video v1 9-17 s", top, 2),
               figures.Query("Bo sleeps.", "video v3 0-8 s", top[:1], 0)]
    fig = figures.retrieval_queries(queries, "test")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "first correct clip at rank 2" in texts and "no correct clip in its pool" in texts
    marks = [t for t in fig.axes[0].texts if t.get_text().strip()[:2] in ("1.", "2.")]
    assert [(t.get_text().split()[1], t.get_color()) for t in marks] == [
        ("wrong", figures.WRONG), ("correct", figures.RIGHT), ("wrong", figures.WRONG)]
    long = next(t for t in texts if t.startswith("Someone runs."))
    assert long.endswith(" ...") and len(long) < 100  # shortened to the line
    assert plots.report(tmp_path / "r.png", lambda: fig).stat().st_size > 3000
