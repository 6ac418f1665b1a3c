"""Movie101 TNG glue: RNL local grounding in a window around each narration.

Training: binary cross-entropy of every valid proposal's score against its scaled IoU
(2D-TAN, t_min = 0.5, t_max = 1.0). Evaluation: proposals ranked by score, greedy NMS
(IoU 0.5), "R@n, IoU@m" for n in {1, 5}, m in {0.1, 0.3, 0.5, 0.7} (in percent), plus
`random_R@1,IoU@m`: the exact expected value of a uniformly random valid proposal on the
same windows (the chance level).

Scope (documented gap): this is the paper's local-grounding stage with the oracle anchor
(the window is placed around the ground truth at a fixed, id-hashed offset). The global
shot-retrieval stage (`vnr.models.grounding.ShotDualEncoder`, 20-s shots, positives by
`grounding_metrics.shot_alignment`, R@1/5/10 by `retrieval_recall`) and the two-stage
k-way re-ranking of Table 6 are not wired into this task yet.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import sharding
from vnr.data import movie101_tng as data
from vnr.models.grounding import RNL
from vnr.ops import grounding_metrics as gm

IOUS = (0.1, 0.3, 0.5, 0.7)


def validate(config: Any) -> None:
    d = config.data
    if d.config.startswith(("v1_", "v2_")) and not d.manual_dir:
        raise ValueError(f"data.manual_dir is required for data.config={d.config!r}")
    if d.manual_dir and not pathlib.Path(d.manual_dir).is_dir():
        raise ValueError(f"data.manual_dir={d.manual_dir!r} does not exist")
    if d.window % d.n_clips:
        raise ValueError(f"data.window={d.window} must be a multiple of data.n_clips={d.n_clips}")


def make_model(config: Any, rngs: nnx.Rngs) -> RNL:
    d, m = config.data, config.model
    return RNL(frame_dim=d.frame_dim, face_dim=d.face_dim, faces=d.faces, vocab=d.vocab_size,
               width=m.width, n_clips=d.n_clips, portraits=m.portraits, rngs=rngs)


def prepare_data(config: Any) -> None:
    data.prepare(config.data)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def _targets(gt: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    i = jnp.arange(n)[:, None].astype(jnp.float32)
    j = jnp.arange(n)[None].astype(jnp.float32) + 1
    s, e = gt[:, 0, None, None], gt[:, 1, None, None]
    inter = jnp.clip(jnp.minimum(j, e) - jnp.maximum(i, s), 0)
    union = (j - i) + (e - s) - inter
    iou = inter / jnp.maximum(union, 1e-6)
    valid = (j - 1 >= i)[None]
    return jnp.clip((iou - 0.5) / 0.5, 0, 1) * valid, jnp.broadcast_to(valid, iou.shape)


def loss_fn(model: RNL, batch: dict, rngs: nnx.Rngs, config: Any):
    scores = model(batch)
    y, valid = _targets(batch["gt"], config.data.n_clips)
    bce = optax.sigmoid_binary_cross_entropy(jnp.where(valid, scores, 0.0), y)
    loss = (bce * valid).sum() / valid.sum()
    best = jnp.argmax(scores.reshape(scores.shape[0], -1), -1)
    hit = jnp.take_along_axis(y.reshape(y.shape[0], -1), best[:, None], 1)[:, 0] >= 0.0001
    return loss, {"top1_iou_gt_0.5": hit.mean()}


def predict(model: RNL, batch: dict, config: Any) -> dict[str, jax.Array]:
    return {"scores": model(batch), "gt": batch["gt"], "valid": batch["valid"]}


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_clips: int = 0, report_path: pathlib.Path | None = None) -> dict[str, float]:
    pc = jax.process_count()
    local = config.eval_batch_size // pc
    it, n_batches = data.eval_batches(config.data, split, config.eval_batch_size, max_clips,
                                      jax.process_index(), pc)
    scores, gts = [], []
    for _ in range(n_batches):
        host = next(it, None)
        if host is None:
            raise ValueError(f"evaluation split {split} is empty on this process")
        out = jax.device_get(predict_fn(sharding.global_batch(data.pad_batch(host, local),
                                                              mesh)))
        keep = np.asarray(out["valid"], bool)
        scores.append(np.asarray(out["scores"])[keep])
        gts.append(np.asarray(out["gt"])[keep])
    return score_windows(np.concatenate(scores), np.concatenate(gts), config.data.n_clips)


def score_windows(scores: np.ndarray, gt: np.ndarray, n: int) -> dict[str, float]:
    """Ranked proposals (NMS) -> R@n IoU@m in percent, with the random chance level."""
    spans, valid = gm.proposal_spans(n)
    flat_spans = spans[valid]
    preds = np.stack([gm.nms_topk(flat_spans, s[valid], 5, 0.5) for s in scores])
    out = {k: 100 * v for k, v in gm.recall_at_iou(preds, gt, (1, 5), IOUS).items()}
    for m in IOUS:
        out[f"random_R@1,IoU@{m}"] = 100 * gm.random_recall(n, gt, m)
    out["narrations"] = float(len(gt))
    return out


def results_table(results: dict[str, dict[str, float]]) -> str:
    cols = [f"R@{n},IoU@{m}" for n in (1, 5) for m in IOUS]
    rows = ["| split | " + " | ".join(cols) + " | random R@1,IoU@0.5 |",
            "|" + "---|" * (len(cols) + 2)]
    for split, m in results.items():
        rows.append(f"| {split} | " + " | ".join(f"{m[c]:.2f}" for c in cols)
                    + f" | {m['random_R@1,IoU@0.5']:.2f} |")
    return "\n".join(rows)
