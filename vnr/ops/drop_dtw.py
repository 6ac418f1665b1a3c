"""Drop-DTW (Dvornik et al., NeurIPS 2021), batched in JAX, hard and soft.

Setting (M-SYMON Appendix E.1): ``x`` = video clips (N), ``y`` = sentences (M), ``cost [B, N,
M]`` = cost of matching clip i to sentence j. An alignment assigns every real clip either one
sentence or "drop"; matched sentence indices are non-decreasing in i (monotone); several
consecutive clips may share one sentence. Its cost is

    sum of cost[i, a_i] over matched clips + sum of drop_x[i] over dropped clips
    + sum of drop_y[j] over sentences that no clip matches.

``drop_y=None`` is the one-sided variant (the authors' Algorithm 1): sentences cannot be
dropped, every real sentence must be matched by at least one clip (infeasible, value inf, when
``len_x < len_y``). ``contiguous=True`` (the authors' default) also forbids a dropped clip
between two clips matched to the same sentence; ``contiguous=False`` allows it.

Recursion on the (N+1) x (M+1) grid (row 0 / column 0 = nothing consumed), three tables:
``A[i, j]`` clip i matched to sentence j; ``Z[i, j]`` clip i dropped while sentence j is matched
and still open (only for ``contiguous=False``); ``G[i, j]`` best over everything that has used
clips <= i and sentences <= j. At each cell::

    A[i, j] = cost[i, j] + min(G[i-1, j-1], A[i-1, j] [, Z[i-1, j]])   (1) match x_i with y_j
    Z[i, j] = drop_x[i] + min(A[i-1, j], Z[i-1, j])
    G[i, j] = min(A[i, j],                                               (1)
                  G[i-1, j] + drop_x[i],                                 (2) drop x_i
                  G[i, j-1] + drop_y[j])                                 (3) drop y_j

and the value is ``G[len_x, len_y]``. Option (4) of the appendix, "drop both", is (2) followed
by (3): it never changes the minimum, so it is not a separate move (in the soft version it
would only count the same alignment once more). The soft version replaces every min by
``softmin_gamma`` and is differentiated by autodiff through the wavefront scan.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from vnr.ops.wavefront import (
    BIG,
    as_arrays,
    check_gamma,
    prepare,
    shift_down,
    skew,
    softmin,
    take_index,
)

__all__ = ["drop_dtw", "soft_drop_dtw", "percentile_drop_cost"]

_UNROLL = 1


def _check_drop(drop: Any, b: int, size: int, name: str, dtype) -> Any:
    """Checks a drop cost's shape: scalar, ``[B]`` (one per pair) or ``[B, size]``.

    NumPy / Python input is broadcast to ``[B, size]`` here (free, and one compiled function
    serves all three forms); JAX arrays are broadcast inside jit.
    """
    if not isinstance(drop, jax.Array):
        drop = np.asarray(drop)
    shape = tuple(np.shape(drop))
    if shape not in ((), (b,), (b, size)):
        raise ValueError(
            f"{name} must be a scalar, shape [B]=({b},) or [B, {size}]=({b}, {size}), "
            f"got shape {shape}"
        )
    if isinstance(drop, np.ndarray):
        drop = drop.astype(dtype, copy=False)
        drop = np.broadcast_to(drop[:, None] if drop.ndim == 1 else drop, (b, size))
    return drop


def _drop_array(drop: Any, b: int, size: int, dtype) -> jax.Array:
    """Inside jit: a drop cost as ``[B, size]``."""
    drop = jnp.asarray(drop).astype(dtype)
    if drop.ndim == 1:
        drop = drop[:, None]
    return jnp.broadcast_to(drop, (b, size))


def _wavefront(cost, drop_x, drop_y, len_x, len_y, gamma, contiguous):
    """Runs the recursion. gamma=None: hard min; also returns packed choices [D, B, K]."""
    b, n, m = cost.shape
    dt = cost.dtype
    big = jnp.asarray(BIG, dt)
    hard = gamma is None
    clamp = lambda v: jnp.minimum(v, big)
    # Grid with a border row/column: cell (i, j) uses cost[i-1, j-1], drop_x[i-1], drop_y[j-1];
    # border cells cannot match. The diagonal vector runs along the shorter side (by_y when
    # M < N): same recursion, shorter vectors.
    by_y = m < n
    grid = jnp.pad(clamp(cost), ((0, 0), (1, 0), (1, 0)), constant_values=BIG)
    dxg = jnp.pad(clamp(drop_x), ((0, 0), (1, 0)), constant_values=BIG)[:, :, None]
    dyg = jnp.pad(clamp(drop_y), ((0, 0), (1, 0)), constant_values=BIG)[:, None, :]
    dxg, dyg = (jnp.broadcast_to(v, grid.shape) for v in (dxg, dyg))
    if by_y:
        grid, dxg, dyg = (v.transpose(0, 2, 1) for v in (grid, dxg, dyg))
    k_len, other = grid.shape[1], grid.shape[2]
    kk = jnp.arange(k_len)
    # Predecessors on the previous diagonal: (i-1, j) and (i, j-1).
    shift = lambda v: shift_down(v, big)
    same = lambda v: v
    px, py = (same, shift) if by_y else (shift, same)
    target_d = len_x + len_y
    target_k = len_y if by_y else len_x

    def mn(vals):
        if hard:
            stacked = jnp.stack(vals)
            return jnp.min(stacked, 0), jnp.argmin(stacked, 0).astype(jnp.int8)
        return softmin(vals, gamma), None

    def step(carry, xs):
        g1, a1, z1, g2, val = carry
        c, dx, dy, d = xs
        a_up, z_up = px(a1), px(z1)
        a_min, a_ch = mn([shift(g2), a_up] + ([] if contiguous else [z_up]))
        a = clamp(c + a_min)
        if contiguous:
            z, z_ch = jnp.full_like(a, big), 0
        else:
            z_min, z_ch = mn([a_up, z_up])
            z = clamp(dx + z_min)
        g, g_ch = mn([a, px(g1) + dx, py(g1) + dy])
        g = clamp(jnp.where((d == 0) & (kk == 0)[None, :], 0.0, g))
        ok = ((d - kk >= 0) & (d - kk < other))[None, :]
        g, a, z = (jnp.where(ok, v, big) for v in (g, a, z))
        val = jnp.where(d == target_d, take_index(g, target_k), val)
        ch = (a_ch + 3 * z_ch + 6 * g_ch) if hard else None
        return (g, a, z, g1, val), ch

    full = jnp.full((b, k_len), big, dt)
    init = (full, full, full, full, jnp.zeros((b,), dt))
    xs = (skew(grid), skew(dxg), skew(dyg), jnp.arange(n + m + 1))
    (*_, val), choices = lax.scan(step, init, xs, unroll=_UNROLL)
    val = jnp.where(val >= 0.5 * BIG, jnp.inf, val)
    return val, choices, by_y


def _backtrack(choices, len_x, len_y, n, m, by_y):
    """Follows the packed choices from G[len_x, len_y]; returns match_x [B, N] (-1 = drop)."""
    b = len_x.shape[0]
    bidx = jnp.arange(b)
    st_g, st_a, st_z = 0, 1, 2
    k_max = choices.shape[2] - 1

    def body(_, st):
        i, j, s, match = st
        k = jnp.clip(j if by_y else i, 0, k_max)
        ch = choices[jnp.clip(i + j, 0, n + m), bidx, k].astype(jnp.int32)
        a_ch, z_ch, g_ch = ch % 3, (ch // 3) % 2, ch // 6
        live = ~((i == 0) & (j == 0)) & (i >= 0) & (j >= 0)
        # Record the match of clip i - 1 to sentence j - 1 when in state A.
        rec = live & (s == st_a) & (i >= 1) & (j >= 1)
        col = jnp.clip(i - 1, 0, n - 1)
        match = match.at[bidx, col].set(jnp.where(rec, j - 1, match[bidx, col]))
        in_g, in_a, in_z = live & (s == st_g), live & (s == st_a), live & (s == st_z)
        di = jnp.where(in_g & (g_ch == 1), 1, 0) + jnp.where(in_a | in_z, 1, 0)
        dj = jnp.where(in_g & (g_ch == 2), 1, 0) + jnp.where(in_a & (a_ch == 0), 1, 0)
        s_next = jnp.where(in_g & (g_ch == 0), st_a, s)
        s_next = jnp.where(in_a, jnp.select([a_ch == 0, a_ch == 1], [st_g, st_a], st_z), s_next)
        s_next = jnp.where(in_z, jnp.where(z_ch == 0, st_a, st_z), s_next)
        return i - di, j - dj, s_next, match

    match = jnp.full((b, n), -1, jnp.int32)
    st = (len_x, len_y, jnp.zeros((b,), jnp.int32), match)
    return lax.fori_loop(0, 2 * n + m + 2, body, st)[3]


def _prepare_drop(cost, drop_x, drop_y, len_x, len_y):
    cost, len_x, len_y = prepare(cost, len_x, len_y)
    b, n, m = np.shape(cost)
    dtype = np.dtype(cost.dtype)
    dtype = dtype if np.issubdtype(dtype, np.floating) else np.dtype(np.float32)
    drop_x = _check_drop(drop_x, b, n, "drop_x", dtype)
    if drop_y is not None:
        drop_y = _check_drop(drop_y, b, m, "drop_y", dtype)
    return cost, drop_x, drop_y, len_x, len_y


def _arrays(cost, drop_x, drop_y, len_x, len_y):
    full = len_x is None and len_y is None
    cost, len_x, len_y = as_arrays(cost, len_x, len_y)
    b, n, m = cost.shape
    dx = _drop_array(drop_x, b, n, cost.dtype)
    # One-sided: y cannot be dropped (BIG = +inf inside the recursion).
    dy = _drop_array(BIG if drop_y is None else drop_y, b, m, cost.dtype)
    if not full:
        # Padding never reaches a value; zeroing it keeps NaN there out of the gradients too.
        real_x = jnp.arange(n)[None, :] < len_x[:, None]
        real_y = jnp.arange(m)[None, :] < len_y[:, None]
        cost = jnp.where(real_x[:, :, None] & real_y[:, None, :], cost, 0.0)
        dx, dy = jnp.where(real_x, dx, 0.0), jnp.where(real_y, dy, 0.0)
    return cost, dx, dy, len_x, len_y


@functools.partial(jax.jit, static_argnames=("contiguous",))
def _drop_dtw_jit(cost, drop_x, drop_y, len_x, len_y, contiguous):
    cost, dx, dy, len_x, len_y = _arrays(cost, drop_x, drop_y, len_x, len_y)
    b, n, m = cost.shape
    val, choices, by_y = _wavefront(cost, dx, dy, len_x, len_y, None, contiguous)
    match = _backtrack(choices, len_x, len_y, n, m, by_y)
    match = jnp.where(jnp.isfinite(val)[:, None], match, -1)
    return val, match


def drop_dtw(
    cost: Any,
    drop_x: Any,
    drop_y: Any = None,
    len_x: Any = None,
    len_y: Any = None,
    contiguous: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """Drop-DTW: optimal monotone many-to-one alignment where elements may be dropped.

    Args:
      cost: ``[B, N, M]`` match costs (x = clips, y = sentences).
      drop_x: cost of dropping each x: scalar, ``[B]`` (one per pair) or ``[B, N]``.
      drop_y: cost of dropping each y (scalar, ``[B]`` or ``[B, M]``), or None for the
        one-sided variant where every real y must be matched.
      len_x: optional ``[B]`` int lengths in ``[1, N]``.
      len_y: optional ``[B]`` int lengths in ``[1, M]``.
      contiguous: forbid dropped x between two x matched to the same y (authors' default).

    Returns:
      ``value [B]`` (inf when infeasible: one-sided with ``len_x < len_y``) and
      ``match_x [B, N]`` int32: index of the y matched by ``x_i``, -1 when dropped or padding.
      On exact ties the backtrack prefers matching over dropping x over dropping y.
    """
    args = _prepare_drop(cost, drop_x, drop_y, len_x, len_y)
    return _drop_dtw_jit(*args, contiguous=bool(contiguous))


@functools.partial(jax.jit, static_argnames=("gamma", "contiguous"))
def _soft_drop_dtw_jit(cost, drop_x, drop_y, len_x, len_y, gamma, contiguous):
    cost, dx, dy, len_x, len_y = _arrays(cost, drop_x, drop_y, len_x, len_y)
    return _wavefront(cost, dx, dy, len_x, len_y, gamma, contiguous)[0]


def soft_drop_dtw(
    cost: Any,
    drop_x: Any,
    drop_y: Any = None,
    gamma: float = 0.1,
    len_x: Any = None,
    len_y: Any = None,
    contiguous: bool = True,
) -> jax.Array:
    """Differentiable Drop-DTW: the :func:`drop_dtw` recursion with every min a soft-min.

    Gradients flow to ``cost``, ``drop_x`` and ``drop_y``; the gradient w.r.t. ``cost`` is the
    expected match matrix (entries in [0, 1]). Tends to :func:`drop_dtw` as ``gamma -> 0``.

    Args:
      cost: ``[B, N, M]`` match costs.
      drop_x: scalar, ``[B]`` or ``[B, N]`` drop costs of x.
      drop_y: scalar, ``[B]`` or ``[B, M]`` drop costs of y, or None (one-sided).
      gamma: smoothing, a Python float > 0.
      len_x: optional ``[B]`` int lengths in ``[1, N]``.
      len_y: optional ``[B]`` int lengths in ``[1, M]``.
      contiguous: as in :func:`drop_dtw`.

    Returns:
      ``[B]`` soft values (inf when infeasible, with zero gradient).
    """
    gamma = check_gamma(gamma)
    args = _prepare_drop(cost, drop_x, drop_y, len_x, len_y)
    return _soft_drop_dtw_jit(*args, gamma=gamma, contiguous=bool(contiguous))


def percentile_drop_cost(
    cost: Any, keep_percentile: float, len_x: Any = None, len_y: Any = None
) -> jax.Array:
    """The Drop-DTW authors' percentile rule for a per-pair drop cost.

    The authors set the drop threshold to the k-th largest similarity of the pair, with
    ``k = max(1, int(n_cells * keep_percentile))``; with ``cost = -similarity`` that is the
    k-th smallest real cost, so about ``keep_percentile`` of the cells are cheaper to match
    than to drop.

    Args:
      cost: ``[B, N, M]`` match costs.
      keep_percentile: fraction in [0, 1].
      len_x: optional ``[B]`` real lengths (cells outside are ignored).
      len_y: optional ``[B]`` real lengths.

    Returns:
      ``[B]`` drop costs, to pass as ``drop_x`` (and/or ``drop_y``).
    """
    kp = float(keep_percentile)
    if not 0.0 <= kp <= 1.0:
        raise ValueError(f"keep_percentile must be in [0, 1], got {keep_percentile}")
    cost, len_x, len_y = prepare(cost, len_x, len_y)
    return _percentile_jit(cost, len_x, len_y, kp)


@functools.partial(jax.jit, static_argnames=("kp",))
def _percentile_jit(cost, len_x, len_y, kp):
    cost, len_x, len_y = as_arrays(cost, len_x, len_y)
    b, n, m = cost.shape
    real = (jnp.arange(n)[None, :, None] < len_x[:, None, None]) & (
        jnp.arange(m)[None, None, :] < len_y[:, None, None]
    )
    flat = jnp.sort(jnp.where(real, cost, jnp.inf).reshape(b, n * m), axis=1)
    # k = max(1, int(n_real * keep_percentile)); the tiny margin absorbs float32 rounding.
    n_real = (len_x * len_y).astype(jnp.float32)
    k = jnp.maximum(1.0, jnp.floor(n_real * kp * (1.0 + 1e-6)))
    return take_index(flat, k.astype(jnp.int32) - 1)
