"""Compute settings applied in one place (vnr/models/compute.py, vnr/models/attention.py):
attention variants agree, remat changes memory not values, dtypes reach every layer, and bad
values are one error naming the key."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from vnr.models import attention, compute
from vnr.models.encoders import factory
from vnr.models.layers import Block


def _qkv(seed: int = 0, b: int = 2, t: int = 5, s: int = 7, h: int = 2, d: int = 8):
    ks = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(ks[0], (b, t, h, d)), jax.random.normal(ks[1], (b, s, h, d)),
            jax.random.normal(ks[2], (b, s, h, d)))


def _reference(q, k, v, key_mask, causal):
    """softmax(q k^T / sqrt(d)) v with masked keys removed, in NumPy float64."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(scores.shape, bool)
    if key_mask is not None:
        allowed &= np.asarray(key_mask, bool)[:, None, None, :]
    if causal:
        allowed &= np.tril(np.ones(scores.shape[-2:], bool))[None, None]
    scores = np.where(allowed, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("impl", ["default", "xla", "explicit"])
def test_attention_variants_match_the_formula(impl, causal):
    q, k, v = _qkv(t=7)
    key_mask = jnp.array([[1] * 7, [1] * 4 + [0] * 3])
    mask = attention.Mask(key_mask, causal=causal)
    if impl == "explicit":  # the dropout path, with dropout that keeps everything
        out = attention.attend(q, k, v, mask, drop=nnx.Dropout(1e-9, rngs=nnx.Rngs(0)),
                               deterministic=False)
    else:
        out = attention.attend(q, k, v, mask, implementation=impl)
    np.testing.assert_allclose(out, _reference(q, k, v, key_mask, causal), atol=1e-5)


def test_cudnn_is_refused_on_cpu_naming_the_key():
    with pytest.raises(ValueError, match="attention='cudnn' needs an NVIDIA GPU"):
        attention.check_implementation("cudnn", backend="cpu")
    attention.check_implementation("cudnn", backend="gpu")


@pytest.mark.parametrize("key,value", [("dtype", "float16"), ("param_dtype", "fp32"),
                                       ("attention", "flash"), ("remat", "all")])
def test_bad_values_are_one_error_naming_the_key(key, value):
    with pytest.raises(ValueError, match=f"^{key}='{value}'"):
        compute.settings(ml_collections.ConfigDict({key: value}))


def _block_loss(model: Block, x, mask):
    return (model(x, mask, train=False, rngs=None) ** 2).mean()


def test_remat_keeps_values_and_gradients():
    x = jax.random.normal(jax.random.key(1), (2, 6, 16))
    mask = jnp.array([[True] * 6, [True] * 3 + [False] * 3])
    grads = []
    for remat in ("none", "full"):
        block = compute.configure(Block(16, 2, 32, 0.0, nnx.Rngs(0)),
                                  ml_collections.ConfigDict(dict(remat=remat)))
        assert block.remat == (remat == "full")
        loss, g = nnx.jit(nnx.value_and_grad(_block_loss))(block, x, mask)
        grads.append((loss, jax.tree.leaves(nnx.state(g))))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-6)
    for a, b in zip(grads[0][1], grads[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_towers_remat_and_bfloat16_reach_the_encoder_layers():
    model, _, _ = factory.create("scratch:bert-tiny", rngs=0)
    cfg = ml_collections.ConfigDict(dict(dtype="bfloat16", param_dtype="float32",
                                         remat="towers", attention="xla"))
    ids = jnp.array([[5, 6, 7, 0], [8, 9, 0, 0]])
    pooled = nnx.jit(lambda m, ids: m(ids, (ids > 0).astype(jnp.int32)).pooled)
    want = pooled(model, ids)
    compute.configure(model, cfg)
    layers = list(model.encoder.layer)
    assert all(layer.remat and layer.attention_impl == "xla" for layer in layers)
    dtypes = {n.dtype for _, n in nnx.iter_graph(model) if isinstance(n, nnx.Linear)}
    assert dtypes == {jnp.bfloat16}
    params = {v.get_value().dtype for _, v in nnx.iter_graph(model) if isinstance(v, nnx.Param)}
    assert params == {jnp.dtype(jnp.float32)}
    got = np.asarray(pooled(model, ids), np.float32)  # retraced: bfloat16, remat
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=0.1)


def test_defaults_leave_the_model_untouched():
    block = Block(8, 2, 16, 0.0, nnx.Rngs(0))
    before = jax.tree.map(np.asarray, nnx.state(block).to_pure_dict())
    compute.configure(block, ml_collections.ConfigDict())
    after = jax.tree.map(np.asarray, nnx.state(block).to_pure_dict())
    jax.tree.map(np.testing.assert_array_equal, before, after)
    assert block.attention_impl == "default" and not block.remat


def _pooled_loss(model, ids):
    return (model(ids, (ids > 0).astype(jnp.int32)).pooled ** 2).sum()


def test_scan_layers_keeps_values_gradients_and_dropout_streams():
    ids = jnp.array([[5, 6, 7, 0], [8, 9, 0, 0]])
    runs = []
    for scan in (False, True):
        model, _, _ = factory.create("scratch:bert-tiny", rngs=0)
        compute.configure(model, ml_collections.ConfigDict(dict(scan_layers=scan)))
        assert len(model.encoder.layer) > 1
        assert all(layer.scan == scan for layer in model.encoder.layer)
        loss, g = nnx.jit(nnx.value_and_grad(_pooled_loss))(model, ids)
        model.train()  # dropout on: each layer draws from its own stream, twice
        drops = [model(ids, (ids > 0).astype(jnp.int32)).pooled for _ in range(2)]
        runs.append((loss, jax.tree.leaves(nnx.state(g)), drops))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-6)
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    for a, b in zip(runs[0][2], runs[1][2], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(runs[1][2][0], runs[1][2][1])  # the streams advanced
    with pytest.raises(ValueError, match="scan_layers"):
        compute.settings(ml_collections.ConfigDict(dict(scan_layers="yes")))
