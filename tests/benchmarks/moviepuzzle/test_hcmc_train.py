"""The baseline rows' models (loss and prediction) and the HCMC / baseline configs' one-line
errors."""

import jax
import numpy as np
import pytest
from flax import nnx

from configs.moviepuzzle import baselines, hcmc
from vnr.benchmarks.moviepuzzle import hcmc as task

# The Table 1 HCMC frame+shot row and the Random row through the trainer, their columns,
# the per-clip report and the table generator:
# tests/reproduce/test_smoke_moviepuzzle.py::test_hcmc_row_runs_end_to_end_and_reaches_the_table.


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

    @nnx.jit
    def run(model, batch):
        loss, metrics = task.loss_fn(c, model, batch, nnx.Rngs(dropout=jax.random.key(0)))
        return loss, metrics, task.predict(c, model, batch)

    loss, metrics, out = run(model, _batch(c))
    assert np.isfinite(float(loss)) and 0 <= float(metrics["pair_acc"]) <= 1
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
