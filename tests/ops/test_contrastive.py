"""The sharded bidirectional NCE equals the full-matrix reference (value and gradients)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from vnr import sharding
from vnr.ops import contrastive


def _data(b=32, d=8, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(b, d)).astype(np.float32)
    t = (v + 0.5 * rng.normal(size=(b, d))).astype(np.float32)
    valid = np.ones(b, bool)
    valid[[3, b // 2 + 1, b - 2]] = False
    return v, t, valid


def _naive_numpy(v, t, valid, tau=1.0):
    s = (v.astype(np.float64) @ t.T.astype(np.float64)) / tau
    idx = np.flatnonzero(valid)
    s = s[np.ix_(idx, idx)]
    lse_r = np.log(np.exp(s).sum(1))
    lse_c = np.log(np.exp(s).sum(0))
    d = np.diag(s)
    return float(((lse_r - d) + (lse_c - d)).mean())


def test_reference_matches_numpy_formula():
    v, t, valid = _data()
    got = float(contrastive.nce_loss_reference(v, t, valid, temperature=0.5))
    assert got == pytest.approx(_naive_numpy(v, t, valid, 0.5), rel=1e-5)
    # Perfectly separated embeddings give a loss near 0; swapped pairs a large one.
    e = 20 * np.eye(8, dtype=np.float32)
    assert float(contrastive.nce_loss_reference(e, e)) < 1e-3
    assert float(contrastive.nce_loss_reference(e, e[::-1].copy())) > 10


@pytest.mark.parametrize("shape", [(8, 1), (4, 2), (1, 8)])
def test_sharded_equals_single_device_loss_and_grads(shape):
    v, t, valid = _data()
    mesh = sharding.make_mesh(shape)

    def loss(fn, v, t):
        return fn(v, t, jnp.asarray(valid), temperature=0.7)

    ref_val, ref_grads = jax.value_and_grad(lambda a, b: loss(contrastive.nce_loss_reference,
                                                              a, b), (0, 1))(v, t)
    sh = NamedSharding(mesh, P("data"))
    vs, ts = jax.device_put(v, sh), jax.device_put(t, sh)

    @jax.jit
    def sharded(a, b):
        with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            return jax.value_and_grad(lambda x, y: loss(contrastive.nce_loss, x, y), (0, 1))(a, b)

    val, grads = sharded(vs, ts)
    np.testing.assert_allclose(float(val), float(ref_val), rtol=1e-5)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-6)
    if shape[0] > 1:  # the sharded path really ran: an all-gather is in the compiled HLO
        hlo = sharded.lower(vs, ts).compile().as_text()
        assert "all-gather" in hlo


def test_bad_shapes_and_batch_raise():
    v, t, _ = _data(b=12)
    with pytest.raises(ValueError, match="must both be"):
        contrastive.nce_loss_reference(v, t[:, :4])
    mesh = sharding.make_mesh((8, 1))
    with jax.sharding.use_abstract_mesh(mesh.abstract_mesh), pytest.raises(
            ValueError, match="not divisible"):
        jax.jit(contrastive.nce_loss).lower(v, t)
