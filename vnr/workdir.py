"""A run's directory: `config.json` (what ran), `results.json` (what it scored).

`check_workdir` refuses a workdir holding a run of another config and writes
`config.json`; `load_config` reads it back as a ConfigDict (for evaluate-only runs);
`write_results` writes `results.json`: split -> metric -> value, plus `selection`, the
step whose model produced them and why (`vnr.evaluators`, `config.select`).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jax
import ml_collections

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
        old = flatten(json.loads(path.read_text()))
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
