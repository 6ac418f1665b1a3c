"""Pairwise scores -> order: batched, jit-compiled beam search (Algorithm 3) and exact DP.

Conventions: `scores [B, N, N]` float, `mask [B, N]` bool (True = real, real first). An
order `[B, N]` int holds at position `k` the input index placed there; padded positions
hold the padded indices in increasing order. `scores[b, i, j]` is the weight of placing
`i` before `j`: *directly* before for `objective="path"` (Algorithm 3: maximise
sum_k scores[o_k, o_{k+1}]), *anywhere* before for `objective="linear"` (maximise
sum over pairs placed i-before-j of scores[i, j], the linear-ordering problem). The
diagonal and every entry that touches a padded index are ignored.

Public functions validate their arguments in Python (shapes always; values such as NaN,
empty mask rows and the real-first layout only when the inputs are concrete, not tracers)
and then call a jitted core.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

Array = jax.Array
OBJECTIVES = ("path", "linear")
MAX_EXACT_N = 20  # 2^20 subsets x 20 ends: 84 MB of DP table (+ 300 MB per layer) per clip
_ROUNDS_MAX = 32  # beams up to this width select by repeated max; wider ones use top_k


def _concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def check_mask(mask, shape: tuple[int, int], name: str = "mask") -> Array:
    """Returns `mask` as bool `[B, N]` (all True if None); raises ValueError when malformed.

    Shape is always checked; empty rows and the real-first layout only when concrete.
    """
    if mask is None:
        return jnp.ones(shape, bool)
    mask = jnp.asarray(mask)
    if mask.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {mask.shape}")
    mask = mask.astype(bool)
    if _concrete(mask):
        m = np.asarray(mask)
        if m.shape[1] == 0 or not m.any(1).all():
            bad = int(np.nonzero(~m.any(1))[0][0]) if m.shape[1] else 0
            raise ValueError(f"{name} row {bad} has no real element (all False)")
        if (m[:, 1:] & ~m[:, :-1]).any():
            raise ValueError(f"{name} must put real elements first (True then False per row)")
    return mask


def check_scores(scores, mask, name: str = "scores") -> tuple[Array, Array]:
    """Validates a `[B, N, N]` score batch and its mask; returns (scores float32, mask)."""
    scores = jnp.asarray(scores)
    if scores.ndim != 3 or scores.shape[1] != scores.shape[2]:
        raise ValueError(f"{name} must be square [B, N, N], got shape {scores.shape}")
    if not jnp.issubdtype(scores.dtype, jnp.floating):
        scores = scores.astype(jnp.float32)
    mask = check_mask(mask, scores.shape[:2])
    if _concrete(scores, mask):
        m = np.asarray(mask)
        pair = m[:, :, None] & m[:, None, :]
        s = np.asarray(scores)
        if not np.isfinite(s[pair]).all():
            raise ValueError(f"{name} has NaN or infinite entries between real elements")
    return scores.astype(jnp.float32), mask


def pair_scores_to_matrix(logits) -> Array:
    """Eq. 5: S = (e^{l1} - e^{l0}) / (e^{l1} + e^{l0}) = tanh((l1 - l0) / 2), stably.

    Args:
      logits: [..., 2] pair logits; class 1 = "i before j".
    Returns:
      [...] scores in (-1, 1), e.g. [B, N, N] for [B, N, N, 2] logits.
    """
    logits = jnp.asarray(logits)
    if logits.ndim < 1 or logits.shape[-1] != 2:
        raise ValueError(f"logits must end in a dimension of size 2, got shape {logits.shape}")
    return jnp.tanh(0.5 * (logits[..., 1] - logits[..., 0]))


def order_total(scores, order, mask=None, objective: str = "path") -> Array:
    """Objective value of given orders (real elements only).

    Args:
      scores: [B, N, N]. order: int [B, N]. mask: bool [B, N] or None.
      objective: "path" or "linear".
    Returns:
      float32 [B].
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    scores, mask = check_scores(scores, mask)
    order = jnp.asarray(order, jnp.int32)
    if order.shape != mask.shape:
        raise ValueError(f"order must have shape {mask.shape}, got {order.shape}")
    n = mask.sum(-1)
    N = order.shape[-1]
    ordered = jax.vmap(lambda a, o: a[o][:, o])(scores, order)  # [b, k, l]
    k = jnp.arange(N)
    real = (k[None, :, None] < n[:, None, None]) & (k[None, None, :] < n[:, None, None])
    if objective == "path":
        sel = (k[:, None] + 1 == k[None, :])[None] & real
    else:
        sel = (k[:, None] < k[None, :])[None] & real
    return jnp.where(sel, ordered, 0.0).sum((1, 2))


# ----------------------------------------------------------------------------- beam search


def _select_by_rows(cand: Array, keep: int) -> tuple[Array, Array]:
    """Best `keep` of cand [W, N, B] per clip as (values [K, B], flat indices w*N+j [K, B]).

    Keeps each row's maximum and its first index; a round takes the best row (first on
    ties), then refreshes only that row (one gathered row, already-taken nodes as bits),
    so a round costs O((W + N) B) instead of a pass over all W*N candidates. Ties go to
    the smaller flat index, as with a stable sort.
    """
    W, N, B = cand.shape
    wi = jnp.arange(W, dtype=jnp.int32)[:, None]
    ji = jnp.arange(N, dtype=jnp.int32)[:, None]

    def row_best(c):  # c [..., N, B] -> max and first argmax over N
        top = c.max(-2)
        return top, jnp.where(c == top[..., None, :], ji, N).min(-2)

    rowmax, rowarg = row_best(cand)
    taken = jnp.zeros((W, B), jnp.int32)
    best, pick = [], []
    for _ in range(keep):
        top = rowmax.max(0)
        w = jnp.where(rowmax == top[None], wi, W).min(0)
        w = jnp.minimum(w, W - 1)  # all rows empty (-inf): any row will do
        here = wi == w[None]
        j = jnp.where(here, rowarg, 0).sum(0)
        best.append(top)
        pick.append(w * N + j)
        taken = jnp.where(here, taken | (1 << j)[None], taken)
        row = jnp.take_along_axis(cand, jnp.broadcast_to(w[None, None], (1, N, B)), axis=0)[0]
        row_taken = jnp.where(here, taken, 0).sum(0)
        row = jnp.where((row_taken[None] >> ji) & 1 == 1, -jnp.inf, row)
        new_max, new_arg = row_best(row)
        rowmax = jnp.where(here, new_max[None], rowmax)
        rowarg = jnp.where(here, new_arg[None], rowarg)
    return jnp.stack(best), jnp.stack(pick)


def _beam_step(s_rows, real, n, t, st, keep: int, objective: str):
    """One expansion of every kept partial order; the clip batch is the last (vector) axis.

    s_rows: [B, N, N] masked scores, transposed for "linear"; real: [N, B]; st: score
    [W, B], gain [W, N, B] (weight of appending each node), seen [W, B] bit masks (or
    bool [W, N, B] when N > 31). "path": gain = s[last, :]. "linear": appending j settles
    every pair (j, k) with k unplaced, so gain[j] = sum_{k unplaced, k != j} s[j, k] and a
    partial score counts every pair already decided (same final total). The best
    `keep` extensions are chosen by `_select_by_rows` (N <= 31), by `keep` rounds of
    (max, first index of the max, mask it out) over all W*N candidates (N > 31), or by
    `lax.top_k` for beams wider than _ROUNDS_MAX; in every case ties go to the earlier
    row, then the smaller node, as in a stable sort.
    Returns the new state and the (parent row, node) of each kept row.
    """
    W, N, B = st["gain"].shape
    forced = t >= n  # [B]: past the real frames, append padded index t at no cost
    idx = jnp.arange(N, dtype=jnp.int32)
    if st["seen"].ndim == 2:  # bit masks (N <= 31)
        free = ((st["seen"][:, None, :] >> idx[None, :, None]) & 1 == 0) & real[None]
    else:  # bool [W, N, B]
        free = ~st["seen"] & real[None]
    allowed = jnp.where(forced[None, None], (idx == t)[None, :, None], free)
    gain = jnp.where(forced[None, None], 0.0, st["gain"])
    cand = jnp.where(allowed, st["score"][:, None] + gain, -jnp.inf)  # [W, N, B]
    if keep <= _ROUNDS_MAX and N <= 31:
        best, pick = _select_by_rows(cand, keep)
    elif keep <= _ROUNDS_MAX:
        cand = cand.reshape(W * N, B)
        flat = jnp.arange(W * N, dtype=jnp.int32)[:, None]
        best, pick = [], []
        for _ in range(keep):
            top = cand.max(0)
            at = jnp.where(cand == top[None], flat, W * N).min(0)
            cand = jnp.where(flat == at[None], -jnp.inf, cand)
            best.append(top)
            pick.append(at)
        best, pick = jnp.stack(best), jnp.stack(pick)  # [K, B]
    else:  # wide beams: XLA's top_k (same tie order: smaller index first)
        kk = min(keep, W * N)
        best, pick = lax.top_k(cand.reshape(W * N, B).T, kk)
        best, pick = best.T, pick.T.astype(jnp.int32)
        if kk < keep:  # fewer extensions than rows: the rest stay empty (-inf)
            best = jnp.concatenate([best, jnp.full((keep - kk, B), -jnp.inf)])
            pick = jnp.concatenate([pick, jnp.zeros((keep - kk, B), jnp.int32)])
    parent, node = pick // N, pick % N
    rows = jax.vmap(lambda a, i: a[i])(s_rows, node.T)  # [B, K, N] = src[node, :]
    gain = jnp.transpose(rows, (1, 2, 0))
    if objective == "linear":  # j now precedes every unplaced k: drop s[j, node]
        gain = jnp.take_along_axis(st["gain"], parent[:, None, :], axis=0) - gain
    if st["seen"].ndim == 2:
        seen = jnp.take_along_axis(st["seen"], parent, axis=0) | (1 << node)
    else:
        seen = jnp.take_along_axis(st["seen"], parent[:, None, :], axis=0)
        seen = seen | (idx[None, :, None] == node[:, None, :])
    return {"score": best, "gain": gain, "seen": seen}, (parent, node)


def _initial_state(s, start, valid, objective):
    """Beam state of one partial order `[start]` per row (clip axis last, W = 1).

    s: [R, N, N] masked scores of each row's clip; start: [R] start node; valid: [R] bool
    (False for a padded start: its beam stays at -inf).
    """
    R, N, _ = s.shape
    idx, rows = jnp.arange(N, dtype=jnp.int32), jnp.arange(R)
    first = s[rows, start]  # [R, N] = s[start, :]
    if objective == "path":
        score0, gain0 = jnp.zeros((R,)), first
    else:  # the start precedes every other node: gain[j] = sum_k s[j, k] - s[j, start]
        rowsum = s.sum(-1)  # [R, N]
        score0, gain0 = first.sum(-1), rowsum - s[rows, :, start]
    seen = (1 << start).astype(jnp.int32) if N <= 31 else idx[None, :] == start[:, None]
    return {
        "score": jnp.where(valid, score0, -jnp.inf)[None],
        "gain": gain0.T[None],
        "seen": seen[None] if N <= 31 else seen.T[None],
    }


def _run_beam(s_rows, real, n, state, beam_size, objective):
    """Steps 1..N-1 from `state` (rows on the last axis).

    Returns (row0 [R], nodes [N-1, R], total [R]) of each row's best order: row0 is the
    initial state row it grew from, nodes the nodes appended at steps 1..N-1.
    """
    R, N, _ = s_rows.shape
    state, first = _beam_step(s_rows, real, n, 1, state, beam_size, objective)

    def body(st, t):
        return _beam_step(s_rows, real, n, t, st, beam_size, objective)

    state, rest = lax.scan(body, state, jnp.arange(2, N, dtype=jnp.int32))
    parents = jnp.concatenate([first[0][None], rest[0]])  # [N-1, K, R]
    nodes = jnp.concatenate([first[1][None], rest[1]])
    K = parents.shape[1]
    krow = jnp.arange(K, dtype=jnp.int32)[:, None]

    def back(row, pn):
        parent, node = pn
        sel = krow == row[None]
        return jnp.where(sel, parent, 0).sum(0), jnp.where(sel, node, 0).sum(0)

    row0, rev = lax.scan(back, jnp.zeros((R,), jnp.int32), (parents, nodes), reverse=True)
    return row0, rev, state["score"][0]


@functools.partial(jax.jit, static_argnames=("beam_size", "objective", "starts"))
def _beam_batch(scores, mask, beam_size, objective, starts):
    B, N, _ = scores.shape
    n = mask.sum(-1).astype(jnp.int32)
    idx = jnp.arange(N, dtype=jnp.int32)
    ok = mask[:, :, None] & mask[:, None, :] & (idx[:, None] != idx[None, :])[None]
    s = jnp.where(ok, scores, 0.0)
    if N == 1:
        return jnp.zeros((B, 1), jnp.int32), jnp.zeros((B,), jnp.float32)
    if starts == "per_start":
        # Algorithm 3: one beam per start node. Rows r = start * B + clip: every (clip,
        # start) pair is an independent search of width beam_size, all in one scan.
        start = jnp.repeat(idx, B)
        clip = jnp.tile(jnp.arange(B, dtype=jnp.int32), N)
        s_r, n_r = s[clip], n[clip]
        state = _initial_state(s_r, start, start < n_r, objective)
        s_rows = s_r if objective == "path" else jnp.transpose(s_r, (0, 2, 1))
        _, rev, total = _run_beam(s_rows, mask[clip].T, n_r, state, beam_size, objective)
        order = jnp.concatenate([start[:, None], rev.T], 1).reshape(N, B, N)
        total = total.reshape(N, B)
        best = jnp.argmax(total, 0)  # the first best start on ties, as max() over bestlist
        order = jnp.take_along_axis(order, best[None, :, None], 0)[0]
        return order.astype(jnp.int32), jnp.take_along_axis(total, best[None], 0)[0]
    # "shared" (ours): all start nodes compete for one beam from step 1 on
    real = mask.T
    if objective == "path":
        s_rows, score0 = s, jnp.zeros((N, B))
        gain0 = jnp.transpose(s, (1, 2, 0))  # s[start, :]
    else:
        s_rows, rowsum = jnp.transpose(s, (0, 2, 1)), s.sum(-1)  # [B, N]
        score0 = rowsum.T  # the start precedes every other node
        gain0 = rowsum.T[None] - jnp.transpose(s, (2, 1, 0))  # sum_k s[j, k] - s[j, start]
    state = {
        "score": jnp.where(real, score0, -jnp.inf),
        "gain": gain0,
        "seen": (
            jnp.broadcast_to((1 << idx)[:, None], (N, B)).astype(jnp.int32)
            if N <= 31
            else jnp.broadcast_to(jnp.eye(N, dtype=bool)[:, :, None], (N, N, B))
        ),
    }
    start, rev, total = _run_beam(s_rows, real, n, state, beam_size, objective)
    return jnp.concatenate([start[None], rev]).T.astype(jnp.int32), total


STARTS = ("per_start", "shared")


def beam_search_order(
    scores, mask=None, beam_size: int = 10, objective: str = "path", starts: str = "per_start"
) -> tuple[Array, Array]:
    """Batched beam search over orders: the paper's Algorithm 3 and our shared-beam variant.

    starts="per_start" (default, Algorithm 3 of the paper, App. C.2): for every real start
    node a separate beam of width `beam_size` is grown to a full order; the best order
    over all start nodes wins (the first start on ties). All (clip, start) pairs are
    independent rows of one batched scan, so the cost is n times that of one beam.
    starts="shared" (ours, not in the paper): every real node starts a partial order, and
    from step 1 on all rows x N extensions compete for a single beam of `beam_size` (n
    times cheaper; on random path scores it loses to per-start, see bench/ordering).

    Each step extends every kept partial order by every unplaced real node and keeps the
    best `beam_size` (ties go to the earlier row, then the smaller node, as a stable sort
    would; the extensions are chosen by `_select_by_rows` for beams <= 32, `lax.top_k`
    beyond). The clip batch is the vector (last) axis of the state; clips of different
    real length share one batch: past its real length a clip appends its padded indices
    at no cost. With "linear", a partial score counts every pair it already decides
    (placed frames precede all unplaced ones); final totals are the objective.

    Args:
      scores: [B, N, N] float; scores[b, i, j] = weight of i (directly, for "path";
        anywhere, for "linear") before j.
      mask: bool [B, N] or None (all real).
      beam_size: partial orders kept per step (per start node with "per_start").
      objective: "path" or "linear".
      starts: "per_start" (Algorithm 3) or "shared" (ours).
    Returns:
      (order int32 [B, N], total float32 [B]) with total the objective of the order.
    """
    if not isinstance(beam_size, int | np.integer) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if starts not in STARTS:
        raise ValueError(f"starts must be one of {STARTS}, got {starts!r}")
    scores, mask = check_scores(scores, mask)
    return _beam_batch(scores, mask, int(beam_size), objective, starts)


# ------------------------------------------------------------------------- exact subset DP


@functools.cache
def _layers(N: int) -> tuple[tuple[np.ndarray, ...], ...]:
    """Subsets of {0..N-1} grouped by size: (sets [C], has [C, N] bool, prev [C, N])."""
    ids = np.arange(1 << N, dtype=np.int64)
    bits = (ids[:, None] >> np.arange(N)) & 1
    size = bits.sum(1)
    out = []
    for s in range(1, N + 1):
        sets = ids[size == s]
        has = bits[sets].astype(bool)
        prev = sets[:, None] ^ (1 << np.arange(N))[None, :]
        out.append((sets.astype(np.int32), has, np.where(has, prev, 0).astype(np.int32)))
    return tuple(out)


def _exact_one(scores: Array, n: Array, layers, objective: str) -> tuple[Array, Array]:
    N = scores.shape[0]
    idx = jnp.arange(N)
    real = idx < n
    ok = real[:, None] & real[None, :] & (idx[:, None] != idx[None, :])
    s = jnp.where(ok, scores, 0.0)
    full = (1 << N) - 1
    neg = -jnp.inf
    if objective == "path":
        # padded nodes may follow real ones at no cost but never precede them: the optimum
        # is the best real path followed by the padded nodes.
        s = jnp.where(~real[:, None] & real[None, :], neg, s)
        dp = jnp.full((1 << N, N), neg).at[(1 << idx), idx].set(0.0)
        for sets, has, prev in layers[1:]:
            cand = dp[prev] + s.T[None]  # [C, j, i] = dp[S - j, i] + s[i, j]
            dp = dp.at[sets].set(jnp.where(has, cand.max(-1), neg))
        last = jnp.argmax(dp[full])
        total = dp[full, last]

        def back(carry, _):
            cur, j = carry
            prv = cur ^ (1 << j)
            i = jnp.argmax(dp[prv] + s[:, j])
            return (prv, i), j

        _, rev = lax.scan(back, (jnp.int32(full), last.astype(jnp.int32)), None, length=N)
    else:
        bits = ((jnp.arange(1 << N)[:, None] >> idx) & 1).astype(jnp.float32)
        into = bits @ s  # into[T, j] = sum_{i in T} s[i, j]
        f = jnp.full((1 << N,), neg).at[0].set(0.0)
        for sets, has, prev in layers:
            cand = f[prev] + into[prev, idx]  # [C, j]: f(S - j) + sum_{i in S-j} s[i, j]
            f = f.at[sets].set(jnp.where(has, cand, neg).max(-1))
        total = f[full]

        def back(cur, _):
            prv = cur ^ (1 << idx)
            val = jnp.where((cur >> idx) & 1 == 1, f[prv] + into[prv, idx], neg)
            j = jnp.argmax(val)
            return cur ^ (1 << j), j

        _, rev = lax.scan(back, jnp.int32(full), None, length=N)
    order = rev[::-1].astype(jnp.int32)
    # canonical padding: real nodes in found order, then padded indices increasing
    key = jnp.where(order < n, jnp.arange(N), N + order)
    return order[jnp.argsort(key)], total


@functools.partial(jax.jit, static_argnames=("objective", "chunk"))
def _exact_batch(scores, mask, layers, objective, chunk):
    n = mask.sum(-1)
    fn = lambda a: _exact_one(a[0], a[1], layers, objective)
    return lax.map(fn, (scores, n), batch_size=chunk)


def exact_order(scores, mask=None, objective: str = "path") -> tuple[Array, Array]:
    """Exact optimum by dynamic programming over subsets, batched and jit-compiled.

    "path": Held-Karp, dp[S, j] = max_{i in S-j} dp[S-j, i] + scores[i, j], O(2^n n^2).
    "linear": f(S + j) = f(S) + sum_{i in S} scores[i, j] (j placed after all of S),
    O(2^n n). Subsets are processed layer by layer (by size) fully vectorised; clips go
    through `lax.map` in small chunks to bound memory. When the mask is concrete the
    padded width is first cut to the longest real clip. Limit: n <= MAX_EXACT_N (20):
    at n = 20 one clip takes ~1 s and ~2 GB peak on a 2-core CPU (clips run one at a time).

    Args:
      scores: [B, N, N] float, same meaning as in `beam_search_order`.
      mask: bool [B, N] or None.
      objective: "path" or "linear".
    Returns:
      (order int32 [B, N], total float32 [B]); total is the optimal objective value.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    scores, mask = check_scores(scores, mask)
    B, N = mask.shape
    lens = np.asarray(mask).sum(1) if _concrete(mask) else np.full(B, N)
    width = int(lens.max())
    if width > MAX_EXACT_N:
        row = int(np.argmax(lens))
        raise ValueError(
            f"scores: clip {row} has {width} frames; exact_order handles clips of at most "
            f"{MAX_EXACT_N} frames (2^n x n DP table); use beam_search_order"
        )
    layers = tuple(tuple(jnp.asarray(a) for a in layer) for layer in _layers(width))
    chunk = max(1, min(B, (1 << 22) // ((1 << width) * width * width)))
    order, total = _exact_batch(
        scores[:, :width, :width], mask[:, :width], layers, objective, chunk
    )
    if width < N:
        tail = jnp.broadcast_to(jnp.arange(width, N, dtype=jnp.int32), (B, N - width))
        order = jnp.concatenate([order, tail], axis=1)
    return order, total


def brute_force_order(scores, n: int, objective: str = "path") -> tuple[np.ndarray, float]:
    """Best order of one clip's first n nodes by enumerating all n! orders (NumPy, n <= 9).

    Args:
      scores: [N, N] array (N >= n). n: real length. objective: "path" or "linear".
    Returns:
      (order [n], total) with the first best order in lexicographic enumeration.
    """
    if n > 9:
        raise ValueError(f"n: brute force is for n <= 9, got {n}")
    s = np.asarray(scores, np.float64)[:n, :n]
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64).reshape(-1, n)
    if objective == "path":
        tot = s[perms[:, :-1], perms[:, 1:]].sum(1)
    else:
        a, b = np.triu_indices(n, 1)
        tot = s[perms[:, a], perms[:, b]].sum(1)
    best = int(np.argmax(tot))
    return perms[best], float(tot[best])
