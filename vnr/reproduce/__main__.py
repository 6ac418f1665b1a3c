"""Reproduce a paper's table with one command.

    python -m vnr.reproduce list [--benchmark B] [--table T]
    python -m vnr.reproduce run --benchmark B --table T --root DIR [--rows a,b] \\
        [--scale smoke|paper] [--dry_run [--launcher local|slurm|tpu]] [--data_dir D] \\
        [--set key=value ...]
    python -m vnr.reproduce report --benchmark B --table T --root DIR [--csv F] [--png F] \\
        [--set key=value ...]
    python -m vnr.reproduce docs [--benchmark B] [--check]

`list` prints each table's rows: status, the paper's numbers and the command. `run` trains
every runnable row of the table into DIR/<row id> (rows that differ only in evaluation
train once and are evaluated per row; a row with a results.json is skipped, so rerunning
resumes); `--dry_run` prints the commands instead, in the form the cluster launchers take.
`--scale smoke` runs every row a few steps on the generated corpora. `report` lays the
table out as the paper does, ours beside the paper's number. `docs` regenerates the
tables of each REPRODUCING.md from the registry (`--check`: only compare).
"""

from __future__ import annotations

import json
import pathlib
import sys

from absl import app, flags, logging

from vnr import cli, progress
from vnr.reproduce import docs, execute, plan, registry, report

COMMANDS = ("list", "run", "report", "docs")
FLAGS = flags.FLAGS
flags.DEFINE_string("benchmark", None, f"One of {', '.join(registry.benchmarks())}.")
flags.DEFINE_string("table", None, "A table of the benchmark's paper (e.g. 1, 10).")
flags.DEFINE_list("rows", [], "run: only these row ids of the table (default: every row).")
flags.DEFINE_string("root", None, "run/report: the directory holding one directory per run.")
flags.DEFINE_enum("scale", "paper", plan.SCALES, "paper: the rows' own commands; smoke: a few "
                  "steps on the generated corpora (report: default the scale run used).")
flags.DEFINE_bool("dry_run", False, "run: print the commands, run nothing.")
flags.DEFINE_enum("launcher", "local", ("local", "slurm", "tpu"), "--dry_run: print trainings "
                  "as `python -m vnr.train`, launch/slurm_gpu.sbatch or launch/tpu_pod.sh "
                  "commands.")
flags.DEFINE_string("data_dir", None, "Where datasets are built: replaces the configs' data/ "
                    "(data/tfds -> DATA_DIR/tfds). Default: data/ (paper), ROOT/_data (smoke).")
flags.DEFINE_string("csv", None, "report: also write the table as CSV here.")
flags.DEFINE_string("png", None, "report: also draw ours vs the paper's per column here.")
flags.DEFINE_bool("check", False, "docs: only check that REPRODUCING.md agrees.")
flags.DEFINE_multi_string("set", [], "run/report: key=value added to every training's "
                          "overrides (e.g. total_steps=N for your corpus); give report the "
                          "same, or it names the runs as another config's.")

SCALE_FILE = "reproduce.json"


class UsageError(ValueError):
    """A bad command line: one line."""


def _table(reg: registry.Registry) -> registry.Table:
    if not FLAGS.table:
        raise UsageError(f"--table is required (tables of {reg.benchmark}: "
                         f"{', '.join(t.id for t in reg.tables)})")
    return reg.table(FLAGS.table)


def _registry(required: bool) -> list[registry.Registry]:
    if FLAGS.benchmark is None:
        if required:
            raise UsageError(f"--benchmark is required (benchmarks: "
                             f"{', '.join(registry.benchmarks())})")
        return registry.load_all()
    return [registry.load(FLAGS.benchmark)]


def _root() -> pathlib.Path:
    if not FLAGS.root:
        raise UsageError("--root is required (the directory of the runs)")
    root = pathlib.Path(FLAGS.root).absolute()
    if root.exists() and not root.is_dir():
        raise UsageError(f"--root {FLAGS.root} is a file, not a directory of runs")
    return root


def _having_table(regs: list[registry.Registry]) -> list[registry.Registry]:
    """`--table` without `--benchmark`: the benchmarks that have that table (one line
    naming every benchmark's tables when none has it)."""
    having = [r for r in regs if any(t.id == FLAGS.table for t in r.tables)]
    if not having:
        raise UsageError(f"no benchmark has a table {FLAGS.table!r} (" + "; ".join(
            f"{r.benchmark}: {', '.join(t.id for t in r.tables)}" for r in regs) + ")")
    return having


def cmd_list() -> None:
    root = pathlib.Path("DIR")
    regs = _registry(False)
    if FLAGS.table and FLAGS.benchmark is None:
        regs = _having_table(regs)
    for reg in regs:
        p = plan.make(reg, "paper", root)
        tables = [_table(reg)] if FLAGS.table else reg.tables
        for table in tables:
            print(f"\n{reg.benchmark} Table {table.id}: {table.title}")
            print("  columns: " + " | ".join(c.name for c in table.columns))
            for row in reg.rows_of(table.id):
                cells = " | ".join(c or "-" for c in row.paper) if row.paper else \
                    f"(not printed: {row.paper_note})"
                print(f"  {row.id}  {report.label(row)}  [{row.status.split(':', 1)[0]}]  "
                      f"{cells}")
                if row.command is None or row.status.startswith("deviates"):
                    print(f"      {row.status}")
                if row.ours:
                    print(f"      ours: {'; '.join(row.ours)}")
                for rid in p.by_row.get(row.id, []):
                    print(f"      {plan.command_line(p, p.runs[rid])}")


def _selected(reg: registry.Registry, table: registry.Table) -> list[registry.Row]:
    rows = reg.rows_of(table.id)
    if not FLAGS.rows:
        return rows
    ids = [r.id for r in rows]
    unknown = [r for r in FLAGS.rows if r not in ids]
    if unknown:
        raise UsageError(f"--rows: {', '.join(unknown)} not in {reg.benchmark} Table "
                         f"{table.id} (its rows: {', '.join(ids)})")
    return [r for r in rows if r.id in FLAGS.rows]


def _env(p: plan.Plan, make_inputs: bool) -> dict[str, str]:
    extra = {}
    if p.scale == "smoke":
        if make_inputs:
            extra = execute.smoke_inputs(p, progress.say)
        else:
            extra = {v.name: str(p.root / "_smoke" / v.name) for v in p.registry.smoke.vars}
    return plan.environment(extra)


def _data_dir(p: plan.Plan) -> str | None:
    if FLAGS.data_dir:
        return FLAGS.data_dir
    return str(p.root / "_data") if p.scale == "smoke" else None


def cmd_run() -> int:
    reg = _registry(True)[0]
    table, root = _table(reg), _root()
    p = plan.make(reg, FLAGS.scale, root, tuple(FLAGS.set))
    rows = _selected(reg, table)
    runs = p.order([r.id for r in rows])
    if FLAGS.dry_run:
        for row in rows:
            if row.command is None:
                print(f"# {row.id}: {row.status}")
            elif row.id in p.skipped:
                print(f"# {row.id}: not run at --scale {p.scale}: {p.skipped[row.id]}")
        for run in runs:
            why = {"copy": f"the run and evaluation of {run.owner}",
                   "evaluate": f"evaluate-only, trained by {run.owner}"}.get(run.action)
            print(f"# {run.id}" + (f": {why}" if why else ""))
            print(plan.command_line(p, run, FLAGS.launcher))
        return 0
    recorded = _recorded_scale(root)
    if recorded and recorded != p.scale:
        raise UsageError(f"--root {root} holds --scale {recorded} runs; use another --root")
    root.mkdir(parents=True, exist_ok=True)
    (root / SCALE_FILE).write_text(json.dumps({"scale": p.scale}))
    env = _env(p, make_inputs=True)
    progress.say(f"{reg.benchmark} Table {table.id}: {len(runs)} run(s) at --scale {p.scale} "
                 f"into {root}")
    failed = execute.execute(p, runs, env, _data_dir(p))
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failed else 0


def _recorded_scale(root: pathlib.Path) -> str | None:
    try:
        return json.loads((root / SCALE_FILE).read_text()).get("scale")
    except (OSError, ValueError):
        return None


def cmd_report() -> int:
    reg = _registry(True)[0]
    table, root = _table(reg), _root()
    recorded = _recorded_scale(root)
    scale = FLAGS.scale if FLAGS["scale"].present or not recorded else recorded
    if recorded and scale != recorded:
        raise UsageError(f"--scale {scale}: {root} holds --scale {recorded} runs")
    p = plan.make(reg, scale, root, tuple(FLAGS.set))
    env = _env(p, make_inputs=False)
    for name, _ in reg.vars:  # unset paths stay `$VAR` (such values are not compared)
        env.setdefault(name, f"${name}")
    lines = report.collect(p, table, report.checker(p, env, _data_dir(p)))
    print(report.markdown(p, table, lines))
    if FLAGS.csv:
        report.write_csv(pathlib.Path(FLAGS.csv), table, lines)
        progress.say(f"wrote {FLAGS.csv}")
    if FLAGS.png:
        progress.say(f"wrote {report.write_png(pathlib.Path(FLAGS.png), p, table, lines)}")
    return 0


def cmd_docs() -> int:
    bad = []
    for reg in _registry(False):
        if FLAGS.check:
            problem = docs.check(reg)
            if problem:
                bad.append(problem)
        elif docs.write(reg):
            progress.say(f"rewrote the tables of {docs.path_of(reg)}")
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    return 1 if bad else 0


def main(argv: list[str]) -> None:
    if not FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # orbax/grain INFO lines drown the progress
    args = argv[1:]
    if len(args) != 1 or args[0] not in COMMANDS:
        cli.fail(f"give one command of {', '.join(COMMANDS)} (got "
                 f"{' '.join(args) or 'none'}); --help names the flags")
    try:
        code = {"list": lambda: cmd_list() or 0, "run": cmd_run, "report": cmd_report,
                "docs": cmd_docs}[args[0]]()
    except (registry.RegistryError, UsageError) as e:
        cli.fail(str(e))
    sys.exit(code)


def parse_flags(argv: list[str]) -> list[str]:
    """absl's parsing, with a bad flag as one error line."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        cli.fail(str(e))


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
