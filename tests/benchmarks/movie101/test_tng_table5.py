"""Table 5's models: the 2D-TAN row (`grounding.TAN2D`: the max-pooled moment map, scores
over valid moments only, the sentence read at its last real token; the row trains in
tests/reproduce/test_smoke_movie101.py::test_glove_row_trains) and RNL on its IA-Net base
(`ianet.py`: query padding and masked portraits are inert, f_v / f_t switch their inputs on
and off)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from configs.movie101 import tng as tng_config
from vnr.benchmarks.movie101 import tng as task
from vnr.benchmarks.movie101.tng_model import RNL, TAN2D, proposal_map


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


def test_rnl_on_ianet_masks_padding_and_uses_faces_and_portraits() -> None:
    rng = np.random.default_rng(2)
    b = {"clips": rng.normal(size=(2, 5, 6)), "faces": rng.normal(size=(2, 5, 3, 4)),
         "tokens": np.array([[5, 7, 9, 0, 0], [3, 0, 0, 0, 0]]),
         "portraits": rng.normal(size=(2, 2, 4)),
         "portrait_mask": np.array([[True, False], [False, False]])}
    b = {k: jnp.asarray(v, jnp.float32 if v.dtype == float else None) for k, v in b.items()}
    model = RNL(frame_dim=6, face_dim=4, faces=3, vocab=40, width=16, n_clips=5,
                portraits=True, blocks=1, local_layers=1, rngs=nnx.Rngs(0))
    call = nnx.jit(lambda mdl, x: mdl(x))
    s = np.asarray(call(model, b))
    valid = np.triu(np.ones((5, 5), bool))
    assert np.isfinite(s[:, valid]).all() and (s[:, ~valid] == task.NEG).all()
    same = [dict(b, tokens=b["tokens"][:, :3]),  # trailing query padding
            dict(b, portraits=b["portraits"].at[:, 1].set(9.0))]  # a masked-out portrait
    for x in same:
        np.testing.assert_allclose(np.asarray(call(model, x)), s, rtol=1e-4, atol=1e-5)
    # a real portrait (f_t) and the faces (f_v) change the scores
    for x in (dict(b, portraits=b["portraits"].at[0, 0].set(9.0)),
              dict(b, faces=b["faces"] + 1.0)):
        assert not np.allclose(np.asarray(call(model, x))[0][valid], s[0][valid])
    base = RNL(frame_dim=6, face_dim=4, faces=0, vocab=40, width=16, n_clips=5,
               portraits=False, rngs=nnx.Rngs(0))  # the IA-Net row: neither input
    assert base.encoder.face_fc is None and base.encoder.portrait is None
    assert len(base.encoder.blocks) == 6 and len(base.encoder.local) == 2  # as upstream


def test_table5_row_configs() -> None:
    c = tng_config.get_config("v1,tan2d")
    assert c.model.arch == "tan2d" and c.data.faces == 0 and not c.model.portraits
    assert (c.batch_size, c.lr) == (64, 1e-4)  # Appendix C's 2D-TAN
    assert isinstance(task.make_model(tng_config.get_config("smoke,tan2d"), nnx.Rngs(0)),
                      TAN2D)
    c = tng_config.get_config("v1,no_faces,no_portraits")  # the IA-Net row
    assert (c.batch_size, c.lr, c.model.blocks, c.model.local_layers) == (64, 8e-4, 3, 2)
