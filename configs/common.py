"""What every config shares: the trainer defaults and the parser of `path.py:ARGS`.

A config builds on `base(task, ...)` (optimizer, schedule, mesh, sharding rules, logging /
eval / checkpoint cadence), sets its `data`, declares its evaluators (`evals(c, ...)`: what is
evaluated, on which split, how often; `vnr/evaluators.py`) and sets only what differs;
`smoke(c, ...)` applies the tiny loop sizes tests use. `parse_arg` turns the comma-separated
ARGS of `--config path.py:ARGS` into flags and typed `key=value` pairs, rejecting anything the
config does not declare.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

import ml_collections

_REPO = pathlib.Path(__file__).resolve().parent.parent


def base(task: str, **overrides: Any) -> ml_collections.ConfigDict:
    """The trainer defaults for `task`; keyword arguments replace (or add) top-level keys."""
    c = ml_collections.ConfigDict()
    c.task = task
    c.seed = 0
    # Optimizer and schedule (vnr/optim.py): AdamW ("adam": no weight
    # decay), linear warmup then cosine decay to lr * end_lr_factor ("cosine": no warmup,
    # "constant": neither; "step_decay": lr * lr_decay every decay_steps), global-norm
    # clipping (grad_clip 0: none).
    c.batch_size = 32
    c.eval_batch_size = 32
    c.total_steps = 1000
    c.warmup_steps = 100
    c.lr = 1e-3
    c.weight_decay = 0.01
    c.b1, c.b2 = 0.9, 0.999
    c.eps = 1e-8  # optax's default
    c.optimizer = "adamw"
    c.schedule = "warmup_cosine"
    c.end_lr_factor = 0.01
    c.grad_clip = 1.0
    # How the model computes (vnr.models.compute): compute/storage dtype, attention kernel
    # ("default" | "xla" | "cudnn"), rematerialisation ("none" | "towers" | "full").
    c.dtype = "float32"
    c.param_dtype = "float32"
    c.attention = "default"
    c.remat = "none"
    c.scan_layers = False  # encoders' identical layers as one lax.scan (compile time)
    c.mesh = dict(shape=(-1, 1), axes=("data", "model"))
    # Logical axis -> mesh axis; names not listed are replicated.
    c.sharding_rules = (("mlp", "model"), ("heads", "model"), ("vocab", "model"))
    c.log_every = 50
    c.eval_every = 500  # the validation evaluator's cadence (`evals`)
    c.ckpt_every = 500
    c.keep_ckpts = 2
    # The step whose model is reported: metric "<evaluator>/<metric>" (e.g. "val/r@1") and
    # "max" or "min"; "" = the last step. Its checkpoint is kept besides the newest ones.
    c.select = dict(metric="", mode="max")
    c.progress = True  # a bar on a terminal
    c.progress_lines = False  # plain lines every log_every steps on a terminal too (always
    #                           when stderr is a file)
    c.profile = dict(start_step=0, num_steps=0)  # jax.profiler trace -> <workdir>/profile
    c.eval = dict()  # the task's own evaluation settings
    for key, value in overrides.items():
        c[key] = value
    return c


def evals(c: ml_collections.ConfigDict, val_max: int = 0, test_max: int = 0,
          kind: str = "", report: bool = True) -> None:
    """The usual evaluators: `val` on `data.val_split` every `eval_every` steps, and `test`
    on `data.test_splits` once after training (the run's results). Both follow later
    changes of those keys (and of `eval_every`): they hold references to them.

    `val_max` / `test_max` cap the examples per split (0 = all); `kind` is the evaluator
    module relative to `vnr.benchmarks` ("" = the task); `report`: the test evaluator
    writes its pictures into `<workdir>/reports/`."""
    c.evals = ml_collections.ConfigDict()
    c.evals.val = dict(type=kind, split=c.data.get_ref("val_split"),
                       every=c.get_ref("eval_every"), max_examples=val_max)
    c.evals.test = dict(type=kind, splits=c.data.get_ref("test_splits"), final=True,
                        max_examples=test_max, report=report)


def smoke(c: ml_collections.ConfigDict, batch: int = 8, steps: tuple[int, int] = (6, 2),
          every: int = 3) -> None:
    """Tiny loop sizes for tests: `batch` examples, (total, warmup) `steps`, log/eval/ckpt.
    A paper's epoch count set before this goes to 0, so `steps` stand on any corpus (100
    epochs of a release-shaped test corpus were 600 steps)."""
    c.batch_size = c.eval_batch_size = batch
    c.total_steps, c.warmup_steps = steps
    for key in ("epochs", "warmup_epochs"):
        if key in c:
            c[key] = 0
    c.log_every = c.eval_every = c.ckpt_every = every


# The type of a `key<sep>value` config arg: int, float, str, or a tuple of the allowed words.
Kind = type | tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Value:
    """A `key<sep>value` config arg's type (`Kind`) and its value when it is not given."""

    kind: Kind = str
    default: Any = None


@dataclasses.dataclass(frozen=True)
class Args:
    """Parsed `path.py:ARGS`: bare `flags` and the given `key<sep>value` pairs as their
    declared types, with the declared defaults and the file named."""

    flags: frozenset[str]
    values: dict[str, Any]
    path: str
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __contains__(self, flag: str) -> bool:
        return flag in self.flags

    def get(self, key: str) -> Any:
        """The value given for `key`, else its declared default."""
        return self.values.get(key, self.defaults.get(key))

    def error(self, message: str) -> ValueError:
        """A one-line config error naming this file."""
        return ValueError(f"{message} ({self.path})")

    def pick(self, choices: Iterable[str], what: str, default: str | None = None) -> str | None:
        """The one flag of `choices` given (else `default`); two or more is an error."""
        got = sorted(self.flags & set(choices))
        if len(got) > 1:
            raise self.error(f"pick one {what} of {', '.join(choices)}, got {got}")
        return got[0] if got else default


def parse_arg(arg: str | None, file: str, flags: Iterable[str] = (),
              values: Mapping[str, Kind | Value] | Iterable[str] = (), sep: str = "=") -> Args:
    """Comma-separated `arg` of the config `file` (its `__file__`) -> `Args`.

    `flags` are the bare words allowed; `values` declares the keys allowed as `key<sep>value`
    (a name may be both), each with its type (`Kind`) or a `Value` (type and default), e.g.
    `{"lambda": float, "steps": int, "clip": str}`; a plain list of names declares strings.
    Anything else, a key given twice, a key without its value or a value not of its type is
    a ValueError naming the file, the arg and what it expects.
    """
    path = display_path(file)
    flags = set(flags)
    declared = {k: v if isinstance(v, Value) else Value(v) for k, v in
                (values.items() if isinstance(values, Mapping) else ((n, str) for n in values))}
    got_flags, got_values = set(), {}
    for item in (arg or "").split(","):
        item = item.strip()
        if not item:
            continue
        if sep in item:
            key, value = (s.strip() for s in item.split(sep, 1))
            if key not in declared:
                raise ValueError(f"unknown config arg {item!r} for {path}; "
                                 f"{_choices(flags, declared, sep)}")
            if key in got_values:
                raise ValueError(f"config arg {key}{sep} given twice for {path}")
            if not value:
                raise ValueError(f"config arg {key} needs a value ({key}{sep}...) for {path}")
            got_values[key] = _typed(key, value, declared[key].kind, sep, path)
        elif item in flags:
            got_flags.add(item)
        elif item in declared:
            raise ValueError(f"config arg {item} needs a value ({item}{sep}...) for {path}")
        else:
            raise ValueError(f"unknown config arg {item!r} for {path}; "
                             f"{_choices(flags, declared, sep)}")
    return Args(frozenset(got_flags), got_values, path,
                {k: v.default for k, v in declared.items() if v.default is not None})


def _typed(key: str, value: str, kind: Kind, sep: str, path: str) -> Any:
    """`value` as `kind`, else a ValueError naming the arg and the type it expects."""
    if isinstance(kind, tuple):
        if value in kind:
            return value
        expected = f"one of {', '.join(kind)}"
    elif kind is str:
        return value
    elif kind in (int, float):
        try:
            number = kind(value)
        except ValueError:
            number = None
        if number is not None and math.isfinite(number):
            return number
        expected = "an integer" if kind is int else "a number"
    else:
        raise TypeError(f"config arg {key}: declared type {kind!r} is not int, float, str or "
                        f"a tuple of words ({path})")
    raise ValueError(f"config arg {key}{sep}{value!r} is not {expected} for {path}")


def _choices(flags: set[str], values: Mapping[str, Value], sep: str) -> str:
    return "choose from " + ", ".join(sorted(flags) + [f"{v}{sep}<{_kind(values[v].kind)}>"
                                                       for v in sorted(values)])


def _kind(kind: Kind) -> str:
    return "|".join(kind) if isinstance(kind, tuple) else getattr(kind, "__name__", str(kind))


def display_path(file: str) -> str:
    """`file` relative to the repository when it lies inside it (as configs are named)."""
    p = pathlib.Path(file).resolve()
    return str(p.relative_to(_REPO)) if p.is_relative_to(_REPO) else str(file)
