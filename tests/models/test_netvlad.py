"""NetVLAD, the gated embedding unit (vnr.models.netvlad) and the max-margin ranking loss
(vnr.ops.ranking) against MoEE's PyTorch code (antoine77340/Mixture-of-Embedding-Experts).

Golden file (tests/golden/make_netvlad.py, run by hand with torch): upstream's modules on
random weights, their eval- and train-mode outputs, running statistics after a train pass and
gradients; upstream's loss and its gradient on a random score matrix."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models import netvlad
from vnr.ops import ranking
from vnr.sharding import var_names

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "netvlad"
META = json.loads((GOLDEN / "meta.json").read_text())
TOL = 2e-6


@pytest.fixture(scope="module")
def io() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


def close(name: str, got, want, tol: float = TOL) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, name
    diff = float(np.abs(got - want).max())
    print(f"{name}: max |diff| {diff:.3g} (max |ref| {np.abs(want).max():.3g})")
    assert diff <= tol * max(1.0, float(np.abs(want).max())), (name, diff)


def set_bn(bn: netvlad.BatchNorm, io: dict, prefix: str) -> None:
    bn.scale.value = jnp.asarray(io[f"{prefix}.weight"])
    bn.bias.value = jnp.asarray(io[f"{prefix}.bias"])
    bn.mean.value = jnp.asarray(io[f"{prefix}.running_mean"])
    bn.var.value = jnp.asarray(io[f"{prefix}.running_var"])


def set_linear(fc: nnx.Linear, io: dict, prefix: str) -> None:
    fc.kernel.value = jnp.asarray(io[f"{prefix}.weight"].T)
    fc.bias.value = jnp.asarray(io[f"{prefix}.bias"])


def vlad_of(io: dict) -> netvlad.NetVLAD:
    m = netvlad.NetVLAD(META["D"], META["K"], nnx.Rngs(0))
    m.clusters.value = jnp.asarray(io["vlad.clusters"])
    m.clusters2.value = jnp.asarray(io["vlad.clusters2"])
    set_bn(m.batch_norm, io, "vlad.batch_norm")
    return m


def geu_of(io: dict) -> netvlad.GatedEmbeddingUnit:
    m = netvlad.GatedEmbeddingUnit(META["D"] * META["K"], META["E"], nnx.Rngs(0))
    set_linear(m.fc, io, "geu.fc")
    set_linear(m.cg.fc, io, "geu.cg.fc")
    set_bn(m.cg.batch_norm, io, "geu.cg.batch_norm")
    return m


def train_pass(model, x, r):
    """Train-mode output and gradients of sum(out * r) w.r.t. the parameters and x."""

    def f(m, v):
        out = m(v, train=True)
        return jnp.sum(out * r), out

    step = nnx.jit(nnx.value_and_grad(f, argnums=(0, 1), has_aux=True))
    (_, out), (g_model, g_x) = step(model, x)
    return out, g_model, g_x


def infer(model, x, **kw):
    return nnx.jit(lambda m, v: m(v, train=False, **kw))(model, x)


def test_netvlad_matches_moee(io):
    m = vlad_of(io)
    x = jnp.asarray(io["x"])
    close("netvlad eval", infer(m, x), io["vlad_eval"])
    out, g, gx = train_pass(m, x, jnp.asarray(io["vlad_r"]))
    close("netvlad train", out, io["vlad_train"])
    close("netvlad running_mean", m.batch_norm.mean.value,
          io["after_vlad.batch_norm.running_mean"])
    close("netvlad running_var", m.batch_norm.var.value,
          io["after_vlad.batch_norm.running_var"])
    close("netvlad grad x", gx, io["grad_x"], 1e-5)
    close("netvlad grad clusters", g.clusters.value, io["grad_vlad.clusters"], 1e-5)
    close("netvlad grad clusters2", g.clusters2.value, io["grad_vlad.clusters2"], 1e-5)
    close("netvlad grad bn scale", g.batch_norm.scale.value, io["grad_vlad.batch_norm.weight"],
          1e-5)
    close("netvlad grad bn bias", g.batch_norm.bias.value, io["grad_vlad.batch_norm.bias"],
          1e-5)


def test_gated_embedding_unit_matches_moee(io):
    m = geu_of(io)
    v = jnp.asarray(io["geu_in"])
    close("geu eval", infer(m, v), io["geu_eval"])
    out, g, gv = train_pass(m, v, jnp.asarray(io["geu_r"]))
    close("geu train", out, io["geu_train"])
    bn = m.cg.batch_norm
    close("geu running_mean", bn.mean.value, io["after_geu.cg.batch_norm.running_mean"])
    close("geu running_var", bn.var.value, io["after_geu.cg.batch_norm.running_var"])
    close("geu grad input", gv, io["grad_geu_in"], 1e-5)
    close("geu grad fc", g.fc.kernel.value, io["grad_geu.fc.weight"].T, 1e-5)
    close("geu grad gate fc", g.cg.fc.kernel.value, io["grad_geu.cg.fc.weight"].T, 1e-5)
    close("geu grad gate bn", g.cg.batch_norm.scale.value,
          io["grad_geu.cg.batch_norm.weight"], 1e-5)


@pytest.mark.parametrize("margin", META["margins"])
def test_max_margin_ranking_loss_matches_moee(io, margin):
    s = jnp.asarray(io["scores"])
    value, grad = jax.value_and_grad(ranking.max_margin_ranking_loss)(s, margin)
    close(f"loss margin {margin}", value, io[f"loss_{margin}"])
    close(f"loss grad margin {margin}", grad, io[f"grad_scores_{margin}"])
    with pytest.raises(ValueError, match="not square"):
        ranking.max_margin_ranking_loss(s[:3])


def test_candidate_max_margin_loss():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(2, 3, 5)).astype(np.float32)
    pos = rng.integers(0, 5, size=(2, 3))
    valid = np.array([[True, False, True], [True, True, False]])
    terms = [np.mean([max(0.0, 0.3 - s[i, j, pos[i, j]] + s[i, j, k]) for k in range(5)
                      if k != pos[i, j]]) for i in range(2) for j in range(3) if valid[i, j]]
    got = ranking.candidate_max_margin_loss(jnp.asarray(s), jnp.asarray(pos), 0.3,
                                            jnp.asarray(valid))
    np.testing.assert_allclose(got, np.mean(terms), rtol=1e-6)
    as_mask = ranking.candidate_max_margin_loss(s, np.eye(5, dtype=bool)[pos], 0.3, valid)
    np.testing.assert_allclose(as_mask, got, rtol=1e-6)
    assert float(ranking.candidate_max_margin_loss(s, pos, 0.3, np.zeros((2, 3), bool))) == 0


def test_mask_makes_padding_irrelevant(io):
    m = vlad_of(io)
    x = jnp.asarray(io["x"])
    lengths = np.array(META["lengths"])
    mask = jnp.asarray(np.arange(META["N"])[None] < lengths[:, None])
    longer = jnp.pad(x, ((0, 0), (0, 3), (0, 0)))
    longer_mask = jnp.pad(mask, ((0, 0), (0, 3)))
    run = nnx.jit(lambda m, v, k, train: m(v, train=train, mask=k), static_argnames="train")
    both = jnp.concatenate([x, x])  # the same sentences, each once with a full mask
    both_mask = jnp.concatenate([mask, jnp.ones_like(mask)])
    np.testing.assert_allclose(run(m, x, mask, False), run(m, longer, longer_mask, False),
                               atol=1e-6)
    np.testing.assert_allclose(run(m, both, both_mask, False)[4:], infer(m, x), atol=1e-6)
    # masked train mode: batch statistics of the real words only
    m.batch_norm.mean.value = jnp.zeros(META["K"])
    run(m, longer, longer_mask, True)
    scores = np.asarray(x).reshape(-1, META["D"])[np.asarray(mask).reshape(-1)] @ io[
        "vlad.clusters"]
    np.testing.assert_allclose(m.batch_norm.mean.value, 0.1 * scores.mean(0), atol=1e-6)
    before = np.asarray(m.batch_norm.var.value)
    run(m, longer, jnp.zeros_like(longer_mask), True)  # nothing counted: statistics kept
    np.testing.assert_array_equal(m.batch_norm.var.value, before)
    with pytest.raises(ValueError, match="width 3"):
        m(jnp.zeros((1, 2, 3)), train=False)


def test_logical_names_and_zero_input():
    abstract = nnx.eval_shape(lambda: netvlad.NetVLAD(300, 32, nnx.Rngs(0)))
    assert var_names(abstract.clusters) == ("embed", "cluster")
    assert abstract.clusters.value.shape == (300, 32) and abstract.out_dim == 9600
    assert var_names(abstract.batch_norm.scale) == ("cluster",)
    assert isinstance(abstract.batch_norm.mean, nnx.BatchStat)
    g = jax.grad(lambda v: netvlad.l2_normalize(v).sum())(jnp.zeros(4))
    assert np.isfinite(np.asarray(g)).all()
