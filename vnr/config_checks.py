"""Range checks of the config keys every task shares, before anything is written or compiled.

`RULES` maps a dotted key to its `Rule` (type and range); a key a config does not define is
not checked. `RELATIONS` are the checks between keys. `check(config)` raises one ValueError
line naming the key, its value and the rule, so that a value which cannot mean a run (a
negative step count, a zero batch, a negative learning rate) stops before `config.json` is
written, instead of training an untrained model's results or failing deep in a library.
Task-specific ranges (a model's positional-embedding size, a tokenizer's vocabulary) are
the task's `validate(config)` hook (`fits_positions` is the shared one for checkpoint text
encoders); split names are its `check_splits(config)`, which the trainer runs (building the dataset)
before anything compiles.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from vnr import profiling


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


# Checks between keys, run once every key above is in range: each returns why not, or None.
# (The evaluators' cadences and `select` are checked by vnr.evaluators.parse.)
RELATIONS: tuple[Callable[[Any], str | None], ...] = (_profile_window,)


def get(config: Any, key: str) -> tuple[bool, Any]:
    """(present, value) of dotted `key` in `config` (a ConfigDict or nested mappings)."""
    node = config
    for part in key.split("."):
        if not hasattr(node, "keys") or part not in node:
            return False, None
        node = node[part]
    return True, node


def check(config: Any, rules: dict[str, Rule] | None = None) -> None:
    """Raises ValueError (one line) on the first key of `rules` (default `RULES`) whose value
    breaks its rule, then on the first failed `RELATIONS` check."""
    for key, rule in (RULES if rules is None else rules).items():
        present, value = get(config, key)
        why = rule.error(value) if present else None
        if why:
            note = f" ({rule.note})" if rule.note else ""
            raise ValueError(f"config key {key}={value!r} {why}{note}")
    for relation in RELATIONS if rules is None else ():
        if why := relation(config):
            raise ValueError(why)


def fits_positions(config: Any, length_key: str, encoder_key: str, part: str | None = None
                   ) -> None:
    """Raises ValueError when `length_key` tokens exceed the positional embeddings of the
    checkpoint that `encoder_key` names (under jit a lookup past the table is clamped, not
    an error: every later position would silently share the last embedding). Scratch and
    hashed-word encoders are sized from the config and need no check."""
    from vnr.models.encoders import towers

    length, encoder = get(config, length_key)[1], get(config, encoder_key)[1]
    if not isinstance(encoder, str) or not towers.is_checkpoint(encoder):
        return
    cfg = towers.config_of(encoder, part, encoder_key)
    cfg = getattr(cfg, f"{part or 'text'}_config", cfg)
    offset = cfg.pad_token_id + 1 if cfg.model_type in ("roberta", "xlm-roberta") else 0
    usable = cfg.max_position_embeddings - offset  # RoBERTa counts from pad_token_id + 1
    if length > usable:
        raise ValueError(f"{length_key}={length} exceeds the {usable} positions of "
                         f"{encoder_key}={encoder!r}")
