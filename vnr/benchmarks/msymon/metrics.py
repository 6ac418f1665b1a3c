"""Clip/sentence alignment metrics: clip accuracy, sentence IoU and their F1.

Video-text story alignment as evaluated by NeuMATCH (Dogan et al., CVPR 2018), SYMON (§7.3)
and M-SYMON (§6.2). An alignment is given per clip:

- ``pred [..., C]``, ``gt [..., C]`` int: the sentence index each clip is aligned to,
  ``-1`` = the clip matches no sentence (e.g. ``match_x`` of ``vnr.ops.dtw.drop_dtw``).
- ``durations [..., C]`` float >= 0: clip lengths in seconds (``durations_from_times`` turns
  ``start``/``end`` times into durations). Padding clips: duration 0, or ``mask`` False.

Leading dimensions are free: ``[C]`` is one video and gives scalars, ``[B, C]`` a padded batch
and gives ``[B]``. Inputs may be NumPy or JAX arrays; the result is NumPy when every input is
NumPy, otherwise JAX (the functions then also work under ``jit``, given ``num_sentences``).

Rules (the exact counting, and why):

- ``clip_accuracy`` = sum of the durations of real clips whose predicted sentence equals the
  ground truth / sum of the durations of all real clips. A clip annotated as matching nothing
  counts as correct iff it is predicted as matching nothing (-1 == -1): deciding that a clip
  belongs to no sentence is part of the alignment (Drop-DTW's drops), and NeuMATCH scores
  clips against the null assignment the same way. Weighting by duration is the papers'
  "temporal proportion", so a long clip weighs more than a short one.
- ``sentence_iou`` = mean over sentences of ``|P_s ∩ G_s| / |P_s ∪ G_s|``, where ``P_s`` and
  ``G_s`` are the sets of clips predicted / annotated for sentence ``s`` and ``|.|`` sums their
  durations (for clips that tile the timeline and consecutive clips per sentence, as monotone
  alignments give, this is the IoU of the time spans). The mean runs over the sentences that
  have ground-truth footage (``G_s`` non-empty): the IoU of "predicted and ground-truth
  durations" is only defined for those, and sentences annotated as unmatched (M-SYMON's
  ``"matched": "no"``) have no ground-truth span. Clips wrongly given to such a sentence are
  still penalised twice: as wrong clips in clip accuracy and, when they belong to another
  sentence, as missed footage in that sentence's IoU. ``unmatched_sentences="penalize"``
  additionally averages in an IoU of 0 for every unmatched sentence that received clips
  (sentences empty on both sides stay out: 0/0 is undefined, and counting them as 1 would
  reward predicting nothing).
- ``f1`` = harmonic mean ``2 a u / (a + u)`` (0 when both are 0). The papers report it from
  the dataset-level means: use ``summarize`` for that.

A video with no real duration gives NaN clip accuracy; one with no sentence to average gives
NaN sentence IoU. ``summarize`` averages with NaNs ignored.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "clip_accuracy",
    "sentence_iou",
    "f1",
    "summarize",
    "alignment_metrics",
    "durations_from_times",
]


def _xp(*arrays: Any):
    """NumPy if every given input is NumPy (or a Python value), else jax.numpy."""
    if any(isinstance(a, jax.Array) for a in arrays if a is not None):
        return jnp
    return np


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x))


def _check(pred: Any, gt: Any, durations: Any, mask: Any):
    """Validates shapes and dtypes (no computation); returns the array module to use."""
    xp = _xp(pred, gt, durations, mask)
    if xp is np:
        pred, gt, durations = np.asarray(pred), np.asarray(gt), np.asarray(durations)
        mask = None if mask is None else np.asarray(mask)
    shape = _shape(pred)
    if len(shape) < 1 or _shape(gt) != shape or _shape(durations) != shape:
        raise ValueError(
            "pred, gt and durations must have the same shape [..., C], got "
            f"{shape}, {_shape(gt)}, {_shape(durations)}"
        )
    int_dtypes = all(jnp.issubdtype(jnp.result_type(a), jnp.integer) for a in (pred, gt))
    if not int_dtypes:
        raise ValueError(
            f"pred and gt must be integer arrays, got {jnp.result_type(pred)} and "
            f"{jnp.result_type(gt)}"
        )
    if mask is not None and _shape(mask) != shape:
        raise ValueError(f"mask must have shape {shape}, got {_shape(mask)}")
    if xp is np and np.any(durations < 0):
        raise ValueError("durations must be >= 0")
    return xp, pred, gt, durations, mask


def _weights(xp, durations, mask):
    dur = durations.astype(np.float64 if xp is np else jnp.result_type(float))
    return dur if mask is None else xp.where(mask.astype(bool), dur, 0.0)


def _clip_accuracy(xp, pred, gt, durations, mask):
    dur = _weights(xp, durations, mask)
    total = dur.sum(-1)
    good = xp.where(pred == gt, dur, 0.0).sum(-1)
    safe = xp.where(total > 0, total, 1.0)
    return xp.where(total > 0, good / safe, xp.nan)


def _sentence_iou(xp, pred, gt, durations, mask, num_sentences, unmatched_sentences):
    dur = _weights(xp, durations, mask)
    s = xp.arange(num_sentences)
    p = pred[..., :, None] == s  # [..., C, S]
    g = gt[..., :, None] == s
    w = dur[..., :, None]
    inter = xp.where(p & g, w, 0.0).sum(-2)  # [..., S]
    union = xp.where(p | g, w, 0.0).sum(-2)
    has_gt = xp.where(g, w, 0.0).sum(-2) > 0
    counted = has_gt if unmatched_sentences == "exclude" else union > 0
    iou = xp.where(counted, inter / xp.where(union > 0, union, 1.0), 0.0)
    n = counted.sum(-1)
    return xp.where(n > 0, iou.sum(-1) / xp.where(n > 0, n, 1), xp.nan)


# JAX inputs run as one compiled function each (instead of many small eager ops).
_clip_accuracy_jax = jax.jit(functools.partial(_clip_accuracy, jnp))
_sentence_iou_jax = jax.jit(functools.partial(_sentence_iou, jnp), static_argnums=(4, 5))


def durations_from_times(start: Any, end: Any) -> Any:
    """Clip durations ``end - start`` from ``[..., C]`` start/end times (seconds)."""
    xp = _xp(start, end)
    start, end = xp.asarray(start), xp.asarray(end)
    if start.shape != end.shape:
        raise ValueError(f"start {start.shape} and end {end.shape} must have the same shape")
    return end - start


def clip_accuracy(pred: Any, gt: Any, durations: Any, mask: Any = None) -> Any:
    """Duration-weighted fraction of clips aligned to the right sentence (or rightly to none).

    Args:
      pred: ``[..., C]`` int predicted sentence per clip, -1 = none.
      gt: ``[..., C]`` int ground-truth sentence per clip, -1 = none.
      durations: ``[..., C]`` clip durations (>= 0).
      mask: optional ``[..., C]`` bool, False for padding clips.

    Returns:
      ``[...]`` clip accuracy in [0, 1] (NaN when a video has no real duration).
    """
    xp, pred, gt, durations, mask = _check(pred, gt, durations, mask)
    if xp is np:
        return _clip_accuracy(np, pred, gt, durations, mask)
    return _clip_accuracy_jax(pred, gt, durations, mask)


def sentence_iou(
    pred: Any,
    gt: Any,
    durations: Any,
    num_sentences: int | None = None,
    mask: Any = None,
    unmatched_sentences: str = "exclude",
) -> Any:
    """Mean over sentences of the duration IoU between predicted and ground-truth clips.

    Args:
      pred: ``[..., C]`` int predicted sentence per clip, -1 = none.
      gt: ``[..., C]`` int ground-truth sentence per clip, -1 = none.
      durations: ``[..., C]`` clip durations (>= 0).
      num_sentences: number of sentence slots S (indices >= S are ignored); default
        ``max(pred, gt) + 1`` (needs concrete inputs: pass it under ``jit``).
      mask: optional ``[..., C]`` bool, False for padding clips.
      unmatched_sentences: ``"exclude"`` (average over sentences with ground-truth clips) or
        ``"penalize"`` (also average in 0 for annotated-unmatched sentences given clips).

    Returns:
      ``[...]`` sentence IoU in [0, 1] (NaN when no sentence is counted).
    """
    if unmatched_sentences not in ("exclude", "penalize"):
        raise ValueError(
            f"unmatched_sentences must be 'exclude' or 'penalize', got {unmatched_sentences!r}"
        )
    xp, pred, gt, durations, mask = _check(pred, gt, durations, mask)
    if num_sentences is None:
        if isinstance(pred, jax.core.Tracer) or isinstance(gt, jax.core.Tracer):
            raise ValueError("num_sentences must be given when pred/gt are traced (under jit)")
        size = int(np.prod(_shape(pred)))
        num_sentences = int(max(np.max(pred), np.max(gt))) + 1 if size else 0
    num_sentences = int(num_sentences)
    if num_sentences < 0:
        raise ValueError(f"num_sentences must be >= 0, got {num_sentences}")
    if xp is np:
        return _sentence_iou(np, pred, gt, durations, mask, num_sentences, unmatched_sentences)
    return _sentence_iou_jax(pred, gt, durations, mask, num_sentences, unmatched_sentences)


def f1(clip_acc: Any, sent_iou: Any) -> Any:
    """Harmonic mean of clip accuracy and sentence IoU (elementwise; 0 when both are 0, NaN
    when either is NaN)."""
    xp = _xp(clip_acc, sent_iou)
    a, u = xp.asarray(clip_acc), xp.asarray(sent_iou)
    s = a + u
    return xp.where(s == 0, 0.0, 2.0 * a * u / xp.where(s == 0, 1.0, s))


SUMMARY = ("clip_accuracy", "sentence_iou", "f1")  # the keys of `summarize`


def summarize(clip_acc: Any, sent_iou: Any) -> dict[str, float]:
    """Dataset-level numbers as the papers report them: NaN-ignoring means over videos of
    clip accuracy and sentence IoU, and F1 as the harmonic mean of those two means.

    Args:
      clip_acc: per-video clip accuracies (any shape).
      sent_iou: per-video sentence IoUs (any shape).

    Returns:
      ``SUMMARY`` (clip_accuracy, sentence_iou, f1) -> Python floats.
    """
    a = float(np.nanmean(np.asarray(clip_acc, np.float64)))
    u = float(np.nanmean(np.asarray(sent_iou, np.float64)))
    return dict(zip(SUMMARY, (a, u, float(f1(np.float64(a), np.float64(u)))), strict=True))


def alignment_metrics(
    pred: Any,
    gt: Any,
    durations: Any,
    num_sentences: int | None = None,
    mask: Any = None,
    unmatched_sentences: str = "exclude",
) -> dict[str, Any]:
    """Per-video clip accuracy, sentence IoU and their F1 in one call.

    Args:
      pred, gt, durations, num_sentences, mask, unmatched_sentences: as in
        :func:`sentence_iou`.

    Returns:
      ``{"clip_accuracy": [...], "sentence_iou": [...], "f1": [...]}``.
    """
    a = clip_accuracy(pred, gt, durations, mask)
    u = sentence_iou(pred, gt, durations, num_sentences, mask, unmatched_sentences)
    return {"clip_accuracy": a, "sentence_iou": u, "f1": f1(a, u)}
