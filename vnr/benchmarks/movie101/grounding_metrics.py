"""Temporal grounding algorithms and metrics (Movie101 TNG), pure NumPy / JAX.

- `temporal_iou(a, b)`: IoU of [start, end] spans (broadcasting).
- `shot_alignment(shots, query)`: Movie101 §5.2's positives for global shot retrieval: a
  shot is aligned with a narration when their overlap exceeds half of EITHER duration.
- `retrieval_recall(scores, positives, ks)`: R@k = share of queries with an aligned shot
  among the k best-scored shots.
- `proposal_spans(n)` / `proposal_map_targets`: the 2D-TAN proposal map over n clips
  (proposal (i, j), i <= j, spans clips i..j) and its scaled-IoU targets
  `clip((IoU - t_min) / (t_max - t_min), 0, 1)`.
- `nms_topk(spans, scores, k, thr)`: greedy temporal NMS (IoU > thr suppressed).
- `recall_at_iou(pred, gt, ns, ms)`: "R@n, IoU@m": share of queries whose top-n predicted
  spans contain one with IoU >= m against the ground truth.
- `random_recall(n_clips, gt_clip_spans, m)`: the exact expected R@1 IoU@m of a uniformly
  random valid proposal (the chance level the Must-show compares against).
- `random_retrieval_recall(n_shots, n_pos, ks)`: exact expected R@k of a random shot ranking.
- `two_stage_rank(...)`: Table 6's combination of global shot scores with local proposal
  scores (see its docstring for the choice made).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def temporal_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of spans a [..., 2] and b [..., 2] (start, end), broadcasting."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    inter = np.clip(np.minimum(a[..., 1], b[..., 1]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    union = (a[..., 1] - a[..., 0]) + (b[..., 1] - b[..., 0]) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def shot_alignment(shots: np.ndarray, query: np.ndarray) -> np.ndarray:
    """shots [S, 2], query [2] -> bool [S]: overlap > half of the shot's or the query's length."""
    shots = np.asarray(shots, np.float64)
    inter = np.clip(np.minimum(shots[:, 1], query[1]) - np.maximum(shots[:, 0], query[0]), 0,
                    None)
    return (inter > 0.5 * (shots[:, 1] - shots[:, 0])) | (inter > 0.5 * (query[1] - query[0]))


def cut_shots(duration: float, shot_len: float = 20.0) -> np.ndarray:
    """The movie cut into consecutive `shot_len`-second shots [S, 2] (last one shorter)."""
    starts = np.arange(0.0, max(duration, 1e-9), shot_len)
    return np.stack([starts, np.minimum(starts + shot_len, duration)], -1)


def retrieval_recall(scores: np.ndarray, positives: np.ndarray, ks: Sequence[int] = (1, 5, 10)
                     ) -> dict[str, float]:
    """scores / positives [Q, S] -> {"R@k": share of queries with a positive in the top k}."""
    order = np.argsort(-np.asarray(scores), axis=1, kind="stable")
    hits = np.take_along_axis(np.asarray(positives, bool), order, 1)
    return {f"R@{k}": float(hits[:, :k].any(1).mean()) for k in ks}


def proposal_spans(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(spans [n, n, 2] in clip units: (i, j + 1), valid [n, n] = i <= j)."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return np.stack([i, j + 1], -1).astype(np.float64), i <= j


def proposal_map_targets(n: int, gt: np.ndarray, t_min: float = 0.5, t_max: float = 1.0
                         ) -> tuple[np.ndarray, np.ndarray]:
    """gt [B, 2] in clip units -> (scaled-IoU targets [B, n, n], IoU [B, n, n]); invalid 0."""
    spans, valid = proposal_spans(n)
    iou = temporal_iou(spans[None], np.asarray(gt, np.float64)[:, None, None]) * valid
    return np.clip((iou - t_min) / (t_max - t_min), 0, 1) * valid, iou


def nms_topk(spans: np.ndarray, scores: np.ndarray, k: int, thr: float = 0.5) -> np.ndarray:
    """Greedy NMS: the best k spans [k, 2] (fewer if not enough; padded with the last)."""
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    for idx in order:
        if all(temporal_iou(spans[idx], spans[j]) <= thr for j in keep):
            keep.append(int(idx))
            if len(keep) == k:
                break
    keep += [keep[-1]] * (k - len(keep))
    return spans[keep]


def recall_at_iou(pred: np.ndarray, gt: np.ndarray, ns: Sequence[int] = (1, 5),
                  ms: Sequence[float] = (0.1, 0.3, 0.5, 0.7)) -> dict[str, float]:
    """pred [Q, K, 2] ranked spans, gt [Q, 2] -> {"R@n,IoU@m": value in [0, 1]}."""
    iou = temporal_iou(pred, np.asarray(gt)[:, None])
    return {f"R@{n},IoU@{m}": float((iou[:, :n] >= m).any(1).mean()) for n in ns for m in ms}


def random_recall(n_clips: int, gt: np.ndarray, m: float) -> float:
    """Expected R@1 IoU@m of a uniformly random valid proposal, gt [Q, 2] in clip units."""
    spans, valid = proposal_spans(n_clips)
    iou = temporal_iou(spans[None], np.asarray(gt, np.float64)[:, None, None])
    return float((((iou >= m) & valid).sum((1, 2)) / valid.sum()).mean())


def random_retrieval_recall(n_shots: np.ndarray, n_pos: np.ndarray,
                            ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """Expected R@k of a uniformly random ranking: mean of 1 - C(S-p, k) / C(S, k)."""
    from math import comb

    out = {}
    for k in ks:
        v = [1.0 - comb(int(s) - int(p), min(k, int(s))) / comb(int(s), min(k, int(s)))
             if p > 0 else 0.0 for s, p in zip(n_shots, n_pos)]
        out[f"R@{k}"] = float(np.mean(v)) if v else 0.0
    return out


def two_stage_rank(shot_scores: np.ndarray, window_starts: np.ndarray,
                   window_spans: np.ndarray, window_scores: np.ndarray, k: int,
                   weight: float = 1.0, thr: float = 0.5, top: int = 5) -> np.ndarray:
    """Table 6's two-stage grounding for one narration, k-way re-ranking.

    shot_scores [k]: the global cosine similarities of the k retrieved shots (best first);
    window_starts [k]: each window's start second; window_spans [P, 2] proposal spans in
    seconds relative to a window; window_scores [k, P]: the local model's logits of every
    proposal in each window. Combination (our choice; the paper gives none):
    `log_sigmoid(local logit) + weight * shot_score`, i.e. the log of the local model's IoU
    estimate sigmoid(logit) times exp(weight * cosine), a softmax-style prior over the k
    windows (weight 0: local scores only; large weight: the best shot's window wins).
    Proposals of all k windows are pooled, ranked and greedy-NMS'd (IoU > thr) -> the best
    `top` absolute spans [top, 2] in seconds.
    """
    shot_scores = np.asarray(shot_scores, np.float64)[:k]
    local = np.asarray(window_scores, np.float64)[:k]
    log_sig = -np.logaddexp(0.0, -local)
    combined = log_sig + weight * shot_scores[:, None]
    spans = np.asarray(window_spans, np.float64)[None] + np.asarray(
        window_starts, np.float64)[:k, None, None]
    return nms_topk(spans.reshape(-1, 2), combined.reshape(-1), top, thr)
