"""Configs: load a config file once, read and set its dotted keys, check its values.

`load("path.py[:arg]")` runs the file's `get_config(arg)` once: a file inside this
repository's `configs/` package is imported as `configs.<...>` (the repository root goes on
`sys.path`, so configs import their siblings), any other file by path. `find` / `put` walk
dotted keys (`"data.max_tokens"`); `check_keys` refuses a `--config.<key>` the config lacks.
`check(config)` range-checks the keys every task shares (`RULES`: type and range of a dotted
key a config defines; `RELATIONS`: checks between keys), so a value that cannot mean a run (a
negative step count, a zero batch) stops before `config.json` is written or anything
compiles. A task's own ranges are its `validate(config)` hook (`fits_positions` is the shared
one for checkpoint text encoders). Every problem is one `ConfigError` line naming the file or
the key.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import math
import pathlib
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import ml_collections

from vnr import profiling

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"


class ConfigError(ValueError):
    """A problem with the config or workdir, reported as one line before any compile."""



def load(spec: str) -> ml_collections.ConfigDict:
    """`path.py[:arg]` -> the ConfigDict its `get_config(arg)` returns."""
    path, _, arg = spec.partition(":")
    module = _module(path)
    get_config = getattr(module, "get_config", None)
    if not callable(get_config):
        raise ConfigError(f"--config {path} defines no get_config(arg)")
    try:
        config = get_config(arg or None)
    except ValueError as e:
        message = " ".join(str(e).split())  # one line
        raise ConfigError(message if path in message or _shown(path) in message
                         else f"{path}: {message}") from e
    if not isinstance(config, ml_collections.ConfigDict):
        raise ConfigError(f"--config {path}: get_config returned {type(config).__name__}, "
                         "not a ConfigDict")
    return config


def _module(path: str) -> ModuleType:
    file = pathlib.Path(path)
    if file.suffix != ".py" or not file.is_file():
        raise ConfigError(f"--config file {path} does not exist (expected path.py[:arg])")
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


def find(config: Any, key: str) -> tuple[bool, Any]:
    """(present, value) of dotted `key` in `config` (a ConfigDict or nested mappings)."""
    node = config
    for part in key.split("."):
        if not hasattr(node, "keys") or part not in node:
            return False, None
        node = node[part]
    return True, node


def put(config: Any, key: str, value: Any) -> None:
    """Sets dotted `key` (its parents must exist)."""
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        node = node[part]
    node[leaf] = value


def parse_value(text: str, old: Any, key: str) -> Any:
    """`text` as the type of the value it replaces (bool, int, float, str, tuple), as absl's
    `--config.key=value` types it."""
    if isinstance(old, bool):
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise ConfigError(f"{key}={text!r}: expected True or False")
    if isinstance(old, str):
        return text
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if old is None:
            return text
        raise ConfigError(f"{key}={text!r}: expected a {type(old).__name__}") from None
    if isinstance(old, float) and isinstance(value, int):
        return float(value)
    if isinstance(old, tuple | list) and isinstance(value, list | tuple):
        return tuple(value)
    return value


def override(config: ml_collections.ConfigDict, items: Iterable[str]) -> None:
    """Sets every `key=value` of `items`, typed like the value it replaces; an unknown key or
    a bad value is a ConfigError naming it."""
    for item in items:
        key, _, text = item.partition("=")
        present, old = find(config, key)
        if not present or isinstance(old, ml_collections.ConfigDict):
            raise ConfigError(f"unknown config key {key}")
        try:
            put(config, key, parse_value(text, old, key))
        except TypeError as e:  # a ConfigDict field's type refuses the value
            raise ConfigError(f"{key}={text!r}: {e}") from None


def check_keys(config: Any, keys: Iterable[str], path: str) -> None:
    """ConfigError for the first `--config.<key>` of `keys` that `config` (from `path`) lacks."""
    for key in keys:
        if not find(config, key)[0]:
            raise ConfigError(f"unknown config key --config.{key} (not in {path})")


@dataclasses.dataclass(frozen=True)
class Rule:
    """`kind` int (not bool) or float (int or float, finite, not bool) within [low, high]
    (`open_low` / `open_high` exclude the bound); `note` says what a bound means."""

    kind: type
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    note: str = ""

    def error(self, value: Any) -> str | None:
        """Why `value` breaks the rule (None when it does not)."""
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                self.kind is int and not isinstance(value, int)):
            return f"must be {'an integer' if self.kind is int else 'a number'}"
        if not math.isfinite(value):
            return "must be finite"
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)):
            return f"must be {'>' if self.open_low else '>='} {self.low}"
        if self.high is not None and (value > self.high or
                                      (self.open_high and value == self.high)):
            return f"must be {'<' if self.open_high else '<='} {self.high}"
        return None


COUNT = Rule(int, 1)  # a size or a cadence: 1 or more
OPTIONAL_COUNT = Rule(int, 0)
POSITIVE = Rule(float, 0, open_low=True)
NON_NEGATIVE = Rule(float, 0)
FRACTION = Rule(float, 0, 1, open_high=True)  # a rate or a decay: [0, 1)

RULES: dict[str, Rule] = {
    "seed": OPTIONAL_COUNT,
    "batch_size": COUNT,
    "eval_batch_size": COUNT,
    # 0 on purpose: evaluate-only and zero-shot rows (init_from, a pretrained tower, a
    # random baseline); a negative count is refused, never read as 0.
    "total_steps": Rule(int, 0, note="0 trains nothing: the final evaluators score the model "
                                     "as built, pretrained weights included"),
    "warmup_steps": OPTIONAL_COUNT,
    "lr": Rule(float, 0, open_low=True, note="use total_steps=0 or config.frozen to train "
                                             "nothing"),
    "weight_decay": NON_NEGATIVE,
    "b1": FRACTION,
    "b2": FRACTION,
    "eps": POSITIVE,
    "momentum": FRACTION,
    "end_lr_factor": NON_NEGATIVE,
    "grad_clip": Rule(float, 0, note="0 clips nothing"),
    "log_every": COUNT,
    "eval_every": COUNT,
    "ckpt_every": COUNT,
    "keep_ckpts": COUNT,
    "eval.beam_size": COUNT,
    "data.num_workers": Rule(int, -1, note="0 reads in this process, -1 = the host's cores "
                                             "minus 2"),
    "data.image_size": COUNT,
    "data.max_frames": COUNT,
    "data.max_tokens": COUNT,
    "data.vocab_size": Rule(int, 0, note="0 takes it from data.tokenizer"),
    "model.dropout": FRACTION,
    "model.width": COUNT,
    "model.heads": COUNT,
    "model.mlp": COUNT,
}


def _profile_window(config: Any) -> str | None:
    try:
        profiling.check(config)
    except ValueError as e:
        return str(e)
    return None


def _directories(config: Any) -> str | None:
    """A release directory the config names exists (every task reads `data.manual_dir`
    only when it is set; builders decide which of their configs need one)."""
    for key in DIRECTORIES:
        present, value = find(config, key)
        if present and value and not pathlib.Path(value).is_dir():
            return f"{key}={value!r} does not exist" + (
                " as a directory" if pathlib.Path(value).exists() else "")
    return None


DIRECTORIES = ("data.manual_dir",)

# Checks between keys, run once every key above is in range: each returns why not, or None.
# (The evaluators' cadences and `select` are checked by vnr.evaluators.parse.)
RELATIONS: tuple[Callable[[Any], str | None], ...] = (_profile_window, _directories)




def check(config: Any, rules: dict[str, Rule] | None = None) -> None:
    """Raises ConfigError (one line) on the first key of `rules` (default `RULES`) whose value
    breaks its rule, then on the first failed `RELATIONS` check."""
    for key, rule in (RULES if rules is None else rules).items():
        present, value = find(config, key)
        why = rule.error(value) if present else None
        if why:
            note = f" ({rule.note})" if rule.note else ""
            raise ConfigError(f"config key {key}={value!r} {why}{note}")
    for relation in RELATIONS if rules is None else ():
        if why := relation(config):
            raise ConfigError(why)


def fits_positions(config: Any, length_key: str, encoder_key: str, part: str | None = None
                   ) -> None:
    """Raises ConfigError when `length_key` tokens exceed the positional embeddings of the
    checkpoint that `encoder_key` names (under jit a lookup past the table is clamped, not
    an error: every later position would silently share the last embedding). Scratch and
    hashed-word encoders are sized from the config and need no check."""
    from vnr.models.encoders import towers

    length, encoder = find(config, length_key)[1], find(config, encoder_key)[1]
    if not isinstance(encoder, str) or not towers.is_checkpoint(encoder):
        return
    cfg = towers.config_of(encoder, part, encoder_key)
    cfg = getattr(cfg, f"{part or 'text'}_config", cfg)
    offset = cfg.pad_token_id + 1 if cfg.model_type in ("roberta", "xlm-roberta") else 0
    usable = cfg.max_position_embeddings - offset  # RoBERTa counts from pad_token_id + 1
    if length > usable:
        raise ConfigError(f"{length_key}={length} exceeds the {usable} positions of "
                         f"{encoder_key}={encoder!r}")
