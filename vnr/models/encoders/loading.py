"""Checkpoint files -> NNX parameters, placed straight into their shardings.

* ``resolve``: the project's one checkpoint-name resolver: a local directory,
  ``$VNR_ENCODERS_DIR/<name>`` (default ``~/.cache/vnr/encoders/<name>``), or a Hugging Face
  hub id already in the Hugging Face cache. It never downloads (runs must not depend on the
  network): with nothing local it fails at once saying how to download the files and where
  to put them.
* ``read_checkpoint``: ``model.safetensors`` (also sharded, via
  ``model.safetensors.index.json``; memory-mapped, bf16 included) or ``flax_model.msgpack``.
  PyTorch-layout tensors (``*.weight``, ``(out, in)``, ``(out, in, kh, kw)``, also old
  ``LayerNorm.gamma/beta``) are renamed and transposed; Flax-layout ones (``*.kernel``,
  ``*.embedding``, ``*.scale``) are taken as they are.
* ``match_tensors``: every model parameter must get exactly one tensor of the right shape and
  every tensor must be used; otherwise one ``CheckpointError`` lists each problem, naming the
  tensor and both shapes. Allowed leftovers: non-parameter buffers (``*position_ids``,
  ``*token_type_ids``) and the caller's ``ignore`` prefixes (pre-training heads).
* ``instantiate``: builds the model abstractly (``nnx.eval_shape``), ``jax.device_put``s each
  tensor with the ``NamedSharding`` its logical names map to under ``rules`` on ``mesh``
  (random init: one jit with those ``out_shardings``), never materialising a replicated copy.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import ml_dtypes
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from vnr.models import rng
from vnr.sharding import Rules, fully_replicated, run_init, var_names
from vnr.sharding import named_sharding as sharding_for

HUB_IDS: dict[str, str] = {
    "clip-vit-base-patch32": "openai/clip-vit-base-patch32",
    "clip-vit-base-patch16": "openai/clip-vit-base-patch16",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-base-chinese": "google-bert/bert-base-chinese",
    "albert-base-v2": "albert/albert-base-v2",
    "xlm-roberta-base": "FacebookAI/xlm-roberta-base",
}

BUFFER_SUFFIXES = ("position_ids", "token_type_ids")
# What `resolve` looks for in the Hugging Face cache.
_HUB_FILES = ["*.json", "*.txt", "*.model", "model.safetensors*", "flax_model.msgpack"]


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model (missing, misshapen or unused tensors)."""


def refuse(where: str | Path, problems: Sequence[str], total: int | None = None) -> None:
    """Raises the first of a checkpoint's `problems` as one CheckpointError line naming
    `where`, with the count of the others (`total`: all of them, when `problems` lists
    fewer); nothing when there are none."""
    if problems:
        n = len(problems) if total is None else total
        more = f" (and {n - 1} more problems)" if n > 1 else ""
        raise CheckpointError(f"{where}: {problems[0]}{more}")


# ----------------------------------------------------------------------------- sharding


# ----------------------------------------------------------------------------- resolving


def encoders_root() -> Path:
    """Where named encoders are looked for: ``$VNR_ENCODERS_DIR`` or ~/.cache/vnr/encoders."""
    return Path(os.environ.get("VNR_ENCODERS_DIR", "~/.cache/vnr/encoders")).expanduser()


def resolve(name_or_dir: str | os.PathLike, key: str | None = None) -> Path:
    """The local (absolute) directory holding a checkpoint; nothing is downloaded.

    Args:
      name_or_dir: a directory, a short name from ``HUB_IDS``, or a hub id ``org/name``.
      key: the config key that named it, put in front of the error message.

    Returns:
      The directory.

    Raises:
      FileNotFoundError: nothing local (the message says how to download it and where to).
    """
    text = str(name_or_dir)
    where = f"{key}={text!r}: " if key else ""
    path = Path(text).expanduser()
    if path.is_dir():
        return path.absolute()
    if text.startswith(("/", ".", "~")) or text.count("/") > 1:
        raise FileNotFoundError(f"{where}no checkpoint directory at {path}")
    repo_id = HUB_IDS.get(text, text)
    for local in (encoders_root() / text, encoders_root() / repo_id):
        if local.is_dir():
            return local.absolute()
    from huggingface_hub import snapshot_download

    try:  # the Hugging Face cache only (local_files_only: as with HF_HUB_OFFLINE=1)
        got = Path(snapshot_download(repo_id, allow_patterns=_HUB_FILES, local_files_only=True))
        if not list(got.glob("model.safetensors*")) and not (got / "flax_model.msgpack").is_file():
            raise FileNotFoundError(f"{got} holds no model.safetensors or flax_model.msgpack")
        return got.absolute()
    except Exception as e:  # noqa: BLE001 - any cache miss becomes the same advice
        raise FileNotFoundError(
            f"{where}cannot load encoder {text!r}: its files are not on this machine and runs "
            f"never download (the hub is used offline, as with HF_HUB_OFFLINE=1; "
            f"{type(e).__name__}). Download them first where there is internet, e.g. "
            f"`huggingface-cli download {repo_id} --local-dir DIR` (config.json, "
            "model.safetensors or flax_model.msgpack, tokenizer files), then pass DIR itself, "
            f"or copy it to {encoders_root() / text} (set VNR_ENCODERS_DIR to change that "
            "root), or keep it in the Hugging Face cache ($HF_HOME/hub)."
        ) from e


# ----------------------------------------------------------------------------- reading

_ST_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Memory-maps a safetensors file.

    Args:
      path: the ``.safetensors`` file.

    Returns:
      ``(name -> read-only array view, metadata)``.
    """
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    meta = header.pop("__metadata__", None) or {}
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size) if header else None
    out = {}
    for name, info in header.items():
        if info["dtype"] not in _ST_DTYPES:
            raise CheckpointError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        out[name] = raw[start:end].view(_ST_DTYPES[info["dtype"]]).reshape(info["shape"])
    return out, meta


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    out = {}
    for k, v in tree.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = np.asarray(v)
    return out


def read_checkpoint(directory: Path) -> tuple[dict[str, np.ndarray], str]:
    """Reads every tensor of a checkpoint directory.

    Args:
      directory: holds ``model.safetensors``, its sharded index, or ``flax_model.msgpack``.

    Returns:
      ``(name -> array, layout)`` with layout ``"pt"`` or ``"flax"``.
    """
    d = Path(directory)
    index = d / "model.safetensors.index.json"
    if (d / "model.safetensors").is_file() or index.is_file():
        files = (
            [d / "model.safetensors"]
            if (d / "model.safetensors").is_file()
            else [d / f for f in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
        )
        tensors, fmt = {}, None
        for f in files:
            got, meta = read_safetensors(f)
            tensors.update(got)
            fmt = fmt or meta.get("format")
        if fmt not in (None, "pt", "flax"):
            raise CheckpointError(f"{d}: safetensors format {fmt!r} is not supported (pt or flax)")
        if fmt is None:
            flaxy = any(k.endswith((".kernel", ".embedding", ".scale")) for k in tensors)
            fmt = "flax" if flaxy else "pt"
        return tensors, fmt
    if (d / "flax_model.msgpack").is_file():
        from flax.serialization import msgpack_restore

        return _flatten(msgpack_restore((d / "flax_model.msgpack").read_bytes())), "flax"
    found = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    raise FileNotFoundError(
        f"{d}: no model.safetensors or flax_model.msgpack (found: {found}). PyTorch .bin and "
        "TensorFlow .h5 files are not read; save the model with safetensors first."
    )


# ----------------------------------------------------------------------------- matching


def _pt_candidates(key: str) -> list[str]:
    module, _, leaf = key.rpartition(".")
    pre = f"{module}." if module else ""
    return {
        "kernel": [pre + "weight"],
        "embedding": [pre + "weight"],
        "scale": [pre + "weight", pre + "gamma"],
        "bias": [pre + "bias", pre + "beta"],
    }.get(leaf, [key])


def torch_key(name: str, prefix: str = "") -> str:
    """NNX parameter name -> PyTorch state-dict key: `kernel`, `scale` and `embedding` are
    torch's `weight`; `prefix` is the tower's key prefix in the checkpoint."""
    module, _, leaf = name.rpartition(".")
    return f"{prefix}{module}.{'weight' if leaf in ('kernel', 'scale', 'embedding') else leaf}"


def torch_shape(name: str, shape: Sequence[int]) -> tuple[int, ...]:
    """An NNX parameter's shape as torch stores it: a kernel (..., in, out) is
    (out, in, ...) (dense and conv of any rank); every other parameter as it is."""
    shape = tuple(shape)
    return (shape[-1], shape[-2], *shape[:-2]) if name.endswith(".kernel") else shape


def to_nnx_layout(name: str, x: np.ndarray) -> np.ndarray:
    """A torch tensor in the layout of the NNX parameter `name` (inverse of `torch_shape`)."""
    if not name.endswith(".kernel"):
        return x
    return np.asarray(x).transpose(*range(2, x.ndim), 1, 0)


def _to_flax_layout(key: str, x: np.ndarray) -> np.ndarray:
    if key.endswith(".kernel") and x.ndim == 2:
        return x.T
    if key.endswith(".kernel") and x.ndim == 4:
        return x.transpose(2, 3, 1, 0)
    return x


def match_tensors(
    targets: Mapping[str, tuple[int, ...]],
    tensors: Mapping[str, np.ndarray],
    layout: str,
    *,
    prefixes: Sequence[str] = ("",),
    ignore: Iterable[str] = (),
) -> dict[str, np.ndarray]:
    """Finds, converts and checks the tensor for every parameter.

    Args:
      targets: parameter name (Flax style, ``a.b.0.kernel``) -> expected shape.
      tensors: checkpoint name -> array.
      layout: ``"pt"`` (rename + transpose) or ``"flax"``.
      prefixes: model-name prefixes the checkpoint may put before every name (``"bert."``);
        the one matching most parameters is used.
      ignore: prefixes of tensors allowed to stay unused (e.g. ``"cls."`` heads).

    Returns:
      parameter name -> array in the Flax layout.

    Raises:
      CheckpointError: listing every missing tensor, wrong shape and unused tensor.
    """

    def candidates(key: str) -> list[str]:
        return _pt_candidates(key) if layout == "pt" else [key]

    def hits(prefix: str) -> int:
        return sum(any(prefix + c in tensors for c in candidates(k)) for k in targets)

    prefix = max(prefixes, key=hits)
    out, used = {}, set()
    problems: dict[str, list[str]] = {"missing": [], "shape": [], "unused": []}
    for key, shape in targets.items():
        names = [prefix + c for c in candidates(key)]
        src = next((n for n in names if n in tensors), None)
        if src is None:
            problems["missing"].append(
                f"missing tensor {names[0]!r} for parameter {key!r} of shape {shape}"
            )
            continue
        used.add(src)
        arr = _to_flax_layout(key, tensors[src]) if layout == "pt" else tensors[src]
        if tuple(arr.shape) != tuple(shape):
            how = "" if arr.shape == tensors[src].shape else f" ({tuple(arr.shape)} transposed)"
            problems["shape"].append(
                f"tensor {src!r} has shape {tuple(tensors[src].shape)}{how} in the checkpoint "
                f"but the model's parameter {key!r} has shape {tuple(shape)}"
            )
            continue
        out[key] = arr
    allowed = tuple(ignore)
    for name in sorted(set(tensors) - used):
        bare = name[len(prefix) :] if name.startswith(prefix) else name
        if name.endswith(BUFFER_SUFFIXES) or name.startswith(allowed) or bare.startswith(allowed):
            continue
        problems["unused"].append(f"unused tensor {name!r} of shape {tuple(tensors[name].shape)}")
    total = sum(map(len, problems.values()))
    if total:
        shown = []
        for kind, lines in problems.items():  # at most 15 of each kind
            shown += lines[:15] + ([f"... and {len(lines) - 15} more {kind}"] if lines[15:] else [])
        raise CheckpointError(
            f"checkpoint does not fit the model ({total} problems):\n  " + "\n  ".join(shown)
        )
    return out


# ----------------------------------------------------------------------------- placing


def _key(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _tracing() -> bool:
    """Whether this runs under `jax.jit` or `eval_shape` (where a new array is a tracer; a
    key drawn there from a seeded `rng.rngs` is concrete, so the key cannot tell)."""
    return isinstance(jax.numpy.zeros(()), jax.core.Tracer)


def _rngs(key: jax.Array) -> nnx.Rngs:
    with jax.ensure_compile_time_eval():  # a concrete key: concrete streams (`rng.rngs`)
        pk, dk = jax.random.split(key)
    return rng.rngs(params=pk, dropout=dk)


def abstract_params(ctor: Callable[[nnx.Rngs], nnx.Module]) -> dict[str, nnx.Variable]:
    """Parameter name -> abstract Variable (shape, dtype, logical names), allocating nothing."""
    _, params, _ = nnx.split(nnx.eval_shape(lambda: ctor(_rngs(jax.random.key(0)))), nnx.Param, ...)
    return {_key(p): v for p, v in nnx.to_flat_state(params)}


def param_shapes(ctor: Callable[[nnx.Rngs], nnx.Module]) -> dict[str, tuple[int, ...]]:
    """Parameter name (``a.b.0.kernel``) -> shape, allocating nothing."""
    return {k: tuple(v.get_value().shape) for k, v in abstract_params(ctor).items()}


def instantiate(
    ctor: Callable[[nnx.Rngs], nnx.Module],
    arrays: Mapping[str, np.ndarray] | None,
    *,
    key: jax.Array,
    mesh: Mesh | None = None,
    rules: Rules | None = None,
) -> nnx.Module:
    """Builds ``ctor``'s model with its parameters placed by their logical names.

    Args:
      ctor: ``rngs -> module``.
      arrays: parameter name -> array (Flax layout), or None for random initialisation.
      key: PRNG key for random init and the dropout streams.
      mesh: device mesh; None = default device.
      rules: logical-to-mesh rules (default ``DEFAULT_RULES``).

    Returns:
      The module, every parameter on its sharding.
    """
    graphdef, abs_params, abs_rest = nnx.split(
        nnx.eval_shape(lambda: ctor(_rngs(key))), nnx.Param, ...
    )
    is_var = lambda x: isinstance(x, nnx.Variable)
    if mesh is None:
        one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        p_shard = jax.tree.map(lambda v: v.replace(one), abs_params, is_leaf=is_var)
        r_shard = jax.tree.map(lambda v: v.replace(one), abs_rest, is_leaf=is_var)
    else:
        p_shard = jax.tree.map(
            lambda v: v.replace(sharding_for(var_names(v), v.get_value().shape, mesh, rules)),
            abs_params,
            is_leaf=is_var,
        )
        repl = NamedSharding(mesh, PartitionSpec())
        r_shard = jax.tree.map(lambda v: v.replace(repl), abs_rest, is_leaf=is_var)

    if arrays is None:  # one jit: random init lands directly in the shardings

        def init(k: jax.Array):
            _, params, rest = nnx.split(ctor(_rngs(k)), nnx.Param, ...)
            return params, rest

        shardings = (p_shard, r_shard)
        whole = fully_replicated(shardings)  # one device's program, copied (as create_sharded)
        # A concrete key is a constant of the program: each parameter's key is folded in
        # outside it (`rng.rngs`), so the program holds no threefry per parameter.
        jitted = jax.jit(functools.partial(init, key), out_shardings=None if whole else shardings)
        if _tracing():  # inside nnx.eval_shape or a jit (a model's tower): traced through
            return nnx.merge(graphdef, *jitted())
        params, rest = run_init(jitted.trace(), whole, shardings)
        return nnx.merge(graphdef, params, rest)
    flat_shard = dict(nnx.to_flat_state(p_shard))
    leaves = []
    for path, var in nnx.to_flat_state(abs_params):
        arr = np.asarray(arrays[_key(path)]).astype(var.get_value().dtype)
        leaves.append((path, var.replace(jax.device_put(arr, flat_shard[path].get_value()))))
    params = nnx.from_flat_state(leaves)
    rest = _fresh_rng_state(abs_rest, key, dict(nnx.to_flat_state(r_shard)))
    return nnx.merge(graphdef, params, rest)


def _fresh_rng_state(abs_rest: Any, key: jax.Array, shardings: Mapping[tuple, Any]) -> Any:
    """Concrete values for the non-parameter state (dropout rng streams) without compiling
    the initialisers: a distinct key per stream, counts at zero."""
    leaves = []
    for i, (path, var) in enumerate(nnx.to_flat_state(abs_rest)):
        if isinstance(var, nnx.RngKey):
            value = jax.random.fold_in(key, i)
        elif isinstance(var, nnx.RngCount):
            value = np.zeros((), np.uint32)
        else:
            raise TypeError(f"unexpected non-parameter state {_key(path)}: {type(var).__name__}")
        leaves.append((path, var.replace(jax.device_put(value, shardings[path].get_value()))))
    return nnx.from_flat_state(leaves)
