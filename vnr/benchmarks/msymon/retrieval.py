"""Text-to-video retrieval (M-SyMoN Appendix D, Tables 10-13): R@1/5/10 and mean rank.

Each annotated (matched, with footage) sentence is a query; the candidates are the clips of
its own video, ranked by cosine similarity; a clip is relevant when the ground truth gives it
that sentence. R@k is the fraction of queries with a relevant clip among the k most similar;
the rank of a query is the 1-based position of its best-ranked relevant clip, and MR is the
mean of those ranks. The paper does not say whether candidates come from one video or the
whole test set: the video's own clips are our choice (the alignment task's setting).
"""

from __future__ import annotations

import numpy as np

KS = (1, 5, 10)


def query_ranks(sim: np.ndarray, labels: np.ndarray, clip_mask: np.ndarray,
                sent_mask: np.ndarray) -> np.ndarray:
    """Ranks [Q] of every query of a batch ([B, C, S] cosine, [B, C] labels)."""
    ranks = []
    for b in range(sim.shape[0]):
        s_b = np.where(clip_mask[b][:, None], sim[b], -np.inf)  # [C, S]
        for s in np.flatnonzero(sent_mask[b]):
            relevant = (labels[b] == s) & clip_mask[b]
            if not relevant.any():
                continue
            order = np.argsort(-s_b[:, s], kind="stable")
            ranks.append(int(np.flatnonzero(relevant[order])[0]) + 1)
    return np.asarray(ranks, np.int64)


def retrieval_metrics(sim: np.ndarray, labels: np.ndarray, clip_mask: np.ndarray,
                      sent_mask: np.ndarray) -> dict[str, float]:
    """{r1, r5, r10, mean_rank, queries}; NaN rates when there is no query."""
    ranks = query_ranks(np.asarray(sim), np.asarray(labels), np.asarray(clip_mask, bool),
                        np.asarray(sent_mask, bool))
    out = {f"r{k}": float((ranks <= k).mean()) if len(ranks) else float("nan") for k in KS}
    out["mean_rank"] = float(ranks.mean()) if len(ranks) else float("nan")
    out["queries"] = float(len(ranks))
    return out
