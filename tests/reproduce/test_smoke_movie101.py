"""Every runnable Movie101 row (Tables 3-6) at smoke scale: MCN and TNG trainings, and
Table 6's two-stage tool on the Table 4 and Table 5 runs. The rows' runs are also where the
CNCLIP and 2D-TAN rows' end-to-end checks look (one training each)."""

import json
import math
import pathlib

import numpy as np
import pytest

from tests.reproduce import smoke
from vnr import workdir as workdir_lib

pytestmark = pytest.mark.e2e


runs = smoke.module_runs("movie101")


def _test_narrations(config) -> int:
    """The usable test narrations of the run's data (what a run evaluates uncapped)."""
    from vnr.benchmarks.movie101 import records

    return len(records.usable_source(config.data, "test"))


def _evaluated(root: pathlib.Path, run: str) -> tuple[dict, object]:
    """A run's test metrics and config: it evaluated the first `evals.test.max_examples`
    (the smoke cap) of the test narrations, all of them when there are fewer."""
    c = workdir_lib.load_config(root / run)
    cap, n = c.evals.test.max_examples, _test_narrations(c)
    m = smoke.results(root, run)["test"]
    assert cap > 0 and m["narrations"] == min(cap, n) > 0, (run, cap, n, m["narrations"])
    return m, c


def test_every_movie101_row_runs_at_smoke_scale(runs):
    tables, root = runs.tables, runs.root
    tool = json.loads((root / "t6-k2" / "row.json").read_text())
    assert tool["tool"].endswith(f"--global_workdir {root}/t4-cnclip --local_workdir "
                                 f"{root}/t5-rnl --k 2")
    k1 = next(ln for ln in tables["6"] if ln.row.id == "t6-k1")
    assert all(0 <= c.ours <= 100 for c in k1.cells)
    rnl = smoke.results(root, "t5-rnl")
    assert rnl["selection"]["mode"] == "last"  # smoke: no validation pass (cheaper)


def test_two_stage_rows_score_every_test_narration(runs):
    """Table 6's tool on the CNCLIP and RNL runs: every usable test narration, R@1 <= R@5 at
    each IoU (a tan2d local run's proposal-map path: test_movie101_tng_global.py)."""
    root = runs.root
    n = _test_narrations(workdir_lib.load_config(root / "t5-rnl"))
    for k in (1, 2, 3):
        two = smoke.results(root, f"t6-k{k}")["tool"]
        assert two["narrations"] == n > 0
        for iou in (0.1, 0.3, 0.5, 0.7):
            assert 0 <= two[f"R@1,IoU@{iou}"] <= two[f"R@5,IoU@{iou}"] <= 100, (k, iou, two)


def test_cnclip_row_trains_on_stored_shot_frames(runs):
    """Table 4's CNCLIP row (golden tiny Chinese-CLIP, generated videos): R@k in order, the
    random level of 10 shots a movie, the frames it stored."""
    from vnr.benchmarks.movie101 import tng_cnclip
    from vnr.benchmarks.movie101 import tng_data as data
    from vnr.data import synthetic_video, video

    root = runs.root
    m, c = _evaluated(root, "t4-cnclip")
    assert c.model.arch == "cnclip" and c.stage == "global"
    assert m["R@1"] <= m["R@5"] <= m["R@10"] <= 100
    assert m["random_R@1"] == pytest.approx(100 * np.mean(1 / 10), abs=2)  # 10 shots a movie
    # the stored frames are those shown at the centres of the shot's 10 equal parts
    assert c.data.frames.per_shot == 10
    spans, _ = tng_cnclip.shot_spans(c.data, "train")
    store = tng_cnclip.ShotStore(c.data, spans)
    mid = next(iter(spans))
    for k in (0, 3):
        want = [math.floor(t) for t in video.uniform(*spans[mid][k], 10)]  # 1 frame a second
        got = [synthetic_video.read_index(f) for f in store.frames(mid, k)]
        assert got == want
    assert data.given_shots(c.data) is False


def test_glove_row_trains(runs):
    """Table 5's 2D-TAN row on the smoke GloVe-format file: R@k at IoU 0.5 in order, the
    file's words and width, and its grounding report."""
    from vnr.benchmarks.movie101 import tng_glove

    root = runs.root
    m, c = _evaluated(root, "t5-2d-tan")
    assert (c.model.arch, c.model.text) == ("tan2d", "glove")
    assert 0 <= m["R@1,IoU@0.5"] <= m["R@5,IoU@0.5"] <= 100
    wv = tng_glove.load(c.data)
    assert "walks" in wv and wv.dim == 16
    assert (root / "t5-2d-tan" / "reports" / "test_grounding.png").stat().st_size > 5000


def test_two_stage_reranks_with_a_glove_local_run(runs):
    """Table 6's tool with Table 5's 2D-TAN (GloVe words) as the local run: its windows get
    the word vectors its own pipeline gives it, every usable test narration is scored."""
    from vnr.benchmarks.movie101 import tools

    root = runs.root
    n = _test_narrations(workdir_lib.load_config(root / "t5-2d-tan"))
    two = tools.two_stage(str(root / "t4-cnclip"), str(root / "t5-2d-tan"), k=2)
    assert two["narrations"] == n > 0
    for iou in (0.1, 0.3, 0.5, 0.7):
        assert 0 <= two[f"R@1,IoU@{iou}"] <= two[f"R@5,IoU@{iou}"] <= 100, (iou, two)
