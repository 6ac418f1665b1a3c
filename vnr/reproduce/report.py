"""`report`: one table laid out as the paper prints it, our number beside the paper's.

Every cell is `ours / paper (ours - paper)`, ours rounded like the paper's cell. A row whose
runs have no results.json is `missing`; a run directory holding another config's run, or a
results.json nothing identifies (no config.json, no row.json), is named and left out of the
table (never mixed in); `not provided` rows keep the paper's
numbers and say why. `--csv` writes every cell as three numbers, `--png` draws per column
ours and the paper's, row by row.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import pathlib
from collections.abc import Callable
from typing import Any

from vnr.reproduce import runconfig
from vnr.reproduce.plan import Plan, PlanError, Run
from vnr.reproduce.registry import Column, Row, Table, number


@dataclasses.dataclass
class Cell:
    paper: str | None  # as printed
    ours: float | None = None
    std: float | None = None  # over the runs of a mean_std column
    why: str = "missing"  # when `ours` is None: missing (no run), n/a (no such metric),
    #                       - (this row has no number of ours in the column), n/p, n/r,
    #                       held out (its directory holds another or an unidentified run)
    places: int = 2  # decimals of ours: the paper's cell's, else its row's first printed


@dataclasses.dataclass
class Line:
    row: Row
    state: str  # ok, partial, missing, not provided, tool, not run at this scale, other
    #             config, unidentified (a results.json nothing says the origin of)
    detail: str
    cells: list[Cell]


def _status(row: Row) -> str:
    return row.status.split(":", 1)[0]


def _metric(results: dict[str, Any], key: str) -> float | None:
    """The value of `split/metric` (`*`: the one split having it; `a|b`: the first found)."""
    if "|" in key:
        return next((v for k in key.split("|") if (v := _metric(results, k)) is not None),
                    None)
    split, _, metric = key.partition("/")
    if split == "*":
        hits = [m[metric] for s, m in results.items() if s != "selection"
                and isinstance(m, dict) and metric in m]
        return float(hits[0]) if len(hits) == 1 else None
    v = (results.get(split) or {}).get(metric)
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _load(plan: Plan, run: Run, check: Callable[[Run], str]) -> tuple[dict | None, str]:
    path = plan.root / run.id / "results.json"
    if not path.is_file():
        return None, ""
    problem = check(run)
    if problem:
        return None, f"{run.id} holds {runconfig.holding(problem)}"
    try:
        return json.loads(path.read_text()), ""
    except (OSError, ValueError) as e:
        return None, f"{path}: unreadable ({e})"


def collect(plan: Plan, table: Table, check: Callable[[Run], str]) -> list[Line]:
    """The table's lines from the run directories under the plan's root."""
    lines = []
    for row in plan.registry.rows_of(table.id):
        printed = next((c for c in row.paper if c), None)
        cells = [Cell(row.paper[i] if row.paper else None) for i in range(len(table.columns))]
        for c in cells:
            c.places = _decimals(c.paper or printed)
        if row.command is None:
            lines.append(Line(row, "not provided", row.status.split(": ", 1)[-1], cells))
            continue
        if row.id in plan.skipped:
            lines.append(Line(row, "not run at this scale", plan.skipped[row.id], cells))
            continue
        runs = [plan.runs[r] for r in plan.by_row[row.id]]
        got, problems = {}, []
        for run in runs:
            res, problem = _load(plan, run, check)
            if problem:
                problems.append(problem)
            elif res is not None:
                got[run.id] = res
        for cell, column in zip(cells, table.columns, strict=True):
            if not column.mean_of:
                _fill(cell, row, column, runs, got)
            elif not all(row.key(c) for c in table.columns if c.name in column.mean_of):
                cell.why = "-"
        names = [c.name for c in table.columns]
        for cell, column in zip(cells, table.columns, strict=True):
            if column.mean_of and cell.why != "-":
                parts = [cells[names.index(n)] for n in column.mean_of]
                if all(p.ours is not None for p in parts):
                    cell.ours = sum(p.ours for p in parts) / len(parts)
                else:
                    cell.why = next(p.why for p in parts if p.ours is None)
        if problems:
            state = "other config" if any(" of another config " in p for p in problems) \
                else "unidentified"
            detail = "; ".join(problems)
            for cell in cells:  # not "missing": a run is there, and kept out
                cell.why = "held out" if cell.why == "missing" else cell.why
        elif not got:
            state, detail = "missing", "no results.json: not run, running or failed"
        elif len(got) < len(runs):
            state, detail = "partial", f"{len(got)} of {len(runs)} runs have results"
        else:
            state, detail = "ok", ""
        lines.append(Line(row, state, detail, cells))
    return lines


def _fill(cell: Cell, row: Row, column: Column, runs: list[Run], got: dict) -> None:
    key = row.key(column)
    if not key:
        cell.why = "-"
        return
    chosen = [r for r in runs if all(dict(r.values).get(k, v) == v for k, v in column.where)]
    if not chosen:
        cell.why = "n/r"  # e.g. a language the smoke scale does not run
        return
    if any(r.id not in got for r in chosen):
        return
    values = [_metric(got[r.id], key) for r in chosen]
    if any(v is None for v in values):
        cell.why = "n/a"
        return
    values = [v * column.scale for v in values]
    cell.ours = sum(values) / len(values)
    if column.agg == "mean_std" and len(values) > 1:
        cell.std = math.sqrt(sum((v - cell.ours) ** 2 for v in values) / (len(values) - 1))


def _decimals(printed: str | None) -> int:
    if not printed:
        return 2
    head = printed.split()[0].rstrip("%")
    return len(head.split(".", 1)[1]) if "." in head else 0


def ours_text(cell: Cell) -> str:
    if cell.ours is None:
        return ""
    d = cell.places
    text = f"{cell.ours:.{d}f}"
    return text + (f" ± {cell.std:.{d}f}" if cell.std is not None else "")


def diff(cell: Cell) -> float | None:
    p = number(cell.paper)
    return None if p is None or cell.ours is None else cell.ours - p


def cell_text(cell: Cell, state: str) -> str:
    paper = cell.paper or "-"
    if cell.ours is None:
        shown = {"not provided": "n/p", "not run at this scale": "n/r"}.get(state, cell.why)
        return f"{shown} / {paper}"
    d, places = diff(cell), cell.places
    delta = f" ({round(d, places) + 0.0:+.{places}f})" if d is not None else ""  # no -0.0
    return f"{ours_text(cell)} / {paper}{delta}"


def label(row: Row) -> str:
    return f"{row.group} {row.name}".strip()


def markdown(plan: Plan, table: Table, lines: list[Line]) -> str:
    reg = plan.registry
    out = [f"{reg.title}: Table {table.id}, {table.title}",
           f"(cells: ours / paper (ours - paper); root {plan.root}, scale {plan.scale}; "
           f"missing: not run; n/a: the run reports no such metric; -: no number of ours in "
           f"this column; n/p: not provided; n/r: not run at this scale; held out: the "
           f"directory holds another config's or an unidentified run)", "",
           "| row | " + " | ".join(c.name for c in table.columns) + " | status | ours |",
           "|" + "---|" * (len(table.columns) + 3)]
    for ln in lines:
        out.append(f"| {label(ln.row)} | " + " | ".join(cell_text(c, ln.state)
                                                      for c in ln.cells)
                   + f" | {_status(ln.row)} | {ln.state} |")
    notes = [f"- {ln.row.id}: {ln.state}: {ln.detail}" for ln in lines
             if ln.detail and ln.state not in ("not provided", "ok")]
    if notes:
        out += ["", *notes]
    return "\n".join(out)


def write_csv(path: pathlib.Path, table: Table, lines: list[Line]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["table", "row", "name", "status", "state"]
                   + [f"{c.name} {x}" for c in table.columns for x in ("ours", "paper", "diff")])
        for ln in lines:
            w.writerow([table.id, ln.row.id, label(ln.row), _status(ln.row), ln.state]
                       + [v for c in ln.cells for v in (
                           "" if c.ours is None else f"{c.ours:.6g}", c.paper or "",
                           "" if diff(c) is None else f"{diff(c):.6g}")])


def write_png(path: pathlib.Path, plan: Plan, table: Table, lines: list[Line]) -> pathlib.Path:
    """Per column, horizontal bars row by row: the paper's (grey) and ours (blue)."""
    from vnr.reports import plots

    plt = plots.plt
    shown = [ln for ln in lines if any(number(c.paper) is not None or c.ours is not None
                                       for c in ln.cells)]
    if not shown:
        raise PlanError(f"table {table.id}: no row has a number to draw")
    cols = min(3, len(table.columns))
    nrows = -(-len(table.columns) // cols)
    height = 0.32 * len(shown) + 1.2
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, height * nrows), squeeze=False)
    y = list(range(len(shown)))
    for k, (ax, column) in enumerate(zip(axes.flat, table.columns)):
        paper = [number(ln.cells[k].paper) for ln in shown]
        ours = [ln.cells[k].ours for ln in shown]
        ax.barh([i - 0.2 for i in y], [p or 0 for p in paper], 0.4, color="0.65",
                label="paper")
        ax.barh([i + 0.2 for i in y], [o or 0 for o in ours], 0.4, color="tab:blue",
                label="ours")
        have = [(o, i + 0.2) for i, o in enumerate(ours) if o is not None]
        if have:  # a tick at each of our values, so a 0 shows too
            ax.scatter(*zip(*have), marker="|", color="tab:blue", s=40)
        for i, (p, o, ln) in enumerate(zip(paper, ours, shown)):
            if o == 0:
                ax.text(0, i + 0.2, " 0", va="center", fontsize=6, color="tab:blue")
            if o is None:
                why = {"not provided": "n/p", "not run at this scale": "n/r"}.get(
                    ln.state, ln.cells[k].why)
                ax.text(0, i + 0.2, " " + why, va="center", fontsize=6, color="tab:red")
            if p is None:
                ax.text(0, i - 0.2, " -", va="center", fontsize=6, color="0.4")
        ax.set_yticks(y)
        ax.set_yticklabels([label(ln.row) if k % cols == 0 else "" for ln in shown],
                           fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{column.name} ({'higher' if column.better != 'min' else 'lower'} "
                     f"is better)", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
        if k == 0:
            ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(table.columns):]:
        ax.axis("off")
    fig.suptitle(f"{plan.registry.benchmark} Table {table.id}: ours (blue) vs paper (grey), "
                 f"{plan.scale} scale", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def checker(plan: Plan, env: dict[str, str], data_dir: str | None) -> Callable[[Run], str]:
    """Whether a run directory holds this row's run: '' or what differs."""
    from vnr.reproduce.execute import mismatch

    def check(run: Run) -> str:
        try:
            return mismatch(plan, run, env, data_dir)
        except PlanError as e:
            return f"cannot build its config: {e}"
    return check
