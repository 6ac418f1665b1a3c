"""A vnr run written without training, for tests of the readers of a run: at each given
step the (model, optimizer) state of a freshly built model is checkpointed the trainer's
way (`vnr.checkpoint.save`, with the selecting metric), beside a config.json naming
`select` and, optionally, a results.json reporting one step."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

import numpy as np
import optax
from flax import nnx

from vnr import checkpoint


class _Iterator:
    """The data-iterator interface a checkpoint saves."""

    def get_state(self) -> dict:
        return {"position": 0}


def params(state: nnx.State, root: tuple = ()) -> dict[tuple, np.ndarray]:
    """{parameter path below `root`: value} of a state (a model's, or `root=(0,)` for the
    trainer's (model, optimizer) state)."""
    return {p[len(root):]: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(state)
            if p[:len(root)] == root and isinstance(v, nnx.Param)}


def write_run(workdir: pathlib.Path, model_of: Callable[[int], nnx.Module],
              metric_of_step: dict[int, float], select: dict[str, str],
              reported: int | None = None, used: str = "") -> dict[int, dict[tuple, np.ndarray]]:
    """Checkpoints `model_of(step)` at each step of `metric_of_step`, ranked by
    `select` ({"metric", "mode"}; metric "" = a run that selects nothing, no metrics
    saved; `used`: the alternative of an "a|b" metric that gave the values, saved beside it
    as the trainer does); `reported`: the step results.json reports (None: no results.json,
    an unfinished run). Returns {step: its parameters}."""
    metric, mode = select.get("metric", ""), select.get("mode", "max")
    out = {}
    with checkpoint.manager(workdir / "checkpoints", keep=1, best_metric=metric or None,
                            best_mode=mode) as mgr:
        for step, value in sorted(metric_of_step.items()):
            model = model_of(step)
            state = nnx.state((model, nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)))
            saved = {metric: value, **({used: value} if used else {})}
            checkpoint.save(mgr, step, state, _Iterator(), metrics=saved if metric else None)
            mgr.wait_until_finished()
            out[step] = params(nnx.state(model))
    (workdir / "config.json").write_text(json.dumps({"select": select}))
    if reported is not None:
        value = metric_of_step[reported] if metric else None
        (workdir / "results.json").write_text(json.dumps({
            "test": {"x": 1.0}, "selection": {"metric": metric or None,
                                              "mode": mode if metric else "last",
                                              "step": reported, "value": value}}))
    return out
