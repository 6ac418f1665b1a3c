"""Reference for tests and benchmarks: MoviePuzzle's Algorithm 3 (App. C.2), line by line.

`algorithm3` is a plain Python transcription of the printed pseudo-code (per start node a
separate beam list, grown to full length, its best path added to a best list; the best of
the best list is returned). Its line numbers are the paper's. It is kept deliberately
literal (lists of paths, `not in` tests, a stable sort) so that
`vnr.ops.permutation_search.beam_search_order(starts="per_start")` can be checked and timed
against it. `shared_beam` is NOT the paper's algorithm: it is the reference for our
`starts="shared"` option (all start nodes compete for one beam). Not used by the library.

Choices the pseudo-code leaves open, written down here and matched by the library:
- "score" of a path is the sum of S[a, b] over its consecutive pairs (App. C.2: S[i, j]
  is the weight of i placed directly before j). Objective "linear" (ours, not in the
  paper) instead counts every pair already decided: placed frames before unplaced ones.
- "top bsize" keeps the first bsize of a stable descending sort, so ties go to the path
  added first (earlier beam path, then smaller node); `max` returns the first maximum.
- Line 10 truncates after each beam path's extensions are added (as printed, inside the
  loop of line 8); with a stable sort this keeps the same bsize paths as truncating once
  after the loop.
"""

from __future__ import annotations

import numpy as np


def _gain(s: list[list[float]], path: list[int], i: int, n: int, objective: str) -> float:
    """Score added by appending node i to path."""
    if objective == "path":
        return s[path[-1]][i]
    return sum(s[i][k] for k in range(n) if k != i and k not in path)  # i before unplaced k


def _start_score(s: list[list[float]], begin: int, n: int, objective: str) -> float:
    if objective == "path":
        return 0.0
    return sum(s[begin][k] for k in range(n) if k != begin)


def algorithm3(
    scores: np.ndarray, n: int, bsize: int = 10, objective: str = "path"
) -> tuple[list[int], float]:
    """Algorithm 3 (BeamSearch) on the first n nodes of `scores`; returns (path, score)."""
    s = np.asarray(scores, dtype=np.float64)[:n, :n].tolist()
    bestlist = []  # line 1
    # line 2: n is the number of real nodes
    for begin in range(n):  # line 3
        beamlist = [([begin], _start_score(s, begin, n, objective))]  # line 4
        length = 1  # line 5
        while length < n:  # line 6
            newlist = []  # line 7
            for beam_path, score in beamlist:  # line 8
                newlist += [  # line 9
                    (beam_path + [i], score + _gain(s, beam_path, i, n, objective))
                    for i in range(n)
                    if i not in beam_path
                ]
                newlist = sorted(newlist, key=lambda e: e[1], reverse=True)[:bsize]  # line 10
            beamlist = newlist  # line 12
            length += 1  # line 13
        bestlist.append(max(beamlist, key=lambda e: e[1]))  # line 15
    path, score = max(bestlist, key=lambda e: e[1])  # line 17
    return path, score  # line 18


def shared_beam(
    scores: np.ndarray, n: int, bsize: int = 10, objective: str = "path"
) -> tuple[list[int], float]:
    """Ours (starts="shared"), not the paper's: every node starts a partial order, and each
    step keeps the best bsize extensions of all kept orders together."""
    s = np.asarray(scores, dtype=np.float64)[:n, :n].tolist()
    beam = [([i], _start_score(s, i, n, objective)) for i in range(n)]
    for _ in range(n - 1):
        extended = [
            (path + [j], score + _gain(s, path, j, n, objective))
            for path, score in beam
            for j in range(n)
            if j not in path
        ]
        beam = sorted(extended, key=lambda e: e[1], reverse=True)[:bsize]
    return beam[0]


def batch(
    scores: np.ndarray,
    mask: np.ndarray,
    bsize: int = 10,
    objective: str = "path",
    starts: str = "per_start",
) -> tuple[np.ndarray, np.ndarray]:
    """Loops `algorithm3` (or `shared_beam`) over a padded batch, in the library's layout.

    Args:
      scores: [B, N, N]. mask: bool [B, N], real first. bsize, objective: as above.
      starts: "per_start" (Algorithm 3) or "shared" (ours).
    Returns:
      (order int [B, N] with padded indices appended in increasing order, total [B]).
    """
    fn = algorithm3 if starts == "per_start" else shared_beam
    B, N = mask.shape
    orders = np.tile(np.arange(N), (B, 1))
    totals = np.zeros(B)
    for b in range(B):
        n = int(mask[b].sum())
        seq, total = fn(scores[b], n, bsize, objective)
        orders[b, :n] = seq
        totals[b] = total
    return orders, totals
