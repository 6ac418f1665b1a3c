"""Torchvision-layout image-model checkpoints (DenseNet, Inception-v3): the glue both share.

A checkpoint is a directory (or a name under `$VNR_ENCODERS_DIR`) holding a torchvision state
dict saved as `model.safetensors` and, optionally, a `config.json` of architecture fields over
the model's defaults. Nothing downloads: a missing directory is an error that says how to
convert torchvision's weights where torchvision is installed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import jax
from flax import nnx
from jax.sharding import Mesh

from vnr.models.encoders import loading

C = TypeVar("C")


def find_directory(name_or_dir: str | Path, what: str, factory: str) -> Path:
    """The checkpoint directory: `name_or_dir` itself, or that name under the encoders root.
    `what` names the model in the error, `factory` the torchvision constructor to convert."""
    root = loading.encoders_root()
    for p in (Path(name_or_dir).expanduser(), root / str(name_or_dir)):
        if p.is_dir():
            return p
    raise FileNotFoundError(
        f"no {what} checkpoint {str(name_or_dir)!r} (not a directory, not under {root}); runs "
        f"never download. {what} weights are torchvision's: where torchvision is installed, "
        f"`safetensors.torch.save_file(torchvision.models.{factory}(weights='DEFAULT')"
        f".state_dict(), 'model.safetensors')`, then put the file in {root / str(name_or_dir)}/")


def read_config(directory: Path, default: C, what: str,
                convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> C:
    """`config.json` fields of a checkpoint directory over `default` (a dataclass); unknown
    keys are an error naming the file. `convert` adapts JSON values (lists to tuples)."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        return default
    raw = json.loads(path.read_text())
    fields = {f.name for f in dataclasses.fields(default)}
    unknown = sorted(set(raw) - fields - {"model_type", "architectures"})
    if unknown:
        raise ValueError(f"{path}: unknown {what} config keys {unknown} "
                         f"(known: {sorted(fields)})")
    kw = {k: v for k, v in raw.items() if k in fields}
    return dataclasses.replace(default, **(convert(kw) if convert else kw))


def load(directory: Path, ctor: Callable[[nnx.Rngs], nnx.Module],
         from_torchvision: Callable[[dict], dict], ignore: tuple[str, ...] = (),
         key: jax.Array | None = None, mesh: Mesh | None = None) -> Any:
    """The module `ctor` builds, with the directory's weights: a PyTorch-layout state dict
    goes through `from_torchvision` (renames, dropped tensors) first; parameters under the
    `ignore` prefixes are left out of the match (e.g. a dropped classifier)."""
    tensors, layout = loading.read_checkpoint(directory)
    tensors = from_torchvision(dict(tensors)) if layout == "pt" else dict(tensors)
    arrays = loading.match_tensors(loading.param_shapes(ctor), tensors, layout, ignore=ignore)
    return loading.instantiate(ctor, arrays, key=jax.random.key(0) if key is None else key,
                               mesh=mesh)
