"""From registry rows to runs: one run per row and combination of its `each` values.

Each run has a directory `<root>/<run id>` and an action:
  train     vnr.train into its directory (the first run of its training key: the config
            and training overrides after `{run:...}` are resolved; args in any order)
  copy      the same training and evaluation as its owner: results.json copied
  evaluate  the owner's training evaluated again with `eval_set` (vnr.evaluate)
  tool      a command printing JSON (e.g. a two-stage evaluation of two runs)
so rows that differ only in evaluation train once. `--scale smoke` derives each command
from the paper one by the benchmark's [smoke] rules (or the row's own `smoke`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import pathlib
import re
import shlex

from vnr.reproduce.registry import RUN_REF, Command, Registry, RegistryError, Row

SCALES = ("smoke", "paper")
VAR = re.compile(r"\$\{?([A-Z][A-Z0-9_]*)\}?")


class PlanError(RegistryError):
    """A run cannot be planned (a reference, a variable, a cycle): one line."""


@dataclasses.dataclass(frozen=True)
class Run:
    id: str
    row: str
    values: tuple[tuple[str, str], ...]
    config: str
    set: tuple[str, ...]
    eval_set: tuple[str, ...]
    tool: str
    deps: tuple[str, ...]
    train_key: str
    owner: str = ""
    action: str = ""


@dataclasses.dataclass
class Plan:
    registry: Registry
    scale: str
    root: pathlib.Path
    runs: dict[str, Run]
    by_row: dict[str, list[str]]
    skipped: dict[str, str]  # row id -> why it does not run at this scale

    def order(self, row_ids: list[str]) -> list[Run]:
        """The runs of `row_ids`, the runs they need and the owners of their trainings,
        each after what it needs."""
        out: dict[str, Run] = {}

        def visit(rid: str, stack: tuple[str, ...] = ()) -> None:
            if rid in out:
                return
            if rid in stack:
                raise PlanError(f"{self.registry.benchmark}: runs depend on each other: "
                                f"{' -> '.join((*stack, rid))}")
            run = self.runs[rid]
            for dep in (*run.deps, run.owner):
                if dep and dep != rid:
                    visit(dep, (*stack, rid))
            out[rid] = run

        for row in row_ids:
            for rid in self.by_row.get(row, []):
                visit(rid)
        return list(out.values())


def command_at(row: Row, scale: str, reg: Registry) -> Command | None:
    """The row's command at `scale` (None: not runnable there)."""
    if row.command is None or (scale == "smoke" and row.smoke_skip):
        return None
    c = row.command
    if scale == "paper":
        return c
    s, rules = row.smoke or Command(set=None, eval_set=None, each=None), reg.smoke
    own = s.set if s.set is not None else tuple(
        x for x in c.set if x.split("=", 1)[0] not in rules.drop_set)
    return Command(config=s.config or (_derive(c.config, rules) if c.config else ""),
                   set=(*rules.set, *own) if not (s.tool or c.tool) else (),
                   eval_set=s.eval_set if s.eval_set is not None else c.eval_set,
                   each=s.each if s.each is not None else c.each, tool=s.tool or c.tool)


def _derive(config: str, rules) -> str:
    path, _, args = config.partition(":")
    kept = [a for a in args.split(",") if a and a not in rules.drop
            and not any(d.endswith("=") and a.startswith(d) for d in rules.drop)]
    kept += [a for a in rules.add if a not in kept]
    return f"{path}:{','.join(kept)}" if kept else path


def make(reg: Registry, scale: str, root: pathlib.Path, extra: tuple[str, ...] = ()
         ) -> Plan:
    """Every run of every row (and prerequisite) of `reg` at `scale`; `extra` overrides
    (`--set key=value`) go after every training's own, e.g. a step count for a corpus."""
    if scale not in SCALES:
        raise PlanError(f"--scale={scale!r}: use smoke or paper")
    for item in extra:
        if "=" not in item or item.startswith("-"):
            raise PlanError(f"--set {item!r}: give key=value (a config key, no --config.)")
    raw: dict[str, tuple[Row, Command, tuple[tuple[str, str], ...]]] = {}
    by_row: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    for row in reg.rows:
        cmd = command_at(row, scale, reg)
        if cmd is None:
            if row.command is not None:
                skipped[row.id] = row.smoke_skip
            continue
        names = [k for k, _ in cmd.each]
        for combo in itertools.product(*(v for _, v in cmd.each)):
            values = tuple(zip(names, combo, strict=True))
            rid = "-".join([row.id, *combo])
            filled = _fill(cmd, dict(values))
            if extra and not filled.tool:
                filled = dataclasses.replace(filled, set=(*filled.set, *extra))
            raw[rid] = (row, filled, values)
            by_row.setdefault(row.id, []).append(rid)

    def dep(rid: str, ref: str) -> str:
        """The run of row `ref` whose each-values agree with run `rid`'s where shared."""
        if ref not in by_row:
            why = f": {skipped[ref]}" if skipped.get(ref) else ""
            raise PlanError(f"{reg.benchmark}: run {rid} needs {{run:{ref}}}, which does not "
                            f"run at --scale {scale}{why}")
        mine = dict(raw[rid][2])
        hits = [r for r in by_row[ref] if all(mine.get(k, v) == v for k, v in raw[r][2])]
        if len(hits) != 1:
            raise PlanError(f"{reg.benchmark}: run {rid}: {{run:{ref}}} matches {len(hits)} "
                            f"runs of {', '.join(by_row[ref])}")
        return hits[0]

    keys: dict[str, str] = {}

    def key(rid: str, stack: tuple[str, ...] = ()) -> str:
        """The training key: the config (args in any order) and the overrides, each
        `{run:...}` standing for the key of the run it names."""
        if rid in stack:
            raise PlanError(f"{reg.benchmark}: {{run:...}} references loop: "
                            f"{' -> '.join((*stack, rid))}")
        if rid not in keys:
            _, cmd, _ = raw[rid]
            sub = lambda m: "<" + key(dep(rid, m.group(1)), (*stack, rid)) + ">"  # noqa: E731
            sets = sorted(RUN_REF.sub(sub, x) for x in cmd.set)
            tool = RUN_REF.sub(sub, cmd.tool)
            keys[rid] = f"tool|{tool}" if tool else json.dumps([_normal(cmd.config), sets])
        return keys[rid]

    owners: dict[str, str] = {}
    for rid, (_, cmd, _) in raw.items():
        if not cmd.eval_set or cmd.tool:
            owners.setdefault(key(rid), rid)
        key(rid)
    runs: dict[str, Run] = {}
    for rid, (row, cmd, values) in raw.items():
        owner = owners.get(keys[rid])
        if owner is None:
            raise PlanError(f"{reg.benchmark}: row {row.id} evaluates a training that no "
                            f"row runs without eval_set (add that row or a prereq)")
        deps = [dep(rid, ref) for x in (*cmd.set, cmd.tool) for ref in RUN_REF.findall(x)]
        where = lambda m, r=rid: str(root / owners[keys[dep(r, m.group(1))]])  # noqa: E731
        action = "tool" if cmd.tool else "train" if owner == rid else \
            "copy" if not cmd.eval_set else "evaluate"
        runs[rid] = Run(rid, row.id, values, cmd.config,
                        tuple(RUN_REF.sub(where, x) for x in cmd.set), cmd.eval_set,
                        RUN_REF.sub(where, cmd.tool), tuple(dict.fromkeys(deps)), keys[rid],
                        "" if owner == rid else owner, action)
    return Plan(reg, scale, root, runs, by_row, skipped)


def _fill(cmd: Command, values: dict[str, str]) -> Command:
    """`{var}` of the `each` variables replaced by their values."""
    def f(text: str) -> str:
        for k, v in values.items():
            text = text.replace("{" + k + "}", v)
        return text
    return Command(f(cmd.config), tuple(map(f, cmd.set)), tuple(map(f, cmd.eval_set)),
                   (), f(cmd.tool))


def _normal(config: str) -> str:
    path, _, args = config.partition(":")
    return f"{path}:{','.join(sorted(a for a in args.split(',') if a))}"


# ----------------------------------------------------------------------------- variables


def variables(text: str) -> list[str]:
    return VAR.findall(text)


def expand(text: str, env: dict[str, str], what: str, described: dict[str, str]) -> str:
    """`$VAR` / `${VAR}` replaced from `env`; a missing one is one error line."""
    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name not in env:
            hint = f" ({described[name]})" if name in described else ""
            raise PlanError(f"{what} needs ${name}{hint}: export {name}=...")
        return env[name]
    return VAR.sub(sub, text)


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **(extra or {})}


# ----------------------------------------------------------------------------- commands


def _q(token: str) -> str:
    """Shell quoting that still lets `$VAR` expand."""
    if VAR.search(token):
        return '"' + token.replace('"', '\\"') + '"'
    return shlex.quote(token)


def overrides(items: tuple[str, ...]) -> list[str]:
    return [f"--config.{x}" for x in items]


EVAL_STEP = "selected"  # an evaluate-only row reads the step its training reports


def command_line(plan: Plan, run: Run, launcher: str = "local") -> str:
    """One shell command for `run` in the form `launcher` takes (local, slurm, tpu); an
    evaluate-only row's is the one the executor runs (`EVAL_STEP`: the owner's reported
    step, its best validated one when it selects, else its last, at any scale)."""
    d = plan.root / run.id
    if run.action == "tool":
        return " ".join(_q(t) for t in shlex.split(run.tool))
    if run.action == "copy":
        src = plan.root / run.owner / "results.json"
        return f"mkdir -p {_q(str(d))} && cp {_q(str(src))} {_q(str(d / 'results.json'))}"
    if run.action == "evaluate":
        parts = ["python", "-m", "vnr.evaluate", "--workdir", str(plan.root / run.owner),
                 "--step", EVAL_STEP, "--out", str(d / "results.json"),
                 *overrides(run.eval_set)]
        return " ".join(_q(p) for p in parts)
    extra = overrides(run.set)
    if launcher == "slurm":
        return " ".join([f"CONFIG={_q(run.config)}", f"WORKDIR={_q(str(d))}", "sbatch",
                         "launch/slurm_gpu.sbatch", *(_q(x) for x in extra)])
    if launcher == "tpu":
        return " ".join(["bash", "launch/tpu_pod.sh", _q(run.config), _q(str(d)),
                         *(_q(x) for x in extra)])
    parts = ["python", "-m", "vnr.train", "--config", run.config, "--workdir", str(d), *extra]
    return " ".join(_q(p) for p in parts)
