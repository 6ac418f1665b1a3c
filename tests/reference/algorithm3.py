"""Reference for benchmarks and tests: MoviePuzzle's Algorithm 3 (beam search over orders).

A plain per-clip NumPy/Python transcription of the paper's pseudo-code, kept deliberately
literal (lists of partial orders, a set of placed frames per entry, one stable sort per
step) so that `vnr.ops.permutation_search.beam_search_order` can be checked and timed
against it. Not used by the library itself.
"""

from __future__ import annotations

import numpy as np


def beam_search_clip(
    scores: np.ndarray, n: int, beam_size: int = 10, objective: str = "path"
) -> tuple[list[int], float]:
    """Algorithm 3 for one clip of `n` real frames.

    Step 0 keeps every frame as a start; each later step extends every kept partial order
    by every unplaced frame, sorts all extensions by score (stable, descending) and keeps
    the best `beam_size`. A partial score counts every pair already decided: for "path"
    the consecutive pairs, for "linear" also each placed frame before every unplaced one.

    Args:
      scores: [N, N] array; scores[i, j] = weight of i directly ("path") or anywhere
        ("linear") before j.
      n: number of real frames (the first n indices).
      beam_size: partial orders kept per step.
      objective: "path" or "linear".
    Returns:
      (order as a list of the n frame indices, its total score).
    """
    s = np.asarray(scores, dtype=np.float64)[:n, :n].tolist()
    if objective == "path":
        beam = [(0.0, {i}, [i]) for i in range(n)]  # every start node
    else:  # a start node precedes all others
        beam = [(sum(s[i][k] for k in range(n) if k != i), {i}, [i]) for i in range(n)]
    for _ in range(n - 1):
        extended = []
        for total, placed, seq in beam:
            last = seq[-1]
            for j in range(n):
                if j in placed:
                    continue
                if objective == "path":
                    gain = s[last][j]
                else:  # j precedes every frame still unplaced
                    gain = sum(s[j][k] for k in range(n) if k != j and k not in placed)
                extended.append((total + gain, placed | {j}, seq + [j]))
        extended.sort(key=lambda entry: entry[0], reverse=True)
        beam = extended[:beam_size]
    best = beam[0]
    return best[2], best[0]


def beam_search_batch(
    scores: np.ndarray, mask: np.ndarray, beam_size: int = 10, objective: str = "path"
) -> tuple[np.ndarray, np.ndarray]:
    """Loops `beam_search_clip` over a padded batch; same output convention as the library.

    Args:
      scores: [B, N, N]. mask: bool [B, N], real first. beam_size, objective: as above.
    Returns:
      (order int [B, N] with padded indices appended in increasing order, total [B]).
    """
    B, N = mask.shape
    orders = np.tile(np.arange(N), (B, 1))
    totals = np.zeros(B)
    for b in range(B):
        n = int(mask[b].sum())
        seq, total = beam_search_clip(scores[b], n, beam_size, objective)
        orders[b, :n] = seq
        totals[b] = total
    return orders, totals


def beam_search_clip_numpy(
    scores: np.ndarray, n: int, beam_size: int = 10, objective: str = "path"
) -> tuple[list[int], float]:
    """The same search with each step vectorised in NumPy (a stronger per-clip baseline).

    Args and returns as `beam_search_clip`; ties are broken the same way (stable sort).
    """
    s = np.asarray(scores, dtype=np.float64)[:n, :n].copy()
    np.fill_diagonal(s, 0.0)
    seqs = np.arange(n)[:, None]
    seen = np.eye(n, dtype=bool)
    if objective == "path":
        total = np.zeros(n)
        gain = s.copy()  # gain[row, j] of appending j
    else:
        total = s.sum(1)
        gain = s.sum(1)[None, :] - s.T  # sum over unplaced k != j of s[j, k]
    for _ in range(n - 1):
        cand = np.where(seen, -np.inf, total[:, None] + gain).ravel()
        pick = np.argsort(-cand, kind="stable")[:beam_size]
        pick = pick[np.isfinite(cand[pick])]
        parent, node = np.divmod(pick, n)
        total = cand[pick]
        seqs = np.concatenate([seqs[parent], node[:, None]], 1)
        seen = seen[parent]
        seen[np.arange(len(node)), node] = True
        gain = s[node] if objective == "path" else gain[parent] - s[:, node].T
    return seqs[0].tolist(), float(total[0])
