"""The task contract: the plain functions a benchmark task module gives the trainer.

A task is a module `vnr/benchmarks/<benchmark>/<task>.py`, named in a config as
`config.task = "<benchmark>.<task>"`: `task.py` in a home with one task (`"sc2st.task"`),
else one module per task named after it (`"moviepuzzle.hcmc"`). The trainer
(`vnr/train.py`) owns everything else: mesh, sharded state, optimizer, checkpoints, the
loop, the evaluation loop (`vnr/evaluation.py`) and the results table
(`vnr/reports/results.py`). Every hook takes `config` first. `load` imports a task and
checks it against this contract before anything compiles.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import jax
from flax import nnx

from vnr.config import ConfigError

Metrics = dict[str, float]


@runtime_checkable
class Task(Protocol):
    """The hooks a task module gives as module-level functions: the `REQUIRED` four and
    one evaluation (`EVALUATION`)."""

    def make_model(self, config: Any, rngs: nnx.Rngs) -> nnx.Module:
        """The model's structure, randomly initialised; never reads weights (those come
        through the optional `pretrained` hook, so a resumed run takes its own)."""

    def train_data(self, config: Any, local_batch: int, process_index: int,
                   process_count: int) -> Iterable[dict]:
        """This process's endless stream of host batches of `local_batch` rows."""

    def loss_fn(self, config: Any, model: nnx.Module, batch: dict,
                rngs: nnx.Rngs) -> tuple[jax.Array, dict]:
        """(scalar loss, metrics to log) on one global batch; traced inside the step."""

    def predict(self, config: Any, model: nnx.Module, batch: dict) -> dict[str, jax.Array]:
        """Jitted model outputs for one global eval batch. Must hold `valid` [B] (bool):
        the evaluation loop keeps exactly the rows where it is True."""

    def eval_data(self, config: Any, split: str, max_examples: int) -> Any:
        """This process's `vnr.data.pipeline.EvalStream` over `split` (global batches of
        `config.eval_batch_size`; `max_examples` > 0 caps the split, 0 = all of it)."""

    def eval_metrics(self, config: Any, split: str, out: Any,
                     report_dir: pathlib.Path | None) -> Metrics:
        """Metrics of `split` from `out`, the `vnr.evaluation.SplitOutputs` that `predict`
        gave on every valid row of `eval_data` (`out.info`: the stream's `info`;
        `out.other(split, max_examples)`: another split's, e.g. to tune a threshold on
        validation); with a `report_dir`, the task writes its pictures of `split` there (its
        own file names)."""


REQUIRED = ("make_model", "train_data", "loss_fn", "predict")

# The evaluation: `eval_data` + `eval_metrics` (the one loop, `vnr.evaluation.evaluate`, runs
# `predict` between them), or a task's own `evaluate(config, split, predict_fn, mesh, *,
# max_examples=0, report_dir=None) -> Metrics` where the loop itself differs (HCMC's
# Algorithm 1: requests computed from the clip pass). `evaluate` wins when a module gives both.
EVALUATION = (("eval_data", "eval_metrics"), ("evaluate",))

# Optional hooks: name -> what it does (the trainer calls each one only if defined).
OPTIONAL = {
    "validate": "validate(config): config checks that need no data or compile (raise "
                "ValueError with one line)",
    "check_splits": "check_splits(config): every configured split exists, once the "
                    "dataset is built",
    "prepare_data": "prepare_data(config): process 0 builds the dataset before the others "
                    "open it",
    "predictors": "predictors(config) -> {name: fn(config, model, batch)}: named predict "
                  "functions beside `predict` (jitted like it); an evaluator picks one with "
                  "`pred=<name>`, a task's own `evaluate` reaches any as "
                  "`predict_fn.named(name)` (`vnr.evaluation.Predictor`)",
    "pretrained": "pretrained(config) -> {param path: (checkpoint, tower)}: the weights "
                  "`vnr/pretrained.py` loads into a fresh run",
    "metric_columns": "metric_columns(config) -> [vnr.reports.results.Column]: every metric "
                      "`evaluate` may report under this config, in results-table order "
                      "(`table=False`: not a column). `config.select` is checked against "
                      "their keys before anything compiles; the table shows the ones the "
                      "results hold. Every task of the project gives it; without it the "
                      "table shows every metric",
    "feature_towers": "feature_towers(config) -> {name: vnr.feature_cache.Tower}: towers "
                      "whose outputs `python -m vnr.cache_features` can compute once when "
                      "frozen (`config.data.feature_cache`)",
}

# Argument names of each hook, in order (the contract's one argument order).
SIGNATURES = {
    "make_model": ("config", "rngs"),
    "train_data": ("config", "local_batch", "process_index", "process_count"),
    "loss_fn": ("config", "model", "batch", "rngs"),
    "predict": ("config", "model", "batch"),
    "evaluate": ("config", "split", "predict_fn", "mesh"),
    "eval_data": ("config", "split", "max_examples"),
    "eval_metrics": ("config", "split", "out", "report_dir"),
    "validate": ("config",),
    "check_splits": ("config",),
    "prepare_data": ("config",),
    "predictors": ("config",),
    "pretrained": ("config",),
    "feature_towers": ("config",),
    "metric_columns": ("config",),
}


# Hooks merged into `metric_columns`: a module still giving one is told so, not ignored.
REPLACED = ("metric_names", "result_columns")


class TaskError(ConfigError):
    """A config names no task module, or the module breaks the contract."""


def check(module: Any) -> None:
    """Raises TaskError naming the module and every missing or misordered hook."""
    name = getattr(module, "__name__", repr(module))
    missing = [h for h in REQUIRED if not callable(getattr(module, h, None))]
    if not evaluates(module):
        missing.append("evaluate (or eval_data and eval_metrics)")
    if missing:
        raise TaskError(f"task module {name} lacks required hook(s) {', '.join(missing)} "
                        f"(the contract is in vnr/task.py)")
    wrong = [f"{old} is part of metric_columns(config) now" for old in REPLACED
             if callable(getattr(module, old, None))]
    for hook, want in SIGNATURES.items():
        fn = getattr(module, hook, None)
        if fn is None:
            continue
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if tuple(params[:len(want)]) != want:
            wrong.append(f"{hook}({', '.join(params)}) should be {hook}({', '.join(want)})")
    if wrong:
        raise TaskError(f"task module {name}: " + "; ".join(wrong) + " (vnr/task.py)")


def predictors(module: Any, config: Any) -> dict[str, Callable]:
    """`module`'s predict functions by name: `predict` and its `predictors(config)`."""
    fn = hook(module, "predictors")
    named = dict(fn(config)) if fn is not None else {}
    if "predict" in named:
        raise TaskError(f"{module.__name__}.predictors: 'predict' is the task's own `predict`")
    return {"predict": module.predict, **named}


def evaluates(module: Any) -> bool:
    """Whether `module` gives an evaluation (`EVALUATION`)."""
    return any(all(callable(getattr(module, h, None)) for h in hooks) for hooks in EVALUATION)


def load(name: str) -> Any:
    """Imports `vnr.benchmarks.<name>` and checks it against the contract."""
    module_name = f"vnr.benchmarks.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            path = "vnr/benchmarks/" + name.replace(".", "/") + ".py"
            raise TaskError(f"task={name!r}: no module {path}") from None
        raise
    check(module)
    return module


def hook(module: Any, name: str) -> Callable | None:
    """An optional hook of `module`, or None when the task does not define it."""
    if name not in OPTIONAL:
        raise KeyError(f"{name!r} is not an optional hook of vnr/task.py")
    return getattr(module, name, None)


def metric_names(module: Any, config: Any) -> tuple[str, ...]:
    """The keys of `module`'s `metric_columns(config)`; () when it declares none."""
    fn = hook(module, "metric_columns")
    return tuple(c.key for c in fn(config)) if fn is not None else ()


def columns(module: Any, config: Any, results: dict[str, Metrics]) -> Sequence[Any] | None:
    """The results-table columns: `module`'s declared ones (`metric_columns`) that some split
    of `results` holds, in their order; None (every metric) without a declaration."""
    fn = hook(module, "metric_columns")
    if fn is None:
        return None
    shown = [c for c in fn(config) if c.table and any(c.key in m for m in results.values())]
    return shown or None


def require_splits(config: Any, have: Sequence[str], dataset: str, joined: bool = False,
                   train: bool = True) -> None:
    """Every configured split (`data.train_split`, `data.val_split`, `data.test_splits` and
    every evaluator's, `config.evals`) is one of `have`, the built `dataset`'s splits; else
    ValueError naming the key (the `check_splits` hook of every task). `joined`: a split may
    join several with "+". `train=False`, or a config without `data.train_split`: the task
    never reads that key (it is not checked)."""
    d = config.data
    named = [("data.train_split", d.train_split)] if train and "train_split" in d else []
    named += [("data.val_split", d.val_split)] + [("data.test_splits", s) for s in d.test_splits]
    known = {s for _, s in named}
    evals = config.get("evals") or {}
    for name in evals:
        spec = evals[name]
        for key in ("split", "splits"):
            value = spec.get(key)
            for s in (value,) if isinstance(value, str) else value or ():
                if s not in known:
                    named.append((f"evals.{name}.{key}", s))
                    known.add(s)
    for key, split in named:
        if not joined and split not in have:
            raise ValueError(f"{key}={split!r} is not a split of {dataset} "
                             f"(it has {', '.join(have)})")
        for part in split.split("+") if joined else ():
            if part not in have:
                raise ValueError(f"{key}={split!r}: {part!r} is not a split of {dataset} "
                                 f"(it has {', '.join(sorted(have))})")
