"""Reference for the Drop-DTW benchmark: the authors' cell-by-cell loop, in NumPy.

A transcription of the structure of Algorithm 1 of Dvornik et al. (NeurIPS 2021) as their
reference code runs it (one-sided: only video clips are dropped; a Python double loop over
cells, two states per cell: "clip matched" and "clip dropped", with a back-pointer table).
Written for this repository as the speed and correctness baseline of ``vnr.ops.dtw.drop_dtw``
with ``drop_y=None, contiguous=True``; it is deliberately the slow per-cell algorithm.

``exhaustive`` is the definition itself: every drop/match choice of every clip, scored as the
Drop-DTW objective (the ground truth of the tests, for tiny sizes only).
"""

from __future__ import annotations

import itertools

import numpy as np

MATCHED, DROPPED = 0, 1


def drop_dtw_loop(zx_costs: np.ndarray, drop_costs: np.ndarray, contiguous: bool = True):
    """One pair. Steps z (K) must all be matched, in order; clips x (N) may be dropped.

    Args:
      zx_costs: ``[K, N]`` cost of matching step k with clip n.
      drop_costs: ``[N]`` cost of dropping each clip.
      contiguous: a step's clips must be consecutive (no dropped clip in between).

    Returns:
      ``(cost, labels)``: the optimal cost and ``labels [N]`` int, the 1-based step each
      clip is matched to, 0 when dropped.
    """
    k_steps, n_clips = zx_costs.shape
    table = np.zeros((k_steps + 1, n_clips + 1, 2))
    table[1:, 0, :] = np.inf  # a step cannot be matched before any clip is seen
    table[0, 1:, MATCHED] = np.inf  # no step is open yet
    table[0, 1:, DROPPED] = np.cumsum(drop_costs)
    back = np.zeros((k_steps + 1, n_clips + 1, 2, 3), dtype=int)  # (row, col, state)
    for xi in range(1, n_clips + 1):
        back[0, xi, DROPPED] = (0, xi - 1, DROPPED)

    for zi in range(1, k_steps + 1):
        for xi in range(1, n_clips + 1):
            # Clip xi matched to step zi: either a new step starts (from the diagonal, any
            # state) or step zi continues from clip xi - 1 (matched; or also dropped when the
            # matches of a step need not be contiguous).
            cands = [
                (zi - 1, xi - 1, MATCHED),
                (zi - 1, xi - 1, DROPPED),
                (zi, xi - 1, MATCHED),
            ]
            if not contiguous:
                cands.append((zi, xi - 1, DROPPED))
            vals = [table[c] for c in cands]
            best = int(np.argmin(vals))
            table[zi, xi, MATCHED] = vals[best] + zx_costs[zi - 1, xi - 1]
            back[zi, xi, MATCHED] = cands[best]
            # Clip xi dropped: coming from clip xi - 1 at the same step, any state.
            cands = [(zi, xi - 1, MATCHED), (zi, xi - 1, DROPPED)]
            vals = [table[c] for c in cands]
            best = int(np.argmin(vals))
            table[zi, xi, DROPPED] = vals[best] + drop_costs[xi - 1]
            back[zi, xi, DROPPED] = cands[best]

    state = int(np.argmin(table[k_steps, n_clips]))
    cost = float(table[k_steps, n_clips, state])
    labels = np.zeros(n_clips, dtype=int)
    zi, xi = k_steps, n_clips
    while xi > 0:
        if state == MATCHED:
            labels[xi - 1] = zi
        zi, xi, state = back[zi, xi, state]
    return cost, labels


def drop_dtw_batch(costs: np.ndarray, drop_x: np.ndarray):
    """Loops :func:`drop_dtw_loop` over a batch in our layout.

    Args:
      costs: ``[B, N, M]`` cost of matching clip n with sentence m.
      drop_x: ``[B, N]`` clip drop costs.

    Returns:
      ``values [B]`` and ``match_x [B, N]`` (0-based sentence per clip, -1 = dropped).
    """
    values, matches = [], []
    for c, d in zip(costs, drop_x, strict=True):
        v, labels = drop_dtw_loop(np.asarray(c, np.float64).T, np.asarray(d, np.float64))
        values.append(v)
        matches.append(labels - 1)
    return np.asarray(values), np.asarray(matches)


def alignment_cost(a, c, dx, dy):
    """Cost of assignment ``a`` (sentence per clip, -1 = drop), or None if not allowed
    (one-sided, ``dy=None``: every sentence must be matched)."""
    matched = [v for v in a if v >= 0]
    total = sum(c[i, v] if v >= 0 else dx[i] for i, v in enumerate(a))
    unmatched = set(range(c.shape[1])) - set(matched)
    if dy is None:
        return None if unmatched else total
    return total + sum(dy[j] for j in unmatched)


def allowed(a, contiguous: bool) -> bool:
    """Monotone; with ``contiguous`` no dropped clip between two clips of one sentence."""
    matched = [v for v in a if v >= 0]
    if any(p > q for p, q in itertools.pairwise(matched)):
        return False
    if contiguous:
        for i, v in enumerate(a):
            if v < 0:
                before = [u for u in a[:i] if u >= 0]
                after = [u for u in a[i + 1 :] if u >= 0]
                if before and after and before[-1] == after[0]:
                    return False
    return True


def exhaustive(c, dx, dy, contiguous: bool):
    """(best cost, best assignment) over every drop/match choice of every clip."""
    n, m = c.shape
    best, arg = np.inf, None
    for a in itertools.product(range(-1, m), repeat=n):
        if not allowed(a, contiguous):
            continue
        cost = alignment_cost(a, c, dx, dy)
        if cost is not None and cost < best:
            best, arg = cost, a
    return best, arg
