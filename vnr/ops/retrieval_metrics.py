"""Retrieval metrics of SYMON §7.2: R@1/5/10 and median rank in both directions.

Items are (video segment, narration sentence) pairs; `sim[i, j]` scores segment i
against sentence j. The protocol, as §7.2 describes it:

* correct: for segment i, the three sentences of the same video nearest to it in
  time (its own sentence included) all count as correct (`relevance`);
  for text -> video, sentence j's correct segments are those whose three
  nearest sentences include j (the transpose), so the two directions share one
  relevance matrix;
* exclusion: candidates from the same movie as the query (other summaries of the
  same film, or other moments of the same video) that are not correct are
  removed from the candidate list, since they may legitimately describe the query;
* rank: 1 + the number of remaining incorrect candidates scored strictly above
  the best-scored correct candidate (ties favour the correct item).

Queries with no correct candidate (impossible with `relevance` on real pairs) are
left out of the means. All functions are pure NumPy on host arrays.
"""

from __future__ import annotations

import numpy as np

KS = (1, 5, 10)


def relevance(video: np.ndarray, center: np.ndarray, nearest: int = 3) -> np.ndarray:
    """bool [N, N]: sentence j is among the `nearest` sentences of the same video to segment i.

    video [N] ints (video of each item); center [N] float seconds (mid-time of item i's
    segment / sentence; the pair shares it). Ties in distance are broken by index.
    """
    video, center = np.asarray(video), np.asarray(center, np.float64)
    n = len(video)
    same = video[:, None] == video[None, :]
    dist = np.where(same, np.abs(center[:, None] - center[None, :]), np.inf)
    order = np.argsort(dist, axis=1, kind="stable")[:, :nearest]
    rel = np.zeros((n, n), bool)
    rows = np.repeat(np.arange(n), order.shape[1])
    rel[rows, order.ravel()] = True
    return rel & same


def exclusion(movie: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """bool [N, N]: candidate j is removed for query i (same movie and not correct)."""
    movie = np.asarray(movie)
    return (movie[:, None] == movie[None, :]) & ~rel


def ranks(sim: np.ndarray, rel: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Rank of the best correct candidate per query row (np.nan if the row has none)."""
    sim = np.asarray(sim, np.float64)
    best = np.where(rel, sim, -np.inf).max(1)
    wrong = ~rel & ~excluded
    above = (wrong & (sim > best[:, None])).sum(1)
    return np.where(rel.any(1), 1.0 + above, np.nan)


def summary(sim: np.ndarray, rel: np.ndarray, excluded: np.ndarray,
            prefix: str = "") -> dict[str, float]:
    """R@1/5/10 (percent) and median rank over the rows of `sim` (queries)."""
    r = ranks(sim, rel, excluded)
    r = r[~np.isnan(r)]
    if not len(r):
        return {f"{prefix}r@{k}": float("nan") for k in KS} | {f"{prefix}medr": float("nan")}
    out = {f"{prefix}r@{k}": float(100.0 * (r <= k).mean()) for k in KS}
    out[f"{prefix}medr"] = float(np.median(r))
    return out


def retrieval_metrics(sim: np.ndarray, video: np.ndarray, movie: np.ndarray,
                      center: np.ndarray, nearest: int = 3) -> dict[str, float]:
    """Both directions: `v2t_*` (segment queries, rows) and `t2v_*` (sentence queries).

    sim [N, N] segment x sentence scores of N paired items; video, movie [N] ids;
    center [N] mid-times in seconds.
    """
    sim = np.asarray(sim)
    if sim.ndim != 2 or sim.shape[0] != sim.shape[1] or sim.shape[0] != len(video):
        raise ValueError(f"retrieval_metrics: sim {sim.shape} must be [N, N] with N = "
                         f"{len(video)} items")
    rel = relevance(video, center, nearest)
    exc = exclusion(movie, rel)
    return summary(sim, rel, exc, "v2t_") | summary(sim.T, rel.T, exc.T, "t2v_")


def random_expectation(video: np.ndarray, movie: np.ndarray, center: np.ndarray,
                       nearest: int = 3, k: int = 10, trials: int = 20,
                       seed: int = 0) -> float:
    """Mean v2t R@k (percent) of random scores on these items (the chance level)."""
    rng = np.random.default_rng(seed)
    rel = relevance(video, center, nearest)
    exc = exclusion(movie, rel)
    n = len(video)
    vals = [summary(rng.normal(size=(n, n)), rel, exc)[f"r@{k}"] for _ in range(trials)]
    return float(np.mean(vals))
