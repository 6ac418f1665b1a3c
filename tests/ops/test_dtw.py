"""soft_dtw / dtw / soft_dtw_divergence / pairwise_cost against brute force and references."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from vnr.ops import dtw as dtw_module
from vnr.ops.dtw import dtw, pairwise_cost, soft_dtw, soft_dtw_divergence

# One padded shape for most tests (one compile), lengths covering 1 and full.
B, N, M = 6, 5, 5
LX = np.array([5, 4, 1, 3, 5, 2])
LY = np.array([5, 2, 4, 1, 3, 5])


def _paths(n: int, m: int) -> list[list[tuple[int, int]]]:
    """Every monotone path (steps (1,0), (0,1), (1,1)) from (0,0) to (n-1, m-1)."""
    out = []

    def rec(i, j, p):
        if (i, j) == (n - 1, m - 1):
            out.append(p)
            return
        for di, dj in ((1, 0), (0, 1), (1, 1)):
            if i + di < n and j + dj < m:
                rec(i + di, j + dj, p + [(i + di, j + dj)])

    rec(0, 0, [(0, 0)])
    return out


def _brute_soft(c: np.ndarray, gamma: float):
    """Soft-DTW value and expected alignment by enumerating all paths (float64)."""
    paths = _paths(*c.shape)
    costs = np.array([sum(c[i, j] for i, j in p) for p in paths], np.float64)
    z = -costs / gamma
    zmax = z.max()
    probs = np.exp(z - zmax)
    value = -gamma * (zmax + np.log(probs.sum()))
    probs /= probs.sum()
    expected = np.zeros(c.shape)
    for p, w in zip(paths, probs, strict=True):
        for i, j in p:
            expected[i, j] += w
    return value, expected, costs.min(), len(paths)


@pytest.fixture(scope="module")
def costs() -> np.ndarray:
    return np.random.default_rng(0).uniform(0.0, 3.0, (B, N, M)).astype(np.float32)


def test_soft_dtw_matches_brute_force_value_and_expected_alignment(costs):
    gamma = 0.5
    val = soft_dtw(costs, gamma, LX, LY)
    grad = jax.grad(lambda c: soft_dtw(c, gamma, LX, LY).sum())(jnp.asarray(costs))
    assert val.shape == (B,) and val.dtype == jnp.float32
    for b in range(B):
        n, m = LX[b], LY[b]
        ref, expected, _, _ = _brute_soft(costs[b, :n, :m].astype(np.float64), gamma)
        np.testing.assert_allclose(val[b], ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(grad[b, :n, :m], expected, atol=2e-5)
        assert np.all(np.asarray(grad[b, n:, :]) == 0) and np.all(np.asarray(grad[b, :, m:]) == 0)
    assert float(grad.min()) >= 0.0 and float(grad.max()) <= 1.0 + 1e-6
    # Without lengths (every pair full): the same numbers as passing full lengths.
    val_full = soft_dtw(costs, gamma)
    grad_full = jax.grad(lambda c: soft_dtw(c, gamma).sum())(jnp.asarray(costs))
    np.testing.assert_allclose(val_full[0], val[0], rtol=1e-6)
    np.testing.assert_allclose(grad_full[0], grad[0], atol=1e-6)
    ref, expected, _, _ = _brute_soft(costs[1].astype(np.float64), gamma)
    np.testing.assert_allclose(val_full[1], ref, rtol=1e-5)
    np.testing.assert_allclose(grad_full[1], expected, atol=2e-5)


def test_dtw_matches_brute_force_minimum_and_returns_a_valid_optimal_path(costs):
    val, path = dtw(costs, LX, LY)
    assert path.shape == (B, N + M, 2) and path.dtype == jnp.int32
    for b in range(B):
        n, m = LX[b], LY[b]
        _, _, best, _ = _brute_soft(costs[b, :n, :m].astype(np.float64), 1.0)
        np.testing.assert_allclose(val[b], best, rtol=1e-6)
        p = np.asarray(path[b])
        real = p[p[:, 0] >= 0]
        assert np.all(p[len(real) :] == -1)
        assert tuple(real[0]) == (0, 0) and tuple(real[-1]) == (n - 1, m - 1)
        steps = {tuple(s) for s in np.diff(real, axis=0)}
        assert steps <= {(1, 0), (0, 1), (1, 1)}
        np.testing.assert_allclose(costs[b][real[:, 0], real[:, 1]].sum(), best, rtol=1e-6)


def test_dtw_on_a_tall_matrix_runs_transposed_with_the_same_answer(costs):
    tall = np.concatenate([costs, costs[:, :3]], axis=1)  # [B, 8, 5]
    val, path = dtw(tall, None, LY)
    val_t, path_t = dtw(tall.transpose(0, 2, 1), LY, None)
    np.testing.assert_allclose(val, val_t, rtol=1e-6)
    for b in range(B):
        p = np.asarray(path[b])
        real = p[p[:, 0] >= 0]
        np.testing.assert_allclose(tall[b][real[:, 0], real[:, 1]].sum(), val[b], rtol=1e-6)


def _naive_soft_dtw(c: jax.Array, gamma: float) -> jax.Array:
    """Row-by-row recursion (scan over rows, scan over columns), differentiated by autodiff."""
    n, m = c.shape
    inf = jnp.asarray(jnp.inf, c.dtype)

    def softmin(a, b, d):
        return -gamma * jax.nn.logsumexp(-jnp.stack([a, b, d]) / gamma)

    def row_step(prev, ci):  # prev = R[i-1, -1..m-1]
        def col_step(left, k):
            r = ci[k] + softmin(prev[k], prev[k + 1], left)
            return r, r

        _, row = lax.scan(col_step, inf, jnp.arange(m))
        new = jnp.concatenate([inf[None], row])
        return new, None

    first = jnp.concatenate([jnp.zeros((1,), c.dtype), jnp.full((m,), inf)])
    last, _ = lax.scan(row_step, first, c)
    return last[-1]


def test_gradient_matches_finite_differences_and_naive_autodiff_in_float64():
    with jax.enable_x64(True):
        rng = np.random.default_rng(1)
        c = jnp.asarray(rng.uniform(0.0, 2.0, (2, 4, 3)), jnp.float64)
        lx, ly, gamma = np.array([4, 3]), np.array([3, 2]), 0.3
        f = lambda c: soft_dtw(c, gamma, lx, ly)
        assert f(c).dtype == jnp.float64
        grad = np.asarray(jax.jacrev(lambda c: f(c).sum())(c))
        eps = 1e-6
        fd = np.zeros_like(grad)
        for idx in itertools.product(*(range(s) for s in c.shape)):
            e = np.zeros(c.shape)
            e[idx] = eps
            fd[idx] = (np.asarray(f(c + e)).sum() - np.asarray(f(c - e)).sum()) / (2 * eps)
        np.testing.assert_allclose(grad, fd, atol=1e-8)
        for b in range(2):
            sub = c[b, : lx[b], : ly[b]]
            naive = jax.grad(lambda s: _naive_soft_dtw(s, gamma))(sub)
            np.testing.assert_allclose(_naive_soft_dtw(sub, gamma), f(c)[b], rtol=1e-12)
            np.testing.assert_allclose(grad[b, : lx[b], : ly[b]], naive, atol=1e-12)


def test_accelerators_run_the_batch_as_one_wavefront_with_the_same_results(monkeypatch):
    # On CPU the batch runs in L1-sized groups, one after another; on a GPU each wavefront
    # step costs kernel launches, so the whole batch is one group. Scheduling only.
    monkeypatch.setattr(dtw_module, "_CELLS_PER_STEP", 12)  # CPU: groups of one pair here
    rng = np.random.default_rng(7)
    c = jnp.asarray(rng.uniform(0.0, 3.0, (3, 6, 7)).astype(np.float32))
    lx, ly = jnp.array([6, 1, 4]), jnp.array([7, 5, 1])
    assert dtw_module._grouped(c) and dtw_module._group_size(3, 6, True) == 1
    assert dtw_module._group_size(3, 6, False) == 3
    out = {}
    for grouped in (True, False):  # a static argument: each its own trace
        f = lambda c, g=grouped: dtw_module._soft_dtw_jit(c, lx, ly, 0.3, g)  # noqa: E731
        out[grouped] = f(c), jax.grad(lambda c, f=f: f(c).sum())(c)
    np.testing.assert_allclose(out[False][0], out[True][0], rtol=1e-6)
    np.testing.assert_allclose(out[False][1], out[True][1], atol=1e-6)


def test_banded_and_grouped_wavefront_matches_naive_autodiff(monkeypatch):
    # N >= 32 runs the diagonals as several bands; a tiny cell budget puts each pair in its
    # own group. Neither may change a value or a gradient.
    monkeypatch.setattr(dtw_module, "_CELLS_PER_STEP", 40)
    monkeypatch.setattr(dtw_module, "_BANDS", 2)  # fewer loops to compile, same code path
    # A fresh plan cache for _BANDS = 2 (the module's holds plans made under 4), dropped after.
    monkeypatch.setattr(dtw_module, "_band_plan", functools.cache(
        dtw_module._band_plan.__wrapped__))
    rng = np.random.default_rng(6)
    c = rng.uniform(0.0, 3.0, (2, 40, 45)).astype(np.float32)
    lx, ly, gamma = np.array([40, 14]), np.array([45, 44]), 0.3
    assert len(dtw_module._band_plan(40, 45)) == 5 and dtw_module._group_size(2, 40, True) == 1
    val = soft_dtw(c, gamma, lx, ly)
    grad = jax.grad(lambda c: soft_dtw(c, gamma, lx, ly).sum())(jnp.asarray(c))
    for b in range(2):
        sub = jnp.asarray(c[b, : lx[b], : ly[b]])
        np.testing.assert_allclose(val[b], _naive_soft_dtw(sub, gamma), rtol=1e-5)
        naive = jax.grad(lambda s: _naive_soft_dtw(s, gamma))(sub)
        np.testing.assert_allclose(grad[b, : lx[b], : ly[b]], naive, atol=1e-5)
        assert float(jnp.abs(grad[b, lx[b] :]).sum() + jnp.abs(grad[b, :, ly[b] :]).sum()) == 0
    # Without lengths (static fast path: the value is read off the last diagonal).
    full = jax.value_and_grad(lambda c: soft_dtw(c, gamma)[0])(jnp.asarray(c[:1]))
    np.testing.assert_allclose(full[0], val[0], rtol=1e-6)
    np.testing.assert_allclose(full[1], grad[:1], atol=1e-6)


def test_soft_dtw_tends_to_dtw_as_gamma_goes_to_zero(costs):
    hard, _ = dtw(costs, LX, LY)
    gaps = []
    for gamma in (1.0, 0.1, 0.01):
        soft = np.asarray(soft_dtw(costs, gamma, LX, LY))
        npaths = np.array([len(_paths(n, m)) for n, m in zip(LX, LY, strict=True)])
        # min - gamma log(#paths) <= soft <= min
        assert np.all(soft <= np.asarray(hard) + 1e-5)
        assert np.all(soft >= np.asarray(hard) - gamma * np.log(npaths) - 1e-5)
        gaps.append(np.abs(soft - np.asarray(hard)).max())
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.05


def test_padded_batch_equals_each_pair_alone():
    rng = np.random.default_rng(2)
    c = rng.uniform(0.0, 3.0, (3, 7, 6)).astype(np.float32)
    c[0, 5:, :] = 1e3  # junk in the padding must not matter
    c[1, :, 4:] = -7.0
    c[2, 2:, :] = np.nan
    lx, ly = np.array([5, 7, 2]), np.array([6, 4, 3])
    gamma = 0.5
    val = soft_dtw(c, gamma, lx, ly)
    grad = jax.grad(lambda c: soft_dtw(c, gamma, lx, ly).sum())(jnp.asarray(c))
    assert np.all(np.isfinite(val)) and np.all(np.isfinite(grad))
    for b in (0, 1):
        sub = c[b : b + 1, : lx[b], : ly[b]]
        np.testing.assert_allclose(val[b], soft_dtw(sub, gamma)[0], rtol=1e-6)
        g_alone = jax.grad(lambda s: soft_dtw(s, gamma).sum())(jnp.asarray(sub))[0]
        np.testing.assert_allclose(grad[b, : lx[b], : ly[b]], g_alone, atol=1e-6)
        assert float(jnp.abs(grad[b]).sum()) == pytest.approx(float(jnp.abs(g_alone).sum()))


def test_float32_small_gamma_stays_finite_and_near_dtw():
    rng = np.random.default_rng(3)
    c = rng.uniform(0.0, 10.0, (2, 30, 24)).astype(np.float32)
    lx, ly = np.array([30, 25]), np.array([24, 17])
    val = soft_dtw(c, 1e-3, lx, ly)
    grad = jax.grad(lambda c: soft_dtw(c, 1e-3, lx, ly).sum())(jnp.asarray(c))
    assert np.all(np.isfinite(val)) and np.all(np.isfinite(grad))
    assert float(grad.min()) >= 0.0 and float(grad.max()) <= 1.0 + 1e-5
    hard, path = dtw(c, lx, ly)
    np.testing.assert_allclose(val, hard, atol=0.05)
    # The expected alignment concentrates on the optimal path.
    for b in range(2):
        p = np.asarray(path[b])
        p = p[p[:, 0] >= 0]
        assert float(grad[b][p[:, 0], p[:, 1]].mean()) > 0.9


def test_nan_cost_stays_in_its_batch_element(costs):
    bad = costs.copy()
    bad[1, 0, 1] = np.nan  # inside element 1
    bad[0, 4, :] = np.nan  # element 0 has len_x = 5: inside too
    bad[3, 3:, :] = np.nan  # element 3 has len_x = 3: padding only
    gamma = 0.5
    clean = soft_dtw(costs, gamma, LX, LY)
    val = soft_dtw(bad, gamma, LX, LY)
    grad = jax.grad(lambda c: soft_dtw(c, gamma, LX, LY).sum())(jnp.asarray(bad))
    clean_grad = jax.grad(lambda c: soft_dtw(c, gamma, LX, LY).sum())(jnp.asarray(costs))
    assert np.isnan(val[0]) and np.isnan(val[1])
    for b in (2, 3, 4, 5):
        np.testing.assert_allclose(val[b], clean[b], rtol=1e-6)
        np.testing.assert_allclose(grad[b], clean_grad[b], atol=1e-6)
    hard, _ = dtw(bad, LX, LY)
    assert np.isnan(hard[1]) and np.isfinite(hard[3]) and np.isfinite(hard[2])


def test_divergence_and_pairwise_cost():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 6, 3)).astype(np.float32)
    y = rng.normal(size=(2, 5, 3)).astype(np.float32)
    cxy = pairwise_cost(x, y)
    np.testing.assert_allclose(
        cxy, ((x[:, :, None] - y[:, None]) ** 2).sum(-1), rtol=1e-5, atol=1e-5
    )
    cos = pairwise_cost(x, y, kind="cosine")
    xn = x / np.linalg.norm(x, axis=-1, keepdims=True)
    yn = y / np.linalg.norm(y, axis=-1, keepdims=True)
    np.testing.assert_allclose(cos, 1 - np.einsum("bnd,bmd->bnm", xn, yn), atol=1e-6)
    cxx, cyy = pairwise_cost(x, x), pairwise_cost(y, y)
    lx, ly = np.array([6, 4]), np.array([5, 3])
    div = soft_dtw_divergence(cxy, cxx, cyy, 1.0, lx, ly)
    assert np.all(np.asarray(div) >= -1e-4)
    self_div = soft_dtw_divergence(cxx, cxx, cxx, 1.0, lx, lx)
    np.testing.assert_allclose(self_div, 0.0, atol=1e-5)


def test_bad_input_raises_value_error_naming_the_argument(costs):
    with pytest.raises(ValueError, match="cost"):
        soft_dtw(costs[0], 1.0)
    with pytest.raises(ValueError, match="cost"):
        dtw(np.zeros((2, 0, 3)))
    for g in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="gamma"):
            soft_dtw(costs, g)
    with pytest.raises(ValueError, match="len_x"):
        soft_dtw(costs, 1.0, len_x=np.array([0, 1, 1, 1, 1, 1]))
    with pytest.raises(ValueError, match="len_x"):
        dtw(costs, len_x=np.full(B, N + 1))
    with pytest.raises(ValueError, match="len_y"):
        soft_dtw(costs, 1.0, len_y=np.array([1, 2]))
    with pytest.raises(ValueError, match="cost_xx"):
        soft_dtw_divergence(costs, costs[:, :2], costs, 1.0)
    with pytest.raises(ValueError, match="kind"):
        pairwise_cost(costs, costs, kind="l1")


def test_works_under_an_outer_jit(costs):
    f = jax.jit(lambda c, lx: soft_dtw(c, 0.5, lx, LY))
    np.testing.assert_allclose(f(costs, LX), soft_dtw(costs, 0.5, LX, LY), rtol=1e-6)


def test_matches_tslearn_soft_dtw(costs):
    metrics = pytest.importorskip("tslearn.metrics")
    gamma = 0.5  # same shape and gamma as the brute-force test: nothing to recompile here
    val = soft_dtw(costs, gamma, LX, LY)
    grad = jax.grad(lambda c: soft_dtw(c, gamma, LX, LY).sum())(jnp.asarray(costs))
    for b in range(B):
        sub = costs[b, : LX[b], : LY[b]].astype(np.float64)
        ref = metrics.SoftDTW(sub, gamma=gamma)
        np.testing.assert_allclose(val[b], ref.compute(), rtol=1e-5)
        np.testing.assert_allclose(grad[b, : LX[b], : LY[b]], ref.grad(), atol=1e-5)
