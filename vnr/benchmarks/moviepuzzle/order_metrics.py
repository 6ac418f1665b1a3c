"""MoviePuzzle ordering metrics (Table 1: LSD, LMD, SD, SSD, OS), batched and jit-friendly.

Conventions (shared with `vnr.ops.permutation_search`): a batch of clips is padded to `N`
with a boolean `mask [B, N]` (True = real frame, real frames first). An *order* `[B, N]`
int holds at position `k` the input index placed there; padded positions hold the padded
indices in increasing order. For a clip with `n` real frames write `p_i` / `q_i` for the
predicted / ground-truth position of frame `i` (the inverse of the order), and
`sigma = p[gt_order]`: `sigma[g]` is the predicted position of the frame whose true
position is `g`. Every metric compares only the real frames.

Why these definitions. The paper (MoviePuzzle, arXiv 2306.02252) names the metrics but
does not print formulas for LSD/LMD/SD/SSD; we fixed them by the Random row of Table 1
(in-domain: LSD 34.24, LMD 4.57, SD 10.59, SSD 33.99, OS2 49.66, OS3 16.42). For a uniform
random order of `n` frames the exact expectations are (see `random_expectation`):
LSD (n^2-1)/6, LMD (n^2-1)/(3n), SD n - H_n, SSD (n^2-1)/6, OS_2 1/2, OS_3 1/6. Over the
length histogram of the 100 public in-domain clips (n = 10..20, mean 14.0) these give
LSD 35.09, LMD 4.63, SD 10.77, SSD 35.09, OS2 50, OS3 16.67: within 1-3% of the paper
(a uniform 10..20 histogram gives 39.0, 4.98, 11.70, 39.0: 9-15% high, so the paper's
test clips are shorter than uniform, like the public ones).
Rival definitions miss by far: Kendall (adjacent-swap) distance 49.5, Ulam distance
(n - LIS) 8.7, greedy selection-sort swap distance 49.6, sum of squared swap lengths 366.
That LSD and SSD share one expectation explains why the paper's Random LSD and SSD agree
(34.24 vs 33.99).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

# The keys of `summary` and `random_expectation`, in Table 1's column order.
METRICS = ("lsd", "lmd", "sd", "ssd", "os2", "os3")

Array = jax.Array


def _concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def _prepare(pred_order, gt_order, mask) -> tuple[Array, Array, Array]:
    """Validates shapes (always) and order contents (when concrete); returns jnp arrays."""
    pred_order = jnp.asarray(pred_order)
    gt_order = jnp.asarray(gt_order)
    if pred_order.ndim != 2:
        raise ValueError(f"pred_order must be [B, N], got shape {pred_order.shape}")
    if gt_order.shape != pred_order.shape:
        raise ValueError(
            f"gt_order shape {gt_order.shape} differs from pred_order shape {pred_order.shape}"
        )
    for name, o in (("pred_order", pred_order), ("gt_order", gt_order)):
        if not jnp.issubdtype(o.dtype, jnp.integer):
            raise ValueError(f"{name} must be an integer array, got dtype {o.dtype}")
    if mask is None:
        mask = jnp.ones(pred_order.shape, bool)
    mask = jnp.asarray(mask)
    if mask.shape != pred_order.shape:
        raise ValueError(f"mask shape {mask.shape} differs from order shape {pred_order.shape}")
    mask = mask.astype(bool)
    if _concrete(mask):
        m = np.asarray(mask)
        if m.shape[1] == 0 or not m.any(1).all():
            raise ValueError("mask has a row with no real frame (all False)")
        if (m[:, 1:] & ~m[:, :-1]).any():
            raise ValueError("mask must put real frames first (True then False in every row)")
        n = m.sum(1)
        for name, o in (("pred_order", pred_order), ("gt_order", gt_order)):
            if not _concrete(o):
                continue
            a = np.asarray(o)
            N = a.shape[1]
            perm_ok = (np.sort(a, axis=1) == np.arange(N)).all(1)
            k = np.arange(N)
            pad_ok = np.where(k[None] >= n[:, None], a == k[None], True).all(1)
            bad = np.nonzero(~(perm_ok & pad_ok))[0]
            if bad.size:
                raise ValueError(
                    f"{name} row {int(bad[0])} is not an order of its {int(n[bad[0]])} real "
                    "frames with padded indices last in increasing order"
                )
    return pred_order.astype(jnp.int32), gt_order.astype(jnp.int32), mask


def _positions(order: Array) -> Array:
    """Inverse permutation: position of each input index."""
    return jnp.argsort(order, axis=-1).astype(jnp.int32)


@jax.jit
def _deviation_core(pred_order, gt_order, mask):
    dev = (_positions(pred_order) - _positions(gt_order)).astype(jnp.float32)
    return jnp.where(mask, dev, 0.0), mask.sum(-1).astype(jnp.float32)


def _deviation(pred_order, gt_order, mask) -> tuple[Array, Array]:
    return _deviation_core(*_prepare(pred_order, gt_order, mask))


def location_square_deviation(pred_order, gt_order, mask=None) -> Array:
    """LSD: mean over real frames of the squared position error.

    LSD = (1/n) * sum_i (p_i - q_i)^2. For random orders E = (n^2 - 1)/6.

    Args:
      pred_order, gt_order: int [B, N] orders. mask: bool [B, N] or None (all real).
    Returns:
      float32 [B].
    """
    dev, n = _deviation(pred_order, gt_order, mask)
    return (dev**2).sum(-1) / n


def location_mean_deviation(pred_order, gt_order, mask=None) -> Array:
    """LMD: mean over real frames of the absolute position error.

    LMD = (1/n) * sum_i |p_i - q_i|. For random orders E = (n^2 - 1)/(3n).

    Args:
      pred_order, gt_order: int [B, N] orders. mask: bool [B, N] or None (all real).
    Returns:
      float32 [B].
    """
    dev, n = _deviation(pred_order, gt_order, mask)
    return jnp.abs(dev).sum(-1) / n


def swap_distance_deviation(pred_order, gt_order, mask=None) -> Array:
    """SSD: least total length of swaps that turn the prediction into the ground truth.

    A swap of positions a and b costs |a - b|; the least total cost equals half the
    Spearman footrule, SSD = (1/2) * sum_i |p_i - q_i| (checked by exhaustive search in
    the tests). For random orders E = (n^2 - 1)/6, the same as LSD, which is why the
    paper's Random LSD and SSD agree (34.24 vs 33.99).

    Args:
      pred_order, gt_order: int [B, N] orders. mask: bool [B, N] or None (all real).
    Returns:
      float32 [B].
    """
    dev, _ = _deviation(pred_order, gt_order, mask)
    return 0.5 * jnp.abs(dev).sum(-1)


@jax.jit
def _swap_core(pred_order, gt_order):
    N = pred_order.shape[-1]
    sigma = jnp.take_along_axis(_positions(pred_order), gt_order, axis=-1)
    low = jnp.broadcast_to(jnp.arange(N, dtype=jnp.int32), sigma.shape)
    jump = sigma
    for _ in range(max(1, math.ceil(math.log2(max(N, 2))))):
        low = jnp.minimum(low, jnp.take_along_axis(low, jump, axis=-1))
        jump = jnp.take_along_axis(jump, jump, axis=-1)
    cycles = (low == jnp.arange(N)).sum(-1)  # padded frames are fixed points: N - n cycles
    return (N - cycles).astype(jnp.float32)


def swap_deviation(pred_order, gt_order, mask=None) -> Array:
    """SD: least number of swaps (any two positions) that turn prediction into ground truth.

    SD = n - c(sigma), c = number of cycles of sigma (Cayley distance). For random orders
    E = n - H_n (H_n the harmonic number). Cycles are counted by pointer doubling
    (ceil(log2 N) gathers): a frame is counted when it is the smallest index of its cycle.

    Args:
      pred_order, gt_order: int [B, N] orders. mask: bool [B, N] or None (all real).
    Returns:
      float32 [B].
    """
    pred_order, gt_order, _ = _prepare(pred_order, gt_order, mask)
    return _swap_core(pred_order, gt_order)


def _increasing_share(sigma, real, n, beta: int):
    """#{increasing length-beta subsequences of sigma over the `real` entries} / C(n, beta),
    by the DP c_1 = 1, c_k[h] = sum_{g < h, sigma_g < sigma_h} c_{k-1}[g] (see
    `ordering_score`)."""
    N = sigma.shape[-1]
    up = (
        (jnp.arange(N)[:, None] < jnp.arange(N)[None, :])[None]
        & (sigma[:, :, None] < sigma[:, None, :])
        & real[:, :, None]
        & real[:, None, :]
    ).astype(jnp.float32)
    count = real.astype(jnp.float32)
    for _ in range(beta - 1):
        count = jnp.einsum("bg,bgh->bh", count, up)
    nf = n.astype(jnp.float32)
    total = jnp.ones_like(nf)
    for i in range(beta):
        total = total * (nf - i) / (i + 1)
    return count.sum(-1) / total


@functools.partial(jax.jit, static_argnames=("beta",))
def _os_core(pred_order, gt_order, mask, beta: int):
    N = pred_order.shape[-1]
    n = mask.sum(-1)
    sigma = jnp.take_along_axis(_positions(pred_order), gt_order, axis=-1)
    real = jnp.arange(N)[None] < n[:, None]  # gt positions g < n hold the real frames
    return _increasing_share(sigma, real, n, beta)


def ordering_score(pred_order, gt_order, beta: int = 2, mask=None) -> Array:
    """OS_beta (Appendix B, Eq. 6): fraction of the C(n, beta) frame subsets ordered alike.

    A subset keeps its relative order iff it is an increasing subsequence of sigma, so
    OS_beta = #{increasing length-beta subsequences of sigma} / C(n, beta), counted exactly
    by the DP c_1 = 1, c_k[h] = sum_{g < h, sigma_g < sigma_h} c_{k-1}[g] in O(beta n^2)
    without enumerating subsets. OS_2 = (1 + Kendall tau)/2; for random orders E = 1/beta!.
    Counts are float32: exact up to 2^24 subsets, relative error < 1e-6 beyond.

    Args:
      pred_order, gt_order: int [B, N] orders. beta: subset size, 1 <= beta <= n.
      mask: bool [B, N] or None. A clip with n < beta is an error when the mask is
        concrete; under tracing it yields NaN.
    Returns:
      float32 [B] in [0, 1].
    """
    if not isinstance(beta, int | np.integer) or beta < 1:
        raise ValueError(f"beta must be a positive int, got {beta!r}")
    pred_order, gt_order, mask = _prepare(pred_order, gt_order, mask)
    n = mask.sum(-1)
    if _concrete(n) and int(np.asarray(n).min()) < beta:
        shortest = int(np.asarray(n).min())
        raise ValueError(f"beta={beta} exceeds the real length {shortest} of a clip")
    return _os_core(pred_order, gt_order, mask, int(beta))


@functools.partial(jax.jit, static_argnames=("beta",))
def _os_partial_core(pred, gt_order, mask, beta: int):
    N = gt_order.shape[-1]
    n = mask.sum(-1)
    hit = pred[:, :, None] == jnp.arange(N)[None, None, :]  # [B, M, N]
    pos = jnp.where(hit.any(1), jnp.argmax(hit, axis=1), -1)  # first occurrence, -1 missing
    sigma = jnp.take_along_axis(pos, gt_order, axis=-1)
    real = (jnp.arange(N)[None] < n[:, None]) & (sigma >= 0)
    return _increasing_share(sigma, real, n, beta)


def ordering_score_partial(pred, gt_order, beta: int = 2, mask=None) -> Array:
    """OS_beta of predictions that may miss frames (Appendix B: generative models' outputs).

    Appendix B's definition as it stands: a beta-subset of the clip's n true frames matches
    when every one of its frames appears in the prediction and their predicted order equals
    their true order; the denominator stays C(n, beta) over the true clip, so a missing
    frame costs every subset it belongs to. Choices the paper leaves open: a frame named
    twice counts at its first place; ids outside the clip's real frames and empty slots
    (-1) are ignored. On full orders this equals `ordering_score`.

    Args:
      pred: int [B, M] predicted frame indices in predicted order (any M; -1 = empty slot).
      gt_order: int [B, N] true orders (as `ordering_score`). beta: subset size.
      mask: bool [B, N] or None.
    Returns:
      float32 [B] in [0, 1].
    """
    if not isinstance(beta, int | np.integer) or beta < 1:
        raise ValueError(f"beta must be a positive int, got {beta!r}")
    pred = jnp.asarray(pred)
    if pred.ndim != 2 or pred.shape[0] != jnp.shape(gt_order)[0]:
        raise ValueError(f"pred must be [B, M] with B = {jnp.shape(gt_order)[0]}, got shape "
                         f"{pred.shape}")
    if not jnp.issubdtype(pred.dtype, jnp.integer):
        raise ValueError(f"pred must be an integer array, got dtype {pred.dtype}")
    _, gt_order, mask = _prepare(gt_order, gt_order, mask)
    n = mask.sum(-1)
    if _concrete(n) and int(np.asarray(n).min()) < beta:
        raise ValueError(f"beta={beta} exceeds the real length {int(np.asarray(n).min())} "
                         "of a clip")
    n_pad = jnp.where(mask, 0, 1).sum(-1)  # ids >= n are padding: never real frames
    real_ids = pred < (gt_order.shape[-1] - n_pad)[:, None]
    pred = jnp.where(real_ids & (pred >= 0), pred, -1).astype(jnp.int32)
    return _os_partial_core(pred, gt_order, mask, int(beta))


def summary(pred_order, gt_order, mask=None) -> dict[str, float]:
    """Clip-averaged Table 1 metrics, keyed by `METRICS` (lsd, lmd, sd, ssd, os2, os3).

    LSD/LMD/SD/SSD are in the paper's units (positions, swaps); OS2/OS3 are percentages.
    Needs concrete inputs (returns Python floats) and n >= 3 in every clip for OS3.

    Args:
      pred_order, gt_order: int [B, N] orders. mask: bool [B, N] or None.
    Returns:
      dict of floats.
    """
    values = (location_square_deviation(pred_order, gt_order, mask),
              location_mean_deviation(pred_order, gt_order, mask),
              swap_deviation(pred_order, gt_order, mask),
              swap_distance_deviation(pred_order, gt_order, mask),
              100.0 * ordering_score(pred_order, gt_order, 2, mask),
              100.0 * ordering_score(pred_order, gt_order, 3, mask))
    return {k: float(jnp.mean(v)) for k, v in zip(METRICS, values, strict=True)}


def random_expectation(lengths: Sequence[int]) -> dict[str, float]:
    """Exact expected metrics of uniformly random orders, averaged over clip lengths.

    Per clip of n frames: LSD (n^2-1)/6, LMD (n^2-1)/(3n), SD n - H_n, SSD (n^2-1)/6,
    OS2 100/2, OS3 100/6 (the Random row of Table 1 under our definitions).

    Args:
      lengths: real clip lengths (each >= 3).
    Returns:
      dict keyed like `summary`.
    """
    ns = np.asarray(list(lengths), dtype=np.float64)
    if ns.size == 0 or (ns < 3).any():
        raise ValueError("lengths must be a non-empty list of clip lengths >= 3")
    harmonic = np.array([sum(1.0 / k for k in range(1, int(n) + 1)) for n in ns])
    values = (np.mean((ns**2 - 1) / 6), np.mean((ns**2 - 1) / (3 * ns)), np.mean(ns - harmonic),
              np.mean((ns**2 - 1) / 6), 50.0, 100.0 / 6)
    return {k: float(v) for k, v in zip(METRICS, values, strict=True)}
