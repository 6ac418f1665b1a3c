"""Cross-modal retrieval metrics (Movie Synopsis Association, MoviePuzzle Table 4): R@k, MedR.

`sim[i, j]` scores query i (a segment) against candidate j (a synopsis); the answer of query
i is candidate i. Ranks come from the shared ranking op (`vnr.ops.ranking`) with the tie
policy "expected": ties are broken uniformly at random in expectation, so a constant scorer
gets R@k = k / C and median rank (C + 1) / 2, never a lucky rank 1. With g = #candidates
scored strictly higher than the answer and e = #other candidates tied with it:

    R@k  = P(rank <= k) = clip((k - g) / (e + 1), 0, 1)
    rank = E[rank]      = g + 1 + e / 2

MedR is the median over queries of the expected rank (of the lower and upper middle values'
mean for an even count, as `numpy.median`). Rows and columns where `valid` is False
(batch padding) are left out of both the candidates and the queries. A NaN score counts as
-inf (the ranking op's rule): a NaN answer ranks below every scored candidate.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vnr.ops import ranking

KS = (1, 5, 10)
NAMES = (*(f"r{k}" for k in KS), "medr", "mean_rank")  # the metrics (besides `count`)
TIE = "expected"


def _stats(sim: jax.Array, valid: jax.Array | None) -> ranking.RankStats:
    """Rank counts of every query: its answer the one positive, the valid candidates the
    pool (a query that is not valid has no pooled positive: `RankStats.valid` False)."""
    n = sim.shape[0]
    pool = jnp.ones((n,), bool) if valid is None else jnp.asarray(valid).astype(bool)
    return ranking.rank_stats(sim, jnp.eye(n, dtype=bool), pool[None, :])


def answer_counts(sim: jax.Array, valid: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """(g, e) per valid query: valid candidates scored strictly higher than / equal to the
    answer (the answer itself excluded from e). sim [Q, Q], valid bool [Q]; the counts of a
    query that is not valid mean nothing."""
    stats = _stats(sim, valid)
    return stats.higher, stats.tied


def retrieval_metrics(sim: jax.Array, valid: jax.Array | None = None,
                      ks: tuple[int, ...] = KS) -> dict[str, jax.Array]:
    """{"r1", "r5", "r10" (as `ks`), "medr", "mean_rank", "count"} over the valid queries;
    R@k are fractions in [0, 1]. Jit-able (`ks` static)."""
    stats = _stats(sim, valid)
    ok = stats.valid
    count = jnp.maximum(ok.sum(dtype=jnp.float32), 1.0)
    mean = lambda x: jnp.where(ok, x, 0.0).sum() / count  # noqa: E731
    out = {f"r{k}": mean(ranking.recall(stats, k, TIE)) for k in ks}
    rank = ranking.rank(stats, TIE)  # NaN where not valid
    out["medr"] = jnp.nanmedian(rank)
    out["mean_rank"] = mean(rank)
    out["count"] = ok.sum(dtype=jnp.float32)
    return out
