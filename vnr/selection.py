"""Which checkpoint step a reader of a vnr run takes, and the `selection` record saying so.

A finished run reports one step: results.json's `selection` ({metric, mode, step, value}),
the best checkpoint by `config.select` or, when nothing selects, the last one. Every reader
of a run (`python -m vnr.evaluate --step`, and through `vnr.run_reader.restore_run` the
`init_from` chains, zero-shot sources and two-stage tools) names its step with one selector,
`selected` (that reported step), `best`, `last` or a number, resolved here by `choose_step`,
so they all read the model whose test numbers the run reports unless told otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def best(mgr: Any) -> tuple[int, dict] | None:
    """(step, its saved metrics) of the best checkpoint by the manager's metric, or None
    when no checkpoint carries metrics (the run never evaluated a checkpointed step)."""
    steps = [s for s in mgr.all_steps() if mgr.metrics(s)]
    if not steps:
        return None
    step = mgr.best_step()
    return step, dict(mgr.metrics(step))


def alternatives(metric: str) -> list[str]:
    """The metric names of `select.metric` ("a|b": a, else b)."""
    return [m.strip() for m in metric.split("|") if m.strip()]


def best_record(mgr: Any, select: Mapping[str, Any]) -> dict[str, Any] | None:
    """results.json's `selection` of the best checkpoint by `select` (`metric`: the
    alternative that ranked it), or None when no checkpoint carries metrics."""
    got = best(mgr)
    if got is None:
        return None
    step, metrics = got
    metric = select["metric"]
    used = next((alt for alt in alternatives(metric) if alt in metrics), metric)
    return {"metric": used, "mode": select.get("mode", "max"), "step": int(step),
            "value": float(metrics[metric])}


STEP_CHOICES = "selected, best, last or a step number"


class StepError(ValueError):
    """A step selector the run cannot honour (one line naming the selector and the run)."""


@dataclasses.dataclass(frozen=True)
class Chosen:
    """The checkpoint step a reader of a run takes: `record` in results.json's `selection`
    layout ({metric, mode, step, value}) and `why` in words, for the line that says it."""

    step: int
    record: dict[str, Any]
    why: str


def _best_why(metric: str, value: float, mode: str) -> str:
    return f"best {metric} = {value:.4g} ({mode})"


def choose_step(mgr: Any, select: Mapping[str, Any] | None,
                which: str | int = "selected", reported: Mapping[str, Any] | None = None,
                flag: str = "--step") -> Chosen:
    """The step `which` names among the checkpoints of `mgr` (a `vnr.checkpoint.reader` ranked
    by `select`): the one chooser of every reader of a finished run (`vnr.evaluate --step`,
    `restore_run`: init_from, zero-shot and two-stage sources).

    `selected` is the step the run reports: `reported` (results.json's `selection`); a run
    without one (unfinished) gives its best validated step when it selects, else (or when it
    never validated) its newest. `best` is the best by `select` (an error when the run
    selects nothing or never validated a saved step), `last` the newest, a number that
    step. Errors are StepError lines starting with `flag`."""
    steps = sorted(mgr.all_steps())
    if not steps:
        raise StepError(f"{flag}: no checkpoint in {mgr.directory}")
    select = dict(select or {})
    metric, mode = select.get("metric") or None, select.get("mode", "max")
    which = str(which)
    if which == "selected":
        return _reported(mgr, steps, metric, mode, reported, flag)
    if which == "best":
        if not metric:
            raise StepError(f"{flag} best: this run selects no step (config.select.metric is "
                            f"empty: it reports its last step); use {flag}=last")
        record = best_record(mgr, select)
        if record is None:
            raise StepError(f"{flag} best: the run never validated a saved step (no "
                            f"checkpoint in {mgr.directory} carries {metric!r})")
        return Chosen(record["step"], record,
                      _best_why(record["metric"], record["value"], mode))
    if which == "last":
        n, why = steps[-1], "the newest checkpoint (asked for last)"
    else:
        try:
            n = int(which)
        except ValueError:
            raise StepError(f"{flag}={which!r}: use {STEP_CHOICES}") from None
        if n not in steps:
            raise StepError(f"{flag}={n}: no checkpoint of that step (there are "
                            f"{', '.join(map(str, steps))})")
        why = f"asked for step {n}"
    metrics = mgr.metrics(n) or {}
    value = float(metrics[metric]) if metric in metrics else None
    return Chosen(int(n), {"metric": metric, "mode": "last" if which == "last" else "step",
                           "step": int(n), "value": value}, why)


def _reported(mgr: Any, steps: list[int], metric: str | None, mode: str,
              reported: Mapping[str, Any] | None, flag: str) -> Chosen:
    """`selected`: the step results.json reports, else best / newest (see `choose_step`)."""
    n = (reported or {}).get("step")
    if isinstance(n, int) and not isinstance(n, bool):
        if n not in steps:
            raise StepError(f"{flag}=selected: results.json reports step {n}, but no checkpoint "
                            f"of it is kept in {mgr.directory} (there are "
                            f"{', '.join(map(str, steps))}); give last or a step number")
        record = dict(reported)
        how = (_best_why(record["metric"], record["value"], record["mode"])
               if record.get("mode") in ("max", "min") and record.get("value") is not None
               else f"its {record.get('mode', 'last')} step")
        return Chosen(n, record, f"the step its results.json reports: {how}")
    record = best_record(mgr, {"metric": metric, "mode": mode}) if metric else None
    if record is not None:
        why = _best_why(record["metric"], record["value"], mode)
        return Chosen(record["step"], record, f"{why}; no results.json yet")
    why = ("the newest: no results.json yet and no validated checkpoint" if metric
           else "the newest: no results.json yet and the run selects no step")
    return Chosen(steps[-1], {"metric": metric, "mode": "last", "step": steps[-1],
                              "value": None}, why)
