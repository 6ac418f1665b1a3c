"""Every runnable Sc2St row (Tables 3-5) at smoke scale; a run directory holding another
config's run is named by `run` and `report`, never used. The rows' runs are also where the
trained-model checks of the SA, Prior and V-MoEE ports look (one training each, not two)."""

import json
import pathlib

import numpy as np
import pytest

from tests.reproduce import smoke
from vnr import workdir as workdir_lib
from vnr.reproduce import execute, report

pytestmark = pytest.mark.e2e


runs = smoke.module_runs("sc2st")


def _test_metrics(root: pathlib.Path, run: str) -> dict:
    results = json.loads((root / run / "results.json").read_text())
    cap = workdir_lib.load_config(root / run).evals.test.max_examples
    m = results["test"]
    assert m["storyboards"] == cap, (run, m["storyboards"], cap)  # the corpus has more
    return m


def test_every_sc2st_row_runs_at_smoke_scale(runs):
    p, env, root = runs.plan, runs.env, runs.root
    row = json.loads((root / "t3-ours-sa" / "row.json").read_text())
    assert row["config_spec"] == "configs/sc2st/main.py:paper,sa,smoke,text_encoder=" \
                                 "scratch:bert-tiny"  # the A.1 preset at test sizes
    # another config under a row's name: named, left alone, kept out of the table
    path = root / "t3-ours-lf" / "config.json"
    other = json.loads(path.read_text())
    other["seed"] = 7
    path.write_text(json.dumps(other))
    table = p.registry.table("3")
    lines = {ln.row.id: ln for ln in report.collect(p, table, report.checker(p, env, None))}
    lf = lines["t3-ours-lf"]
    assert lf.state == "other config" and all(c.ours is None for c in lf.cells)
    assert "t3-ours-lf holds a run of another config (seed is 7 there, the row runs 0)" \
        in lf.detail
    assert lines["t3-ours-gf"].state == "ok"
    failed = execute.execute(p, [p.runs["t3-ours-lf"]], env, None, lambda m: None)
    assert len(failed) == 1 and "holds a run of another config (seed is 7 there" in failed[0]
    assert json.loads(path.read_text())["seed"] == 7  # not overwritten


def test_smoke_run_end_to_end(runs):
    """The SA model trained two steps and the Prior baseline: the retrieval metrics and
    their position breakdown, the results file, checkpoints and the storyboard picture."""
    root = runs.root
    for run in ("t3-ours-sa", "t3-prior"):
        m = _test_metrics(root, run)
        assert 0 <= m["r1"] <= m["r5"] <= m["r10"] <= 100 and 1 <= m["mean_rank"] <= 20
        assert {"early_r1", "middle_mrr", "late_mean_rank"} <= set(m)
    assert (root / "t3-ours-sa" / "checkpoints").is_dir()
    assert (root / "t3-ours-sa" / "reports" / "test_storyboard.png").stat().st_size > 5000


def test_paper_experts_build_and_train_smoke(runs):
    """The smoke inputs build lsmdc_scratch_experts (expert columns from the loaded networks
    on the keyframe JPEGs) and V-MoEE trains on them."""
    from tfds_builders import sc2st as builder
    from tfds_builders.sc2st import Keyframe
    from vnr.benchmarks.sc2st import experts

    root = runs.root
    m = _test_metrics(root, "t3-v-moee")
    assert 1 <= m["mean_rank"] <= 20
    cfg = workdir_lib.load_config(root / "t3-v-moee")
    assert cfg.data.config == "lsmdc_scratch_experts"
    rec = builder.data_source("lsmdc_scratch_experts", "test", cfg.data.data_dir,
                              build=False)[0]
    assert rec["expert_scene"].shape == (10, 23) and rec["expert_object"].shape == (10, 64)
    scene = experts.places365_expert("tiny", checkpoint=cfg.data.scene_checkpoint)
    frames = pathlib.Path(cfg.data.manual_dir)
    keys = [Keyframe(f, "m", "s", (), np.zeros(32), frames / f) for f in rec["frame_ids"][:2]]
    np.testing.assert_allclose(rec["expert_scene"][:2], scene.encode_keyframes(keys),
                               rtol=1e-4, atol=1e-5)


def test_a_bad_word_vector_file_stops_before_training(runs, tmp_path):
    """On the built corpus of the V-MoEE run: a word-vector file with a repeated word, or of
    another width than model.word_dim, stops the split check with one line naming it."""
    from vnr.benchmarks.sc2st import smoke_inputs, task, words
    from vnr.data.word_vectors import WordVectorsError

    root = runs.root
    cfg = workdir_lib.load_config(root / "t3-v-moee")
    task.check_splits(cfg)  # the run's own file passes
    words._table.cache_clear()
    bad = tmp_path / "bad.txt"
    bad.write_text("someone 1 2\nsomeone 3 4\n")
    cfg.data.word_vectors = str(bad)
    with pytest.raises(WordVectorsError, match="bad.txt: word 'someone'"):
        task.check_splits(cfg)
    cfg.data.word_vectors = str(smoke_inputs.tiny_word_vectors(tmp_path / "w8", dim=8))
    with pytest.raises(ValueError, match="8-d word vectors, but model.word_dim=16"):
        task.check_splits(cfg)
