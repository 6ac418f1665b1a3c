"""SYMON segment ordering across a camera cut (§6.2, Eq. 4).

Each item is two 4-second segments on either side of a cut plus the narration
overlapping them (`vnr.benchmarks.symon.data`), presented in random order. A shared cross
encoder maps (segment, narration) to f and P(seg_a is earlier) =
sigmoid(wᵀf_a − wᵀf_b); trained with binary cross-entropy, evaluated by accuracy.
`model.use_text=False` is the video-only configuration (text replaced by zeros).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx

from vnr import sharding
from vnr.benchmarks.symon import data
from vnr.benchmarks.symon import retrieval as symon_retrieval
from vnr.benchmarks.symon.model import OrderModel
from vnr.data import pipeline

TASK = "order"
check_splits = symon_retrieval.check_splits


def validate(config: Any) -> None:
    d = config.data
    symon_retrieval.validate_data(d)
    if d.segment_seconds <= 0:
        raise ValueError(f"data.segment_seconds={d.segment_seconds} must be > 0")


def make_model(config: Any, rngs: nnx.Rngs) -> OrderModel:
    from tfds_builders import symon

    m, d = config.model, config.data
    dim, fps, _ = symon.metadata(d.config)
    frames = int(round(d.segment_seconds * fps))
    return OrderModel(feature_dim=dim, vocab_size=d.vocab_size,
                      max_len=max(frames, d.max_tokens), width=m.width, layers=m.layers,
                      heads=m.heads, mlp=m.mlp, dropout=m.dropout, use_text=m.use_text,
                      rngs=rngs)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, TASK, local_batch, config.seed, process_index,
                              process_count)


def loss_fn(model: OrderModel, batch: dict, rngs: nnx.Rngs, config: Any):
    logits = model(batch["seg_a"], batch["seg_b"], batch["tokens"], train=True, rngs=rngs)
    labels = batch["label"].astype(logits.dtype)
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    acc = ((logits > 0) == (batch["label"] == 1)).mean()
    return loss, {"acc": acc}


def predict(model: OrderModel, batch: dict, config: Any) -> dict[str, jax.Array]:
    logits = model(batch["seg_a"], batch["seg_b"], batch["tokens"], train=False, rngs=None)
    return {"logits": logits, "label": batch["label"], "valid": batch["valid"]}


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_clips: int = 0, report_path: pathlib.Path | None = None) -> dict[str, float]:
    """Accuracy of the order prediction over the cut pairs of `split`."""
    del report_path
    pc = jax.process_count()
    local = config.eval_batch_size // pc
    ds, n = data.eval_dataset(config.data, TASK, split, config.eval_batch_size, max_clips,
                              jax.process_index(), pc)
    if not n:
        raise ValueError(f"symon {split}: no usable cut pairs")
    n_batches = data.num_batches(n, pc, local)
    it, right, total, first = iter(ds), 0, 0, None
    for _ in range(n_batches):
        host = next(it, None)
        if host is None:
            host = {k: np.zeros((0, *v.shape[1:]), v.dtype) for k, v in first.items()}
        first = host
        out = jax.device_get(predict_fn(sharding.global_batch(pipeline.pad_batch(host, local),
                                                               mesh)))
        valid = np.asarray(out["valid"])
        right += int(((out["logits"] > 0) == (out["label"] == 1))[valid].sum())
        total += int(valid.sum())
    return {"accuracy": 100.0 * right / total, "pairs": float(total)}


def results_table(results: dict[str, dict[str, float]]) -> str:
    rows = ["| split | accuracy (%) | pairs |", "|---|---|---|"]
    rows += [f"| {s} | {m['accuracy']:.1f} | {int(m['pairs'])} |" for s, m in results.items()]
    return "\n".join(rows)
