"""SYMON Eq. 5: the NCE loss against a NumPy transcription of the printed formula (value
and gradient, padded items excluded), and the sharded version equal to the reference."""

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


def _eq5_numpy(v, t, valid, tau=1.0):
    """Eq. 5 as printed, term by term, over the valid items only (padding dropped first)."""
    v, t = v[valid].astype(np.float64), t[valid].astype(np.float64)
    n = len(v)
    total = 0.0
    for i in range(n):
        pos = v[i] @ t[i] / tau
        neg_t = sum(np.exp(v[i] @ t[k] / tau) for k in range(n) if k != i)
        neg_v = sum(np.exp(v[k] @ t[i] / tau) for k in range(n) if k != i)
        total += -pos + np.log(np.exp(pos) + neg_t + neg_v)
    return total / n


def _numeric_grad(f, x, eps=1e-5):
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        g[idx] = (f(hi) - f(lo)) / (2 * eps)
    return g


def test_reference_is_eq5_value_and_gradient_padding_excluded():
    v, t, valid = _data(b=6, d=4, seed=1)
    v64, t64 = v.astype(np.float64), t.astype(np.float64)
    tau = 0.7
    got, (gv, gt) = jax.value_and_grad(
        lambda a, b: contrastive.nce_loss_reference(a, b, jnp.asarray(valid), tau), (0, 1))(v, t)
    assert float(got) == pytest.approx(_eq5_numpy(v64, t64, valid, tau), rel=1e-5)
    want_v = _numeric_grad(lambda x: _eq5_numpy(x, t64, valid, tau), v64)
    want_t = _numeric_grad(lambda x: _eq5_numpy(v64, x, valid, tau), t64)
    np.testing.assert_allclose(np.asarray(gv), want_v, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gt), want_t, rtol=1e-3, atol=1e-5)
    assert not np.asarray(gv)[~valid].any() and not np.asarray(gt)[~valid].any()
    # Padded rows carry garbage: neither anchors nor negatives.
    v2, t2 = v.copy(), t.copy()
    v2[~valid], t2[~valid] = 50.0, -50.0
    assert float(contrastive.nce_loss_reference(v2, t2, valid, tau)) == pytest.approx(
        float(got), rel=1e-6)


def test_eq5_is_not_the_two_softmax_sum():
    v, t, _ = _data(b=6, d=4, seed=2)
    s = v.astype(np.float64) @ t.T.astype(np.float64)
    d = np.diag(s)
    two = np.mean(np.log(np.exp(s).sum(1)) - d + np.log(np.exp(s).sum(0)) - d)
    eq5 = float(contrastive.nce_loss_reference(v, t))
    assert eq5 == pytest.approx(_eq5_numpy(v, t, np.ones(6, bool)), rel=1e-5)
    assert abs(eq5 - two) > 0.5
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
    assert float(ref_val) == pytest.approx(_eq5_numpy(v, t, valid, 0.7), rel=1e-5)
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
