"""Retrieval metrics of SYMON §7.2: R@1/5/10 and median rank in both directions.

Items are (video clip, narration text) pairs; `sim[i, j]` scores clip i against text
j. The protocol, as §7.2 describes it:

* correct: "the three closest sentences as correct answers and vice versa": for clip i,
  the three texts of the SAME video nearest to it in time (its own text included) are
  correct (`relevance`); "vice versa": for text j, the three clips of its video nearest
  to it in time are correct (computed separately: nearest-three is not symmetric, so
  this is not the transpose of the clip-side matrix). Distances are between mid-times
  (clip mid-time for clips, text mid-time for texts); ties are broken by index;
* exclusion: "videos of the same movie are removed": every item of ANOTHER summary
  video of the query's movie leaves the candidate pool (it may legitimately describe
  the query); the other clips of the query's own video STAY as candidates (they are
  the hard negatives the task is about);
* rank: 1 + the number of remaining incorrect candidates scored strictly above
  the best-scored correct candidate (ties favour the correct item).

Queries with no correct candidate (impossible with `relevance` on real pairs) are
left out of the means. All functions are pure NumPy on host arrays.
"""

from __future__ import annotations

import numpy as np

KS = (1, 5, 10)


def relevance(video: np.ndarray, center: np.ndarray, nearest: int = 3,
              cand_center: np.ndarray | None = None) -> np.ndarray:
    """bool [N, N]: candidate j is among the `nearest` candidates of query i's video to i.

    video [N] ints (video of each item); center [N] float seconds (mid-time of each query);
    cand_center [N] mid-times of the candidates (default: `center`). Ties by index.
    """
    video, center = np.asarray(video), np.asarray(center, np.float64)
    cand = center if cand_center is None else np.asarray(cand_center, np.float64)
    n = len(video)
    same = video[:, None] == video[None, :]
    dist = np.where(same, np.abs(center[:, None] - cand[None, :]), np.inf)
    order = np.argsort(dist, axis=1, kind="stable")[:, :nearest]
    rel = np.zeros((n, n), bool)
    rows = np.repeat(np.arange(n), order.shape[1])
    rel[rows, order.ravel()] = True
    return rel & same


def exclusion(video: np.ndarray, movie: np.ndarray) -> np.ndarray:
    """bool [N, N]: candidate j is removed for query i (another video of i's movie)."""
    video, movie = np.asarray(video), np.asarray(movie)
    return (movie[:, None] == movie[None, :]) & (video[:, None] != video[None, :])


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


def random_expectation(video: np.ndarray, movie: np.ndarray, center: np.ndarray,
                       nearest: int = 3, k: int = 10, trials: int = 20,
                       seed: int = 0) -> float:
    """Mean v2t R@k (percent) of random scores on these items (the chance level)."""
    rng = np.random.default_rng(seed)
    rel = relevance(video, center, nearest)
    exc = exclusion(video, movie)
    n = len(video)
    vals = [summary(rng.normal(size=(n, n)), rel, exc)[f"r@{k}"] for _ in range(trials)]
    return float(np.mean(vals))
