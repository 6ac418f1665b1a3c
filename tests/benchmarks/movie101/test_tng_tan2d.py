"""Table 5's 2D-TAN row (`grounding.TAN2D`): the max-pooled moment map, scores over valid
moments only, the sentence read at its last real token, and two training steps of the
`tng.py:smoke,tan2d` row on the tiny generated corpus."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from configs.movie101 import tng as tng_config
from vnr.benchmarks.movie101 import tng as task
from vnr.benchmarks.movie101 import tng_data as data
from vnr.benchmarks.movie101.grounding import TAN2D, proposal_map


def test_proposal_map_is_the_max_over_each_span() -> None:
    f = np.random.default_rng(0).normal(size=(2, 5, 3)).astype(np.float32)
    grid, valid = proposal_map(jnp.asarray(f))
    for i in range(5):
        for j in range(5):
            want = f[:, i:j + 1].max(1) if j >= i else np.zeros((2, 3))
            np.testing.assert_allclose(np.asarray(grid[:, i, j]), want, rtol=1e-6)
            assert bool(valid[i, j]) == (j >= i)


def test_tan2d_scores_valid_moments_and_ignores_padding() -> None:
    model = TAN2D(frame_dim=6, vocab=40, width=8, layers=2, kernel=3, rngs=nnx.Rngs(0))
    call = nnx.jit(lambda mdl, b: mdl(b))

    def m(b: dict) -> jax.Array:
        return call(model, b)

    rng = np.random.default_rng(1)
    clips = jnp.asarray(rng.normal(size=(2, 4, 6)), jnp.float32)
    tok = jnp.array([[5, 7, 9, 0, 0, 0], [3, 0, 0, 0, 0, 0]])
    s = m({"clips": clips, "tokens": tok})
    assert s.shape == (2, 4, 4)
    below = ~np.triu(np.ones((4, 4), bool))
    assert (np.asarray(s)[:, below] == task.NEG).all()
    assert np.isfinite(np.asarray(s)[:, ~below]).all()
    # the sentence is the LSTM state after its last real token: trailing padding is inert
    s2 = m({"clips": clips, "tokens": tok[:, :3]})
    np.testing.assert_allclose(np.asarray(s), np.asarray(s2), rtol=1e-5, atol=1e-6)
    # ... and the text matters
    s3 = m({"clips": clips, "tokens": tok.at[0, 1].set(11)})
    assert not np.allclose(np.asarray(s3)[0, ~below], np.asarray(s)[0, ~below])


@pytest.mark.e2e
def test_tan2d_row_trains_two_steps(tmp_path) -> None:
    c = tng_config.get_config("smoke,tan2d")
    assert c.model.arch == "tan2d" and c.data.faces == 0 and not c.model.portraits
    c.data.data_dir = str(tmp_path / "tfds")
    model = task.make_model(c, nnx.Rngs(0))
    assert isinstance(model, TAN2D) and len(model.convs) == c.model.map_layers
    opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt, batch):
        (loss, _), g = nnx.value_and_grad(lambda m: task.loss_fn(c, m, batch, None),
                                          has_aux=True)(model)
        opt.update(model, g)
        return loss

    batch = {k: jnp.asarray(v) for k, v in next(iter(task.train_data(c, 8, 0, 1))).items()}
    before = nnx.state(model, nnx.Param)
    before = jax.tree.map(np.asarray, before)
    losses = [float(step(model, opt, batch)) for _ in range(2)]
    assert np.isfinite(losses).all() and losses[1] < losses[0]  # the same batch twice
    after = nnx.state(model, nnx.Param)
    moved = jax.tree.map(lambda a, b: not np.allclose(a, np.asarray(b)), before, after)
    assert all(jax.tree.leaves(moved))  # every parameter gets a gradient
    it, n = data.eval_batches(c.data, "test", 8, max_examples=8)
    out = nnx.jit(lambda mdl, b: task.predict(c, mdl, b))(
        model, {k: jnp.asarray(v) for k, v in next(it).items()})
    m = task.score_windows(np.asarray(out["scores"]), np.asarray(out["gt"]), c.data.n_clips)
    assert m["narrations"] == 8 and 0 <= m["R@1,IoU@0.5"] <= m["R@5,IoU@0.5"] <= 100
