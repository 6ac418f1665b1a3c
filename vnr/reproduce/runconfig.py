"""A run's config: built from its command, and compared with what a directory holds.

`build` loads `path.py[:args]` the way `--config` does (`vnr.config`), applies the
run's `key=value` overrides typed like the values they replace (as absl's `--config.key`
does) and maps the configs' `data/` dataset directories under `--data_dir`. `differs`
says whether a directory's config is another run's, naming the first key that differs.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import ml_collections

from vnr import config as config_lib
from vnr import workdir as workdir_lib
from vnr.reproduce.plan import Plan, PlanError, Run, expand

# What `execute.mismatch` says of a directory whose results.json nothing identifies.
UNIDENTIFIED = "nothing in it says what ran (a results.json without config.json or row.json)"

# Keys that may differ between the registry's command and a run on another machine.
FREE = ("data.data_dir", "data.manual_dir", "data.num_workers", "mesh", "sharding_rules",
        "progress", "progress_lines", "profile", "log_every", "ckpt_every", "keep_ckpts",
        "eval_batch_size")


def apply(config: ml_collections.ConfigDict, items: tuple[str, ...], what: str) -> None:
    """Sets every `key=value` of `items` (`vnr.config.override`); a bad one is one line."""
    try:
        config_lib.override(config, items)
    except config_lib.ConfigError as e:
        raise PlanError(f"{what}: {e}") from None


def data_dirs(config: ml_collections.ConfigDict, data_dir: str | None) -> None:
    """`data/<x>` (the configs' dataset directories, relative to the working directory)
    becomes `<data_dir>/<x>`, keeping datasets that configs keep apart apart."""
    if not data_dir or "data" not in config or "data_dir" not in config.data:
        return
    old = str(config.data.data_dir)
    if old == "data" or old.startswith("data/"):
        config.data.data_dir = str(pathlib.Path(data_dir) / old[len("data/"):])


def build(plan: Plan, run: Run, env: dict[str, str], data_dir: str | None = None,
          with_eval: bool = False) -> ml_collections.ConfigDict:
    """The config `run` trains with (and with `with_eval`, the one it is evaluated with)."""
    what = f"{plan.registry.benchmark} run {run.id}"
    described = dict(plan.registry.vars)
    spec = expand(run.config, env, what, described)
    try:
        config = config_lib.load(spec)
    except ValueError as e:
        raise PlanError(f"{what}: {e}") from None
    items = tuple(expand(x, env, what, described) for x in run.set)
    apply(config, items, what)
    if with_eval:
        apply(config, tuple(expand(x, env, what, described) for x in run.eval_set), what)
    data_dirs(config, data_dir)
    return config


def flat(config: Any) -> dict[str, Any]:
    raw = json.loads(config.to_json_best_effort()) if hasattr(config, "to_json_best_effort") \
        else config
    return workdir_lib.flatten(raw)


def held(directory: pathlib.Path) -> dict[str, Any] | None:
    """The config a run directory holds: its config.json (a training) or the one row.json
    records (a run evaluated or copied from another); None when it holds neither."""
    for name, pick in (("config.json", lambda d: d), ("row.json", lambda d: d.get("config"))):
        path = directory / name
        if path.is_file():
            try:
                got = pick(json.loads(path.read_text()))
            except (OSError, ValueError):
                return {"<unreadable>": str(path)}
            if got is not None:
                return got
    return None


def holding(problem: str) -> str:
    """What a run directory holds, in words, given `execute.mismatch`'s problem."""
    return (f"an unidentified run ({UNIDENTIFIED})" if problem == UNIDENTIFIED
            else f"a run of another config ({problem})")


def differs(expected: ml_collections.ConfigDict, got: dict[str, Any],
            root: pathlib.Path) -> str:
    """'' when `got` is the same run as `expected`, else the first differing key. Keys of
    FREE, values holding an unexpanded `$VAR` and paths under other roots are not compared."""
    if "<unreadable>" in got:
        return f"unreadable {got['<unreadable>']}"
    want, have = flat(expected), workdir_lib.flatten(got)

    def norm(v: Any) -> Any:
        if isinstance(v, str) and str(root) in v:
            return v.replace(str(root), "<root>")
        return v

    for k in sorted(set(want) | set(have)):
        if any(k == f or k.startswith(f + ".") for f in FREE):
            continue
        w, h = want.get(k), have.get(k)
        if isinstance(w, str) and "$" in w:
            continue
        if norm(w) != norm(h):
            return f"{k} is {h!r} there, the row runs {w!r}"
    return ""
