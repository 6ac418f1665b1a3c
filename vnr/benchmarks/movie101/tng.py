"""Movie101 TNG glue: local grounding in a window around each narration (RNL on its IA-Net
base, or Table 5's 2D-TAN row with model.arch = "tan2d").

Training: binary cross-entropy of every valid proposal's score against its scaled IoU
(2D-TAN, t_min = 0.5, t_max = 1.0). With model.arch = "release" (configs/movie101/tng.py:
release) the model is upstream's RNL itself (`rnl.py`: anchors of 8/16/32/64 clips at every
clip, boundary regression; words from BERT-base-Chinese, `tng_bert`) with its own loss
(`rnl.loss`, as `gcn_final.py`) on upstream's clip labels (`gt_index`); its refined boxes
are scored as `runner_final.eval_new` does (`rnl.index_boxes`, then the same NMS and recall).
Evaluation as Movie101's RNL code (`score_windows`): index boxes with both ends included, NMS
at m - 0.05 for each IoU threshold m, "R@n, IoU@m" for n in {1, 5}, m in {0.1, 0.3, 0.5, 0.7}
(percent), plus `random_R@1,IoU@m`: the chance level (a uniformly random valid proposal).
The local stage uses the oracle anchor (a window around the truth at an id-hashed offset).

`config.stage = "global"` (configs/movie101/tng.py:global) is §5.2's global shot retrieval:
every movie cut into `data.shot_len`-second shots, `ShotDualEncoder` trained with a
symmetric InfoNCE loss over the batch (temperature `model.temperature`; other rows of the
same (movie, shot) are masked, not negatives), positives by `shot_alignment`; evaluation
ranks all shots of the narration's own movie: R@1/5/10 in percent and the exact
`random_R@k`. Narrations with no aligned shot (`no_positive`) count as misses. With
`data.shot_source = "rtemp"` (configs/movie101/tng.py:v1,rtemp) the records are the
release's Movie101-R-temp shots and captions instead (`tng_global`). With
`model.arch = "cnclip"` (configs/movie101/tng.py:v1,rtemp,cnclip, Table 4's row) the model is
Chinese-CLIP over each shot's frames, trained with Chinese-CLIP's contrastive loss
(`_clip_loss`; `tng_cnclip`).
"""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import evaluation
from vnr import task as task_lib
from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import records, rnl, tng_bert, tng_cnclip, tng_global, tng_glove
from vnr.benchmarks.movie101 import tng_data as data
from vnr.benchmarks.movie101.tng_global import KS, REPORT_NARRATIONS, REPORT_TOP
from vnr.benchmarks.movie101.tng_model import RNL, TAN2D, ShotDualEncoder
from vnr.data import pipeline
from vnr.models.compute import float32
from vnr.reports import results as results_lib

NEG = -1.0e9

IOUS = (0.1, 0.3, 0.5, 0.7)
LOCAL_NS = (1, 5)  # local grounding: R@n, IoU@m for n in LOCAL_NS, m in IOUS


def _global(config: Any) -> bool:
    stage = config.get("stage", "local")
    if stage not in ("local", "global"):
        raise ValueError(f"config.stage={stage!r}: choose 'local' or 'global'")
    return stage == "global"


def _release(config: Any) -> bool:
    """Upstream's RNL with its loss and box evaluation (model.arch = "release")."""
    return not _global(config) and config.model.get("arch", "rnl") == "release"


def release_config(config: Any) -> rnl.RNLConfig:
    """The `rnl.RNLConfig` of a model.arch = "release" config (words: `tng_bert`'s width)."""
    d, m = config.data, config.model
    return rnl.RNLConfig(
        clip_dim=int(d.s3d_dim) if d.get("s3d_only", False) else int(d.frame_dim),
        face_dim=int(d.faces) * int(d.face_dim), width=int(m.width), heads=int(m.heads),
        word_dim=tng_bert.width(config) if tng_bert.enabled(config) else int(m.word_dim),
        attn_layers=int(m.local_layers), blocks=int(m.blocks), portraits=bool(m.portraits),
        portrait_fc=bool(m.get("portrait_fc", False)), portrait_dim=int(d.face_dim),
        dropout=float(m.dropout))


def validate(config: Any) -> None:
    d = config.data
    if d.window % d.n_clips:
        raise ValueError(f"data.window={d.window} must be a multiple of data.n_clips={d.n_clips}")
    if _global(config) and d.shot_len <= 0:
        raise ValueError(f"data.shot_len={d.shot_len} must be positive")
    if data.given_shots(d) and (not _global(config) or d.config != "v1_shots"):
        raise ValueError("data.shot_source='rtemp' is the global stage on data.config="
                         f"'v1_shots' (got stage={config.get('stage')!r}, "
                         f"config={d.config!r})")
    tng_bert.check(config)  # data.text_encoder: the release RNL's BERT words only
    if config.model.get("arch") == "cnclip" and not _global(config):
        raise ValueError("model.arch='cnclip' is the global stage (config.stage='global')")
    if _release(config):
        from vnr.data import pipeline

        if not d.get("index_gt", False):
            raise ValueError("model.arch='release' trains on upstream's clip labels: set "
                             "data.index_gt=True (tng.py:release does)")
        m = config.model
        if m.portraits and not m.get("portrait_fc", False) and d.face_dim != m.width:
            raise ValueError(f"model.arch='release' with model.portrait_fc=False appends the "
                             f"portrait features as they are (upstream's code): model.width="
                             f"{m.width} must be data.face_dim={d.face_dim}")

        def narrations() -> int:
            data.prepare(d)
            return len(records.usable_source(d, d.train_split))

        pipeline.resolve_epochs(config, narrations, "train narrations",
                                "vnr:movie101_rnl_epochs")
    if tng_cnclip.enabled(config):
        tng_cnclip.check(config)
        from vnr.data import pipeline

        def count() -> int:
            data.prepare(d)
            return len(records.usable_source(d, d.train_split))

        pipeline.resolve_epochs(config, count, "train shots", "vnr:movie101_cnclip_epochs")
    glove = config.model.get("text", "hashed") == "glove"
    if glove and not tng_glove.requested(d):
        raise ValueError("model.text='glove' (tng.py:tan2d,glove) needs data.word_vectors=<a "
                         f"GloVe-format file of data.word_dim={d.word_dim} values a word>")
    if tng_glove.requested(d) and (not glove or config.model.get("arch") != "tan2d"):
        raise ValueError("data.word_vectors is read by the 2D-TAN row only (model.arch="
                         "'tan2d', model.text='glove': tng.py:tan2d,glove)")


def make_model(config: Any, rngs: nnx.Rngs) -> RNL | TAN2D | ShotDualEncoder | Any:
    d, m = config.data, config.model
    if tng_cnclip.enabled(config):
        return tng_cnclip.make_model(config, rngs)
    if _global(config):
        return ShotDualEncoder(frame_dim=d.frame_dim, vocab=d.vocab_size, width=m.width,
                               rngs=rngs)
    arch = m.get("arch", "rnl")
    if arch == "release":
        return rnl.WindowRNL(release_config(config), d.vocab_size, rngs,
                             tng_bert.tower(config, rngs), d.max_tokens)
    if arch == "tan2d":
        glove = m.get("text", "hashed") == "glove"
        return TAN2D(frame_dim=d.frame_dim, vocab=d.vocab_size, width=m.width,
                     layers=m.map_layers, kernel=m.map_kernel, rngs=rngs,
                     word_dim=int(d.word_dim) if glove else 0,
                     text_layers=int(m.get("text_layers", 1)))
    if arch != "rnl":
        raise ValueError(f"model.arch={arch!r}: choose 'rnl', 'release' or 'tan2d'")
    return RNL(frame_dim=d.frame_dim, face_dim=d.face_dim, faces=d.faces, vocab=d.vocab_size,
               width=m.width, n_clips=d.n_clips, portraits=m.portraits,
               heads=m.get("heads", 4), blocks=m.get("blocks", 3),
               local_layers=m.get("local_layers", 2), rngs=rngs)


def check_splits(config: Any) -> None:
    from tfds_builders import movie101

    d = config.data
    have = movie101.split_names(d.config, d.data_dir, d.manual_dir or None)
    task_lib.require_splits(config, have, f"movie101/{d.config}")
    data.check(d, faces=not _global(config))  # per-split counts in the log; stops a run
    # that cannot mean what its config says
    tng_glove.check(d)  # a bad word-vector file: one line naming it
    if tng_cnclip.enabled(config):
        tng_cnclip.check_videos(d, sorted({d.train_split, d.val_split, *d.test_splits}))


def pretrained(config: Any) -> dict[str, tuple[str, str]]:
    """The trainer's hook: Table 4's Chinese-CLIP, Table 5's BERT-base-Chinese, or none."""
    return (tng_bert.sources(config) if tng_bert.enabled(config) else
            tng_cnclip.sources(config) if tng_cnclip.enabled(config) else {})


def prepare_data(config: Any) -> None:
    data.prepare(config.data)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    if tng_cnclip.enabled(config):
        return tng_cnclip.train_dataset(config, local_batch, config.seed, process_index,
                                        process_count)
    if _global(config):
        return data.shot_train_dataset(config.data, local_batch, config.seed, process_index,
                                       process_count)
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


def _infonce(model: ShotDualEncoder, batch: dict, config: Any):
    v = model.shots(batch["shot"], batch["shot_mask"])
    t = model.text(batch["tokens"])
    logits = float32(t) @ float32(v).T / config.model.temperature
    same = ((batch["movie"][:, None] == batch["movie"][None])
            & (batch["shot_index"][:, None] == batch["shot_index"][None]))
    logits = jnp.where(same & ~jnp.eye(len(v), dtype=bool), NEG, logits)
    labels = jnp.arange(len(v))
    loss = 0.5 * (optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
                  + optax.softmax_cross_entropy_with_integer_labels(logits.T, labels).mean())
    return loss, {"batch_t2v_acc": (jnp.argmax(logits, 1) == labels).mean()}


def _clip_loss(model: Any, batch: dict, config: Any):
    """Chinese-CLIP's contrastive loss: the mean of the text->shot and shot->text
    cross-entropies of the batch's scaled cosine logits (the in-batch pairs as they come)."""
    v = model.shots(batch["frames"], batch["frame_mask"])
    t = model.text_features(batch["ids"], batch["id_mask"])
    logits = float32(t) @ float32(v).T * model.scale()
    labels = jnp.arange(len(v))
    loss = 0.5 * (optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
                  + optax.softmax_cross_entropy_with_integer_labels(logits.T, labels).mean())
    return loss, {"batch_t2v_acc": (jnp.argmax(logits, 1) == labels).mean(),
                  "logit_scale": model.scale()}


def loss_fn(config: Any, model: RNL, batch: dict, rngs: nnx.Rngs):
    if tng_cnclip.enabled(config):
        return _clip_loss(model, batch, config)
    if _global(config):
        return _infonce(model, batch, config)
    if _release(config):
        out = model(batch, train=True, rngs=rngs)
        out = {k: float32(out[k]) for k in ("logits", "boxes")}
        gt = batch["gt_index"]
        y, legal, _ = rnl.targets(gt, config.data.n_clips, rnl.RNLConfig.anchors)
        best = jnp.argmax(jnp.where(legal, out["logits"], NEG), -1)  # its target: IoU/max
        top = jnp.take_along_axis(y, best[:, None], 1)[:, 0]
        return rnl.loss(out, gt, release_config(config), train=True), {"top1_target": top.mean()}
    scores = float32(model(batch))
    y, valid = _targets(batch["gt"], config.data.n_clips)
    bce = optax.sigmoid_binary_cross_entropy(jnp.where(valid, scores, 0.0), y)
    loss = (bce * valid).sum() / valid.sum()
    best = jnp.argmax(scores.reshape(scores.shape[0], -1), -1)
    hit = jnp.take_along_axis(y.reshape(y.shape[0], -1), best[:, None], 1)[:, 0] >= 0.0001
    return loss, {"top1_iou_gt_0.5": hit.mean()}


def predict(config: Any, model: RNL, batch: dict) -> dict[str, jax.Array]:
    if tng_cnclip.enabled(config):
        return {"shot": model.shots(batch["frames"], batch["frame_mask"]),
                "text": model.text_features(batch["ids"], batch["id_mask"]),
                "valid": batch["valid"]}
    if _global(config):
        return {"shot": model.shots(batch["shot"], batch["shot_mask"]),
                "text": model.text(batch["tokens"]), "valid": batch["valid"]}
    if _release(config):
        out = model(batch)
        return {"scores": out["scores"], "boxes": out["boxes"], "gt": batch["gt_index"],
                "valid": batch["valid"]}
    return {"scores": model(batch), "gt": batch["gt"], "valid": batch["valid"]}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Local: one row per narration window; global: the split's movies (`tng_global`)."""
    if _global(config):
        return tng_global.eval_data(config, split, max_examples)
    return data.eval_dataset(config.data, split, config.eval_batch_size, max_examples)


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None = None) -> dict[str, float]:
    """Local grounding's R@n,IoU@m (`score_boxes` for the release's RNL, else
    `score_windows`); global: `tng_global.eval_metrics`."""
    if _global(config):
        return tng_global.eval_metrics(config, split, out, report_dir)
    if _release(config):
        metrics = score_boxes(out["scores"], out["boxes"], out["gt"], config.data.n_clips)
    else:
        metrics = score_windows(out["scores"], out["gt"], config.data.n_clips)
    metrics["left_out"] = float(sum(records.usable(config.data, split)[1].values()))
    if report_dir is not None and out.first is not None and not _release(config):
        local_report(config, split, out, report_dir)
    return metrics


def local_report(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path) -> None:
    """`<split>_grounding.png` (`local_figure`)."""
    from vnr.reports import plots

    plots.report(report_dir / f"{split}_grounding.png", local_figure, config, split, out)


def local_figure(config: Any, split: str, out: evaluation.SplitOutputs) -> Any:
    """The first narrations' windows, true spans and top spans. The first rows of the
    outputs are this (the primary) process's first batch, whose records are the split's
    0, P, 2P, ... (P processes: `tng_data.eval_dataset`)."""
    from vnr.benchmarks.movie101 import figures

    d = config.data
    src, pc = records.usable_source(d, split), jax.process_count()
    spans, valid = gm.proposal_spans(d.n_clips)
    sec, margin = d.window / d.n_clips, 0.15 * d.window  # seconds per clip, around
    rows = []
    for r in range(min(REPORT_NARRATIONS, int(out.first["valid"].sum()))):
        rec, ws = src[r * pc], float(out.first["window_start"][r])
        top = gm.nms_topk(spans[valid], np.asarray(out["scores"][r])[valid], REPORT_TOP)
        rows.append(figures.Grounded(
            f"{rec['text']}  ({rec['movie_id']}, {float(rec['start']):.0f}-"
            f"{float(rec['end']):.0f} s)", tuple(ws + sec * np.asarray(out["gt"][r])),
            [tuple(ws + sec * np.asarray(t)) for t in dict.fromkeys(map(tuple, top))],
            (ws - margin, ws + d.window + margin), window=(ws, ws + d.window)))
    return figures.grounding(rows, f"{split}: local grounding, top {REPORT_TOP} spans after "
                             "NMS")


def score_windows(scores: np.ndarray, gt: np.ndarray, n: int) -> dict[str, float]:
    """Proposal scores [Q, n, n] -> R@n IoU@m in percent with the protocol of Movie101's RNL
    evaluation (`grounding_metrics.recall_upstream`: proposal (i, j) is the index box
    [i, j], the ground truth [s, e) in clip units the box of the clips it touches, NMS at
    m - 0.05 per threshold, inclusive IoU), and the random chance level of one valid
    proposal under the same IoU."""
    spans, valid = gm.proposal_spans(n)
    boxes = gm.to_index_boxes(spans[valid])
    gt_boxes = gm.to_index_boxes(np.asarray(gt, np.float64))
    flat = np.asarray(scores, np.float64)[:, valid]
    out = {k: 100 * v for k, v in gm.recall_upstream(flat, boxes, gt_boxes, LOCAL_NS,
                                                     IOUS).items()}
    for m in IOUS:
        out[f"random_R@1,IoU@{m}"] = 100 * gm.random_recall_upstream(boxes, gt_boxes, m)
    out["narrations"] = float(len(gt))
    return out


def score_boxes(scores: np.ndarray, boxes: np.ndarray, gt: np.ndarray, n: int
                ) -> dict[str, float]:
    """Upstream RNL's evaluation (`runner_final.eval_new`, `criteria.compute_IoU_recall`):
    scores [Q, P] (illegal proposals 0, still candidates), refined boxes [Q, P, 2]
    (`rnl.index_boxes`), gt [Q, 2] index boxes -> R@n IoU@m in percent, and the chance level
    of one uniformly random legal anchor proposal (before regression)."""
    gt = np.asarray(gt, np.float64)
    out = {k: 100 * v for k, v in gm.recall_upstream(
        np.asarray(scores, np.float64), rnl.index_boxes(boxes, n), gt, LOCAL_NS, IOUS).items()}
    props, legal = rnl.proposals(n, rnl.RNLConfig.anchors)
    for m in IOUS:
        out[f"random_R@1,IoU@{m}"] = 100 * gm.random_recall_upstream(
            np.trunc(props[legal]), gt, m)
    out["narrations"] = float(len(gt))
    return out


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports for `config.stage`. The table (Tables 4-6): global retrieval's
    R@1/5/10, its random level and the count; local grounding's R@n,IoU@m and the random
    level at IoU 0.5."""
    col = results_lib.Column
    if _global(config):
        return [*results_lib.cols([f"R@{k}" for k in KS]),
                col("random_R@1", "random R@1"), col("random_R@5", "random R@5"),
                col("narrations", fmt="{:.0f}"),
                *results_lib.unshown((*(f"movie_avg_R@{k}" for k in KS), "movies",
                                      *(f"random_R@{k}" for k in KS[2:]), "no_positive",
                                      "left_out"))]
    return [*results_lib.cols([f"R@{n},IoU@{m}" for n in LOCAL_NS for m in IOUS]),
            col("random_R@1,IoU@0.5", "random R@1,IoU@0.5"),
            *results_lib.unshown((*(f"random_R@1,IoU@{m}" for m in IOUS if m != 0.5),
                                  "narrations", "left_out"))]
