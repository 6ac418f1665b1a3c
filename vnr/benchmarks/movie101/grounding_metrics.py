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
- `inclusive_iou`, `to_index_boxes`, `nms_upstream`, `recall_upstream`,
  `random_recall_upstream`: the TNG protocol of Movie101's RNL evaluation (criteria.py):
  index boxes with both ends included, NMS at m - 0.05 for each IoU threshold m, at most 7
  picks. Tables 4-6 are scored with these; `temporal_iou` / `nms_topk` / `recall_at_iou`
  (continuous spans) stay for the global stage's shot alignment and other callers.
- `two_stage_candidates(...)`: Table 6's k-way re-ranking (pooled proposals of the k
  windows ranked by local confidence; the shot-cosine prior only as a named option).
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


def cut_shots(duration: float, shot_len: float = 20.0, offset: float = 0.0) -> np.ndarray:
    """The movie cut into consecutive `shot_len`-second shots [S, 2] (last one shorter) on
    the grid offset + k * shot_len (Movie101-R-temp's per-movie offsets); with offset % L > 0
    the seconds before the first grid point are one shorter leading shot."""
    o = float(offset) % shot_len
    starts = np.arange(o, max(duration, o + 1e-9), shot_len)
    if o > 0:
        starts = np.concatenate([[0.0], starts])
    return np.stack([starts, np.minimum(np.append(starts[1:], np.inf), duration)], -1)


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


def inclusive_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of index boxes [..., 2] = (first, last) index, both included (the TNG evaluation
    of Movie101's RNL code): (min end - max start + 1) / (max end - min start + 1), 0 when
    negative. Broadcasting."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    inter = np.minimum(a[..., 1], b[..., 1]) - np.maximum(a[..., 0], b[..., 0]) + 1
    union = np.maximum(a[..., 1], b[..., 1]) - np.minimum(a[..., 0], b[..., 0]) + 1
    iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
    return np.maximum(iou, 0.0)


def to_index_boxes(spans: np.ndarray) -> np.ndarray:
    """Continuous [start, end) spans in clip (or second) units -> inclusive index boxes
    [floor(start), max(floor(start), ceil(end) - 1)] (the clips a span touches)."""
    spans = np.asarray(spans, np.float64)
    first = np.floor(spans[..., 0] + 1e-9)
    last = np.maximum(first, np.ceil(spans[..., 1] - 1e-9) - 1)
    return np.stack([first, last], -1)


MAX_PICKS = 7  # the upstream NMS loop stops after its 7th pick


def nms_upstream(scores: np.ndarray, boxes: np.ndarray, overlap: float) -> list[int]:
    """Greedy temporal NMS as Movie101's RNL evaluation: candidates by descending score
    (equal scores: the later index first), a candidate is dropped when its overlap with the
    pick exceeds `overlap`, overlap = inter / (len_a + len_b - inter) with len = last -
    first of the index boxes (NOT the inclusive IoU; two one-index boxes give 0/0, which
    never passes the `<= overlap` test, so the later one is dropped), at most MAX_PICKS."""
    scores, boxes = np.asarray(scores, np.float64), np.asarray(boxes, np.float64)
    idx = np.argsort(scores, kind="stable")  # ascending; the pick is the last one
    lens = boxes[:, 1] - boxes[:, 0]
    picks: list[int] = []
    while len(idx):
        i = int(idx[-1])
        picks.append(i)
        if len(picks) == MAX_PICKS:
            break
        rest = idx[:-1]
        inter = np.maximum(0.0, np.minimum(boxes[i, 1], boxes[rest, 1])
                           - np.maximum(boxes[i, 0], boxes[rest, 0]))
        den = lens[i] + lens[rest] - inter
        with np.errstate(divide="ignore", invalid="ignore"):
            lap = inter / den
        idx = rest[lap <= overlap]  # NaN (0/0) compares False: dropped
    return picks


def recall_upstream(scores: np.ndarray, boxes: np.ndarray, gt: np.ndarray,
                    ns: Sequence[int] = (1, 5), ms: Sequence[float] = (0.1, 0.3, 0.5, 0.7)
                    ) -> dict[str, float]:
    """"R@n, IoU@m" of Movie101's TNG evaluation for one query or a batch: for each m the
    candidates are NMS'd at m - 0.05 (`nms_upstream`) and a query counts when one of its
    first n picks has inclusive IoU >= m with the ground-truth index box.
    scores [Q, P] / boxes [Q, P, 2] (or [P, 2] shared) / gt [Q, 2] -> shares in [0, 1]."""
    scores = np.atleast_2d(np.asarray(scores, np.float64))
    gt = np.atleast_2d(np.asarray(gt, np.float64))
    boxes = np.asarray(boxes, np.float64)
    if boxes.ndim == 2:
        boxes = np.broadcast_to(boxes, (len(scores), *boxes.shape))
    hits = {(n, m): 0 for n in ns for m in ms}
    for s, b, g in zip(scores, boxes, gt):
        for m in ms:
            picks = nms_upstream(s, b, m - 0.05)
            ok = inclusive_iou(b[picks], g) >= m
            for n in ns:
                hits[n, m] += bool(ok[:n].any())
    q = max(len(scores), 1)
    return {f"R@{n},IoU@{m}": hits[n, m] / q for n in ns for m in ms}


def random_recall_upstream(boxes: np.ndarray, gt: np.ndarray, m: float) -> float:
    """Expected R@1 IoU@m (inclusive IoU) of one uniformly random candidate of `boxes`
    [P, 2] (index boxes) for every ground truth gt [Q, 2]."""
    iou = inclusive_iou(np.asarray(boxes)[None], np.asarray(gt)[:, None])
    return float((iou >= m).mean(1).mean()) if len(iou) else 0.0


def two_stage_candidates(shot_scores: np.ndarray, window_starts: np.ndarray,
                         window_spans: np.ndarray, window_scores: np.ndarray, k: int,
                         prior_weight: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Table 6's k-way re-ranking for one narration: the local model runs in a window
    around each of the k best shots and ALL proposals of the k windows are pooled and ranked
    by their confidence, sigmoid(local logit) (§5.2: "re-ranked with their confidence
    scores"). `prior_weight` > 0 is OUR named option: confidence x exp(prior_weight x shot
    cosine), i.e. a softmax-style prior of the shot retrieval (0 = the paper's rule).

    shot_scores [k] (global cosine of the retrieved shots, best first), window_starts [k]
    (seconds), window_spans [P, 2] proposal spans in seconds relative to a window,
    window_scores [k, P] local logits -> (absolute spans [k*P, 2] in seconds, scores
    [k*P]) for `recall_upstream` (after `to_index_boxes`)."""
    shot = np.asarray(shot_scores, np.float64)[:k]
    local = np.asarray(window_scores, np.float64)[:k]
    score = -np.logaddexp(0.0, -local) + prior_weight * shot[:, None]  # log of the rule
    spans = np.asarray(window_spans, np.float64)[None] + np.asarray(
        window_starts, np.float64)[:k, None, None]
    return spans.reshape(-1, 2), score.reshape(-1)
