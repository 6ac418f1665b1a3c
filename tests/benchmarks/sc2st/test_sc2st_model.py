"""Sc2St model and task: scan == Python loop, causality, baselines, and a smoke run."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tests import ROOT  # noqa: E402
from vnr import config as config_lib
from vnr.benchmarks.sc2st import baselines, task
from vnr.benchmarks.sc2st import fusion as fusions
from vnr.benchmarks.sc2st.model import TRAINED, prior_scores, similarity_scores


def get_config(arg):
    return config_lib.load(f"{ROOT / 'configs/sc2st/main.py'}:{arg or ''}")


def fake_batch(b=2, c=12, d=32, tokens=16, seed=0):
    rng = np.random.default_rng(seed)
    return {"tokens": rng.integers(2, 1024, (b, 10, tokens)).astype(np.int32),
            "features": rng.normal(size=(b, 10, d)).astype(np.float32),
            "cands": rng.normal(size=(b, 9, c, d)).astype(np.float32),
            "answer": rng.integers(0, c, (b, 9)).astype(np.int32),
            "index": np.arange(b, dtype=np.int32), "mask": np.ones(b, bool)}


@pytest.fixture(scope="module")
def models():
    out = {}
    for fusion in TRAINED:
        cfg = get_config(f"smoke,{fusion}")
        out[fusion] = task.make_model(cfg, nnx.Rngs(0))
    return out


def test_scan_equals_python_loop_and_is_causal(models):
    batch = fake_batch()
    for fusion, model in models.items():
        carry, xs = model.prepare(batch)
        scan = model.rounds_scan(carry, xs)
        loop = model.rounds_loop(carry, xs)
        assert scan.shape == (2, 9, 12)
        np.testing.assert_allclose(scan, loop, rtol=1e-5, atol=1e-5, err_msg=fusion)
        # Round t (index t-2) must not see keyframe t or later: change keyframe 6.
        changed = dict(batch, features=batch["features"].copy())
        changed["features"][:, 5] += 3.0
        after = model(changed)
        np.testing.assert_allclose(after[:, :5], scan[:, :5], atol=1e-6, err_msg=fusion)
        if fusion != "lf_t":  # visual context must matter from round 7 on
            assert not np.allclose(after[:, 5:], scan[:, 5:])
        else:
            np.testing.assert_allclose(after, scan, atol=1e-6)


@pytest.mark.parametrize("fusion", ["gf", "sa"])  # MoEE: test_moee_rows
def test_loss_has_gradients_everywhere(models, fusion):
    batch = jax.tree.map(jnp.asarray, fake_batch())
    cfg = get_config(f"smoke,{fusion}")
    model = models[fusion]
    grads = nnx.jit(nnx.grad(lambda m: task.loss_fn(cfg, m, batch, nnx.Rngs(dropout=1))[0]))(
        model)
    norms = {jax.tree_util.keystr(p): float(jnp.abs(g).sum())
             for p, g in jax.tree_util.tree_leaves_with_path(nnx.state(grads))}
    assert all(np.isfinite(v) for v in norms.values())
    dead = [k for k, v in norms.items() if v == 0]
    assert not dead, dead


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _lin(layer, x):
    return x @ np.asarray(layer.kernel[...]) + np.asarray(layer.bias[...])


def test_gf_is_eq1():
    """g_t = G_S(r_S^t) r_I^{t-1} + G_I(r_I^{t-1}) r_S^t, G = linear + sigmoid, element-wise."""
    gf = fusions.GatedFusion(6, nnx.Rngs(3))
    rng = np.random.default_rng(0)
    for _ in range(3):
        rs, ri = rng.normal(size=(2, 4, 6)).astype(np.float32)
        want = np.empty((4, 6))
        for b in range(4):
            gs, gi = _sig(_lin(gf.gate_s, rs[b])), _sig(_lin(gf.gate_i, ri[b]))
            want[b] = gs * ri[b] + gi * rs[b]
        np.testing.assert_allclose(gf(jnp.asarray(rs), jnp.asarray(ri)), want, rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("normalise", ["printed", "query"])
def test_sa_is_eq2_eq3(normalise):
    """u = MLP([r_S; r_I]) in R^{U x N}; u_j <- W_v sum_i w_{j,i} u_i with
    w_{j,i} = exp(a_{i,j}) / sum_k exp(a_{i,k}) (printed) and a_{i,j} = (W_q u_i)^T (W_k u_j)."""
    n, unit = 4, 3
    sa = fusions.ChannelAttentionFusion(5, 7, n, unit, nnx.Rngs(4), normalise)
    wq, wk, wv = (np.asarray(w[...], np.float64) for w in (sa.wq, sa.wk, sa.wv))
    rng = np.random.default_rng(1)
    rs, ri = rng.normal(size=(2, 2, 5)).astype(np.float32)
    got = np.asarray(sa(jnp.asarray(rs), jnp.asarray(ri)))
    for b in range(2):
        h = _lin(sa.up, np.concatenate([rs[b], ri[b]]))
        h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))  # GELU
        u = _lin(sa.down, h).reshape(n, unit)  # row i = channel u_i (width U)
        a = np.array([[(wq @ u[i]) @ (wk @ u[j]) for j in range(n)] for i in range(n)])
        out = []
        for j in range(n):
            if normalise == "printed":
                w = [np.exp(a[i, j]) / np.exp(a[i]).sum() for i in range(n)]
            else:
                w = [np.exp(a[j, i]) / np.exp(a[j]).sum() for i in range(n)]
            out.append(wv @ sum(w[i] * u[i] for i in range(n)))
        np.testing.assert_allclose(got[b], np.concatenate(out), rtol=1e-4, atol=1e-5)


def _geu(unit, x):
    """A GatedEmbeddingUnit at evaluation (running statistics) in NumPy."""
    y = _lin(unit.fc, x)
    g = _lin(unit.cg.fc, y)
    bn = unit.cg.batch_norm
    if bn is not None:
        g = ((g - np.asarray(bn.mean.value)) / np.sqrt(np.asarray(bn.var.value) + 1e-5)
             * np.asarray(bn.scale.value) + np.asarray(bn.bias.value))
    y = y * _sig(g)
    return y / np.maximum(np.linalg.norm(y, axis=-1, keepdims=True), 1e-6)


def test_moee_rows():
    """Units as Miech et al.'s (batch norm in the gate); V-MoEE ignores the history,
    C-CMoEE reads keyframes 1..t-1 only."""
    model = task.make_model(get_config("smoke,moee"), nnx.Rngs(0))
    unit = model.image_units[0]
    assert unit.cg.batch_norm is not None
    x = np.random.default_rng(2).normal(size=(3, 32)).astype(np.float32)
    np.testing.assert_allclose(nnx.jit(lambda u, x: u(x, train=False))(unit, x), _geu(unit, x),
                               rtol=1e-5, atol=1e-6)
    batch = fake_batch()
    changed = dict(batch, features=batch["features"].copy())
    changed["features"][:, 5] += 3.0  # keyframe 6
    both = nnx.jit(lambda m, b1, b2: (m(b1), m(b2)))
    for name, ctx in (("moee", False), ("cmoee", True)):
        model = task.make_model(get_config(f"smoke,{name}"), nnx.Rngs(0))
        a, b = map(np.asarray, both(model, batch, changed))
        assert a.shape == (2, 9, 12)
        np.testing.assert_allclose(a[:, :5], b[:, :5], atol=1e-6)  # rounds 2..6
        assert ctx == (not np.allclose(a[:, 5:], b[:, 5:]))


def test_baselines():
    b = fake_batch()
    sim = np.asarray(similarity_scores(b["features"], b["cands"]))
    prev, cand = b["features"][0, 3], b["cands"][0, 3, 7]
    want = prev @ cand / np.linalg.norm(prev) / np.linalg.norm(cand)
    assert sim[0, 3, 7] == pytest.approx(want, rel=1e-5)
    p1 = prior_scores(jax.random.key(0), jnp.array([0, 1]), (9, 12))
    p2 = prior_scores(jax.random.key(0), jnp.array([1]), (9, 12))
    np.testing.assert_array_equal(p1[1], p2[0])  # a storyboard's scores depend on its index only
    cfg = get_config("similarity")
    assert cfg.total_steps == 0
    cfg.total_steps = 5
    with pytest.raises(ValueError, match="nothing to train"):
        task.validate(cfg)
    with pytest.raises(ValueError, match="one model"):
        get_config("sa,gf")


# The SA model and the Prior baseline trained and evaluated end to end (results, checkpoints,
# the storyboard picture): tests/reproduce/test_smoke_sc2st.py::test_smoke_run_end_to_end.


def test_moee_experts_mask_and_renormalise():
    """N experts from N columns: per-expert gated units, text mixture weights softmax(W s); an
    expert missing for a candidate (all zero) is masked and the weights renormalised.
    Checked against a NumPy transcription."""
    cfg = get_config("smoke,moee")
    text, width = task.text_encoder(cfg, nnx.Rngs(0))
    model = baselines.MoEE(context=False, text_encoder=text, text_width=width, feature_dim=32,
                           width=8, rngs=nnx.Rngs(1), experts={"scene": 6, "character": 4})
    batch = fake_batch()
    rng = np.random.default_rng(3)
    for name, d in (("scene", 6), ("character", 4)):
        batch[f"x_{name}"] = rng.normal(size=(2, 10, d)).astype(np.float32)
        batch[f"c_{name}"] = rng.normal(size=(2, 9, 12, d)).astype(np.float32)
    batch["c_character"][:, :, :5] = 0.0  # no character for candidates 0..4
    tok = batch["tokens"][:, 1:].reshape(18, -1)

    @nnx.jit
    def run(model, batch, tok):
        return model(batch), model.text(tok, (tok > 0).astype(jnp.int32)).pooled

    got, sent = map(np.asarray, run(model, batch, tok))
    sent = sent.reshape(2, 9, -1)

    logits = _lin(model.weights, sent)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    sims = [np.einsum("brw,brcw->brc", _geu(model.text_units[e], sent),
                      _geu(model.image_units[e], batch[f"c_{n}"]))
            for e, n in enumerate(("scene", "character"))]
    present = np.stack([np.ones((2, 9, 12)), batch["c_character"].any(-1)], -1)
    wt = w[:, :, None, :] * present
    wt /= wt.sum(-1, keepdims=True)
    want = wt[..., 0] * sims[0] + wt[..., 1] * sims[1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[:, :, :5], sims[0][:, :, :5], rtol=1e-4, atol=1e-5)
    ctx = baselines.MoEE(context=True, text_encoder=text, text_width=width, feature_dim=32,
                         width=8, rngs=nnx.Rngs(1), experts={"scene": 6, "character": 4})
    assert ctx.weights.kernel.shape == (width, 4)  # current + context per expert
    # an expert missing everywhere: zero input, zero-initialised bias, y = 0 in its GEU; the
    # gradient must stay finite (that of ||y|| at 0 is NaN)
    grads = nnx.jit(nnx.grad(lambda u: u(jnp.zeros((3, 4)), train=True).sum()))(
        ctx.image_units[1])
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))
