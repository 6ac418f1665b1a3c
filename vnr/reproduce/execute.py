"""`run`: every run of the chosen rows, in dependency order, resumable.

A run whose directory has a results.json of the same config is skipped; one holding
another config's run is named and left alone (never overwritten, never reported). Trainings
go through `vnr.train.run`, re-evaluations through `vnr.evaluate.evaluate`, tools run in
this process (`runpy`, their JSON output parsed), all in one process so compiled programs
and built datasets are shared. Each directory gets a `row.json` saying what ran there.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import pathlib
import runpy
import shlex
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from vnr import progress
from vnr import workdir as workdir_lib
from vnr.reproduce import runconfig
from vnr.reproduce.plan import EVAL_STEP, Plan, PlanError, Run, command_line, expand
from vnr.reproduce.registry import SmokeVar

ROW_JSON = "row.json"
TOOL_SPLIT = "tool"  # the results.json key of a tool's metrics


def smoke_inputs(plan: Plan, say: Callable[[str], None]) -> dict[str, str]:
    """The benchmark's generated smoke inputs (`[smoke.vars]`), made once under
    `<root>/_smoke/`; {VAR: path}."""
    out = {}
    for var in plan.registry.smoke.vars:
        out[var.name] = str(_make_input(var, plan.root / "_smoke" / var.name, say))
    return out


def _make_input(var: SmokeVar, path: pathlib.Path, say: Callable[[str], None]) -> pathlib.Path:
    done = path.with_name(f".{path.name}.done")
    if done.exists():
        return pathlib.Path(done.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    if var.call:
        module, _, name = var.call.partition(":")
        say(f"smoke input {var.name}: {var.call}")
        got = getattr(importlib.import_module(module), name)(path, **dict(var.kwargs))
        path = pathlib.Path(got) if got is not None else path
    else:
        path.write_text(var.text)
    done.write_text(str(path))
    return path


def execute(plan: Plan, runs: list[Run], env: dict[str, str], data_dir: str | None,
            say: Callable[[str], None] = progress.say) -> list[str]:
    """Runs `runs` (in order); returns one line per run that failed or was refused."""
    failed: dict[str, str] = {}
    n = len(runs)
    for i, run in enumerate(runs, 1):
        d = plan.root / run.id
        head = f"[{i}/{n}] {run.id}"
        blocked = [x for x in (*run.deps, run.owner) if x and x in failed]
        if blocked:
            failed[run.id] = f"{run.id}: not run, {blocked[0]} failed"
            say(f"{head}: not run ({blocked[0]} failed)")
            continue
        try:
            if (d / "results.json").is_file():
                problem = mismatch(plan, run, env, data_dir)
                if problem:
                    raise PlanError(f"{d} holds {runconfig.holding(problem)}; left alone: "
                                    f"use another --root or remove it")
                say(f"{head}: done before (results.json), skipped")
                continue
            t0 = time.perf_counter()
            say(f"{head}: {run.action} ...")
            _ACTIONS[run.action](plan, run, env, data_dir, say)
            say(f"{head}: {run.action} finished in {progress.duration(time.perf_counter() - t0)}")
        except Exception as e:  # noqa: BLE001 (one line per failed run, the others go on)
            message = " ".join(str(e).split())
            if not isinstance(e, ValueError | RuntimeError) or not message:
                message = f"{type(e).__name__}: {message}"  # an unexpected error: its kind
            failed[run.id] = f"{run.id}: {message}"
            say(f"{head}: failed: {message}")
    return list(failed.values())


def mismatch(plan: Plan, run: Run, env: dict[str, str], data_dir: str | None) -> str:
    """'' when the run directory holds `run`; else the first thing that differs, or
    `runconfig.UNIDENTIFIED` when nothing in it says what ran."""
    d = plan.root / run.id
    if run.action == "tool":
        try:
            tool = json.loads((d / ROW_JSON).read_text()).get("tool")
        except (OSError, ValueError):
            return runconfig.UNIDENTIFIED  # a results.json alone: whose?
        return "" if tool == run.tool else f"it ran {tool!r}"
    got = runconfig.held(d)
    if got is None:
        return runconfig.UNIDENTIFIED
    want = runconfig.build(plan, run, env, data_dir, with_eval=run.action == "evaluate")
    return runconfig.differs(want, got, plan.root)


def _record(plan: Plan, run: Run, config: Any = None, **extra: Any) -> None:
    d = plan.root / run.id
    d.mkdir(parents=True, exist_ok=True)
    record = {"benchmark": plan.registry.benchmark, "row": run.row, "run": run.id,
              "scale": plan.scale, "action": run.action, "config_spec": run.config,
              "set": list(run.set), "eval_set": list(run.eval_set), **extra}
    if config is not None:
        record["config"] = json.loads(config.to_json_best_effort())
    (d / ROW_JSON).write_text(json.dumps(record, indent=2))


def _train(plan: Plan, run: Run, env: dict[str, str], data_dir: str | None,
           say: Callable[[str], None]) -> None:
    from vnr import train

    config = runconfig.build(plan, run, env, data_dir)
    got = runconfig.held(plan.root / run.id)
    problem = runconfig.differs(config, got, plan.root) if got is not None else ""
    if problem:  # a run of another config, unfinished: named, never resumed or overwritten
        raise PlanError(f"{plan.root / run.id} holds a run of another config ({problem}); "
                        f"left alone: use another --root or remove it")
    say(f"  python -m vnr.train --config {expand(run.config, env, run.id, {})} --workdir "
        f"{plan.root / run.id} {' '.join('--config.' + x for x in run.set)}")
    _record(plan, run)
    train.run(config, str(plan.root / run.id))


def _owner_config(plan: Plan, run: Run) -> Any:
    owner = plan.root / run.owner
    if not (owner / "results.json").is_file():
        raise PlanError(f"{run.id}: its training {owner} has no results.json")
    return workdir_lib.load_config(owner)


def _copy(plan: Plan, run: Run, env: dict[str, str], data_dir: str | None,
          say: Callable[[str], None]) -> None:
    config = _owner_config(plan, run)
    _record(plan, run, config, trained_in=str(plan.root / run.owner))
    shutil.copyfile(plan.root / run.owner / "results.json", plan.root / run.id / "results.json")


def _evaluate(plan: Plan, run: Run, env: dict[str, str], data_dir: str | None,
              say: Callable[[str], None]) -> None:
    from vnr import evaluate

    config = _owner_config(plan, run)
    runconfig.apply(config, tuple(expand(x, env, run.id, {}) for x in run.eval_set), run.id)
    say(f"  {command_line(plan, run)}")  # the command --dry_run prints: the same step
    _record(plan, run, config, trained_in=str(plan.root / run.owner))
    results = evaluate.evaluate(config, plan.root / run.owner, EVAL_STEP)
    workdir_lib.write_results(plan.root / run.id / "results.json",
                              workdir_lib.split_results(results),
                              results[workdir_lib.SELECTION])


def _tool(plan: Plan, run: Run, env: dict[str, str], data_dir: str | None,
          say: Callable[[str], None]) -> None:
    argv = shlex.split(expand(run.tool, env, run.id, dict(plan.registry.vars)))
    if argv[:2] != ["python", "-m"] or len(argv) < 3:
        raise PlanError(f"{run.id}: tool {run.tool!r} is not 'python -m module ...'")
    say(f"  {' '.join(argv)}")
    _record(plan, run, tool=run.tool)
    out, old = io.StringIO(), sys.argv
    sys.argv = [argv[2], *argv[3:]]
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            # a tool module imported before (e.g. by a smoke input's generator) runs anew
            warnings.filterwarnings("ignore", ".* found in sys.modules", RuntimeWarning)
            runpy.run_module(argv[2], run_name="__main__", alter_sys=False)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise PlanError(f"{run.id}: {argv[2]} stopped: {e.code}") from None
    finally:
        sys.argv = old
    metrics = _last_json(out.getvalue(), run.id)
    workdir_lib.write_results(plan.root / run.id / "results.json", {TOOL_SPLIT: metrics},
                              {"metric": None, "mode": "tool", "step": None, "value": None})


def _last_json(text: str, what: str) -> dict[str, float]:
    """The last JSON object a tool printed."""
    start = text.rfind("\n{")
    start = start + 1 if start >= 0 else text.find("{")
    try:
        got = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        got = None
    if not isinstance(got, dict):
        raise PlanError(f"{what}: the tool printed no JSON object")
    return {k: float(v) for k, v in got.items() if isinstance(v, int | float)}


_ACTIONS = {"train": _train, "copy": _copy, "evaluate": _evaluate, "tool": _tool}
