"""Cross-modal retrieval metrics (Movie Synopsis Association, MoviePuzzle Table 4): R@k, MedR.

`sim[i, j]` scores query i (a segment) against candidate j (a synopsis); the answer of query
i is candidate i. The rank of the answer is 1 + (#candidates scored strictly higher) plus a
tie share: ties are broken uniformly at random in expectation, so a constant scorer gets
R@k = k / C and median rank (C + 1) / 2, never a lucky rank 1. With g = #higher and
e = #other candidates tied with the answer:

    R@k  = P(rank <= k) = clip((k - g) / (e + 1), 0, 1)
    rank = E[rank]      = g + 1 + e / 2

MedR is the median over queries of the expected rank (of the lower and upper middle values'
mean for an even count, as `numpy.median`). Rows and columns where `valid` is False
(batch padding) are left out of both the candidates and the queries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

KS = (1, 5, 10)
NAMES = (*(f"r{k}" for k in KS), "medr", "mean_rank")  # the metrics (besides `count`)


def answer_counts(sim: jax.Array, valid: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """(g, e) per query: valid candidates scored strictly higher than / equal to the answer
    (the answer itself excluded from e). sim [Q, Q], valid bool [Q]."""
    n = sim.shape[0]
    valid = jnp.ones((n,), bool) if valid is None else valid.astype(bool)
    answer = jnp.diagonal(sim)[:, None]
    cand = valid[None, :] & ~jnp.eye(n, dtype=bool)
    higher = ((sim > answer) & cand).sum(1)
    ties = ((sim == answer) & cand).sum(1)
    return higher, ties


def retrieval_metrics(sim: jax.Array, valid: jax.Array | None = None,
                      ks: tuple[int, ...] = KS) -> dict[str, jax.Array]:
    """{"r1", "r5", "r10" (as `ks`), "medr", "mean_rank", "count"} over the valid queries;
    R@k are fractions in [0, 1]. Jit-able (`ks` static)."""
    n = sim.shape[0]
    valid = jnp.ones((n,), bool) if valid is None else valid.astype(bool)
    g, e = answer_counts(sim.astype(jnp.float32), valid)
    g, e = g.astype(jnp.float32), e.astype(jnp.float32)
    w = valid.astype(jnp.float32)
    count = jnp.maximum(w.sum(), 1.0)
    out = {f"r{k}": (jnp.clip((k - g) / (e + 1.0), 0.0, 1.0) * w).sum() / count for k in ks}
    rank = g + 1.0 + e / 2.0
    out["medr"] = jnp.nanmedian(jnp.where(valid, rank, jnp.nan))
    out["mean_rank"] = (rank * w).sum() / count
    out["count"] = w.sum()
    return out

