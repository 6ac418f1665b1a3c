"""Text-to-video retrieval (M-SyMoN Appendix D, Tables 10-13): R@1/5/10 and mean rank.

Appendix D: the clips and the sentences are "both from all videos in the test set"; each
annotated sentence (matched, with footage) is a query, scored by cosine similarity against
EVERY clip of the split (`pooled_retrieval_metrics`, reported as `r1`, `r5`, `r10`,
`mean_rank`, with `queries`, `pool_clips` and `pool_videos`). A clip is relevant when the
ground truth gives it that sentence (so only clips of the query's own video can be). R@k is
the fraction of queries with a relevant clip among the k most similar; the rank of a query
is the 1-based position of its best-ranked relevant clip, and MR is the mean of those ranks.

Ranks come from `vnr.ops.ranking` with the tie policy "index": clips in split order (video
by video, in time), a stable sort by descending similarity (ours; the paper does not say).
The pool is computed block by block, so it never holds the [queries, clips] matrix.

`retrieval_metrics` is the same over the clips of the query's own video only (ours, named
`video_pool_*` in the results: the alignment task's setting, which is easier).
"""

from __future__ import annotations

import jax
import numpy as np

from vnr.ops import ranking

KS = (1, 5, 10)
TIE = "index"
SUMMARY = (*(f"r{k}" for k in KS), "mean_rank", "queries")  # `retrieval_metrics`' keys
POOLED = (*SUMMARY, "pool_clips", "pool_videos")  # `pooled_retrieval_metrics`' keys


def _summary(r: np.ndarray, prefix: str = "") -> dict[str, float]:
    r = r[~np.isnan(r)]
    out = {f"{prefix}r{k}": float((r <= k).mean()) if len(r) else float("nan") for k in KS}
    out[f"{prefix}mean_rank"] = float(r.mean()) if len(r) else float("nan")
    out[f"{prefix}queries"] = float(len(r))
    return out


def query_ranks(sim: np.ndarray, labels: np.ndarray, clip_mask: np.ndarray,
                sent_mask: np.ndarray) -> np.ndarray:
    """Ranks [Q] of every query of a batch among its own video's clips ([B, C, S] cosine,
    [B, C] labels), in (video, sentence) order."""
    s = np.asarray(sim).shape[-1]
    scores = np.swapaxes(np.asarray(sim), 1, 2)  # [B, S, C]
    positive = np.asarray(labels)[:, None, :] == np.arange(s)[None, :, None]
    stats = ranking.rank_stats(scores, positive, np.asarray(clip_mask, bool)[:, None, :])
    r = np.asarray(ranking.rank(stats, TIE), np.float64)
    return r[np.asarray(sent_mask, bool) & ~np.isnan(r)].astype(np.int64)


def retrieval_metrics(sim: np.ndarray, labels: np.ndarray, clip_mask: np.ndarray,
                      sent_mask: np.ndarray) -> dict[str, float]:
    """Per-video pool: {r1, r5, r10, mean_rank, queries}; NaN rates when there is no query."""
    return _summary(query_ranks(sim, labels, clip_mask, sent_mask).astype(np.float64))


def pooled_retrieval_metrics(v: np.ndarray, t: np.ndarray, labels: np.ndarray,
                             clip_mask: np.ndarray, sent_mask: np.ndarray,
                             mesh: jax.sharding.Mesh | None = None) -> dict[str, float]:
    """Appendix D's pool: every sentence of the split against every clip of the split.

    Args:
      v: [B, C, E] unit clip embeddings; t: [B, S, E] unit sentence embeddings.
      labels: [B, C] sentence index per clip (-1 none); clip_mask [B, C]; sent_mask [B, S].
      mesh: split the queries over its "data" axis.

    Returns:
      {r1, r5, r10, mean_rank, queries, pool_clips, pool_videos}.
    """
    v, t = np.asarray(v, np.float32), np.asarray(t, np.float32)
    labels = np.asarray(labels)
    clip_mask, sent_mask = np.asarray(clip_mask, bool), np.asarray(sent_mask, bool)
    b_idx, c_idx = np.nonzero(clip_mask)  # candidates in split order
    cand = v[b_idx, c_idx]
    flat = np.full(clip_mask.shape, -1, np.int64)
    flat[b_idx, c_idx] = np.arange(len(b_idx))
    rows = []  # (video, sentence, candidate indices of its clips)
    for b in range(len(labels)):
        for s in np.flatnonzero(sent_mask[b]):
            hits = flat[b][(labels[b] == s) & clip_mask[b]]
            if len(hits):
                rows.append((b, s, hits))
    out = {"pool_clips": float(len(cand)), "pool_videos": float(clip_mask.any(1).sum())}
    if not rows:
        return _summary(np.zeros(0)) | out
    positives = np.full((len(rows), max(len(h) for _, _, h in rows)), -1, np.int64)
    for i, (_, _, hits) in enumerate(rows):
        positives[i, :len(hits)] = hits
    queries = t[[b for b, _, _ in rows], [s for _, s, _ in rows]]
    stats = ranking.rank_stats_blockwise(queries, cand, positives, mesh=mesh)
    return _summary(np.asarray(ranking.rank(stats, TIE), np.float64)) | out
