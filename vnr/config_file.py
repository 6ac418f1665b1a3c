"""Load a config file `path.py[:arg]` the way `--config` names it.

A file inside this repository's `configs/` package is imported as `configs.<...>` (the
repository root goes on `sys.path`), so configs import their siblings normally; any other
file is executed by path. Every problem is one `ValueError` line naming the file.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import sys
from types import ModuleType

import ml_collections

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"


def load(spec: str) -> ml_collections.ConfigDict:
    """`path.py[:arg]` -> the ConfigDict its `get_config(arg)` returns."""
    path, _, arg = spec.partition(":")
    module = _module(path)
    get_config = getattr(module, "get_config", None)
    if not callable(get_config):
        raise ValueError(f"--config {path} defines no get_config(arg)")
    try:
        config = get_config(arg or None)
    except ValueError as e:
        message = " ".join(str(e).split())  # one line
        raise ValueError(message if path in message or _shown(path) in message
                         else f"{path}: {message}") from e
    if not isinstance(config, ml_collections.ConfigDict):
        raise ValueError(f"--config {path}: get_config returned {type(config).__name__}, "
                         "not a ConfigDict")
    return config


def _module(path: str) -> ModuleType:
    file = pathlib.Path(path)
    if file.suffix != ".py" or not file.is_file():
        raise ValueError(f"--config file {path} does not exist (expected path.py[:arg])")
    resolved = file.resolve()
    if resolved.is_relative_to(CONFIGS):
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        name = ".".join(resolved.relative_to(REPO).with_suffix("").parts)
        module = importlib.import_module(name)
        if pathlib.Path(module.__file__).resolve() == resolved:  # not another checkout's
            return module
    spec = importlib.util.spec_from_file_location(f"_vnr_config_{resolved.stem}", resolved)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shown(path: str) -> str:
    """How configs name themselves in errors (`configs/<...>.py`)."""
    resolved = pathlib.Path(path).resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else path


# Keys older configs used, and where each went (one error line names the new key).
RENAMED = {
    "eval.max_val_clips": "evals.val.max_examples",
    "eval.max_test_clips": "evals.test.max_examples",
    "best_metric": "select.metric (e.g. 'val/os2')",
    "best_mode": "select.mode",
}


def check_overrides(argv: list[str]) -> None:
    """Exits with one `error:` line on a bad `--config path.py[:arg]`, a renamed or an
    unknown `--config.<key>`, before absl parses them (its errors are tracebacks)."""
    spec = next((a.split("=", 1)[1] if "=" in a else argv[i + 1]
                 for i, a in enumerate(argv) if a.split("=", 1)[0] == "--config"
                 and ("=" in a or i + 1 < len(argv))), None)
    if spec is None:
        return
    try:
        config = load(spec)
    except ValueError as e:
        sys.exit(f"error: {e}")
    check_keys(config, [a[len("--config."):].split("=", 1)[0] for a in argv
                        if a.startswith("--config.")], spec.partition(":")[0])


def check_keys(config: ml_collections.ConfigDict, keys: list[str], path: str) -> None:
    """Exits with one `error:` line for the first key of `keys` the config lacks."""
    for key in keys:
        if key in RENAMED:
            sys.exit(f"error: --config.{key} is gone: use --config.{RENAMED[key]}")
        node = config
        for part in key.split("."):
            if not isinstance(node, ml_collections.ConfigDict) or part not in node:
                sys.exit(f"error: unknown config key --config.{key} (not in {path})")
            node = node[part]
