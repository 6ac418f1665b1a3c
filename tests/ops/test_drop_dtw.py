"""drop_dtw / soft_drop_dtw / percentile_drop_cost against exhaustive search and the loop."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench.reference.drop_dtw import alignment_cost, allowed, drop_dtw_batch, exhaustive
from vnr.ops.dtw import drop_dtw, percentile_drop_cost, soft_drop_dtw

B, N, M = 8, 5, 4
LX = np.array([5, 4, 3, 5, 2, 1, 5, 3])
LY = np.array([4, 3, 4, 2, 2, 1, 1, 3])


_alignment_cost, _allowed, _brute = alignment_cost, allowed, exhaustive


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    c = rng.uniform(0.0, 3.0, (B, N, M)).astype(np.float32)
    dx = rng.uniform(0.0, 2.0, (B, N)).astype(np.float32)
    dy = rng.uniform(0.0, 2.0, (B, M)).astype(np.float32)
    return c, dx, dy


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("two_sided", [True, False])
def test_drop_dtw_matches_exhaustive_search(data, contiguous, two_sided):
    c, dx, dy = data
    drop_y = dy if two_sided else None
    val, match = drop_dtw(c, dx, drop_y, LX, LY, contiguous=contiguous)
    assert val.shape == (B,) and match.shape == (B, N) and match.dtype == jnp.int32
    for b in range(B):
        n, m = LX[b], LY[b]
        sub_dy = None if drop_y is None else dy[b, :m]
        best, _ = _brute(c[b, :n, :m], dx[b, :n], sub_dy, contiguous)
        if np.isinf(best):  # one-sided with fewer clips than sentences
            assert np.isinf(val[b]) and np.all(np.asarray(match[b]) == -1)
            continue
        np.testing.assert_allclose(val[b], best, rtol=1e-5)
        a = tuple(int(v) for v in match[b, :n])
        assert np.all(np.asarray(match[b, n:]) == -1)
        assert _allowed(a, contiguous) and all(v < m for v in a)
        cost = _alignment_cost(a, c[b, :n, :m], dx[b, :n], sub_dy)
        assert cost is not None
        np.testing.assert_allclose(cost, best, rtol=1e-5)


def test_tall_and_wide_inputs_and_drop_cost_shapes(data):
    c, dx, dy = data
    wide = np.concatenate([c, c], axis=2)  # [B, 5, 8]: diagonals indexed by x
    dyw = np.concatenate([dy, dy], axis=1)
    val, match = drop_dtw(wide, dx, dyw, LX, 2 * LY)
    for b in (2, 3, 4, 5):
        n, m = LX[b], 2 * LY[b]
        best, _ = _brute(wide[b, :n, :m], dx[b, :n], dyw[b, :m], True)
        np.testing.assert_allclose(val[b], best, rtol=1e-5)
    # Scalar, per-pair [B] and per-element [B, N] drop costs agree when they are equal.
    v_scalar, m_scalar = drop_dtw(c, 0.7, 0.4, LX, LY)
    v_pair, m_pair = drop_dtw(c, np.full(B, 0.7), np.full(B, 0.4), LX, LY)
    v_full, m_full = drop_dtw(c, np.full((B, N), 0.7), np.full((B, M), 0.4), LX, LY)
    np.testing.assert_allclose(v_scalar, v_full, rtol=1e-6)
    np.testing.assert_allclose(v_pair, v_full, rtol=1e-6)
    np.testing.assert_array_equal(m_scalar, m_full)
    np.testing.assert_array_equal(m_pair, m_full)


def test_one_sided_matches_the_authors_cell_loop():
    rng = np.random.default_rng(1)
    c = rng.uniform(0.0, 1.0, (4, 30, 6)).astype(np.float32)
    dx = rng.uniform(0.3, 0.7, (4, 30)).astype(np.float32)
    ref_val, ref_match = drop_dtw_batch(c, dx)
    val, match = drop_dtw(c, dx)
    np.testing.assert_allclose(val, ref_val, rtol=1e-5)
    np.testing.assert_array_equal(match, ref_match)


def test_padded_batch_equals_each_pair_alone(data):
    c, dx, dy = data
    junk = c.copy()
    for b in range(B):
        junk[b, LX[b] :, :] = -100.0
        junk[b, :, LY[b] :] = -100.0
    junk[2, LX[2] :, :] = np.nan
    val, match = drop_dtw(junk, dx, dy, LX, LY)
    soft = soft_drop_dtw(junk, dx, dy, 0.3, LX, LY)
    grad = jax.grad(lambda c: soft_drop_dtw(c, dx, dy, 0.3, LX, LY).sum())(jnp.asarray(junk))
    assert np.all(np.isfinite(val)) and np.all(np.isfinite(grad))
    for b in (2, 4):
        n, m = LX[b], LY[b]
        v1, m1 = drop_dtw(c[b : b + 1, :n, :m], dx[b : b + 1, :n], dy[b : b + 1, :m])
        np.testing.assert_allclose(val[b], v1[0], rtol=1e-6)
        np.testing.assert_array_equal(match[b, :n], m1[0])
        s1 = soft_drop_dtw(c[b : b + 1, :n, :m], dx[b : b + 1, :n], dy[b : b + 1, :m], 0.3)
        np.testing.assert_allclose(soft[b], s1[0], rtol=1e-5)


def test_soft_drop_dtw_tends_to_drop_dtw_and_is_differentiable(data):
    c, dx, dy = data
    hard, _ = drop_dtw(c, dx, dy, LX, LY)
    gaps = []
    for gamma in (0.3, 1e-3):
        soft = np.asarray(soft_drop_dtw(c, dx, dy, gamma, LX, LY))
        assert np.all(soft <= np.asarray(hard) + 1e-4)
        gaps.append(np.abs(soft - np.asarray(hard)).max())
    assert gaps[0] > gaps[1] and gaps[1] < 0.05
    f = lambda c, dx, dy: soft_drop_dtw(c, dx, dy, 0.3, LX, LY).sum()
    gc, gdx, gdy = jax.grad(f, argnums=(0, 1, 2))(jnp.asarray(c), jnp.asarray(dx), jnp.asarray(dy))
    for g in (gc, gdx, gdy):
        assert np.all(np.isfinite(g)) and float(g.min()) >= -1e-6 and float(g.max()) <= 1 + 1e-5
    for b in range(B):  # nothing flows to padding
        assert float(jnp.abs(gc[b, LX[b] :]).sum()) == 0.0
        assert float(jnp.abs(gdx[b, LX[b] :]).sum()) == 0.0


def test_soft_drop_dtw_gradient_matches_finite_differences_in_float64():
    with jax.enable_x64(True):
        rng = np.random.default_rng(2)
        c = jnp.asarray(rng.uniform(0.0, 2.0, (1, 3, 3)), jnp.float64)
        dx = jnp.asarray(rng.uniform(0.5, 1.5, (1, 3)), jnp.float64)
        f = lambda c, dx: soft_drop_dtw(c, dx, 0.8, 0.2, contiguous=False)[0]
        gc, gdx = jax.grad(f, argnums=(0, 1))(c, dx)
        eps = 1e-6
        for arr, grad, which in ((c, gc, 0), (dx, gdx, 1)):
            for idx in itertools.product(*(range(s) for s in arr.shape)):
                e = jnp.zeros(arr.shape, jnp.float64).at[idx].set(eps)
                args_p = (c + e, dx) if which == 0 else (c, dx + e)
                args_m = (c - e, dx) if which == 0 else (c, dx - e)
                fd = (f(*args_p) - f(*args_m)) / (2 * eps)
                np.testing.assert_allclose(grad[idx], fd, atol=1e-7)


def test_percentile_rule_is_the_kth_largest_similarity():
    rng = np.random.default_rng(3)
    sim = rng.normal(size=(3, 6, 4)).astype(np.float32)
    lx, ly = np.array([6, 3, 5]), np.array([4, 4, 2])
    for keep in (0.0, 0.3, 1.0):
        got = percentile_drop_cost(-sim, keep, lx, ly)
        for b in range(3):
            real = sim[b, : lx[b], : ly[b]].ravel()
            k = max(1, int(real.size * keep))
            np.testing.assert_allclose(-got[b], np.sort(real)[::-1][k - 1])


def test_bad_input_and_nan_isolation(data):
    c, dx, dy = data
    with pytest.raises(ValueError, match="drop_x"):
        drop_dtw(c, np.ones((B, N + 1)))
    with pytest.raises(ValueError, match="drop_y"):
        drop_dtw(c, dx, np.ones((2,)))
    with pytest.raises(ValueError, match="len_y"):
        drop_dtw(c, dx, dy, LX, LY + 1)
    with pytest.raises(ValueError, match="cost"):
        drop_dtw(c[0], dx)
    with pytest.raises(ValueError, match="gamma"):
        soft_drop_dtw(c, dx, dy, gamma=0.0)
    with pytest.raises(ValueError, match="keep_percentile"):
        percentile_drop_cost(c, 1.5)
    bad = c.copy()
    bad[2, 0, 0] = np.nan
    val, _ = drop_dtw(bad, dx, dy, LX, LY)
    clean, _ = drop_dtw(c, dx, dy, LX, LY)
    assert np.isnan(val[2])
    keep = np.arange(B) != 2
    np.testing.assert_allclose(np.asarray(val)[keep], np.asarray(clean)[keep], rtol=1e-6)
