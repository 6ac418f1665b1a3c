"""Ranks of positives among scored candidates: the one ranking op behind every retrieval metric.

A query scores candidates (higher = better). Some candidates are its positives; some are
outside its pool (never ranked, positives included). The query's rank is the position of
its best-scored pooled positive among its pooled candidates. Everything is counted relative
to that best score s* (`RankStats`):

  higher       pooled non-positive candidates scored above s*
  tied         pooled non-positive candidates scored exactly s*
  tied_before  those of `tied` whose candidate index is below the first positive at s*
  tied_pos     pooled positives scored exactly s* (>= 1 for a valid query)

and a tie policy (`TIES`) turns the counts into a rank:

  optimistic   1 + higher                   ties go to the positive
  pessimistic  1 + higher + tied            ties go against it
  index        1 + higher + tied_before     candidates in index order (a stable sort by
                                            descending score)
  expected     uniformly random order among everything tied at s*: the rank, R@k and the
               reciprocal rank are exact expectations (a constant scorer over C candidates
               gets mean rank (C + 1) / 2 and R@k = k / C)

NaN scores count as -inf. A query without a pooled positive is not valid: its metrics are NaN.

Two ways to the same counts:

* `rank_stats(scores, positive, pool)`: dense scores [..., N] (any leading dims; small N).
* `rank_stats_blockwise(queries, candidates, positives, ...)`: scores are dot products
  computed block by block ([block_queries, block_candidates] at a time), so memory does
  not grow with Q x N. Positives are index lists; the pool is a function of per-query and
  per-candidate attributes evaluated on each block. Two passes over the blocks: the first
  finds s* (only the candidate blocks holding a query block's positives), the second
  counts; both compute each block's scores with the same dot, so s* and the candidates'
  scores are compared within one consistent set of float32 values. With a mesh, queries
  are split over a mesh axis (`jax.shard_map`; candidates replicated).

A training loss on the same kind of scores lives here too: `max_margin_ranking_loss`, the
bidirectional hinge of MoEE (Miech et al. 2018) on a square text x video matrix, and
`candidate_max_margin_loss`, the same hinge for a query scored against its own candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

TIES = ("optimistic", "pessimistic", "index", "expected")

PoolFn = Callable[[dict[str, jax.Array], dict[str, jax.Array]], jax.Array]


class RankStats(NamedTuple):
    """Per-query counts relative to the best pooled positive score (module docstring)."""

    best: jax.Array  # float32: s* (-inf when not valid)
    higher: jax.Array  # int32
    tied: jax.Array  # int32
    tied_before: jax.Array  # int32
    tied_pos: jax.Array  # int32
    valid: jax.Array  # bool: the query has a pooled positive


def _check_tie(tie: str) -> None:
    if tie not in TIES:
        raise ValueError(f"tie={tie!r}: choose one of {TIES}")


def _clean(scores: jax.Array) -> jax.Array:
    scores = jnp.asarray(scores, jnp.float32)
    return jnp.where(jnp.isnan(scores), -jnp.inf, scores)


# ----------------------------------------------------------------------------- dense


def rank_stats(scores: jax.Array, positive: jax.Array, pool: jax.Array | None = None
               ) -> RankStats:
    """Counts of dense scores.

    Args:
      scores: float [..., N] (compared in float32).
      positive: bool [..., N] (broadcastable to scores).
      pool: bool [..., N] or None (every candidate).

    Returns:
      `RankStats` with the leading shape [...].
    """
    s = _clean(scores)
    pool = jnp.ones(s.shape, bool) if pool is None else jnp.broadcast_to(pool, s.shape)
    positive = jnp.broadcast_to(jnp.asarray(positive, bool), s.shape)
    pos = positive & pool
    best = jnp.max(jnp.where(pos, s, -jnp.inf), -1)
    at_best = s == best[..., None]
    idx = jnp.arange(s.shape[-1])
    first = jnp.argmax(pos & at_best, -1)
    other = pool & ~positive
    tie = other & at_best
    count = lambda m: m.sum(-1, dtype=jnp.int32)  # noqa: E731
    return RankStats(best=best, higher=count(other & (s > best[..., None])), tied=count(tie),
                     tied_before=count(tie & (idx < first[..., None])),
                     tied_pos=count(pos & at_best), valid=pos.any(-1))


# ----------------------------------------------------------------------------- blockwise


def _block_scores(q: jax.Array, c: jax.Array) -> jax.Array:
    """[Qb, Nb] dot products; the barrier keeps both passes' scores the same values."""
    return _clean(jax.lax.optimization_barrier(
        jnp.dot(q, c.T, preferred_element_type=jnp.float32)))


def _slice(tree: Any, start: jax.Array, size: int) -> Any:
    return jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, start, size, 0), tree)


def _local_stats(queries, positives, query_attrs, candidates, cand_valid, cand_attrs, *,
                 pool_fn: PoolFn | None, qb: int, nb: int) -> RankStats:
    """Counts of the local queries (a multiple of qb) against every candidate."""
    n_cand = candidates.shape[0]
    n_blocks = n_cand // nb
    cols = jnp.arange(nb)

    def block_masks(j, q, pos, qa):
        start = j * nb
        c = jax.lax.dynamic_slice_in_dim(candidates, start, nb, 0)
        s = _block_scores(q, c)
        pool = jax.lax.dynamic_slice_in_dim(cand_valid, start, nb, 0)[None, :]
        if pool_fn is not None:
            pool = pool & pool_fn(qa, _slice(cand_attrs, start, nb))
        local = jnp.where((pos >= start) & (pos < start + nb), pos - start, nb)
        rows = jnp.broadcast_to(jnp.arange(q.shape[0])[:, None], local.shape)
        is_pos = jnp.zeros(s.shape, bool).at[rows, local].set(True, mode="drop")
        return s, is_pos, pool, start

    def one_query_block(args):
        q, pos, qa = args
        has = pos >= 0
        lo = jnp.where(has, pos, n_cand).min() // nb
        hi = jnp.where(has.any(), jnp.where(has, pos, -1).max() // nb + 1, lo)
        init = (jnp.full((qb,), -jnp.inf), jnp.zeros((qb,), jnp.int32),
                jnp.zeros((qb,), jnp.int32), jnp.zeros((qb,), bool))

        def find_best(j, carry):
            best, first, tpos, seen = carry
            s, is_pos, pool, start = block_masks(j, q, pos, qa)
            pm = is_pos & pool
            has_b = pm.any(1)
            bmax = jnp.where(pm, s, -jnp.inf).max(1)
            at = pm & (s == bmax[:, None])
            bfirst = jnp.argmax(at, 1).astype(jnp.int32) + start
            bcnt = at.sum(1, dtype=jnp.int32)
            take = has_b & (~seen | (bmax > best))
            same = has_b & seen & (bmax == best)
            return (jnp.where(take, bmax, best), jnp.where(take, bfirst, first),
                    jnp.where(take, bcnt, jnp.where(same, tpos + bcnt, tpos)), seen | has_b)

        best, first, tpos, seen = jax.lax.fori_loop(lo, hi, find_best, init)

        def count(j, carry):
            higher, tied, before = carry
            s, is_pos, pool, start = block_masks(j, q, pos, qa)
            other = pool & ~is_pos
            tie = other & (s == best[:, None])
            return (higher + (other & (s > best[:, None])).sum(1, dtype=jnp.int32),
                    tied + tie.sum(1, dtype=jnp.int32),
                    before + (tie & (cols[None, :] + start < first[:, None])).sum(
                        1, dtype=jnp.int32))

        zeros = jnp.zeros((qb,), jnp.int32)
        higher, tied, before = jax.lax.fori_loop(0, n_blocks, count, (zeros, zeros, zeros))
        return RankStats(best, higher, tied, before, tpos, seen)

    n = queries.shape[0] // qb
    split = lambda x: x.reshape(n, qb, *x.shape[1:])  # noqa: E731
    out = jax.lax.map(one_query_block, (split(queries), split(positives),
                                        jax.tree.map(split, query_attrs)))
    return jax.tree.map(lambda x: x.reshape(n * qb, *x.shape[2:]), out)


def _pad(x: np.ndarray, n: int, fill: Any) -> np.ndarray:
    if len(x) == n:
        return x
    pad = np.full((n - len(x), *x.shape[1:]), fill, x.dtype)
    return np.concatenate([x, pad])


def rank_stats_blockwise(queries: Any, candidates: Any, positives: Any, *,
                         pool_fn: PoolFn | None = None, query_attrs: dict | None = None,
                         candidate_attrs: dict | None = None, candidate_valid: Any = None,
                         block_queries: int = 1024, block_candidates: int = 8192,
                         mesh: jax.sharding.Mesh | None = None, axis: str = "data"
                         ) -> RankStats:
    """Counts of the scores queries @ candidates.T, never holding the [Q, N] matrix.

    Args:
      queries: float [Q, D]; candidates: float [N, D] (scores in float32).
      positives: int [Q, P] candidate indices of each query's positives, -1 = none.
      pool_fn: `pool_fn(query_attrs_block, candidate_attrs_block) -> bool [Qb, Nb]`, True
        where the candidate is in the query's pool (a module-level function: it is a
        static argument of the compiled loop). None: every valid candidate.
      query_attrs / candidate_attrs: dicts of arrays [Q] / [N] that `pool_fn` reads.
      candidate_valid: bool [N] (default all): invalid candidates are in no pool.
      block_queries, block_candidates: the block shape (memory ~ 10 bytes per block entry).
      mesh: split the queries over its `axis` (when larger than 1).

    Returns:
      `RankStats` of the Q queries (NumPy arrays, on the host).
    """
    q = np.asarray(queries, np.float32)
    c = np.asarray(candidates, np.float32)
    pos = np.asarray(positives, np.int32).reshape(len(q), -1)
    if q.ndim != 2 or c.ndim != 2 or q.shape[1] != c.shape[1]:
        raise ValueError(f"rank_stats_blockwise: queries {q.shape} and candidates {c.shape} "
                         "must be [Q, D] and [N, D]")
    n_q, n_c = len(q), len(c)
    if pos.size and (pos.max() >= n_c or pos.min() < -1):
        raise ValueError(f"rank_stats_blockwise: positives must lie in [-1, {n_c})")
    shards = mesh.shape[axis] if mesh is not None and axis in mesh.axis_names else 1
    qb = max(1, min(block_queries, -(-n_q // shards)))
    nb = max(1, min(block_candidates, n_c))
    q_rows = -(-max(n_q, 1) // (qb * shards)) * qb * shards
    c_rows = -(-max(n_c, 1) // nb) * nb
    valid = np.ones(n_c, bool) if candidate_valid is None else np.asarray(candidate_valid, bool)
    qa = {k: _pad(np.asarray(v), q_rows, 0) for k, v in (query_attrs or {}).items()}
    ca = {k: _pad(np.asarray(v), c_rows, 0) for k, v in (candidate_attrs or {}).items()}
    args = (_pad(q, q_rows, 0.0), _pad(pos, q_rows, -1), qa, _pad(c, c_rows, 0.0),
            _pad(valid, c_rows, False), ca)
    stats = _compiled(pool_fn, qb, nb, mesh if shards > 1 else None, axis)(*args)
    return RankStats(*(np.asarray(x)[:n_q] for x in stats))


_CACHE: dict[tuple, Callable] = {}


def _compiled(pool_fn: PoolFn | None, qb: int, nb: int, mesh: jax.sharding.Mesh | None,
              axis: str) -> Callable:
    key = (pool_fn, qb, nb, mesh, axis)
    if key not in _CACHE:
        def local(q, pos, qa, c, valid, ca):
            return _local_stats(q, pos, qa, c, valid, ca, pool_fn=pool_fn, qb=qb, nb=nb)

        fn = local
        if mesh is not None:
            # Each device ranks its own queries: no collective, so nothing to check.
            sharded = jax.shard_map(local, mesh=mesh, axis_names={axis}, check_vma=False,
                                    in_specs=(P(axis), P(axis), P(axis), P(), P(), P()),
                                    out_specs=P(axis))
            everywhere = jax.sharding.NamedSharding(mesh, P())

            def fn(*args):  # replicated: every process reads the (small) result
                return jax.lax.with_sharding_constraint(sharded(*args), everywhere)

        _CACHE[key] = jax.jit(fn)
    return _CACHE[key]


# ----------------------------------------------------------------------------- metrics


def rank(stats: RankStats, tie: str) -> jax.Array:
    """Rank of the best positive (float32; the expectation for "expected"); NaN if invalid."""
    _check_tie(tie)
    g, e = stats.higher.astype(jnp.float32), stats.tied.astype(jnp.float32)
    if tie == "optimistic":
        r = 1.0 + g
    elif tie == "pessimistic":
        r = 1.0 + g + e
    elif tie == "index":
        r = 1.0 + g + jnp.asarray(stats.tied_before, jnp.float32)
    else:
        t = jnp.asarray(stats.tied_pos, jnp.float32)
        r = g + (e + t + 1.0) / (t + 1.0)
    return jnp.where(stats.valid, r, jnp.nan)


def recall(stats: RankStats, k: int, tie: str) -> jax.Array:
    """P(rank <= k) per query: 0/1 for the deterministic policies, the exact probability
    for "expected"; NaN if invalid."""
    _check_tie(tie)
    if tie != "expected":
        return jnp.where(stats.valid, (rank(stats, tie) <= k).astype(jnp.float32), jnp.nan)
    g, e = stats.higher.astype(jnp.float32), stats.tied.astype(jnp.float32)
    t = jnp.asarray(stats.tied_pos, jnp.float32)
    m = k - g  # places left for the tied group
    # P(the first m of the shuffled tied group are all non-positive) = prod (e - i) / (e + t - i)
    miss = jnp.ones_like(g)
    for i in range(k):
        miss = jnp.where(i < m, miss * jnp.maximum(e - i, 0.0) / jnp.maximum(e + t - i, 1.0),
                         miss)
    one = jnp.clip(m / (e + 1.0), 0.0, 1.0)  # t == 1 in closed form (exact in float32)
    r = jnp.where(m <= 0, 0.0, jnp.where(t == 1, one, 1.0 - miss))
    return jnp.where(stats.valid, r, jnp.nan)


def _harmonic(n: jax.Array) -> jax.Array:
    return jax.scipy.special.digamma(n + 1.0) + np.euler_gamma


def reciprocal_rank(stats: RankStats, tie: str) -> jax.Array:
    """1 / rank per query (for "expected" E[1 / rank], exact); NaN if invalid."""
    _check_tie(tie)
    if tie != "expected":
        return 1.0 / rank(stats, tie)
    g, e = stats.higher.astype(jnp.float32), stats.tied.astype(jnp.float32)
    t = jnp.asarray(stats.tied_pos, jnp.float32)
    one = (_harmonic(g + e + 1.0) - _harmonic(g)) / (e + 1.0)  # t == 1 in closed form

    def body(x, carry):  # x = 1 .. e + 1: P(first positive at x) / (g + x)
        acc, none_yet = carry
        live = x <= e + 1.0
        p = none_yet * t / jnp.maximum(e + t - x + 1.0, 1.0)
        acc = acc + jnp.where(live, p / (g + x), 0.0)
        none_yet = jnp.where(live, none_yet * jnp.maximum(e - x + 1.0, 0.0)
                             / jnp.maximum(e + t - x + 1.0, 1.0), none_yet)
        return acc, none_yet

    steps = jnp.max(jnp.where(stats.valid & (t > 1), e + 1.0, 0.0), initial=0.0)
    many, _ = jax.lax.fori_loop(1, steps.astype(jnp.int32) + 1,
                                lambda x, c: body(x.astype(jnp.float32), c),
                                (jnp.zeros_like(g), jnp.ones_like(g)))
    return jnp.where(stats.valid, jnp.where(t > 1, many, one), jnp.nan)


# ----------------------------------------------------------------------------- losses


def max_margin_ranking_loss(scores: jax.Array, margin: float = 0.2) -> jax.Array:
    """MoEE's max-margin ranking loss of a square score matrix.

    Args:
      scores: [n, n], row i a text, column j a video; the diagonal holds the matching pairs.
      margin: the hinge's margin (MoEE trained with 0.2).

    Returns:
      The mean over i, j of max(0, margin - s_ii + s_ij) and max(0, margin - s_ii + s_ji):
      2 n^2 terms, the n diagonal ones (each `margin`, no gradient) included as MoEE does.
    """
    s = jnp.asarray(scores, jnp.float32)
    n = s.shape[0]
    if s.shape != (n, n):
        raise ValueError(f"max_margin_ranking_loss: scores of shape {s.shape}, not square")
    pos = jnp.diagonal(s)[:, None]
    hinge = jax.nn.relu(margin - pos + s).sum() + jax.nn.relu(margin - pos + s.T).sum()
    return hinge / (2 * n * n)


def candidate_max_margin_loss(scores: jax.Array, positive: jax.Array, margin: float = 0.2,
                              valid: jax.Array | None = None) -> jax.Array:
    """The same hinge for queries each scored against their own candidates (ours).

    Args:
      scores: [..., C] candidate scores of each query.
      positive: int [...] (the positive's index) or bool [..., C] (exactly one True).
      margin: the hinge's margin.
      valid: bool [...] queries to count (None: all).

    Returns:
      The mean over counted queries and their C - 1 negatives of
      max(0, margin - s_pos + s_neg); 0 when no query counts.
    """
    s = jnp.asarray(scores, jnp.float32)
    c, positive = s.shape[-1], jnp.asarray(positive)
    if positive.dtype != jnp.bool_:
        positive = jax.nn.one_hot(positive, c, dtype=jnp.bool_)
    pos = jnp.sum(jnp.where(positive, s, 0.0), axis=-1, keepdims=True)
    hinge = jnp.where(positive, 0.0, jax.nn.relu(margin - pos + s)).sum(-1) / max(c - 1, 1)
    w = jnp.ones(hinge.shape, jnp.float32) if valid is None else valid.astype(jnp.float32)
    return (hinge * w).sum() / jnp.maximum(w.sum(), 1.0)
