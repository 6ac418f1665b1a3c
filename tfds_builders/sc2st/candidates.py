"""Sc2St candidate sets (paper §4.1.3), pure NumPy.

For every ground-truth keyframe a storyboard asks for (positions 2..10), the
candidate set is that keyframe plus `num_candidates - 1` (99) incorrect ones:

* `round(similar_frac * 99)` = 69 *similar*: the keyframes nearest to the ground
  truth by cosine of their image features; of these `round(same_movie_frac * 69)`
  = 21 are the nearest from the same movie, the other 48 the nearest from other
  movies;
* the remaining 30 *random*: uniform without replacement, again
  `round(0.3 * 30)` = 9 from the same movie and 21 from other movies.

Choices the paper leaves open, made here: candidates come only from the pool of
the storyboard's own split (so no candidate is shared across splits) and never
from the storyboard itself (its other keyframes are history or future, not
distractors); random ones are drawn after the similar ones, from what is left;
when a movie has too few keyframes for its same-movie share the shortfall is
taken from other movies (counted in `stats["same_movie_shortfall"]`). The 100
are shuffled, and `answer` is the index of the ground truth. Everything is a
function of (seed, split, query index), so any split rebuilds identically.

Isolated keyframes (§4.1.3: candidates "can include" keyframes that belong to no
storyboard, the pairs story formation dropped) join the pool after the storyboards'
keyframes (`extra_features`, `extra_movies`). They compete for every category on equal
terms (their movie decides same / other movie), so the counted proportions stay as above;
they are never a ground truth.

Pool index of keyframe (storyboard b, position p) is `b * length + p`; isolated keyframe k
of the split is `N * length + k`.
"""

from __future__ import annotations

import collections

import numpy as np


def category_counts(num_candidates: int = 100, similar_frac: float = 0.7,
                    same_movie_frac: float = 0.3) -> dict[str, int]:
    """How many incorrect candidates of each kind (they sum to num_candidates - 1)."""
    n = num_candidates - 1
    sim = int(round(similar_frac * n))
    rnd = n - sim
    sim_same = int(round(same_movie_frac * sim))
    rnd_same = int(round(same_movie_frac * rnd))
    return {"similar_same": sim_same, "similar_other": sim - sim_same,
            "random_same": rnd_same, "random_other": rnd - rnd_same}


def _top(scores: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    """The `k` entries of `idx` with the highest `scores[idx]` (ties: lower index first)."""
    if k <= 0 or len(idx) == 0:
        return idx[:0]
    s = scores[idx]
    if k < len(idx):
        part = np.argpartition(-s, k - 1)[:k]
        idx, s = idx[part], s[part]
    order = np.lexsort((idx, -s))
    return idx[order][:k]


def sample_candidates(features: np.ndarray, movies: np.ndarray, *, seed: int, split_code: int,
                      positions: tuple[int, ...] = tuple(range(1, 10)),
                      num_candidates: int = 100, similar_frac: float = 0.7,
                      same_movie_frac: float = 0.3, block: int = 512,
                      stats: collections.Counter | None = None,
                      extra_features: np.ndarray | None = None,
                      extra_movies: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Candidate sets for every storyboard of one split.

    Args:
      features: float [N, L, D] keyframe features of the split's N storyboards.
      movies: [N] movie id of each storyboard (any hashable dtype).
      seed, split_code: the randomness (split_code distinguishes splits).
      positions: 0-based positions asked for (default 1..9, i.e. rounds t = 2..10).
      num_candidates: set size including the ground truth.
      similar_frac, same_movie_frac: the paper's 70% / 30%.
      block: queries per similarity matmul.
      stats: optional counter for shortfalls (and `isolated_candidates`, how many
        candidate slots an isolated keyframe fills).
      extra_features, extra_movies: float [M, D] / [M] isolated keyframes of the split
        (in no storyboard), pool indices N * L .. N * L + M - 1.

    Returns:
      (candidates int32 [N, len(positions), C] pool indices, answer int32 [N, len(positions)]).
    """
    n, length, dim = features.shape
    if extra_features is None:
        extra_features, extra_movies = np.zeros((0, dim), np.float32), np.asarray(movies)[:0]
    if extra_movies is None or len(extra_movies) != len(extra_features):
        raise ValueError(f"extra_movies must give the movie of each of the "
                         f"{len(extra_features)} isolated keyframes")
    m = len(extra_features)
    pool = np.concatenate([features.reshape(n * length, -1), extra_features]).astype(np.float32)
    pool = pool / np.maximum(np.linalg.norm(pool, axis=-1, keepdims=True), 1e-12)
    movie_of = np.concatenate([np.repeat(np.asarray(movies), length), np.asarray(extra_movies)])
    board_of = np.concatenate([np.repeat(np.arange(n), length), np.full(m, -1)])
    counts = category_counts(num_candidates, similar_frac, same_movie_frac)
    if len(pool) - length < num_candidates - 1:
        raise ValueError(f"a split of {n} storyboards and {m} isolated keyframes has only "
                         f"{len(pool) - length} keyframes outside each storyboard; "
                         f"{num_candidates - 1} incorrect candidates are needed per set "
                         "(build more storyboards or fewer candidates)")
    queries = np.array([b * length + p for b in range(n) for p in positions], np.int64)
    cands = np.zeros((len(queries), num_candidates), np.int32)
    answer = np.zeros((len(queries),), np.int32)
    stats = stats if stats is not None else collections.Counter()
    movie_members = {m: np.flatnonzero(movie_of == m) for m in np.unique(movie_of)}
    for lo in range(0, len(queries), block):
        q = queries[lo:lo + block]
        sims = pool[q] @ pool.T
        for r, qi in enumerate(q):
            rng = np.random.default_rng([seed, split_code, int(qi)])
            b = board_of[qi]
            same = movie_members[movie_of[qi]]
            same = same[board_of[same] != b]
            other_mask = movie_of != movie_of[qi]
            other = np.flatnonzero(other_mask)
            s = sims[r]
            sim_same = _top(s, same, counts["similar_same"])
            short = counts["similar_same"] - len(sim_same)
            sim_other = _top(s, other, counts["similar_other"] + short)
            lack = counts["similar_other"] + short - len(sim_other)
            if lack:  # too few other-movie keyframes: the next most similar of the movie
                more = _top(s, np.setdiff1d(same, sim_same), lack)
                sim_other = np.concatenate([sim_other, more])
                stats["other_movie_shortfall"] += lack
            chosen = np.concatenate([sim_same, sim_other])
            taken = np.zeros(len(pool), bool)
            taken[chosen] = True
            rest_same = same[~taken[same]]
            k_same = min(counts["random_same"], len(rest_same))
            rnd_same = rng.choice(rest_same, k_same, replace=False) if k_same else rest_same[:0]
            rest_other = other[~taken[other]]
            need = counts["random_other"] + counts["random_same"] - k_same
            short += counts["random_same"] - k_same
            if need > len(rest_other):  # too few other-movie keyframes: fill from the movie
                extra_pool = np.setdiff1d(rest_same, rnd_same)
                rnd_other = rest_other
                fill = rng.choice(extra_pool, need - len(rest_other), replace=False)
                rnd_other = np.concatenate([rnd_other, fill])
                stats["other_movie_shortfall"] += need - len(rest_other)
            else:
                rnd_other = rng.choice(rest_other, need, replace=False)
            if short:
                stats["same_movie_shortfall"] += short
            row = np.concatenate([[qi], chosen, rnd_same, rnd_other]).astype(np.int64)
            if m and (iso := int((row >= n * length).sum())):
                stats["isolated_candidates"] += iso
            order = rng.permutation(num_candidates)
            cands[lo + r] = row[order]
            answer[lo + r] = int(np.flatnonzero(order == 0)[0])
    shape = (n, len(positions))
    return cands.reshape(*shape, num_candidates), answer.reshape(shape)
