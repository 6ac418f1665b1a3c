"""Retrieval metrics of SYMON §7.2: R@1/5/10 and median rank in both directions.

Items are (video clip, narration text) pairs; clip i is scored against text j. The
protocol, as §7.2 describes it:

* correct: "the three closest sentences as correct answers and vice versa": for clip i,
  the three texts of the SAME video nearest to it in time (its own text included) are
  correct (`relevance`, `nearest_positives`); "vice versa": for text j, the three clips of
  its video nearest to it in time are correct (computed separately: nearest-three is not
  symmetric, so this is not the transpose of the clip-side matrix). Distances are between
  mid-times (clip mid-time for clips, text mid-time for texts); ties are broken by index;
* exclusion: "videos of the same movie are removed": every item of ANOTHER summary
  video of the query's movie leaves the candidate pool (it may legitimately describe
  the query); the other clips of the query's own video STAY as candidates (they are
  the hard negatives the task is about);
* rank: 1 + the number of remaining incorrect candidates scored strictly above
  the best-scored correct candidate: `vnr.ops.ranking` with tie policy "optimistic"
  (ties favour the correct item; the paper does not say, ours).

Queries with no correct candidate (impossible with `relevance` on real pairs) are
left out of the means. Two entry points with the same numbers:

* `retrieval_metrics(sim, ...)`: a given [N, N] score matrix (small N: tests, analyses);
* `embedding_retrieval_metrics(v, t, ...)`: scores v @ t.T computed blockwise by
  `ranking.rank_stats_blockwise` (memory independent of N x N; queries sharded over a
  mesh), the positives as index lists (`nearest_positives`). This is what evaluation runs.

`chance_recall` is the exact expected R@k of random scores on the same items.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from vnr.ops import ranking

KS = (1, 5, 10)
TIE = "optimistic"
DIRECTIONS = ("v2t_", "t2v_")  # clip queries, text queries
# Every key `retrieval_metrics` / `embedding_retrieval_metrics` report.
NAMES = tuple(f"{d}{m}" for d in DIRECTIONS for m in (*(f"r@{k}" for k in KS), "medr"))


def relevance(video: np.ndarray, center: np.ndarray, nearest: int = 3,
              cand_center: np.ndarray | None = None) -> np.ndarray:
    """bool [N, N]: candidate j is among the `nearest` candidates of query i's video to i.

    video [N] ints (video of each item); center [N] float seconds (mid-time of each query);
    cand_center [N] mid-times of the candidates (default: `center`). Ties by index.
    """
    video = np.asarray(video)
    pos = nearest_positives(video, center, nearest, cand_center)
    n = len(video)
    rel = np.zeros((n, n), bool)
    rows = np.repeat(np.arange(n), pos.shape[1])
    keep = pos.ravel() >= 0
    rel[rows[keep], pos.ravel()[keep]] = True
    return rel


def nearest_positives(video: np.ndarray, center: np.ndarray, nearest: int = 3,
                      cand_center: np.ndarray | None = None) -> np.ndarray:
    """int [N, nearest]: the `nearest` candidates of query i's own video closest to i in time
    (ties by index), -1 where the video has fewer. Memory O(N + max video size ^ 2)."""
    video = np.asarray(video)
    center = np.asarray(center, np.float64)
    cand = center if cand_center is None else np.asarray(cand_center, np.float64)
    out = np.full((len(video), nearest), -1, np.int64)
    order = np.argsort(video, kind="stable")
    starts = np.flatnonzero(np.r_[True, video[order][1:] != video[order][:-1]])
    for a, b in zip(starts, [*starts[1:], len(order)], strict=True):
        idx = order[a:b]  # this video's items, ascending index
        dist = np.abs(center[idx][:, None] - cand[idx][None, :])
        near = idx[np.argsort(dist, axis=1, kind="stable")[:, :nearest]]
        out[idx, :near.shape[1]] = near
    return out


def exclusion(video: np.ndarray, movie: np.ndarray) -> np.ndarray:
    """bool [N, N]: candidate j is removed for query i (another video of i's movie)."""
    video, movie = np.asarray(video), np.asarray(movie)
    return (movie[:, None] == movie[None, :]) & (video[:, None] != video[None, :])


def in_pool(query: dict[str, jax.Array], cand: dict[str, jax.Array]) -> jax.Array:
    """bool [Qb, Nb]: the block form of ~`exclusion` (the pool rule of the blockwise op)."""
    same_movie = query["movie"][:, None] == cand["movie"][None, :]
    return ~same_movie | (query["video"][:, None] == cand["video"][None, :])


def ranks(sim: np.ndarray, rel: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Rank of the best correct candidate per query row (np.nan if the row has none)."""
    stats = ranking.rank_stats(jnp.asarray(sim), jnp.asarray(rel), ~jnp.asarray(excluded))
    return np.asarray(ranking.rank(stats, TIE), np.float64)


def _summary(r: np.ndarray, prefix: str) -> dict[str, float]:
    r = r[~np.isnan(r)]
    if not len(r):
        return {f"{prefix}r@{k}": float("nan") for k in KS} | {f"{prefix}medr": float("nan")}
    out = {f"{prefix}r@{k}": float(100.0 * (r <= k).mean()) for k in KS}
    out[f"{prefix}medr"] = float(np.median(r))
    return out


def summary(sim: np.ndarray, rel: np.ndarray, excluded: np.ndarray,
            prefix: str = "") -> dict[str, float]:
    """R@1/5/10 (percent) and median rank over the rows of `sim` (queries)."""
    return _summary(ranks(sim, rel, excluded), prefix)


def retrieval_metrics(sim: np.ndarray, video: np.ndarray, movie: np.ndarray,
                      center: np.ndarray, nearest: int = 3,
                      text_center: np.ndarray | None = None) -> dict[str, float]:
    """Both directions: `v2t_*` (clip queries, rows) and `t2v_*` (text queries, columns).

    sim [N, N] clip x text scores of N paired items; video, movie [N] ids; center [N]
    clip mid-times and text_center [N] text mid-times in seconds (default: `center`).
    """
    sim = np.asarray(sim)
    if sim.ndim != 2 or sim.shape[0] != sim.shape[1] or sim.shape[0] != len(video):
        raise ValueError(f"retrieval_metrics: sim {sim.shape} must be [N, N] with N = "
                         f"{len(video)} items")
    tc = center if text_center is None else text_center
    exc = exclusion(video, movie)  # symmetric
    return (summary(sim, relevance(video, center, nearest, tc), exc, "v2t_")
            | summary(sim.T, relevance(video, tc, nearest, center), exc, "t2v_"))


def embedding_retrieval_metrics(v: np.ndarray, t: np.ndarray, video: np.ndarray,
                                movie: np.ndarray, center: np.ndarray, nearest: int = 3,
                                text_center: np.ndarray | None = None,
                                mesh: jax.sharding.Mesh | None = None,
                                block_queries: int = 1024, block_candidates: int = 8192
                                ) -> dict[str, float]:
    """`retrieval_metrics(v @ t.T, ...)` without the N x N matrix (module docstring).

    v, t [N, D] clip / text embeddings of N paired items (score = dot product).
    """
    v, t = np.asarray(v, np.float32), np.asarray(t, np.float32)
    if v.shape != t.shape or v.ndim != 2 or len(v) != len(video):
        raise ValueError(f"embedding_retrieval_metrics: v {v.shape} and t {t.shape} must be "
                         f"[N, D] with N = {len(video)} items")
    tc = center if text_center is None else text_center
    attrs = {"video": np.asarray(video, np.int32), "movie": np.asarray(movie, np.int32)}
    out: dict[str, float] = {}
    for prefix, q, c, qc, cc in (("v2t_", v, t, center, tc), ("t2v_", t, v, tc, center)):
        stats = ranking.rank_stats_blockwise(
            q, c, nearest_positives(video, qc, nearest, cc), pool_fn=in_pool,
            query_attrs=attrs, candidate_attrs=attrs, mesh=mesh,
            block_queries=block_queries, block_candidates=block_candidates)
        out |= _summary(np.asarray(ranking.rank(stats, TIE), np.float64), prefix)
    return out


def chance_recall(video: np.ndarray, movie: np.ndarray, nearest: int = 3, k: int = 10
                  ) -> float:
    """Expected v2t R@k (percent) of random scores on these items, exactly: a query with
    M candidates in its pool and p correct ones finds one in the top k with probability
    1 - C(M - p, k) / C(M, k). O(N) memory."""
    video, movie = np.asarray(video), np.asarray(movie)
    n = len(video)
    _, v_idx, v_count = np.unique(video, return_inverse=True, return_counts=True)
    movie_of_video = np.zeros(len(v_count), movie.dtype)
    movie_of_video[v_idx] = movie
    _, m_idx = np.unique(movie_of_video, return_inverse=True)
    movie_items = np.bincount(m_idx, weights=v_count)
    own = v_count[v_idx]
    pool = n - (movie_items[m_idx[v_idx]] - own)  # minus the other videos of the movie
    p = np.minimum(own, nearest)
    pairs, count = np.unique(np.stack([pool, p], 1).astype(np.int64), axis=0,
                             return_counts=True)
    miss = [math.comb(int(m - q), k) / math.comb(int(m), k) if m >= k else 0.0
            for m, q in pairs]
    return float(100.0 * (1.0 - np.dot(miss, count) / n)) if n else float("nan")


def random_expectation(video: np.ndarray, movie: np.ndarray, center: np.ndarray,
                       nearest: int = 3, k: int = 10) -> float:
    """Mean v2t R@k (percent) of random scores on these items (the chance level): exact,
    `chance_recall` (the item times do not change it)."""
    del center
    return chance_recall(video, movie, nearest, k)
