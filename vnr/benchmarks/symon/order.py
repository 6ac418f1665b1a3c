"""SYMON segment ordering across a camera cut (§6.2, Eq. 4).

Each item is two 4-second segments on either side of a cut plus the narration
overlapping them (`vnr.benchmarks.symon.data`), presented in random order. A shared cross
encoder maps (segment, narration) to f and P(seg_a is earlier) =
sigmoid(wᵀf_a − wᵀf_b); trained with binary cross-entropy, evaluated by accuracy.
`model.use_text=False` is the video-only configuration (text replaced by zeros).
"""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx

from vnr import evaluation
from vnr.benchmarks.symon import data
from vnr.benchmarks.symon import retrieval as symon_retrieval
from vnr.benchmarks.symon.model import OrderModel, UniVLOrderModel
from vnr.data import pipeline
from vnr.models.compute import float32
from vnr.reports import results as results_lib

TASK = "order"
METRICS = ("accuracy", "pairs")  # what `eval_metrics` reports
check_splits = symon_retrieval.check_splits


def _univl(config: Any) -> bool:
    return config.model.get("encoder", "scratch") == "univl"


def validate(config: Any) -> None:
    d = config.data
    symon_retrieval.validate_data(d)
    if d.segment_seconds <= 0:
        raise ValueError(f"data.segment_seconds={d.segment_seconds} must be > 0")
    if config.model.get("encoder", "scratch") not in symon_retrieval.ENCODERS:
        raise ValueError(f"model.encoder={config.model.encoder!r}: one of "
                         f"{symon_retrieval.ENCODERS}")
    if _univl(config):
        cfg = symon_retrieval.univl_config(config, halves=1)
        if not cfg.cross_layers:
            raise ValueError(f"{config.model.univl_checkpoint} has no cross encoder "
                             "(cross.*): the ordering model of Fig. 10 needs it")
    data.resolve_epochs(config, TASK)  # last: it may build the dataset


def pretrained(config: Any) -> dict[str, tuple[str, str]]:
    """UniVL's text, video and cross encoders from `univl.pretrained.bin` (`univl`)."""
    return {"univl": (config.model.univl_checkpoint, "univl")} if _univl(config) else {}


def make_model(config: Any, rngs: nnx.Rngs) -> OrderModel | UniVLOrderModel:
    from tfds_builders import symon

    m, d = config.model, config.data
    dim, fps, _ = symon.metadata(d.config, d.data_dir, d.manual_dir or None)
    frames = int(round(d.segment_seconds * fps))
    if _univl(config):
        cfg = symon_retrieval.univl_config(config, halves=1)
        if cfg.video_dim != dim or 2 * frames + d.max_tokens > cfg.cross_positions:
            raise ValueError(f"symon/{d.config}: {dim}-d features, {frames} rows + "
                             f"{d.max_tokens} tokens; {m.univl_checkpoint} reads "
                             f"{cfg.video_dim}-d rows, {cfg.cross_positions} cross positions")
        return UniVLOrderModel(cfg, use_text=m.use_text, rngs=rngs)
    return OrderModel(feature_dim=dim, vocab_size=d.vocab_size,
                      max_len=max(frames, d.max_tokens), width=m.width, layers=m.layers,
                      heads=m.heads, mlp=m.mlp, dropout=m.dropout, use_text=m.use_text,
                      rngs=rngs)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, TASK, local_batch, config.seed, process_index,
                              process_count)


def loss_fn(config: Any, model: OrderModel, batch: dict, rngs: nnx.Rngs):
    logits = float32(model(batch["seg_a"], batch["seg_b"], batch["tokens"], train=True, rngs=rngs))
    labels = batch["label"].astype(logits.dtype)
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    acc = ((logits > 0) == (batch["label"] == 1)).mean()
    return loss, {"acc": acc}


def predict(config: Any, model: OrderModel, batch: dict) -> dict[str, jax.Array]:
    logits = model(batch["seg_a"], batch["seg_b"], batch["tokens"], train=False, rngs=None)
    return {"logits": logits, "label": batch["label"], "valid": batch["valid"]}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every cut pair of `split`."""
    return data.eval_dataset(config.data, TASK, split, config.eval_batch_size, max_examples)


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None) -> dict[str, float]:
    """Accuracy of the order prediction over the cut pairs; with `report_dir`,
    `<split>_order.png` (`order_figure`)."""
    if not len(out):
        raise ValueError(f"symon {split}: no usable cut pairs")
    right = int(((out["logits"] > 0) == (out["label"] == 1)).sum())
    if report_dir is not None and out.first is not None:
        from vnr.reports import plots

        plots.report(report_dir / f"{split}_order.png", order_figure, config, split, out)
    return dict(zip(METRICS, (100.0 * right / len(out), float(len(out))), strict=True))


REPORT_PAIRS = 6  # pairs drawn


def order_figure(config: Any, split: str, out: Any) -> Any:
    """All pairs' P(first earlier) by the truth, then the first pairs (`figures.order_pairs`).
    The first rows of the outputs are the primary process's first batch: items 0, P, 2P, ...
    of the split (P processes, `data.eval_dataset`)."""
    from vnr.benchmarks.symon import figures

    src, pc = data.ItemSource(config.data, split, TASK), jax.process_count()
    p_first = 1.0 / (1.0 + np.exp(-np.asarray(out["logits"], np.float64)))
    pairs = []
    for r in range(min(REPORT_PAIRS, int(out.first["valid"].sum()))):
        item = src[r * pc]
        pairs.append(figures.OrderPair(
            out.first["seg_a"][r], out.first["seg_b"][r], item["narration"],
            f"video {src.video(item['video'])['video_id']}, cut at {item['cut']:.1f} s",
            float(p_first[r]), bool(out["label"][r] == 1)))
    return figures.order_pairs(pairs, p_first, np.asarray(out["label"]) == 1, split)


COLUMNS = [results_lib.Column("accuracy", "accuracy (%)", "{:.1f}"),
           results_lib.Column("pairs", fmt="{:.0f}")]


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports (`METRICS`), as results-table columns."""
    return COLUMNS
