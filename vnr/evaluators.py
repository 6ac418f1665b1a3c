"""Evaluators declared in the config: what is evaluated, on which split, how often.

`config.evals` maps a name to one evaluator (the big_vision pattern):

    config.evals.val = dict(split="val", every=500, max_examples=200)
    config.evals.test = dict(splits=("test_a", "test_b"), final=True, report=True)

Keys of an evaluator:
  type          the module holding `evaluate` (and its optional hooks), relative to
                `vnr.benchmarks` (e.g. "moviepuzzle.pairwise") or a full module path;
                "" = the task module.
  split/splits  the split (or splits) it evaluates.
  every         run at every step that is a multiple of `every` during training (0: never).
  final         run once after training, on the selected step; its metrics are the run's
                results (`results.json`, keyed by split).
  max_examples  cap on the examples of each split (0 = all of them).
  report        pass the module a `report_dir` (`<workdir>/reports/`) to write its
                pictures into; the trainer never knows what they show.
  pred          the task's predict function it runs: "predict" (the default) or a name of
                the task's `predictors(config)` (`vnr/task.py`).

The one cadence rule: evaluator E runs after step s when `E.every > 0 and s % E.every == 0`,
and once after the last step when `E.final`. Metrics are logged as `<name>/<metric>` (an
evaluator of one split) or `<name>/<split>/<metric>`. `config.select` names the logged
metric that selects the model (`select.metric = "val/os2"`, `select.mode = "max"`); "a|b"
names alternatives of one evaluator, the first one it reports ranking the checkpoints (for
a metric whose name says how it was measured, e.g. M-SYMON's `estimated_f1` when the
window runs on estimated times); `selection.metric` in results.json is the one used.

An evaluator module gives an evaluation as a task does (`vnr/task.py`: `eval_data` and
`eval_metrics`, or its own `evaluate`) and may give `metric_columns(config)`, whose keys
`config.select` is checked against before anything compiles.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pathlib
import time
from collections.abc import Callable, Iterable
from typing import Any

import jax

from vnr import evaluation, progress, selection
from vnr import task as task_lib
from vnr.config import ConfigError
from vnr.selection import alternatives

EVALUATOR_KEYS = ("type", "split", "splits", "every", "final", "max_examples", "report", "pred")


class EvaluatorError(ConfigError):
    """A config's evaluator is malformed: one line naming `evals.<name>.<key>`."""


@dataclasses.dataclass(frozen=True)
class Evaluator:
    """One declared evaluator, checked."""

    name: str
    module: Any
    splits: tuple[str, ...]
    every: int = 0
    final: bool = False
    max_examples: int = 0
    report: bool = False
    pred: str = "predict"

    def due(self, step: int) -> bool:
        """Whether it runs after training step `step` (the one cadence rule)."""
        return self.every > 0 and step % self.every == 0

    def key(self, split: str, metric: str) -> str:
        """The logged name of `metric` of `split`."""
        return f"{self.name}/{metric}" if len(self.splits) == 1 else \
            f"{self.name}/{split}/{metric}"

    def run(self, config: Any, predict_fn: Callable, mesh: jax.sharding.Mesh,
            report_dir: pathlib.Path | None = None,
            say: Callable[[str], None] = lambda m: None,
            splits: Iterable[str] | None = None,
            timings: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
        """{split: metrics} of every split (or only `splits`); `timings` gets the seconds
        each split took."""
        out = {}
        for split in self.splits if splits is None else splits:
            t0 = time.perf_counter()
            say(f"eval {self.name} on {split}: started")
            fn = predict_fn if self.pred == "predict" else predict_fn.using(self.pred)
            metrics = dict(evaluation.evaluate(
                self.module, config, split, fn, mesh, max_examples=self.max_examples,
                report_dir=report_dir if self.report else None))
            seconds = time.perf_counter() - t0
            say(f"eval {self.name} on {split}: done in {progress.duration(seconds)}")
            out[split] = metrics
            if timings is not None:
                timings[split] = seconds
        return out


def parse(config: Any, task_module: Any) -> list[Evaluator]:
    """The evaluators `config.evals` declares, checked (EvaluatorError, one line)."""
    specs = config.get("evals") or {}
    evaluators = []
    for name in specs:
        spec = specs[name]
        where = f"evals.{name}"
        unknown = sorted(set(spec) - set(EVALUATOR_KEYS))
        if unknown:
            raise EvaluatorError(f"{where}.{unknown[0]}: unknown key (an evaluator has "
                                 f"{', '.join(EVALUATOR_KEYS)})")
        if "/" in name:
            raise EvaluatorError(f"{where}: an evaluator's name may not contain '/'")
        module = _module(spec.get("type", ""), task_module, where)
        splits = _splits(spec, where)
        if not splits:  # e.g. data.test_splits=(): nothing to evaluate
            continue
        every = _count(spec.get("every", 0), f"{where}.every")
        max_examples = _count(spec.get("max_examples", 0), f"{where}.max_examples")
        final, report = bool(spec.get("final", False)), bool(spec.get("report", False))
        if not final and not every:
            raise EvaluatorError(f"{where}: never runs (set every > 0 or final=True)")
        pred = spec.get("pred", "predict")
        if pred != "predict":
            names = task_lib.predictors(task_module, config)
            if pred not in names:
                raise EvaluatorError(f"{where}.pred={pred!r}: the task's predict functions "
                                     f"are {', '.join(names)} (vnr/task.py `predictors`)")
        evaluators.append(Evaluator(name, module, splits, every, final, max_examples, report,
                                    pred))
    seen: dict[str, str] = {}
    for e in evaluators:
        for split in e.splits if e.final else ():
            if split in seen:
                raise EvaluatorError(f"evals.{e.name} and evals.{seen[split]} both report "
                                     f"split {split!r} as a final result")
            seen[split] = e.name
    check_select(config, evaluators)
    return evaluators


def check_select(config: Any, evaluators: list[Evaluator]) -> Evaluator | None:
    """The evaluator `config.select.metric` names (None: the last step is reported)."""
    select = config.get("select") or {}
    metric, mode = select.get("metric", ""), select.get("mode", "max")
    if mode not in ("max", "min"):
        raise EvaluatorError(f"select.mode={mode!r}: use 'max' or 'min'")
    if not metric:
        return None
    parts = [alt.partition("/") for alt in alternatives(metric)]
    name, _, rest = parts[0]
    chosen = next((e for e in evaluators if e.name == name), None)
    if chosen is None or not all(r for _, _, r in parts):
        raise EvaluatorError(f"select.metric={metric!r}: name an evaluator's metric as "
                             f"<evaluator>/<metric> (evaluators: "
                             f"{', '.join(e.name for e in evaluators) or 'none'})")
    if len({n for n, _, _ in parts}) > 1:
        raise EvaluatorError(f"select.metric={metric!r}: alternatives must be metrics of one "
                             f"evaluator (measured at the same steps)")
    names = task_lib.metric_names(chosen.module, config)
    unknown = [leaf for _, _, r in parts if names and (leaf := r.rsplit("/", 1)[-1]) not in names]
    if unknown:
        raise EvaluatorError(f"select.metric={metric!r}: {chosen.module.__name__} reports no "
                             f"{' or '.join(map(repr, unknown))} (it reports {', '.join(names)})")
    if not chosen.every:
        raise EvaluatorError(f"select.metric={metric!r}: evals.{name} never runs during "
                             f"training (every=0), so it cannot select a step")
    if chosen.every > config.total_steps:
        raise EvaluatorError(f"select.metric={metric!r}: evals.{name}.every={chosen.every} > "
                             f"total_steps={config.total_steps}: no step would be evaluated")
    return chosen


def splits_of(evaluators: Iterable[Evaluator]) -> list[str]:
    """Every split some evaluator reads, in declaration order."""
    return list(dict.fromkeys(s for e in evaluators for s in e.splits))


def _module(type_: str, task_module: Any, where: str) -> Any:
    """The evaluator module: `vnr.benchmarks.<type>`, else `<type>` as a full module path."""
    if not type_:
        return task_module
    module = None
    for name in (f"vnr.benchmarks.{type_}", type_):
        try:
            module = importlib.import_module(name)
            break
        except ModuleNotFoundError as e:
            if e.name is None or not name.startswith(e.name):
                raise  # the module exists but an import inside it failed
    if module is None:
        raise EvaluatorError(f"{where}.type={type_!r}: no module vnr/benchmarks/"
                             f"{type_.replace('.', '/')}.py")
    if not task_lib.evaluates(module):
        raise EvaluatorError(f"{where}.type={type_!r}: {module.__name__} has neither "
                             f"eval_data and eval_metrics nor evaluate (vnr/task.py)")
    fn = getattr(module, "evaluate", None)
    if fn is not None and "report_dir" not in inspect.signature(fn).parameters:
        raise EvaluatorError(f"{where}.type={type_!r}: {module.__name__}.evaluate takes no "
                             f"report_dir")
    return module


def _splits(spec: Any, where: str) -> tuple[str, ...]:
    one, many = spec.get("split"), spec.get("splits")
    if one is not None and many is not None:
        raise EvaluatorError(f"{where}: give split or splits, not both")
    splits = (one,) if one is not None else tuple(many or ())
    if isinstance(many, str) or not all(isinstance(s, str) and s for s in splits):
        raise EvaluatorError(f"{where}: split='<name>' or splits=(<names>, ...), got "
                             f"{one if one is not None else many!r}")
    return splits


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EvaluatorError(f"{key}={value!r}: a whole number >= 0")
    return value



def periodic(evaluators: list[Evaluator], config: Any, predict_fn: Callable,
             mesh: jax.sharding.Mesh, step: int, writer: Any,
             report_dir: pathlib.Path | None, say: Callable[[str], None]) -> dict[str, float]:
    """Runs the evaluators due after `step`; returns what they logged ({} if none ran)."""
    logged: dict[str, float] = {}
    for e in evaluators:
        if not e.due(step):
            continue
        seconds: dict[str, float] = {}
        mine: dict[str, float] = {}
        for split, metrics in e.run(config, predict_fn, mesh, report_dir, say,
                                    timings=seconds).items():
            mine.update({e.key(split, k): v for k, v in metrics.items()})
            writer.write(step, {e.key(split, "eval_seconds"): seconds[split]})
        say(f"step {step} {e.name}: " + " ".join(
            f"{k.split('/', 1)[1]}={v:.4g}" for k, v in mine.items()))
        logged.update(mine)
    if logged:
        writer.write(step, logged)
    return logged


def final(evaluators: list[Evaluator], config: Any, predict_fn: Callable,
          mesh: jax.sharding.Mesh, writer: Any, step: int, report_dir: pathlib.Path | None,
          say: Callable[[str], None], splits: Iterable[str] | None = None
          ) -> dict[str, dict[str, float]]:
    """Runs the final evaluators (only `splits` when given): split -> metrics."""
    wanted = None if splits is None else set(splits)
    results: dict[str, dict[str, float]] = {}
    for e in evaluators:
        chosen = [x for x in e.splits if wanted is None or x in wanted]
        if not e.final or not chosen:
            continue
        seconds: dict[str, float] = {}
        for split, metrics in e.run(config, predict_fn, mesh, report_dir, say, chosen,
                                    timings=seconds).items():
            results[split] = metrics
            if writer is not None:
                writer.write(step, {e.key(split, k): v for k, v in
                                    {**metrics, "eval_seconds": seconds[split]}.items()})
    return results


def ranked(logged: dict[str, float], select: Any) -> dict[str, float]:
    """The metric a checkpoint is ranked by, under `select.metric` and under the name of the
    alternative that gave it (the first one reported); none reported is an error naming
    them (raised at the first evaluation)."""
    metric = select["metric"]
    used = next((alt for alt in alternatives(metric) if alt in logged), None)
    if used is None:
        raise EvaluatorError(f"select.metric={metric!r}: the evaluators reported "
                             f"{', '.join(sorted(logged))}")
    return {metric: float(logged[used]), used: float(logged[used])}


def selected_step(mgr: Any, config: Any) -> dict[str, Any]:
    """The `selection` record of results.json: the best checkpointed step by
    `config.select`, or the last step when nothing selects."""
    select = config.get("select") or {}
    if not select.get("metric"):
        return {"metric": None, "mode": "last", "step": int(config.total_steps), "value": None}
    record = selection.best_record(mgr, select)
    if record is None:
        raise EvaluatorError(f"select.metric={select['metric']!r}: no checkpoint carries it "
                             f"(no evaluation of a saved step)")
    return record
