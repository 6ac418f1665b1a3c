"""Alignment at inference (M-SyMoN Appendix E.1, §6.5; SYMON §7.3): a batch of predicted
clip x sentence similarities (`alignment.predict`) -> each clip's sentence (-1: none) by
Drop-DTW on d = 1 - cosine, by the argmax rule with a threshold, or by the transcript-only
baseline; the (d_v, d_t) and threshold grids tuned for F1; and the scores of an alignment
(`score`). The task, its configuration rules and the evaluator: `alignment.py`."""

from __future__ import annotations

from typing import Any

import numpy as np

from vnr.benchmarks.msymon import metrics as am

SCORES = (*am.SUMMARY, "f1_video_mean")  # what `score` reports (under a prefix)
TRANSCRIPTS = ("transcript_", "estimated_transcript_")  # `transcript_prefix`'s two answers
WINDOW_COST = 1e4


def window_mask(out: dict, seconds: float) -> np.ndarray:
    """[B, C, S] True where clip c lies within `seconds` of sentence s's narration."""
    cb, ce = out["clip_begin"][:, :, None], out["clip_end"][:, :, None]
    nb, ne = out["narr_begin"][:, None, :], out["narr_end"][:, None, :]
    return (ce > nb - seconds) & (cb < ne + seconds)


def drop_dtw_alignment(out: dict, ev: Any, d_v: float | None = None,
                       d_t: float | None = None) -> np.ndarray:
    """Per-clip sentence (-1 = dropped) by Drop-DTW on the distance d = 1 - cosine
    (Appendix E.1) with clip drop cost d_v and sentence drop cost d_t (default `ev.d_v` /
    `ev.d_t`; `ev.drop="percentile"`: both from the per-video percentile rule)."""
    from vnr.ops.drop_dtw import drop_dtw, percentile_drop_cost

    cost = 1.0 - np.asarray(out["sim"], np.float32)
    len_x = np.maximum(out["clip_mask"].sum(-1), 1).astype(np.int32)
    len_y = np.maximum(out["sent_mask"].sum(-1), 1).astype(np.int32)
    if ev.drop == "percentile":
        drop_x = drop_y = np.asarray(percentile_drop_cost(cost, ev.keep_percentile, len_x,
                                                          len_y))
    else:
        drop_x = np.full(len(cost), float(ev.d_v if d_v is None else d_v), np.float32)
        drop_y = np.full(len(cost), float(ev.d_t if d_t is None else d_t), np.float32)
    if float(ev.window) > 0:
        cost = np.where(window_mask(out, float(ev.window)), cost, WINDOW_COST)
    _, match = drop_dtw(cost, drop_x, drop_y if ev.drop_sentences else None, len_x, len_y,
                        contiguous=bool(ev.get("contiguous", True)))
    return np.where(out["clip_mask"], np.asarray(match), -1).astype(np.int32)


def tune_drop_costs(out: dict, ev: Any) -> tuple[float, float]:
    """(d_v, d_t) from `ev.drop_grid` x `ev.drop_grid` with the best F1 on `out` (the
    validation videos); ties go to the first in grid order."""
    best, best_f1 = (float(ev.d_v), float(ev.d_t)), -1.0
    for d_v in ev.drop_grid:
        for d_t in ev.drop_grid:
            f = score(out, drop_dtw_alignment(out, ev, float(d_v), float(d_t)))["f1"]
            if f > best_f1:
                best, best_f1 = (float(d_v), float(d_t)), f
    return best


def argmax_alignment(out: dict, threshold: float, window: float = 0.0) -> np.ndarray:
    """Each clip's most similar sentence if the cosine exceeds `threshold`, else -1."""
    sim = np.where(out["sent_mask"][:, None, :], out["sim"], -np.inf)
    if window > 0:
        sim = np.where(window_mask(out, window), sim, -np.inf)
    best = sim.argmax(-1)
    ok = (sim.max(-1) > threshold) & out["clip_mask"]
    return np.where(ok, best, -1).astype(np.int32)


def transcript_alignment(out: dict) -> np.ndarray:
    """The transcript-only baseline (§6.5): each clip takes the sentence whose narration
    (subtitle timestamp) falls in the clip's duration; where several do, the one covering
    most of the clip (the later one on a tie); -1 where none does."""
    cb, ce = out["clip_begin"][:, :, None], out["clip_end"][:, :, None]
    overlap = np.minimum(ce, out["narr_end"][:, None, :]) - np.maximum(
        cb, out["narr_begin"][:, None, :])
    ok = (overlap > 0) & out["sent_mask"][:, None, :] & out["clip_mask"][:, :, None]
    overlap = np.where(ok, overlap, -np.inf)
    s = overlap.shape[-1]
    last = s - 1 - np.argmax(overlap[..., ::-1], -1)  # a later sentence wins a tie
    return np.where(ok.any(-1), last, -1).astype(np.int32)


def transcript_prefix(out: dict) -> str:
    """`transcript_` when every sentence's narration time came from subtitles (the paper's
    baseline); else `estimated_transcript_`: a diagnostic whose missing times come from the
    constant-rate estimate over the video's duration (`data.narration_times`), never the
    paper's baseline."""
    known = out["narr_known"][out["sent_mask"]]
    return TRANSCRIPTS[0] if known.size and known.all() else TRANSCRIPTS[1]


def per_video(pred: np.ndarray, out: dict) -> dict[str, np.ndarray]:
    """Per-video clip accuracy and sentence IoU of `pred` against the ground truth."""
    gt = np.where(out["labels"] == -2, -1, out["labels"]).astype(np.int32)
    dur = np.maximum(out["clip_end"] - out["clip_begin"], 0.0)
    return am.alignment_metrics(pred, gt, dur, out["sim"].shape[-1] if "sim" in out else
                                out["narr_begin"].shape[-1], mask=out["clip_mask"])


def score(outs: dict, pred: np.ndarray, prefix: str = "") -> dict[str, float]:
    """`f1`: the harmonic mean of the two dataset means (our reading of §6.2);
    `f1_video_mean`: the mean of per-video F1s, the other aggregation (REPRODUCING.md)."""
    m = per_video(pred, outs)
    out = am.summarize(m["clip_accuracy"], m["sentence_iou"])
    f1s = np.asarray(m["f1"], np.float64)
    out["f1_video_mean"] = float(np.nanmean(f1s)) if np.isfinite(f1s).any() else float("nan")
    return {prefix + k: v for k, v in out.items()}


def tune_threshold(out: dict, window: float = 0.0) -> float:
    """The argmax threshold with the best F1 on `out` (a grid over cosine values)."""
    best, best_f1 = 0.0, -1.0
    for thr in np.linspace(-0.5, 0.95, 30):
        f = score(out, argmax_alignment(out, float(thr), window))["f1"]
        if f > best_f1:
            best, best_f1 = float(thr), f
    return best
