"""Batched dynamic time warping in JAX: soft-DTW (custom VJP), hard DTW with its path.

Every function takes a cost matrix ``cost [B, N, M]`` (lower is better) and optional
``len_x [B]``, ``len_y [B]``: the real lengths of each pair inside the padding (default: N
and M). Cells outside ``[:len_x, :len_y]`` never influence the value and get zero gradient,
so a padded batch gives exactly what each pair gives alone.

All recursions run as an anti-diagonal wavefront: one ``lax.scan`` step per anti-diagonal
(N + M - 1 steps), the batch and the diagonal inside each step, along the shorter side (the
input is transposed when N > M). The cost is "skewed" once (a pad + reshape, no gather) so that
diagonal ``d`` is a contiguous ``[B, N]`` slice: ``skewed[d, b, i] = cost[b, i, d - i]``.
soft-DTW additionally (pure scheduling, identical results): on CPU runs the batch in groups
sized so a diagonal stays in L1 (``lax.map`` over groups; an accelerator takes the whole batch
per step), and splits the diagonals into bands computed on static row windows, skipping most
of the empty corners. Its backward is a ``custom_vjp``: the
E recursion of Cuturi & Blondel as a reverse wavefront over the soft-min weights stored by the
forward.

Bad input raises ``ValueError`` from a thin wrapper before anything is traced: wrong ranks or
shapes, ``gamma <= 0`` or non-finite, lengths outside ``[1, N]`` / ``[1, M]`` (checked when the
lengths are concrete; under an outer ``jit`` only shapes can be checked). NaN in the cost of one
batch element makes that element's value and gradient NaN and never touches other elements;
NaN in the padding (outside the real lengths) reaches no value (nor, for soft-DTW, gradient).
Costs of +inf are clamped to ``BIG`` (1e10), which stands in for +inf inside the recursions.

Drop-DTW (``drop_dtw``, ``soft_drop_dtw``, ``percentile_drop_cost``) lives in
``vnr/ops/drop_dtw.py`` and is re-exported here; the input checks and wavefront helpers
both use are in ``vnr/ops/wavefront.py``.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from vnr.ops.drop_dtw import drop_dtw, percentile_drop_cost, soft_drop_dtw
from vnr.ops.wavefront import (
    BIG,
    as_arrays,
    check_cost,
    check_gamma,
    prepare,
    shape_of,
    shift_down,
    shift_up,
    skew,
    take_index,
    unskew,
)

__all__ = [
    "BIG",
    "soft_dtw",
    "soft_dtw_divergence",
    "pairwise_cost",
    "dtw",
    "drop_dtw",  # re-exported from vnr.ops.drop_dtw
    "soft_drop_dtw",
    "percentile_drop_cost",
]

# Scan unrolling (no change in results). 1 is fastest on XLA:CPU here: unrolled bodies fuse worse.
_UNROLL = 1


# ----------------------------------------------------------------------------- soft-DTW


def _sort3(a: jax.Array, b: jax.Array, c: jax.Array):
    """Elementwise (min, median, max) of three arrays, exact (no arithmetic)."""
    ab_lo, ab_hi = jnp.minimum(a, b), jnp.maximum(a, b)
    return jnp.minimum(ab_lo, c), jnp.maximum(ab_lo, jnp.minimum(ab_hi, c)), jnp.maximum(ab_hi, c)


def _softmin3_parts(a, b, c, gamma: float):
    """Soft-min of three arrays with 2 exps: the smallest term's weight is exactly exp(0)."""
    lo, med, hi = _sort3(a, b, c)
    e_med = jnp.exp((lo - med) / gamma)
    e_hi = jnp.exp((lo - hi) / gamma)
    return lo, med, hi, e_med, e_hi, 1.0 + e_med + e_hi


# Diagonals near the corners are short. The wavefront runs as a few scans over consecutive
# diagonal ranges ("bands"), each over a static window of rows wide enough for its diagonals,
# instead of one scan over full-height diagonals: ~40% fewer cells for square inputs.
_BANDS = 4  # bands in the growing and in the shrinking part (1 = a single full-height scan)
_MIN_BANDED = 32  # shorter sides use one scan (fewer compiled loops for tiny inputs)


@functools.cache
def _band_plan(n: int, m: int) -> tuple[tuple[int, int, int, int], ...]:
    """``(d0, d1, lo, hi)`` per band: diagonals ``[d0, d1)`` computed on rows ``[lo, hi)``.

    Needs ``n <= m``. Rows outside a band's window are invalid cells on all its diagonals, and so
    are the row just below ``lo`` (the predecessors it would hand to the band's first row).
    """
    ndiag = n + m - 1
    k = _BANDS if n >= _MIN_BANDED else 1
    cuts = {0, ndiag}
    if k > 1:
        cuts |= {round(n * t / k) for t in range(1, k + 1)}  # growing part: d < n
        cuts |= {m + round((n - 1) * t / k) for t in range(0, k)}  # shrinking part: d >= m
    cuts = sorted(c for c in cuts if 0 <= c <= ndiag)
    return tuple((d0, d1, max(0, d0 - m - 1), min(n, d1)) for d0, d1 in itertools.pairwise(cuts))


def _rewindow(x: jax.Array, old: tuple[int, int], new: tuple[int, int], fill) -> jax.Array:
    """Rows ``[old)`` of ``x [B, W]`` re-expressed on rows ``[new)``, ``fill`` elsewhere."""
    (olo, ohi), (nlo, nhi) = old, new
    s, e = max(olo, nlo), min(ohi, nhi)
    core = x[:, s - olo : max(s, e) - olo]
    return jnp.pad(core, ((0, 0), (s - nlo, nhi - max(s, e))), constant_values=fill)


def _sdtw_forward(cost, len_x, len_y, gamma: float, keep: bool, full: bool = False):
    """Wavefront forward (``N <= M``). Returns the value [B] and, if ``keep``, the weights.

    The weights are, per band, ``(w_up, w_left)`` each ``[d1 - d0, B, hi - lo]``: the
    normalised share of ``R[i-1, j]`` and ``R[i, j-1]`` in cell (i, j)'s soft-min (the diagonal
    share is ``1 - w_up - w_left``). Cells outside the matrix are skewed in as ``BIG`` costs:
    their R stays >= BIG, so they get zero weight in every real cell without a mask per step.
    ``full`` (static: every pair has its full lengths) reads the value off the last diagonal
    instead of capturing each pair's end cell at every step.
    """
    b, n, m = cost.shape
    dt = cost.dtype
    sk = skew(cost, fill=BIG)
    target_d = len_x + len_y - 2
    big = jnp.asarray(BIG, dt)
    plan = _band_plan(n, m)
    window = plan[0][2:]
    r1 = r2 = jnp.full((b, window[1] - window[0]), big, dt)
    val = jnp.zeros((b,), dt)
    ws = []
    for d0, d1, lo, hi in plan:
        r1, r2 = (_rewindow(r, window, (lo, hi), BIG) for r in (r1, r2))
        window = (lo, hi)
        end_k = jnp.clip(len_x - 1 - lo, 0, hi - lo - 1)

        def step(carry, xs, end_k=end_k):
            r1, r2, val = carry
            c, d = xs
            up = shift_down(r1, big)
            diag = shift_down(r2, jnp.where(d == 0, 0.0, big).astype(dt))
            mn, _, mx, e_med, e_hi, s = _softmin3_parts(diag, up, r1, gamma)
            r = c + (mn - gamma * jnp.log(s))
            if not full:
                val = jnp.where(d == target_d, take_index(r, end_k), val)
            w = None
            if keep:
                inv = 1.0 / s
                wf = lambda v: jnp.where(v == mn, inv, jnp.where(v == mx, e_hi, e_med) * inv)
                w = (wf(up), wf(r1))
            return (r, r1, val), w

        xs = (sk[d0:d1, :, lo:hi], jnp.arange(d0, d1))
        (r1, r2, val), w = lax.scan(step, (r1, r2, val), xs, unroll=_UNROLL)
        ws.append(w)
    if full:
        val = r1[:, n - 1 - window[0]]
    return val, (tuple(ws) if keep else None)


def _sdtw_backward(ws, len_x, len_y, g: jax.Array, n: int, m: int, full: bool = False):
    """Expected-alignment recursion (Cuturi & Blondel 2017, Alg. 2) as a reverse wavefront.

    Written with the forward's stored soft-min weights (the paper's equivalent form): each
    successor cell hands its E to its three predecessors in proportion to the weights they had
    in its soft-min. The weights of a cell sum to one, so E stays in [0, 1] for any gamma (the
    textbook exp((R_succ - cost_succ - R) / gamma) form loses that in float32 at small gamma).
    E is nonzero only at the end cell and its predecessors, so cells outside a pair's real
    lengths stay exactly 0 (the caller zeroes padding costs, so no NaN can come from there).
    """
    plan = _band_plan(n, m)
    b = len_x.shape[0]
    dt = ws[0][0].dtype
    end_i = (len_x - 1)[:, None]
    target_d = (len_x + len_y - 2)[:, None]
    window = plan[-1][2:]
    e_cur = e_next = jnp.zeros((b, window[1] - window[0]), dt)
    if full:  # the end cell is the last row of the last diagonal
        e_cur = e_cur.at[:, n - 1 - window[0]].set(g)
    es = []
    for (d0, d1, lo, hi), (w_up, w_left) in zip(plan[::-1], ws[::-1], strict=True):
        e_cur, e_next = (_rewindow(e, window, (lo, hi), 0.0) for e in (e_cur, e_next))
        window = (lo, hi)
        rows = lo + jnp.arange(hi - lo)

        def step(carry, xs, rows=rows):
            e_cur, e_next = carry
            d, wu, wl = xs
            e = e_cur
            if not full:
                e = jnp.where((rows[None, :] == end_i) & (d == target_d), g[:, None], e_cur)
            wd = jnp.maximum(1.0 - wu - wl, 0.0)
            e_next = e_next + shift_up(e * wu) + e * wl
            return (e_next, shift_up(e * wd)), e

        xs = (jnp.arange(d0, d1), w_up, w_left)
        (e_cur, e_next), e_band = lax.scan(step, (e_cur, e_next), xs, reverse=True, unroll=_UNROLL)
        es.append(jnp.pad(e_band, ((0, 0), (0, 0), (lo, n - hi))))
    return unskew(jnp.concatenate(es[::-1], axis=0), m)


# On CPU the batch runs in groups of ``bc`` pairs (lax.map over groups) so that one diagonal of
# a group, bc * N values, stays in the L1 cache: ~1.5x faster than the whole batch per step.
# On an accelerator every wavefront step is a few kernel launches whatever its width, so the
# whole batch is one group (an H200 ran (64, 256, 256) 16x slower in groups of 4 than ott-jax's
# one batched wavefront). The platform is the cost's (`_grouped`). Results are identical.
_CELLS_PER_STEP = 1024


def _grouped(cost: Any) -> bool:
    """Whether to run the batch in L1-sized groups: on CPU, by where ``cost`` lives."""
    if isinstance(cost, jax.Array) and not isinstance(cost, jax.core.Tracer):
        return all(d.platform == "cpu" for d in cost.devices())
    return jax.default_backend() == "cpu"  # host data (put on the default device), or traced


def _group_size(b: int, n: int, grouped: bool) -> int:
    if not grouped:
        return b
    target = max(1, _CELLS_PER_STEP // n)
    return max(k for k in range(1, min(b, target) + 1) if b % k == 0)


def _by_group(x: jax.Array, bc: int) -> jax.Array:
    return x.reshape((x.shape[0] // bc, bc) + x.shape[1:])


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _soft_dtw(cost, len_x, len_y, gamma, full, grouped):
    bc = _group_size(cost.shape[0], cost.shape[1], grouped)
    groups = (_by_group(cost, bc), _by_group(len_x, bc), _by_group(len_y, bc))
    val = lax.map(lambda a: _sdtw_forward(*a, gamma, keep=False, full=full)[0], groups)
    return val.reshape(-1)


def _soft_dtw_fwd(cost, len_x, len_y, gamma, full, grouped):
    bc = _group_size(cost.shape[0], cost.shape[1], grouped)
    groups = (_by_group(cost, bc), _by_group(len_x, bc), _by_group(len_y, bc))
    val, ws = lax.map(lambda a: _sdtw_forward(*a, gamma, keep=True, full=full), groups)
    return val.reshape(-1), (ws, len_x, len_y)


def _soft_dtw_bwd(gamma, full, grouped, res, g):
    ws, len_x, len_y = res  # ws: per band, two [G, band length, bc, band width]
    bc = ws[0][0].shape[2]
    n = max(w[0].shape[3] for w in ws)  # the band through diagonal n - 1 spans all rows
    m = sum(w[0].shape[1] for w in ws) - n + 1
    g = g.astype(ws[0][0].dtype)
    groups = (ws, _by_group(len_x, bc), _by_group(len_y, bc), _by_group(g, bc))
    grad = lax.map(lambda a: _sdtw_backward(*a, n, m, full), groups)
    return grad.reshape((-1,) + grad.shape[2:]), None, None


_soft_dtw.defvjp(_soft_dtw_fwd, _soft_dtw_bwd)


@functools.partial(jax.jit, static_argnames=("gamma", "grouped"))
def _soft_dtw_jit(cost, len_x, len_y, gamma, grouped):
    full = len_x is None and len_y is None
    cost, len_x, len_y = as_arrays(cost, len_x, len_y)
    _, n, m = cost.shape
    cost = jnp.minimum(cost, BIG)  # inf inside is clamped to BIG
    if not full:
        # Padding cells are set to 0 (they never reach a value) so that NaN or inf there
        # cannot reach the backward either.
        real = (jnp.arange(n)[None, :, None] < len_x[:, None, None]) & (
            jnp.arange(m)[None, None, :] < len_y[:, None, None]
        )
        cost = jnp.where(real, cost, 0.0)
    if n > m:
        # Soft-DTW is symmetric in (x, y): run along the shorter side (shorter diagonals).
        return _soft_dtw(cost.transpose(0, 2, 1), len_y, len_x, gamma, full, grouped)
    return _soft_dtw(cost, len_x, len_y, gamma, full, grouped)


def soft_dtw(cost: Any, gamma: float, len_x: Any = None, len_y: Any = None) -> jax.Array:
    """Soft-DTW value (Cuturi & Blondel 2017), batched, with a custom VJP.

    ``R[i, j] = cost[i, j] + softmin_gamma(R[i-1, j-1], R[i-1, j], R[i, j-1])`` with
    ``softmin_gamma(a) = -gamma log sum exp(-a / gamma)``; the value is
    ``R[len_x - 1, len_y - 1]``. Its gradient w.r.t. ``cost`` is the expected alignment
    matrix under the Gibbs distribution over monotone paths (entries in [0, 1]).

    Args:
      cost: ``[B, N, M]`` pairwise costs.
      gamma: smoothing, a Python float > 0 (static; stable down to 1e-3 in float32).
      len_x: optional ``[B]`` int lengths in ``[1, N]``.
      len_y: optional ``[B]`` int lengths in ``[1, M]``.

    Returns:
      ``[B]`` soft-DTW values, dtype of ``cost``.
    """
    gamma = check_gamma(gamma)
    cost, len_x, len_y = prepare(cost, len_x, len_y)
    return _soft_dtw_jit(cost, len_x, len_y, gamma=gamma, grouped=_grouped(cost))


def soft_dtw_divergence(
    cost_xy: Any,
    cost_xx: Any,
    cost_yy: Any,
    gamma: float,
    len_x: Any = None,
    len_y: Any = None,
) -> jax.Array:
    """Soft-DTW divergence (Blondel et al. 2021): ``sdtw(xy) - (sdtw(xx) + sdtw(yy)) / 2``.

    Args:
      cost_xy: ``[B, N, M]`` costs between x and y.
      cost_xx: ``[B, N, N]`` costs between x and itself.
      cost_yy: ``[B, M, M]`` costs between y and itself.
      gamma: smoothing, a Python float > 0.
      len_x: optional ``[B]`` real lengths of x.
      len_y: optional ``[B]`` real lengths of y.

    Returns:
      ``[B]`` divergences (>= 0 for costs from a positive-definite kernel, e.g. sqeuclidean).
    """
    gamma = check_gamma(gamma)
    cost_xy, lx, ly = prepare(cost_xy, len_x, len_y, "cost_xy")
    b, n, m = shape_of(cost_xy)
    cost_xx = check_cost(cost_xx, "cost_xx")
    cost_yy = check_cost(cost_yy, "cost_yy")
    if shape_of(cost_xx) != (b, n, n):
        raise ValueError(f"cost_xx must have shape {(b, n, n)}, got {shape_of(cost_xx)}")
    if shape_of(cost_yy) != (b, m, m):
        raise ValueError(f"cost_yy must have shape {(b, m, m)}, got {shape_of(cost_yy)}")
    grouped = _grouped(cost_xy)
    xy = _soft_dtw_jit(cost_xy, lx, ly, gamma=gamma, grouped=grouped)
    xx = _soft_dtw_jit(cost_xx, lx, lx, gamma=gamma, grouped=grouped)
    yy = _soft_dtw_jit(cost_yy, ly, ly, gamma=gamma, grouped=grouped)
    return xy - 0.5 * (xx + yy)


def pairwise_cost(x: Any, y: Any, kind: str = "sqeuclidean") -> jax.Array:
    """Pairwise cost matrices between two batches of sequences.

    Args:
      x: ``[B, N, D]`` features.
      y: ``[B, M, D]`` features.
      kind: ``"sqeuclidean"`` (``|x_i - y_j|^2``, clamped at 0) or ``"cosine"``
        (``1 - cos(x_i, y_j)``, in [0, 2]; zero vectors count as orthogonal).

    Returns:
      ``[B, N, M]`` costs.
    """
    x = jnp.asarray(x)
    y = jnp.asarray(y)
    if x.ndim != 3 or y.ndim != 3:
        raise ValueError(
            f"x and y must have shape [B, N, D] and [B, M, D], got {x.shape} and {y.shape}"
        )
    if x.shape[0] != y.shape[0] or x.shape[2] != y.shape[2]:
        raise ValueError(f"x {x.shape} and y {y.shape} must agree on B and D")
    if kind == "sqeuclidean":
        xy = jnp.einsum("bnd,bmd->bnm", x, y)
        xx = jnp.sum(x * x, -1)[:, :, None]
        yy = jnp.sum(y * y, -1)[:, None, :]
        sq = xx + yy - 2.0 * xy
        return jnp.where(sq > 0.0, sq, 0.0)  # (cheaper to differentiate than maximum)
    if kind == "cosine":
        eps = jnp.finfo(jnp.result_type(x.dtype, y.dtype, jnp.float32)).tiny
        xn = x * lax.rsqrt(jnp.maximum(jnp.sum(x * x, -1, keepdims=True), eps))
        yn = y * lax.rsqrt(jnp.maximum(jnp.sum(y * y, -1, keepdims=True), eps))
        return 1.0 - jnp.einsum("bnd,bmd->bnm", xn, yn)
    raise ValueError(f"kind must be 'sqeuclidean' or 'cosine', got {kind!r}")


# ----------------------------------------------------------------------------- hard DTW


@jax.jit
def _dtw_jit(cost, len_x, len_y):
    cost, len_x, len_y = as_arrays(cost, len_x, len_y)
    cost = jnp.minimum(cost, BIG)
    if cost.shape[1] > cost.shape[2]:
        # Run along the shorter side; swapping up/left keeps the same tie preference.
        val, path = _dtw_core(cost.transpose(0, 2, 1), len_y, len_x, transposed=True)
        return val, path[:, :, ::-1]
    return _dtw_core(cost, len_x, len_y, transposed=False)


def _dtw_core(cost, len_x, len_y, transposed: bool):
    b, n, m = cost.shape
    dt = cost.dtype
    big = jnp.asarray(BIG, dt)
    target_d = len_x + len_y - 2
    # Moves: 0 = diagonal, 1 = (i-1, j), 2 = (i, j-1). Tie preference in the caller's
    # coordinates: diagonal, then (i-1, j), then (i, j-1); transposed, 1 and 2 trade places.
    order = (0, 2, 1) if transposed else (0, 1, 2)

    def step(carry, xs):
        r1, r2, val = carry
        c, d = xs
        preds = {0: shift_down(r2, jnp.where(d == 0, 0.0, big).astype(dt)), 1: shift_down(r1, big)}
        preds[2] = r1
        stacked = jnp.stack([preds[k] for k in order])
        choice = jnp.asarray(order, jnp.int8)[jnp.argmin(stacked, axis=0)]
        r = c + jnp.min(stacked, axis=0)
        val = jnp.where(d == target_d, take_index(r, len_x - 1), val)
        return (r, r1, val), choice

    init = (jnp.full((b, n), big, dt), jnp.full((b, n), big, dt), jnp.zeros((b,), dt))
    xs = (skew(cost, fill=BIG), jnp.arange(n + m - 1))
    (_, _, val), choices = lax.scan(step, init, xs, unroll=_UNROLL)

    bidx = jnp.arange(b)
    steps = n + m

    def back(t, st):
        i, j, active, rev = st
        rev = rev.at[:, t, 0].set(jnp.where(active, i, -1))
        rev = rev.at[:, t, 1].set(jnp.where(active, j, -1))
        ch = choices[jnp.clip(i + j, 0, n + m - 2), bidx, jnp.clip(i, 0, n - 1)]
        move = active & ~((i == 0) & (j == 0))
        i = i - jnp.where(move & (ch <= 1), 1, 0)
        j = j - jnp.where(move & (ch != 1), 1, 0)
        return i, j, move, rev

    rev = jnp.full((b, steps, 2), -1, jnp.int32)
    st = (len_x - 1, len_y - 1, jnp.ones((b,), bool), rev)
    _, _, _, rev = lax.fori_loop(0, steps, back, st)
    length = jnp.sum(rev[:, :, 0] >= 0, axis=1)
    k = jnp.arange(steps)[None, :]
    src = jnp.clip(length[:, None] - 1 - k, 0, steps - 1)
    path = jnp.take_along_axis(rev, src[:, :, None], axis=1)
    path = jnp.where((k < length[:, None])[:, :, None], path, -1)
    return val, path


def dtw(cost: Any, len_x: Any = None, len_y: Any = None) -> tuple[jax.Array, jax.Array]:
    """Hard DTW value and one optimal monotone path.

    Steps are (1, 0), (0, 1), (1, 1) from ``(0, 0)`` to ``(len_x - 1, len_y - 1)``; on ties the
    diagonal predecessor is preferred, then ``(i - 1, j)``, then ``(i, j - 1)``.

    Args:
      cost: ``[B, N, M]`` pairwise costs.
      len_x: optional ``[B]`` int lengths in ``[1, N]``.
      len_y: optional ``[B]`` int lengths in ``[1, M]``.

    Returns:
      ``value [B]`` (sum of cost along the best path) and ``path [B, N + M, 2]`` int32:
      ``path[b, k] = (i, j)`` of the k-th cell from the start, padded with -1.
    """
    cost, len_x, len_y = prepare(cost, len_x, len_y)
    return _dtw_jit(cost, len_x, len_y)
