"""The row registry: every row of every results table a paper prints, as data.

One TOML file per benchmark, `vnr/benchmarks/<benchmark>/rows.toml`, is the one source of
truth for the paper's numbers, the command that runs each row and its status; `list`,
`run` and `report` (`python -m vnr.reproduce`) and the tables of each REPRODUCING.md are
made from it. The file's layout:

    [benchmark]  name, title, paper (file under /work/shared/papers), vars (placeholder ->
                 what to point it at, e.g. MOVIENET = "the raw MovieNet directory")
    [smoke]      how a row's command becomes its `--scale smoke` command: `drop` (config
                 args; `k=` drops any `k=<value>`), `add` (args), `drop_set` (override keys),
                 `set` (overrides for every run), `vars` (generated inputs, see `SmokeVar`)
    [[table]]    id, title, columns = [{name, key, scale, better, where, agg, mean_of}],
                 note; then its rows:
    [[table.row]] id, name (as the paper prints it), group (a section of the table),
                 paper (the printed cells, one per column: a string split on spaces, or a
                 list; "-" = an empty cell), status ("as paper" | "deviates: how" |
                 "not provided: why"; the rule: vnr/benchmarks/<name>/REPRODUCING.md),
                 ours (an `as paper` row: the choices the paper leaves open that the row
                 makes, [] for none), and for a runnable row: config (`path.py:args`), set
                 and eval_set (`key=value` overrides of training and of evaluation only),
                 each ({var = [values]}: one run per combination, `{var}` in the command),
                 smoke ({config, set, each}: the smoke command instead of the derived one,
                 or "skip: why"), tool (a command line printing JSON instead of a training),
                 keys ({column: key} where this row reads another metric), test, note
    [[prereq]]   a run that rows depend on but no table shows (id, config, set, each, smoke)
    [[addition]] key, values, what: a config key whose value among `values` (strings may be
                 fnmatch patterns, e.g. "scratch:*") is something the paper does not do that
                 we add, or a component we replace (augmentation, a stand-in encoder, one of
                 our training choices); an `as paper` row never runs one of them
                 (`additions_on` on its built config; its `set` is checked here)

An `as paper` row follows every choice the paper states and uses every component it names;
the choices the paper leaves open are listed in its `ours`; anything else makes it
`deviates: <what>` (the status rule at the top of each REPRODUCING.md).

`{run:ID}` inside `set` or `tool` is the directory of run ID (a row or prereq with the same
values of the `each` variables they share); `$VAR` is a path the user exports.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import pathlib
import re
import tomllib
from typing import Any

BENCHMARKS_DIR = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
FILE = "rows.toml"
STATUSES = ("as paper", "deviates", "not provided")
ROW_KEYS = {"id", "name", "group", "paper", "paper_note", "status", "ours", "config", "set",
            "eval_set", "each", "smoke", "tool", "keys", "test", "note"}
ADDITION_KEYS = {"key", "values", "what"}
PREREQ_KEYS = {"id", "config", "set", "each", "smoke", "note"}
COLUMN_KEYS = {"name", "key", "scale", "better", "where", "agg", "mean_of"}
TABLE_KEYS = {"id", "title", "columns", "note", "row"}
ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
RUN_REF = re.compile(r"\{run:([a-z0-9_.-]+)\}")


class RegistryError(ValueError):
    """A registry file is malformed, or a name does not exist: one line."""


@dataclasses.dataclass(frozen=True)
class Column:
    """A column as the paper prints it, and where our number comes from.

    `key` is `<split>/<metric>` of a run's results.json (split `*`: the one split that has
    the metric; `a|b`: the first of a and b found, e.g. where the generated corpus names
    its test split otherwise); `scale` turns ours into the paper's unit; `where` picks the
    row's runs ({each variable: value}); `agg` combines them ("mean", or "mean_std" shown as
    m ± s);
    `mean_of` makes a derived column, the mean of those columns (e.g. an Average)."""

    name: str
    key: str = ""
    scale: float = 1.0
    better: str = "max"
    where: tuple[tuple[str, str], ...] = ()
    agg: str = "mean"
    mean_of: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Table:
    id: str
    title: str
    columns: tuple[Column, ...]
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Command:
    """What runs: a config with overrides (or a tool), per combination of `each`."""

    config: str = ""
    set: tuple[str, ...] | None = ()  # None (a row's `smoke` only): not given
    eval_set: tuple[str, ...] | None = ()
    each: tuple[tuple[str, tuple[str, ...]], ...] | None = ()
    tool: str = ""


@dataclasses.dataclass(frozen=True)
class Row:
    """One printed row (or, with `table=""`, a prerequisite run)."""

    id: str
    table: str
    name: str
    status: str
    paper: tuple[str | None, ...] = ()
    paper_note: str = ""
    group: str = ""
    command: Command | None = None
    smoke: Command | None = None  # explicit smoke command
    smoke_skip: str = ""  # why this row does not run at --scale smoke
    keys: tuple[tuple[str, str], ...] = ()
    test: str = ""
    note: str = ""
    ours: tuple[str, ...] = ()  # the choices the paper leaves open (an `as paper` row)

    @property
    def kind(self) -> str:
        """'not provided', 'tool' or 'train'."""
        if self.command is None:
            return "not provided"
        return "tool" if self.command.tool else "train"

    def key(self, column: Column) -> str:
        """The metric key this row reads for `column` ("" = none)."""
        return dict(self.keys).get(column.name, column.key)


@dataclasses.dataclass(frozen=True)
class Addition:
    """A config value that is ours, not the paper's: something the paper does not do that
    we add, or a component we replace. `values`: the values that switch it on (a string
    may be an fnmatch pattern)."""

    key: str
    values: tuple[Any, ...]
    what: str

    def on(self, value: Any) -> bool:
        for v in self.values:
            if isinstance(v, str):
                if isinstance(value, str) and fnmatch.fnmatchcase(value, v):
                    return True
            elif type(v) is type(value) and v == value:  # True is not 1
                return True
        return False


@dataclasses.dataclass(frozen=True)
class SmokeVar:
    """A generated input of smoke runs: a function `module:name` called with the target
    directory and `kwargs` (returning the path to use), or a file holding `text`."""

    name: str
    call: str = ""
    kwargs: tuple[tuple[str, Any], ...] = ()
    text: str = ""


@dataclasses.dataclass(frozen=True)
class Smoke:
    drop: tuple[str, ...] = ()
    add: tuple[str, ...] = ()
    drop_set: tuple[str, ...] = ()
    set: tuple[str, ...] = ()
    vars: tuple[SmokeVar, ...] = ()


@dataclasses.dataclass(frozen=True)
class Registry:
    benchmark: str
    title: str
    paper: str
    path: pathlib.Path
    vars: tuple[tuple[str, str], ...]
    smoke: Smoke
    tables: tuple[Table, ...]
    rows: tuple[Row, ...]  # table rows then prerequisites, in file order
    additions: tuple[Addition, ...] = ()

    def table(self, table_id: str) -> Table:
        for t in self.tables:
            if t.id == table_id:
                return t
        raise RegistryError(f"{self.benchmark} has no table {table_id!r} (tables: "
                            f"{', '.join(t.id for t in self.tables)})")

    def row(self, row_id: str) -> Row:
        for r in self.rows:
            if r.id == row_id:
                return r
        raise RegistryError(f"{self.benchmark} has no row {row_id!r}")

    def rows_of(self, table_id: str) -> list[Row]:
        self.table(table_id)
        return [r for r in self.rows if r.table == table_id]


def benchmarks() -> list[str]:
    """The benchmarks that have a registry file, sorted."""
    return sorted(p.parent.name for p in BENCHMARKS_DIR.glob(f"*/{FILE}"))


def load(benchmark: str, path: pathlib.Path | None = None) -> Registry:
    """The registry of `benchmark` (its rows.toml, or `path`), checked."""
    if path is None:
        if benchmark not in benchmarks():
            raise RegistryError(f"no benchmark {benchmark!r} (benchmarks: "
                                f"{', '.join(benchmarks())})")
        path = BENCHMARKS_DIR / benchmark / FILE
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise RegistryError(f"{path}: unreadable ({e})") from None
    return _parse(raw, path)


def load_all() -> list[Registry]:
    return [load(b) for b in benchmarks()]


def number(printed: str | None) -> float | None:
    """The value of a printed cell: '55.40' -> 55.4, '5.9 ± 0.3' -> 5.9, '81.2%' -> 81.2,
    '-' or None -> None."""
    if printed is None:
        return None
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", printed)
    return float(m.group(1)) if m else None


# ----------------------------------------------------------------------------- parsing


def _parse(raw: dict, path: pathlib.Path) -> Registry:
    where = str(path)

    def fail(msg: str) -> RegistryError:
        return RegistryError(f"{where}: {msg}")

    b = raw.get("benchmark") or {}
    for key in ("name", "title", "paper"):
        if not isinstance(b.get(key), str) or not b[key]:
            raise fail(f"[benchmark] needs {key} (a string)")
    s = raw.get("smoke") or {}
    smoke = Smoke(drop=_strs(s, "drop", fail), add=_strs(s, "add", fail),
                  drop_set=_strs(s, "drop_set", fail), set=_strs(s, "set", fail),
                  vars=tuple(_smoke_var(k, v, fail) for k, v in (s.get("vars") or {}).items()))
    tables = tuple(_table(t, fail) for t in raw.get("table") or ())
    ids = [t.id for t in tables]
    if len(set(ids)) != len(ids):
        raise fail(f"a table id appears twice: {ids}")
    additions = tuple(_addition(a, fail) for a in raw.get("addition") or ())
    rows = [_row(r, table, fail) for t, table in zip(raw.get("table") or (), tables,
                                                     strict=True) for r in t.get("row") or ()]
    rows += [_prereq(r, fail) for r in raw.get("prereq") or ()]
    seen: set[str] = set()
    for r in rows:
        if r.id in seen:
            raise fail(f"row id {r.id!r} appears twice")
        seen.add(r.id)
    for r in rows:
        for c in (r.command, r.smoke):
            for ref in _refs(c):
                if ref not in seen:
                    raise fail(f"row {r.id}: {{run:{ref}}} names no row or prereq")
    for r in rows:
        if r.table and r.status == "as paper" and r.command is not None:
            for item in (*(r.command.set or ()), *(r.command.eval_set or ())):
                hit = _set_addition(item, additions)
                if hit:
                    raise fail(f"row {r.id}: 'as paper' but it sets {item}: {hit.what} "
                               f"(an addition of ours: the row deviates)")
    return Registry(b["name"], b["title"], b["paper"], path,
                    tuple((str(k), str(v)) for k, v in (b.get("vars") or {}).items()),
                    smoke, tables, tuple(rows), additions)


def additions_on(reg: Registry, flat: dict[str, Any]) -> list[str]:
    """The additions of `reg` that a built config (flattened: {dotted key: value}) switches
    on, as 'key=value: what'; [] for a config an `as paper` row may run."""
    out = []
    for a in reg.additions:
        if a.key in flat and a.on(flat[a.key]):
            out.append(f"{a.key}={flat[a.key]!r}: {a.what}")
    return out


def _set_addition(item: str, additions: tuple[Addition, ...]) -> Addition | None:
    """The addition an override `key=value` switches on (the value typed as TOML would
    read it: true/false, numbers, else the string), or None."""
    key, _, text = item.partition("=")
    low = text.strip().lower()
    value: Any = text
    if low in ("true", "false"):
        value = low == "true"
    else:
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = text
    for a in additions:
        if a.key == key.strip() and a.on(value):
            return a
    return None


def _addition(a: Any, fail: Any) -> Addition:
    if not isinstance(a, dict) or set(a) - ADDITION_KEYS or not a.get("key") \
            or not isinstance(a.get("values"), list) or not a["values"] or not a.get("what"):
        raise fail(f"[[addition]] {a.get('key', '?') if isinstance(a, dict) else '?'}: give "
                   f"key = 'dotted.key', values = [...] and what = '...'")
    return Addition(str(a["key"]), tuple(a["values"]), str(a["what"]))


def _refs(c: Command | None) -> list[str]:
    if c is None:
        return []
    return [m for text in (*(c.set or ()), *(c.eval_set or ()), c.tool)
            for m in RUN_REF.findall(text)]


def _strs(d: dict, key: str, fail: Any) -> tuple[str, ...]:
    v = d.get(key, ())
    if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
        raise fail(f"{key} must be a list of strings")
    return tuple(v)


def _smoke_var(name: str, spec: Any, fail: Any) -> SmokeVar:
    if not isinstance(spec, dict) or not (spec.get("call") or "text" in spec):
        raise fail(f"[smoke.vars] {name}: give call = 'module:function' or text = '...'")
    return SmokeVar(name, spec.get("call", ""), tuple(sorted((spec.get("kwargs") or {}).items())),
                    spec.get("text", ""))


def _table(t: dict, fail: Any) -> Table:
    tid = str(t.get("id", ""))
    if not tid or not isinstance(t.get("title"), str) or set(t) - TABLE_KEYS:
        raise fail(f"table {tid or '?'}: a [[table]] has an id, a title, columns, an optional "
                   f"note and its [[table.row]]s (got {', '.join(sorted(t))})")
    cols = []
    for c in t.get("columns") or ():
        unknown = sorted(set(c) - COLUMN_KEYS)
        if unknown or not c.get("name"):
            raise fail(f"table {tid}: column {c.get('name')!r}: unknown key "
                       f"{unknown[0] if unknown else 'name missing'}")
        if c.get("better", "max") not in ("max", "min", ""):
            raise fail(f"table {tid}: column {c['name']}: better is max, min or ''")
        if c.get("agg", "mean") not in ("mean", "mean_std"):
            raise fail(f"table {tid}: column {c['name']}: agg is mean or mean_std")
        cols.append(Column(c["name"], c.get("key", ""), float(c.get("scale", 1.0)),
                           c.get("better", "max"),
                           tuple(sorted((k, str(v)) for k, v in (c.get("where") or {}).items())),
                           c.get("agg", "mean"), tuple(c.get("mean_of", ()))))
    names = [c.name for c in cols]
    if not cols or len(set(names)) != len(names):
        raise fail(f"table {tid}: columns missing or named twice: {names}")
    for c in cols:
        if set(c.mean_of) - set(names):
            raise fail(f"table {tid}: column {c.name}: mean_of names unknown columns")
    return Table(tid, t["title"], tuple(cols), t.get("note", ""))


def _command(d: dict, fail: Any, what: str) -> Command:
    each = d.get("each") or {}
    if not isinstance(each, dict) or not all(isinstance(v, list) and v for v in each.values()):
        raise fail(f"{what}: each = {{var = [values, ...]}}")
    cmd = Command(d.get("config", ""), _strs(d, "set", fail), _strs(d, "eval_set", fail),
                  tuple((k, tuple(str(x) for x in v)) for k, v in each.items()),
                  d.get("tool", ""))
    if bool(cmd.config) == bool(cmd.tool):
        raise fail(f"{what}: give config = 'path.py[:args]' or tool = '...', one of them")
    if cmd.config and ".py" not in cmd.config.partition(":")[0]:
        raise fail(f"{what}: config {cmd.config!r} is not path.py[:args]")
    for item in (*cmd.set, *cmd.eval_set):
        if "=" not in item or item.startswith("--"):
            raise fail(f"{what}: override {item!r} is not key=value")
    return cmd


def _smoke(d: dict, fail: Any, what: str) -> tuple[Command | None, str]:
    """The row's explicit smoke command: each field given replaces the derived one (`set`
    replaces the row's own overrides; the benchmark's [smoke] set still comes first)."""
    s = d.get("smoke")
    if s is None:
        return None, ""
    if isinstance(s, str):
        if not s.startswith("skip: "):
            raise fail(f"{what}: smoke = 'skip: why' or a table {{config, set, each}}")
        return None, s.removeprefix("skip: ")
    unknown = sorted(set(s) - {"config", "set", "eval_set", "each", "tool"})
    if unknown:
        raise fail(f"{what}: smoke has unknown key {unknown[0]}")
    probe = dict(s) if (s.get("config") or s.get("tool")) else {**s, "config": "x.py"}
    cmd = _command(probe, fail, f"{what} smoke")
    return dataclasses.replace(
        cmd, config=s.get("config", ""), set=cmd.set if "set" in s else None,
        eval_set=cmd.eval_set if "eval_set" in s else None,
        each=cmd.each if "each" in s else None), ""


def _row(r: dict, table: Table, fail: Any) -> Row:
    rid = r.get("id", "")
    what = f"row {rid or '?'}"
    unknown = sorted(set(r) - ROW_KEYS)
    if unknown:
        raise fail(f"{what}: unknown key {unknown[0]} (a row has {', '.join(sorted(ROW_KEYS))})")
    if not isinstance(rid, str) or not ID.match(rid):
        raise fail(f"{what}: id must be lower-case letters, digits, '-', '_', '.'")
    status = r.get("status", "")
    kind = next((s for s in STATUSES if status == s or status.startswith(s + ": ")), None)
    if kind is None or (kind != "as paper" and not status.startswith(kind + ": ")):
        raise fail(f"{what}: status {status!r}: 'as paper', 'deviates: how' or "
                   f"'not provided: why'")
    if kind == "as paper" and status != "as paper":
        raise fail(f"{what}: status {status!r}: an 'as paper' status is just that; the "
                   f"choices the paper leaves open go in ours = [...]")
    paper = r.get("paper", [])
    cells = paper.split() if isinstance(paper, str) else list(paper)
    cells = [None if c in ("-", "") else str(c) for c in cells]
    if cells and len(cells) != len(table.columns):
        raise fail(f"{what}: {len(cells)} paper cells for {len(table.columns)} columns of "
                   f"table {table.id}")
    if not cells and not r.get("paper_note"):
        raise fail(f"{what}: no paper cells: say why in paper_note")
    command = None
    if "config" in r or "tool" in r:
        command = _command(r, fail, what)
    elif any(k in r for k in ("set", "eval_set", "each", "smoke")):
        raise fail(f"{what}: set/eval_set/each/smoke without config or tool")
    if (command is None) != (kind == "not provided"):
        raise fail(f"{what}: a 'not provided' row has no config/tool and every other row has one")
    ours = r.get("ours")
    if ours is not None and (not isinstance(ours, list)
                             or not all(isinstance(x, str) and x for x in ours)):
        raise fail(f"{what}: ours must be a list of strings (the choices the paper leaves "
                   f"open)")
    if kind == "as paper" and ours is None:
        raise fail(f"{what}: an 'as paper' row lists the choices the paper leaves open: "
                   f"ours = [...] ([] when there are none)")
    if kind == "not provided" and ours:
        raise fail(f"{what}: a 'not provided' row makes no choices (drop ours)")
    smoke, skip = _smoke(r, fail, what)
    keys = r.get("keys") or {}
    names = {c.name for c in table.columns}
    if set(keys) - names:
        raise fail(f"{what}: keys names unknown columns {sorted(set(keys) - names)}")
    return Row(rid, table.id, str(r.get("name", "")), status, tuple(cells),
               r.get("paper_note", ""), r.get("group", ""), command, smoke, skip,
               tuple(sorted(keys.items())), r.get("test", ""), r.get("note", ""),
               tuple(ours or ()))


def _prereq(r: dict, fail: Any) -> Row:
    rid = r.get("id", "")
    what = f"prereq {rid or '?'}"
    unknown = sorted(set(r) - PREREQ_KEYS)
    if unknown or not isinstance(rid, str) or not ID.match(rid):
        raise fail(f"{what}: needs a lower-case id; unknown keys {unknown}")
    smoke, skip = _smoke(r, fail, what)
    return Row(rid, "", rid, "as paper", command=_command(r, fail, what), smoke=smoke,
               smoke_skip=skip, note=r.get("note", ""))
