"""The one evaluation loop: host batches -> jitted predict -> outputs of every process.

`evaluate` runs a task's evaluation (`vnr/task.py`): its `eval_data` stream through
`predict_split` into its `eval_metrics` (which may ask for another split's outputs, e.g. to
tune on validation: `SplitOutputs.other`), or the task's own `evaluate` where the loop
differs (which calls `predict_split` itself). The loop:
  * pads a short last batch with `vnr.data.pipeline.pad_batch` (zeros, so `valid` is
    False on padding rows);
  * runs exactly `num_batches` global batches on every process, so uneven per-process
    shards work: a process whose shard ran out feeds an all-padding batch (every process
    must join each jitted call);
  * keeps the rows whose `valid` output is True. `predict_fn`'s outputs are replicated,
    so every process holds every process's rows, in global batch order;
  * keeps text (object) columns on the host; the columns named in `host_columns` are
    gathered from every process into the same row order as the model outputs;
  * says how far it got every `PROGRESS_SECONDS` (a long split in a cluster log).
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from vnr import progress, sharding
from vnr.data import pipeline

PROGRESS_SECONDS = 30.0  # a long evaluation says how far it got this often


@dataclasses.dataclass
class SplitOutputs:
    """What `predict_split` returns.

    outputs: every `predict` output (and each gathered host column) for the valid rows
      of every process, concatenated in global batch order.
    first: this process's first host batch, padded, text columns included (for reports);
      None when this process had no example.
    mesh: the mesh the predictions ran on (metrics that shard their own work use it).
    other: (split, max_examples) -> that split's outputs by the same evaluation (its
      `eval_data`, the same predict function; computed once), for metrics tuned on another
      split, e.g. a threshold on the validation split; set by `evaluate`.
    info: the stream's `info` (what the metrics need beyond the rows).
    """

    outputs: dict[str, np.ndarray]
    first: dict[str, np.ndarray] | None
    mesh: jax.sharding.Mesh | None = None
    other: Callable[[str, int], SplitOutputs] | None = None
    info: Any = None

    def __getitem__(self, key: str) -> np.ndarray:
        return self.outputs[key]

    def __contains__(self, key: str) -> bool:
        return key in self.outputs

    def get(self, key: str, default: np.ndarray | None = None) -> np.ndarray | None:
        return self.outputs.get(key, default)

    def __len__(self) -> int:
        return len(self.outputs["valid"])


class Predictor:
    """A task's jitted predict functions on one model state (what the trainer hands an
    evaluation as `predict_fn`). Calling it runs one global batch through `pred`: the task's
    `predict`, or the named one an evaluator picks (`pred=`); `named(name)` is any of them
    (a task's own evaluate that needs two, as HCMC's Algorithm 1)."""

    def __init__(self, fns: Mapping[str, Callable], state: Any, pred: str = "predict"):
        self.fns, self.state, self.pred = fns, state, pred

    def __call__(self, batch: dict) -> dict:
        return self.fns[self.pred](self.state, batch)

    def named(self, name: str) -> Callable[[dict], dict]:
        """The task's predict function `name` on this state: global batch -> outputs."""
        if name not in self.fns:
            raise KeyError(f"no predict function {name!r} (the task has "
                           f"{', '.join(sorted(self.fns))}; vnr/task.py `predictors`)")
        return functools.partial(self.fns[name], self.state)

    def using(self, pred: str) -> Predictor:
        """The same state, calling `pred`."""
        self.named(pred)
        return Predictor(self.fns, self.state, pred)


def evaluate(module: Any, config: Any, split: str, predict_fn: Callable,
             mesh: jax.sharding.Mesh, *, max_examples: int = 0,
             report_dir: pathlib.Path | None = None) -> dict[str, float]:
    """Metrics of `split` by the evaluation `module` gives (a task module, or an evaluator's
    `type`): its own `evaluate`, else `eval_metrics(predict_split(eval_data))`."""
    own = getattr(module, "evaluate", None)
    if own is not None:
        return own(config, split, predict_fn, mesh, max_examples=max_examples,
                   report_dir=report_dir)
    name = module.__name__.removeprefix("vnr.benchmarks.")
    done: dict[tuple[str, int], SplitOutputs] = {}

    def outputs(which: str, cap: int) -> SplitOutputs:
        if (which, cap) not in done:
            stream = module.eval_data(config, which, cap)
            done[which, cap] = predict_split(stream, predict_fn, mesh, name=f"{name} {which}",
                                             host_columns=stream.host_columns)
            done[which, cap].other = outputs
        return done[which, cap]

    return module.eval_metrics(config, split, outputs(split, max_examples), report_dir)


def predict_split(stream: pipeline.EvalStream, predict_fn: Callable, mesh: jax.sharding.Mesh,
                  *, name: str = "split", host_columns: Sequence[str] = ()) -> SplitOutputs:
    """Runs `predict_fn` (global batch -> replicated outputs with `valid` [B]) over the
    `stream.n_batches` global batches built from this process's host batches."""
    it, n_batches, local_batch = iter(stream), stream.n_batches, stream.local_batch
    outs: list[dict[str, np.ndarray]] = []
    first = None
    shown = time.perf_counter()
    for i in range(n_batches):
        if time.perf_counter() - shown > PROGRESS_SECONDS and jax.process_index() == 0:
            progress.say(f"evaluating {name}: batch {i}/{n_batches}")
            shown = time.perf_counter()
        host = next(it, None)
        if host is None:
            if first is None:
                raise ValueError(f"evaluation of {name}: process {jax.process_index()} has no "
                                 f"example (fewer examples than processes)")
            host = {k: v[:0] for k, v in first.items()}
        host = pipeline.pad_batch(host, local_batch)
        first = first if first is not None else host
        arrays = {k: v for k, v in host.items() if not _is_text(v)}
        out = jax.device_get(predict_fn(sharding.global_batch(arrays, mesh)))
        if "valid" not in out:
            raise ValueError(f"evaluation of {name}: predict returned no `valid` column "
                             f"(keys {sorted(out)}); see vnr/task.py")
        keep = np.asarray(out["valid"], bool)
        row = {k: np.asarray(v)[keep] for k, v in out.items()
               if np.ndim(v) and np.shape(v)[0] == len(keep)}
        for k in host_columns:
            row[k] = _gather_rows(host[k])[keep]
        outs.append(row)
    if not outs:
        raise ValueError(f"evaluation of {name}: no batch to evaluate")
    cat = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
    return SplitOutputs(cat, first, mesh, info=stream.info)


def _is_text(v: np.ndarray) -> bool:
    return np.asarray(v).dtype.kind in "OUS"


def _gather_rows(column: np.ndarray) -> np.ndarray:
    """This process's rows of a host column -> every process's rows, in process order
    (the global batch's row order). Text is gathered as UTF-8 bytes."""
    column = np.asarray(column)
    if jax.process_count() == 1:
        return column
    from jax.experimental import multihost_utils

    if not _is_text(column):
        return np.concatenate(list(multihost_utils.process_allgather(column)))
    raw = [str(x).encode("utf-8") for x in column]
    width = int(np.max(multihost_utils.process_allgather(
        np.asarray(max((len(r) for r in raw), default=0), np.int32))))
    buf = np.zeros((len(raw), max(width, 1)), np.uint8)
    lengths = np.zeros(len(raw), np.int32)
    for i, r in enumerate(raw):
        buf[i, :len(r)] = np.frombuffer(r, np.uint8)
        lengths[i] = len(r)
    bufs = multihost_utils.process_allgather(buf)
    lens = multihost_utils.process_allgather(lengths)
    flat_b, flat_l = bufs.reshape(-1, bufs.shape[-1]), lens.reshape(-1)
    return np.array([bytes(b[:n]).decode("utf-8") for b, n in zip(flat_b, flat_l)],
                    dtype=object)


def global_rows(columns: dict[str, np.ndarray], global_batch: int) -> pipeline.EvalStream:
    """Rows every process knows (same arrays everywhere) as this process's host batches:
    global batch b holds rows [b * global_batch, (b + 1) * global_batch), process p feeds
    the p-th block of it (the trainer's layout). Adds `valid` (False on padding rows), so
    `predict_split`'s outputs come back in row order."""
    n = len(next(iter(columns.values())))
    pc, pi = jax.process_count(), jax.process_index()
    local = global_batch // pc
    n_batches = -(-n // global_batch)
    cols = dict(columns, valid=np.ones(n, bool))

    def batches():
        for b in range(n_batches):
            lo = b * global_batch + pi * local
            yield {k: v[lo:lo + local] for k, v in cols.items()}

    return pipeline.EvalStream(batches(), n_batches, local, n)
