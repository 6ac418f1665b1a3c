"""Evaluate a finished run again, without training.

    python -m vnr.evaluate --workdir W [--step best|last|N] [--splits a,b] [--out FILE] \
        [--report_dir DIR] [--config.key=value ...]

Reads `W/config.json`, builds the model on this machine's devices (any mesh:
`--config.mesh.shape=...`), restores the checkpoint of `--step` (`best`: the step
`config.select` chose, as `results.json` reports; `last`: the newest; or a number) and
runs the run's final evaluators (`config.evals`) on their splits, or on `--splits`
(a split no final evaluator names is evaluated by the first final evaluator's module and
settings). `--config.evals.<name>.max_examples=...` and other overrides change what is
evaluated, never the checkpoint. `--out` writes the results in `results.json`'s layout,
`selection` naming the step; at the selected step it equals the run's `results.json`.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import sys
from typing import Any

import jax
import ml_collections
from absl import app, flags, logging

from vnr import checkpoint, config_file, evaluators, progress
from vnr import task as task_lib
from vnr import workdir as workdir_lib
from vnr.reports import results as results_table

FLAGS = flags.FLAGS


class EvaluateError(ValueError):
    """The run or the step cannot be evaluated (one line)."""


def choose_step(mgr: Any, config: Any, step: str) -> dict[str, Any]:
    """The `selection` record of `--step` (`best`, `last` or a number)."""
    steps = sorted(mgr.all_steps())
    if not steps:
        raise EvaluateError(f"{mgr.directory}: no checkpoint to evaluate")
    if step == "best":
        select = config.get("select") or {}
        if not select.get("metric"):
            raise EvaluateError("--step best: this run selects no step (config.select.metric "
                                "is empty: it reports the last step); use --step last")
        best = checkpoint.best(mgr)
        if best is None:
            raise EvaluateError(f"--step best: the run never validated a saved step (no "
                                f"checkpoint in {mgr.directory} carries "
                                f"{select['metric']!r})")
        return evaluators.selected_step(mgr, config)
    if step == "last":
        n = steps[-1]
    else:
        try:
            n = int(step)
        except ValueError:
            raise EvaluateError(f"--step={step!r}: use best, last or a step number") from None
        if n not in steps:
            raise EvaluateError(f"--step={n}: no checkpoint of that step (there are "
                                f"{', '.join(map(str, steps))})")
    metrics = mgr.metrics(n) or {}
    metric = (config.get("select") or {}).get("metric") or None
    return {"metric": metric, "mode": "last" if step == "last" else "step", "step": int(n),
            "value": float(metrics[metric]) if metric in metrics else None}


def evaluate(config: ml_collections.ConfigDict, workdir: str | pathlib.Path,
             step: str = "best", splits: list[str] | None = None,
             report_dir: pathlib.Path | None = None) -> dict[str, Any]:
    """{split: metrics, "selection": the step's record} of a finished run at `step`."""
    from vnr.train import ConfigError, setup  # the trainer builds the model the same way

    workdir = pathlib.Path(workdir).absolute()
    try:
        s = setup(config, load_pretrained=False)
    except ConfigError as e:
        raise EvaluateError(str(e)) from None
    final = [e for e in s.evaluators if e.final]
    if not final:
        raise EvaluateError("the config declares no final evaluator (config.evals.<name>."
                            "final=True)")
    if splits:
        declared = set(evaluators.splits_of(final))
        extra = [x for x in splits if x not in declared]
        if extra:  # evaluated like the first final evaluator's splits
            final = [*final, dataclasses.replace(final[0], name="extra", splits=tuple(extra))]
    if check := task_lib.hook(s.task, "check_splits"):
        try:
            check(_with_splits(config, splits))
        except ValueError as e:
            raise EvaluateError(str(e)) from None
    mgr = checkpoint.reader(workdir / "checkpoints", (config.get("select") or {}).get(
        "metric") or None, (config.get("select") or {}).get("mode", "max"))
    selection = choose_step(mgr, config, step)
    say = progress.say if jax.process_index() == 0 else (lambda m: None)
    say(f"evaluating {workdir} at step {selection['step']} ({selection['mode']})")
    state = checkpoint.restore(mgr, selection["step"], s.state, s.state_shardings, None)
    mgr.close()
    results = evaluators.final(final, config, functools.partial(s.predict_fn, state), s.mesh,
                               None, selection["step"], report_dir, say, splits)
    return {**results, workdir_lib.SELECTION: selection}


def _with_splits(config: ml_collections.ConfigDict, splits: list[str] | None
                 ) -> ml_collections.ConfigDict:
    """The config whose test splits are `splits` (for the task's split check)."""
    if not splits:
        return config
    c = ml_collections.ConfigDict(config.to_dict())
    c.data.test_splits = tuple(splits)
    return c


def main(argv: list[str]) -> None:
    del argv
    if not FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)
    config = FLAGS.config
    try:
        results = evaluate(config, FLAGS.workdir, FLAGS.step, FLAGS.splits or None,
                           pathlib.Path(FLAGS.report_dir) if FLAGS.report_dir else None)
    except (EvaluateError, evaluators.EvaluatorError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    if jax.process_index() != 0:
        return
    if FLAGS.out:
        workdir_lib.write_results(pathlib.Path(FLAGS.out), workdir_lib.split_results(results),
                                  results[workdir_lib.SELECTION])
    task = task_lib.load(config.task)
    table = workdir_lib.split_results(results)
    print(results_table.markdown(table, task_lib.columns(task, config, table)))


def _define_config(argv: list[str]) -> None:
    """`--config` is the run's own config.json, with `--config.key=value` overrides."""
    from ml_collections import config_flags

    workdir = next((a.split("=", 1)[1] if "=" in a else argv[i + 1]
                    for i, a in enumerate(argv) if a.split("=", 1)[0] == "--workdir"
                    and ("=" in a or i + 1 < len(argv))), None)
    if workdir is None:
        sys.exit("error: --workdir is required (a finished vnr.train run)")
    try:
        config = workdir_lib.load_config(pathlib.Path(workdir))
    except ValueError as e:
        sys.exit(f"error: {e}")
    config_file.check_keys(config, [a[len("--config."):].split("=", 1)[0] for a in argv
                                    if a.startswith("--config.")], f"{workdir}/config.json")
    config_flags.DEFINE_config_dict("config", config, lock_config=True)
    # Defined here, not on import: vnr.train defines some of the same names.
    flags.DEFINE_string("workdir", None, "A finished vnr.train run (its config.json and "
                        "checkpoints).")
    flags.DEFINE_string("step", "best", "best (the selected step), last, or a step number.")
    flags.DEFINE_list("splits", [], "Splits to evaluate (default: the final evaluators').")
    flags.DEFINE_string("out", None, "Write the results here (results.json's layout).")
    flags.DEFINE_string("report_dir", None, "Let the evaluators write their pictures here.")


if __name__ == "__main__":
    _define_config(sys.argv)
    app.run(main)
