"""Evaluate a finished run again, without training.

    python -m vnr.evaluate --workdir W [--step selected|best|last|N] [--splits a,b] \\
        [--out FILE] [--report_dir DIR] [--config.key=value ...]

Reads `W/config.json`, builds the model on this machine's devices (any mesh:
`--config.mesh.shape=...`), restores the checkpoint of `--step` (`selected`, the default:
the step `results.json` reports; `best`: the best by `config.select`; `last`: the newest;
or a number) and runs the run's final evaluators (`config.evals`) on their splits, or on `--splits`
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
from absl import flags, logging

from vnr import checkpoint, cli, evaluators, progress, run_reader, selection
from vnr import config as config_lib
from vnr import task as task_lib
from vnr import workdir as workdir_lib
from vnr.reports import results as results_table


class EvaluateError(ValueError):
    """The run or the step cannot be evaluated (one line)."""


@dataclasses.dataclass
class Model:
    """A model ready to evaluate: the trainer's `Setup` and the state to predict with."""

    config: ml_collections.ConfigDict
    setup: Any  # vnr.train.Setup
    state: Any
    selection: dict[str, Any]

    @property
    def predict(self) -> Any:
        """The task's jitted predict functions on this state, called like `predict` on one
        global batch (`vnr.evaluation.Predictor`)."""
        return self.setup.predictor(self.state)


def _setup(config: ml_collections.ConfigDict, load_pretrained: bool,
           abstract: bool = False) -> Any:
    from vnr.train import ConfigError, setup  # the trainer builds the model the same way

    try:
        return setup(config, load_pretrained=load_pretrained, abstract=abstract)
    except ConfigError as e:
        raise EvaluateError(str(e)) from None


def restore(workdir: str | pathlib.Path, step: str = "selected",
            config: ml_collections.ConfigDict | None = None, task: str | None = None) -> Model:
    """A finished run's model at `step` (selected / best / last / a number:
    `vnr.selection.choose_step`, the chooser every reader of a run shares) on this machine's
    mesh, with one line saying which step and why; `config` (default: the run's config.json,
    overrides applied by the caller) says how to build it. `task`: the task the run must be
    (one line otherwise). The one reader of a run for evaluation (this command, the
    two-stage tools)."""
    workdir = pathlib.Path(workdir).absolute()
    config = config if config is not None else workdir_lib.load_config(workdir)
    if task is not None and config.task != task:
        raise EvaluateError(f"{workdir}: task={config.task!r}, expected {task}")
    s = _setup(config, load_pretrained=False, abstract=True)  # the checkpoint fills it
    select = config.get("select") or {}
    try:
        chosen = run_reader.run_step(workdir, step, "--workdir", select, "--step")
    except (selection.StepError, FileNotFoundError, ValueError) as e:
        raise EvaluateError(str(e)) from None
    if jax.process_index() == 0:
        progress.say(f"{workdir}: step {chosen.step} ({chosen.why})")
    mgr = checkpoint.reader(workdir / "checkpoints", select.get("metric") or None,
                            select.get("mode", "max"))
    try:
        state = checkpoint.restore(mgr, chosen.step, s.state, s.state_shardings, None)
    finally:
        mgr.close()
    return Model(config, dataclasses.replace(s, state=state), state, chosen.record)


def from_config(config: ml_collections.ConfigDict) -> Model:
    """A config's model with the weights its task's `pretrained` hook names (e.g.
    `init_from=<another run>` at `init_step`: zero-shot transfer, re-scoring a run),
    evaluated without training; the hook's line names the step read and why, and the
    record names it too (`init_step`: the step number read)."""
    s = _setup(config, load_pretrained=True)
    record = {"metric": None, "mode": "weights", "step": 0, "value": None,
              "init_from": str(config.get("init_from", ""))}
    if record["init_from"]:
        record["init_step"] = run_reader.run_step(
            record["init_from"], config.get("init_step", "selected")).step
    return Model(config, s, s.state, record)


def final_results(model: Model, splits: list[str] | None = None,
                  report_dir: pathlib.Path | None = None) -> dict[str, Any]:
    """{split: metrics, "selection": the step's record}: the config's final evaluators on
    their splits, or on `splits` (a split no final evaluator names goes to the first
    final evaluator's module and settings). Only process 0 draws into `report_dir`."""
    config, s = model.config, model.setup
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
    primary = jax.process_index() == 0
    say = progress.say if primary else (lambda m: None)
    report_dir = report_dir if primary else None  # as the trainer: process 0 draws, alone
    say(f"evaluating at step {model.selection['step']} ({model.selection['mode']})")
    results = evaluators.final(final, config, model.predict, s.mesh, None,
                               model.selection["step"], report_dir, say, splits)
    return {**results, workdir_lib.SELECTION: model.selection}


def evaluate(config: ml_collections.ConfigDict, workdir: str | pathlib.Path,
             step: str = "selected", splits: list[str] | None = None,
             report_dir: pathlib.Path | None = None) -> dict[str, Any]:
    """{split: metrics, "selection": the step's record} of a finished run at `step`."""
    return final_results(restore(workdir, step, config), splits, report_dir)


def _with_splits(config: ml_collections.ConfigDict, splits: list[str] | None
                 ) -> ml_collections.ConfigDict:
    """The config whose test splits are `splits` (for the task's split check)."""
    if not splits:
        return config
    c = ml_collections.ConfigDict(config.to_dict())
    c.data.test_splits = tuple(splits)
    return c


PROG = "python -m vnr.evaluate"


def _flags(argv: list[str], fv: flags.FlagValues) -> None:
    """The flags; `--config` is the run's own config.json (read from `--workdir` in
    `argv`), `--config.key=value` overriding it."""
    from ml_collections import config_flags

    workdir = next((a.split("=", 1)[1] if "=" in a else argv[i + 1]
                    for i, a in enumerate(argv) if a.split("=", 1)[0] == "--workdir"
                    and ("=" in a or i + 1 < len(argv))), None)
    overrides = [a[len("--config."):].split("=", 1)[0] for a in argv
                 if a.startswith("--config.")]
    if workdir is not None:
        try:
            config = workdir_lib.load_config(pathlib.Path(workdir))
        except ValueError as e:
            cli.fail(str(e))
        try:
            config_lib.check_keys(config, overrides, f"{workdir}/config.json")
        except config_lib.ConfigError as e:
            cli.fail(str(e))
        config_flags.DEFINE_config_dict("config", config, "The run's config.json; "
                                        "--config.key=value overrides a key.",
                                        flag_values=fv, lock_config=True,
                                        sys_argv=["", *argv])
    elif overrides and not any(a in cli.HELP for a in argv):
        cli.fail(f"--config.{overrides[0]}: --workdir is required (its config.json is what "
                 f"--config.key=value overrides)")
    flags.DEFINE_string("workdir", None, "A finished vnr.train run (its config.json and "
                        "checkpoints).", required=True, flag_values=fv)
    flags.DEFINE_string("step", "selected", "selected (what results.json reports), best (by "
                        "config.select; an error if the run selects nothing), last, or a "
                        "step number.", flag_values=fv)
    flags.DEFINE_list("splits", [], "Splits to evaluate (default: the final evaluators').",
                      flag_values=fv)
    flags.DEFINE_string("out", None, "Write the results here (results.json's layout).",
                        flag_values=fv)
    flags.DEFINE_string("report_dir", None, "Let the evaluators write their pictures here "
                        "(process 0 draws them).", flag_values=fv)


def main(argv: list[str] | None = None) -> int:
    """`python -m vnr.evaluate` (`argv` without the program name; None: `sys.argv[1:]`): a
    bad command line, run or checkpoint is one `error:` line, exit status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = cli.parse(argv, PROG, __doc__, functools.partial(_flags, argv),
                     shared=("absl.logging",))
    cli.app(lambda: _main(args))


def _main(args: cli.Args) -> int:
    if not args.flags["verbosity"].present:
        logging.set_verbosity(logging.WARNING)
    config = args.config
    try:
        results = evaluate(config, args.workdir, args.step, args.splits or None,
                           pathlib.Path(args.report_dir) if args.report_dir else None)
    except (EvaluateError, evaluators.EvaluatorError, FileNotFoundError,
            checkpoint.CorruptCheckpoint, checkpoint.IncompatibleCheckpoint) as e:
        cli.fail(str(e))
    if jax.process_index() != 0:
        return 0
    if args.out:
        workdir_lib.write_results(pathlib.Path(args.out), workdir_lib.split_results(results),
                                  results[workdir_lib.SELECTION])
    task = task_lib.load(config.task)
    table = workdir_lib.split_results(results)
    print(results_table.markdown(table, task_lib.columns(task, config, table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
