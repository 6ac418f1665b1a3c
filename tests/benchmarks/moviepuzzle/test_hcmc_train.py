"""HCMC and the baseline rows through the trainer: a smoke run end to end, the random row,
and every baseline model's loss and prediction."""

import json

import jax
import numpy as np
import pytest
from flax import nnx

from configs.moviepuzzle import baselines, hcmc
from vnr import train
from vnr.benchmarks.moviepuzzle import hcmc as task
from vnr.benchmarks.moviepuzzle import tables
from vnr.benchmarks.moviepuzzle.order_metrics import random_expectation
from vnr.workdir import split_results

METRICS = {"lsd", "lmd", "sd", "ssd", "os2", "os3"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tfds"))


@pytest.mark.e2e
def test_hcmc_row_runs_end_to_end_and_reaches_the_table(data_dir, tmp_path, capsys):
    """The Table 1 HCMC frame+shot row with the paper preset on CLIP towers (tiny scratch
    ones: frames as token sequences, §3.2; smoke sizes, 2 steps) through the trainer,
    reporting the Table 3 columns (shot IoU, shot-stage OS); then the Random row (no
    training by design) and the table generator."""
    c = hcmc.get_config("smoke,frame_shot,paper,clip")
    assert c.model.frame_repr == "tokens" and ("model.frame_repr", "tokens") in c.paper_preset
    c.data.data_dir = data_dir
    c.total_steps = c.eval_every = c.ckpt_every = 2  # two steps, one validation pass
    results = train.run(c, str(tmp_path / "hcmc"))
    assert "SHOT_OS3" in capsys.readouterr().out  # the printed table has the column
    for split in ("test_in_domain", "test_out_domain"):
        m = results[split]
        assert METRICS | {"pair_acc", "shot_iou", "shot_os2", "shot_os3", "clips"} <= set(m)
        assert 0 <= m["os2"] <= 100 and 0 < m["shot_iou"] <= 1 and m["clips"] == 10
        assert 0 <= m["shot_os3"] <= 100 and 0 < m["shot_os3_clips"] <= 10
    assert split_results(json.loads((tmp_path / "hcmc" / "results.json").read_text())) == results
    clips = (tmp_path / "hcmc" / "reports" / "test_out_domain_clips.jsonl").read_text()
    assert len(clips.splitlines()) == 10  # per-clip OS for length_report (Figures 9-11)
    r = baselines.get_config("random,smoke")
    r.data.data_dir = data_dir
    rand = train.run(r, str(tmp_path / "random"))
    capsys.readouterr()
    tables.main(["--workdirs", str(tmp_path / "hcmc"), str(tmp_path / "random"),
                str(tmp_path / "missing"), "--csv", str(tmp_path / "t.csv")])
    out = capsys.readouterr().out.splitlines()
    assert "HCMC frame+shot" in out[2] and "random" in out[3]
    assert "λ=" not in out[2]  # the default λ = 1 (Table 1/2 rows) is not labelled
    assert "missing" in out[4]
    from tfds_builders import moviepuzzle as builder

    src = builder.data_source("synthetic_tiny", "test_out_domain", data_dir=data_dir)
    want = random_expectation([len(src[k]["frames"]) for k in range(10)])
    assert rand["test_out_domain"]["lsd"] == pytest.approx(want["lsd"])


def _batch(config):
    rng = np.random.default_rng(0)
    b, n, s = 2, 6, config.data.image_size
    mask = np.array([[True] * 6, [True] * 4 + [False] * 2])
    return {"frames": rng.integers(0, 255, (b, n, s, s, 3), dtype=np.uint8),
            "tokens": np.where(mask[..., None], rng.integers(2, 50, (b, n, 5)), 0).astype(
                np.int32),
            "mask": mask, "position": np.tile(np.arange(n, dtype=np.int32), (b, 1)),
            "shot_id": np.where(mask, [0, 0, 1, 1, 2, 2], -1).astype(np.int32),
            "scene_id": np.where(mask, 0, -1).astype(np.int32)}


@pytest.mark.parametrize("row", ["nsp_bert", "sop_albert", "early_fusion", "vision"])
def test_baseline_models_train_and_score_every_pair(row):
    c = baselines.get_config(f"{row},smoke")
    c.data.max_tokens = 5
    task.validate(c)
    model = task.make_model(c, nnx.Rngs(0))
    batch = _batch(c)
    loss, metrics = task.loss_fn(c, model, batch, nnx.Rngs(dropout=jax.random.key(0)))
    assert np.isfinite(float(loss)) and 0 <= float(metrics["pair_acc"]) <= 1
    out = task.predict(c, model, batch)
    assert out["scores"].shape == (2, 6, 6)
    assert np.all(np.abs(np.asarray(out["scores"])) <= 1)


def test_bad_rows_are_one_line_errors():
    with pytest.raises(ValueError, match="exactly one row"):
        baselines.get_config("smoke")
    c = hcmc.get_config("smoke")
    c.model.image_encoder = "no-such-org/no-such-clip"  # not on disk: never downloaded
    with pytest.raises(FileNotFoundError, match="model.image_encoder='no-such-org/no-such-clip'"):
        task.validate(c)
    c.model.image_encoder = "scratch:bert-tiny"
    with pytest.raises(ValueError, match="model.image_encoder='scratch:bert-tiny'"):
        task.validate(c)
