"""Every runnable row of a benchmark's tables at `--scale smoke`, through `vnr.reproduce`'s
own planner, executor and report (shared by the per-benchmark e2e tests, one file each so
the two test workers share them out)."""

from __future__ import annotations

import json
import pathlib
import time
from typing import NamedTuple

import ml_collections
import pytest

from vnr import evaluators
from vnr import task as task_lib
from vnr.reproduce import execute, plan, registry, report, runconfig


def run_all(benchmark: str, root: pathlib.Path) -> tuple[plan.Plan, dict[str, str], float]:
    """Runs every table's rows into `root`; returns the plan, the environment and the
    seconds it took. Every run must succeed; running again must redo nothing."""
    t0 = time.perf_counter()
    reg = registry.load(benchmark)
    p = plan.make(reg, "smoke", root)
    runs = p.order([r.id for r in reg.rows if r.table])
    lines: list[str] = []
    env = plan.environment(execute.smoke_inputs(p, lines.append))
    data_dir = str(root / "_data")
    failed = execute.execute(p, runs, env, data_dir, lines.append)
    assert not failed, "\n".join(failed)
    seconds = time.perf_counter() - t0
    lines.clear()
    assert not execute.execute(p, runs, env, data_dir, lines.append)  # resumable: all done
    assert all("done before" in ln for ln in lines), lines
    return p, env, seconds


def check_tables(p: plan.Plan, env: dict[str, str]) -> dict[str, list[report.Line]]:
    """Every runnable row of every table reports numbers; the rows that do not run at smoke
    are the ones the registry says."""
    out = {}
    check = report.checker(p, env, str(p.root / "_data"))
    for table in p.registry.tables:
        lines = report.collect(p, table, check)
        for ln in lines:
            if ln.row.command is None:
                assert ln.state == "not provided"
            elif ln.row.id in p.skipped:
                assert ln.state == "not run at this scale"
            else:
                assert ln.state == "ok", (table.id, ln.row.id, ln.state, ln.detail)
                assert any(c.ours is not None for c in ln.cells), (table.id, ln.row.id)
        text = report.markdown(p, table, lines)
        assert f"Table {table.id}" in text and "missing" not in text.split("\n", 3)[3]
        out[table.id] = lines
    return out


def check_metric_names(root: pathlib.Path) -> int:
    """Every metric a run's evaluators wrote (its results.json, and the evaluator keys of its
    metrics.jsonl) is one that `metric_columns(config)` of the evaluator's module lists, so the
    names `config.select` is checked against cannot drift from what evaluation reports.
    Returns the number of runs checked (a tool's results hold no config: not checked)."""
    checked = 0
    for path in sorted(root.glob("*/results.json")):
        held = runconfig.held(path.parent)
        if held is None:
            continue
        config = ml_collections.ConfigDict(held)
        evals = evaluators.parse(config, task_lib.load(config.task))
        names = {e.name: set(task_lib.metric_names(e.module, config)) for e in evals}
        final = [e for e in evals if e.final]
        for split, metrics in json.loads(path.read_text()).items():
            if split == "selection":
                continue
            e = next((e for e in final if split in e.splits), final[0])
            extra = sorted(set(metrics) - names[e.name])
            assert not extra, f"{path}: {split} has {extra}, not in {e.module.__name__}." \
                              f"metric_columns"
        log = path.parent / "metrics.jsonl"
        for line in log.read_text().splitlines() if log.is_file() else ():
            for key in json.loads(line):
                name, _, rest = key.partition("/")
                leaf = rest.rsplit("/", 1)[-1]
                assert name not in names or leaf in names[name] | {"eval_seconds"}, \
                    f"{log}: {key} is not in the metric_columns of evals.{name}"
        checked += 1
    return checked


def everything(benchmark: str, root: pathlib.Path
               ) -> tuple[plan.Plan, dict[str, str], dict[str, list[report.Line]]]:
    """`run_all`, `check_tables` and `check_metric_names`, printing the time (pytest -s
    shows it)."""
    p, env, seconds = run_all(benchmark, root)
    tables = check_tables(p, env)
    assert check_metric_names(root) > 0
    print(f"{benchmark}: every row at smoke scale in {seconds:.0f} s")
    return p, env, tables


class Runs(NamedTuple):
    """What `everything` ran: the plan, environment, reported tables and the root folder."""

    plan: plan.Plan
    env: dict[str, str]
    tables: dict[str, list[report.Line]]
    root: pathlib.Path


def module_runs(benchmark: str):
    """A module fixture `runs`: every row of `benchmark` at smoke scale, run once for the
    test file (its tests read the rows' run folders instead of training again)."""

    @pytest.fixture(scope="module")
    def runs(tmp_path_factory) -> Runs:
        root = tmp_path_factory.mktemp(benchmark)
        return Runs(*everything(benchmark, root), root)

    return runs


def results(root: pathlib.Path, run: str) -> dict:
    """A row's results.json."""
    return json.loads((root / run / "results.json").read_text())
