"""An encoder tower's structure from a checkpoint's config.json, without its weights.

A task's `make_model` builds a pretrained tower with `build(checkpoint, part, rngs)`: the
architecture comes from the directory's `config.json` (and, as in `load_pretrained`, the
tensor names decide the BERT pooler and the CLIP projection), initialised randomly like any
other layer under the trainer's jit. The weights come later, through the task's
`pretrained(config)` hook (`vnr.pretrained.load`), so nothing reads tensors at trace time.
Names are found by `loading.resolve`, offline.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
from flax import nnx

from vnr.models.encoders import loading

NOT_CHECKPOINTS = ("small", "hash")
# model_type values each part accepts
PARTS = {"vision": ("clip", "clip_vision_model"), "text": ("clip", "clip_text_model"),
         None: ("bert", "albert", "roberta", "xlm-roberta", "clip_vision_model",
                "clip_text_model")}


def is_checkpoint(name: str) -> bool:
    """True for anything naming weights on disk (not `small`, `hash` or `scratch:...`)."""
    return bool(name) and name not in NOT_CHECKPOINTS and not name.startswith("scratch:")


@functools.lru_cache(maxsize=16)
def _inspect(directory: str) -> tuple[Any, frozenset[str]]:
    """(transformers config, checkpoint tensor names) of a directory (names only: memmap)."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(directory)
    tensors, _ = loading.read_checkpoint(Path(directory))
    return cfg, frozenset(tensors)


def config_of(name: str, part: str | None = None, key: str = "checkpoint") -> Any:
    """The transformers config of the checkpoint `name`, checked against `part`.

    Raises:
      ValueError / FileNotFoundError: one line naming `key`.
    """
    try:
        directory = loading.resolve(name)
        if not (directory / "config.json").is_file():
            raise FileNotFoundError(f"no config.json in {directory}")
        cfg, _ = _inspect(str(directory))
    except (OSError, ValueError) as e:
        raise type(e)(f"{key}={name!r}: {str(e).splitlines()[0]}") from e
    if cfg.model_type not in PARTS[part]:
        want = {"vision": "a CLIP checkpoint (image tower)", "text": "a CLIP checkpoint (text "
                "tower)", None: "a BERT/ALBERT/XLM-R checkpoint"}[part]
        raise ValueError(f"{key}={name!r} is a {cfg.model_type!r} checkpoint; it needs {want}")
    return cfg


def spec(name: str, part: str | None) -> tuple[Callable, tuple, tuple, Any, Path]:
    """(constructor, tensor-name prefixes, ignorable prefixes, config, directory) of the
    tower `part` (`"vision"`, `"text"`, or None for the whole checkpoint) of `name`."""
    directory = loading.resolve(name)
    cfg, names = _inspect(str(directory))
    tower = part if cfg.model_type == "clip" else None
    from vnr.models.encoders.factory import builder, sentence_transformers_pooling

    ctor, prefixes, ignore = builder(
        cfg, tower=tower, add_pooling_layer=any("pooler" in k for k in names),
        pooling=sentence_transformers_pooling(directory),
        with_projection=any(k.startswith(("visual_projection", "text_projection"))
                            for k in names))
    return ctor, prefixes, ignore, cfg, directory


def build(name: str, part: str | None, rngs: nnx.Rngs) -> tuple[nnx.Module, Any]:
    """The encoder of checkpoint `name` (`part` of a CLIP one), randomly initialised:
    (module, transformers config). Its weights come through the trainer's hook; its dropout
    streams hold raw keys (`raw_rng_keys`) so a run's checkpoints restore."""
    ctor, _, _, cfg, _ = spec(name, part)
    sub = getattr(cfg, f"{part}_config", None) if cfg.model_type == "clip" else None
    return raw_rng_keys(ctor(rngs)), copy.deepcopy(sub or cfg)


def raw_rng_keys(module: nnx.Module) -> nnx.Module:
    """`module` with the typed PRNG keys of its stored RNG streams (the encoders' dropout
    layers keep one) turned into raw uint32 key data, which `vnr.checkpoint` restores; the
    streams work the same on raw keys. Returns the module (changed in place)."""
    for _, var in nnx.to_flat_state(nnx.state(module, nnx.RngKey)):
        value = var.get_value()
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            var.set_value(jax.random.key_data(value))
    return module
