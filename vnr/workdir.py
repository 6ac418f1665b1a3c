"""A run's directory: `config.json` (what ran), `results.json` (what it scored).

`check_workdir` refuses a workdir holding a run of another config and writes
`config.json`; `check_data` records in `data.json` the identity of every dataset the run
read (`tfds_builders.fingerprint.identity`: its source files, options, version and split
sizes) and refuses to resume or re-evaluate the run on a dataset built from other data (a
`data_dir` or `manual_dir` may change between resumptions only to the same data);
`load_config` reads config.json back as a ConfigDict (for evaluate-only runs);
`write_results` writes `results.json`: split -> metric -> value, plus `selection`, the
step whose model produced them and why (`vnr.evaluators`, `config.select`).

`Owner` makes one training process the owner of a workdir (`.owner`: host, pid, a
heartbeat), so a second run on the same directory stops in one line instead of both
writing checkpoints and `metrics.jsonl`. The file is created atomically (`O_EXCL`, also on
NFS), refreshed every `HEARTBEAT_S` by a daemon thread, and removed on exit; after a
`kill -9` it is stale (its pid is gone on this host, or no heartbeat for `STALE_S` from
another host) and the next run takes it over, saying so.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Callable
from typing import Any

import jax
import ml_collections

from tfds_builders import Holder, LockHeld
from vnr.config import ConfigError

# Config keys that may change between a run and its resumption.
RESUMABLE = ("total_steps", "log_every", "eval_every", "ckpt_every", "keep_ckpts", "mesh",
             "eval_batch_size", "sharding_rules", "profile",
             "data.data_dir", "data.manual_dir", "eval", "evals", "progress", "progress_lines")
# Not data.num_workers: grain's iterator state depends on the worker count.

SELECTION = "selection"  # the key of results.json that is not a split




def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Nested config -> {dotted key: value}; tuples as lists (as JSON has them)."""
    out = {}
    for k, v in (cfg.items() if hasattr(cfg, "items") else []):
        key = f"{prefix}{k}"
        if isinstance(v, ml_collections.ConfigDict | dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = list(v) if isinstance(v, tuple) else v
    return out


def check_workdir(workdir: pathlib.Path, config: ml_collections.ConfigDict,
                  write: bool = True) -> None:
    """Refuses a workdir that holds a run of another config; writes config.json (`write`)."""
    path = workdir / "config.json"
    new = flatten(json.loads(config.to_json_best_effort()))
    primary = jax.process_index() == 0
    if path.exists():
        try:
            old = flatten(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            raise ConfigError(f"{path} is unreadable ({e}): this workdir's run cannot be "
                              "resumed safely; use a new --workdir") from None
        fixed = lambda k: not any(k == r or k.startswith(r + ".") for r in RESUMABLE)  # noqa
        diff = sorted(k for k in set(old) | set(new) if fixed(k) and old.get(k) != new.get(k))
        if diff:
            k = diff[0]
            raise ConfigError(
                f"workdir {workdir} holds a run of another config ({len(diff)} keys differ, "
                f"e.g. {k}: {old.get(k)!r} there vs {new.get(k)!r} here); use a new --workdir"
            )
    if primary and write:  # atomically: other processes may be reading it right now
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".config.json.tmp{jax.process_index()}")
        tmp.write_text(json.dumps(json.loads(config.to_json_best_effort()), indent=2))
        tmp.replace(path)


DATA_FILE = "data.json"


def unclaim_if_empty(workdir: pathlib.Path) -> bool:
    """Removes the config.json and data.json a run wrote when it left nothing else of value
    (no checkpoint step, no metrics row, no results.json): a run that failed before its
    first step (its training input, a first compile) then does not refuse the corrected
    command in the same workdir. Returns whether it removed them."""
    ckpts = workdir / "checkpoints"
    metrics = workdir / "metrics.jsonl"
    if ((workdir / "results.json").exists()
            or (ckpts.is_dir() and any(p.name.isdigit() for p in ckpts.iterdir()))
            or (metrics.is_file() and metrics.stat().st_size)):
        return False
    for name in ("config.json", DATA_FILE):
        (workdir / name).unlink(missing_ok=True)
    return True


def check_data(workdir: pathlib.Path, used: dict[str, str], write: bool = True) -> None:
    """Refuses, in one line, a workdir whose run read a dataset (by `name/config`) built
    from other data than the same dataset now; then records `used` (merged) in data.json
    (`write`, process 0). A dataset without a recorded identity ("") is not compared."""
    path = workdir / DATA_FILE
    old: dict[str, str] = {}
    if path.exists():
        try:
            old = dict(json.loads(path.read_text())["datasets"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path} is unreadable ({e}): which data this run trained on is "
                              "unknown; use a new --workdir") from None
    for key in sorted(set(old) & set(used)):
        if old[key] and used[key] and old[key] != used[key]:
            raise ConfigError(
                f"workdir {workdir} holds a run on {key} built from other data (identity "
                f"{old[key]} there, {used[key]} now: another release, or a changed one); "
                f"continuing or re-evaluating it would rewrite its results; use a new "
                f"--workdir, or score it on this data with python -m vnr.evaluate --workdir "
                f"{workdir} --out FILE")
    if write and jax.process_index() == 0 and set(used) - set(old):
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{DATA_FILE}.tmp{os.getpid()}")
        tmp.write_text(json.dumps({"datasets": {**old, **used}}, indent=1, sort_keys=True))
        tmp.replace(path)


def load_config(workdir: pathlib.Path) -> ml_collections.ConfigDict:
    """The ConfigDict a finished run wrote to `config.json` (JSON lists back to tuples)."""
    path = workdir / "config.json"
    if not path.is_file():
        raise ConfigError(f"--workdir {workdir}: no config.json (not a vnr.train run)")
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: unreadable ({e})") from None
    return ml_collections.ConfigDict(_tuples(raw))


def _tuples(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def write_results(path: pathlib.Path, results: dict[str, dict[str, float]],
                  selection: dict[str, Any]) -> None:
    """`results.json`: the splits' metrics and the `selection` record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({**results, SELECTION: selection}, indent=2))
    tmp.replace(path)


def select_and_selection(workdir: pathlib.Path, key: str) -> tuple[dict | None, dict | None]:
    """(config.json's `select`, results.json's `selection`) of a run directory, None where
    the file or the entry is absent (an unfinished run has no results.json); a file that
    cannot be read is one line naming it and `key` (the argument that named the run)."""
    out = []
    for name, entry in (("config.json", "select"), ("results.json", SELECTION)):
        path = workdir / name
        try:
            got = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError) as e:
            raise ConfigError(f"{key}: {path} is unreadable ({e})") from None
        value = got.get(entry) if isinstance(got, dict) else None
        out.append(value if isinstance(value, dict) else None)
    return out[0], out[1]


def split_results(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """A results.json's splits only (without `selection`)."""
    return {k: v for k, v in results.items() if k != SELECTION}


OWNER = ".owner"
HEARTBEAT_S, STALE_S = Holder.HEARTBEAT_S, Holder.STALE_S


class Owner(Holder):
    """The training process that owns `workdir` (process 0 of a run); `check()` refuses a
    live owner before anything is written, `acquire()` takes the directory, `release()`
    (or leaving the `with` block) gives it back (`tfds_builders.Holder`)."""

    def __init__(self, workdir: pathlib.Path, say: Callable[[str], None] = print) -> None:
        super().__init__(workdir / OWNER, say)

    def check(self) -> None:
        """ConfigError naming the holder when another live process owns the workdir (or
        when the workdir is not a directory at all)."""
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise ConfigError(f"--workdir {self.path.parent} is a file, not a directory")
        if held := self.holder():
            raise ConfigError(
                f"workdir {self.path.parent} is in use by another run (pid {held.get('pid')} on "
                f"{held.get('host')}, {self.path}); wait for it, stop it, or use a new --workdir")

    def acquire(self) -> None:
        try:
            super().acquire()
        except LockHeld:
            self.check()
            raise
