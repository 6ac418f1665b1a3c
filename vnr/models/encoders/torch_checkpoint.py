"""PyTorch checkpoint files (``.pth``, ``.bin``, ``.th``) read without torch.

``torch.save`` writes a pickle whose tensors point into separate raw storages. Two layouts:

* **zip** (torch >= 1.6): an archive ``<name>/data.pkl`` (the object pickle) with the storages
  as ``<name>/data/<key>``; the folder name varies, so ``data.pkl`` is looked up by suffix.
* **legacy** (older torch, or ``_use_new_zipfile_serialization=False``): one stream of
  pickles -- magic number, protocol version (1001), system info, the object, the sorted list
  of storage keys -- followed, for each key in that order, by an int64 element count and the
  storage's raw little-endian bytes.

The object pickle is read with a restricted unpickler: it resolves only the few globals a
state dict needs (tensor/parameter rebuild functions, typed ``torch.*Storage`` classes,
``collections.OrderedDict``) and refuses every other class with one error naming the file
and the class, so a checkpoint can never run code. Training checkpoints (fairseq's
``checkpoint_best.pt``) also pickle bookkeeping objects next to the weights (an argparse
``Namespace``, NumPy scalars in meters, config enums): with ``foreign="skip"`` every other
class becomes an inert placeholder (``_Foreign``: it takes the pickled arguments and state,
runs none of that class's code and is dropped), allowed only outside the tensor dict that is
returned. Tensors are rebuilt as NumPy arrays
(their storage viewed with the tensor's offset, shape and strides, then copied, so
transposed or sliced tensors come out right and own their memory).

``read_torch_checkpoint(path)`` returns a flat ``{name: np.ndarray}``: a top level of
``{"state_dict": ...}`` or ``{"model": ...}`` is unwrapped, nested dicts and lists are
flattened with dots, and non-tensor leaves (epoch counters, strings) are left out. Every
failure (missing file, not a torch file, truncated or corrupt data, an unsupported class)
is a one-line ``CheckpointError`` that starts with the path. Storages are read whole (no
memory map); of a zip-format training checkpoint (the weights under ``state_dict`` or
``model`` beside an optimizer state) only the storages of the weights are read.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ml_dtypes
import numpy as np

from vnr.models.encoders.loading import CheckpointError

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

# torch's typed storage classes, as pickled (``torch.FloatStorage``), -> element dtype.
STORAGE_DTYPES: dict[str, Any] = {
    "DoubleStorage": np.float64,
    "FloatStorage": np.float32,
    "HalfStorage": np.float16,
    "BFloat16Storage": ml_dtypes.bfloat16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
    "UntypedStorage": np.uint8,
}


FOREIGN = ("refuse", "skip")  # what the reader does with a class outside _ALLOWED


class _Refused(Exception):
    """An unpickler request outside the allowed set (turned into a CheckpointError)."""


class _Foreign:
    """Inert stand-in for an object of a class the reader does not resolve (``foreign="skip"``):
    it absorbs what the pickle passes (constructor arguments, state, items) and runs no code."""

    qualname = "?"

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def __setstate__(self, _state: Any) -> None:
        pass

    def __setitem__(self, _key: Any, _value: Any) -> None:
        pass

    def append(self, _value: Any) -> None:
        pass

    def extend(self, _values: Any) -> None:
        pass


@dataclass(frozen=True)
class _StorageType:
    name: str
    dtype: Any


@dataclass
class _Storage:
    """A storage of the file: the ``root`` key's bytes, elements ``[offset, offset + numel)``."""

    root: str
    dtype: Any
    offset: int
    numel: int
    data: np.ndarray | None = None  # the root's bytes, when they came with the storage


@dataclass
class _TensorRef:
    """A tensor still waiting for its storage's bytes (legacy files put them after the pickle)."""

    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor(storage: _Storage, offset: int, size: tuple, stride: tuple,
                    *_ignored: Any) -> _TensorRef:
    """Stands in for torch._utils._rebuild_tensor(_v2): requires_grad, hooks and metadata are
    irrelevant to the values."""
    if not isinstance(storage, _Storage):
        raise _Refused(f"tensor built from a {type(storage).__name__}, not a storage")
    return _TensorRef(storage, int(offset), tuple(int(s) for s in size),
                      tuple(int(s) for s in stride))


def _rebuild_parameter(data: Any, *_ignored: Any) -> Any:
    """Stands in for torch._utils._rebuild_parameter(_with_state): a Parameter is its data."""
    return data


def _load_from_bytes(data: bytes) -> Any:
    """Stands in for torch.storage._load_from_bytes: a storage torch.save'd into bytes."""
    tree, buffers = _read_object(io.BytesIO(data))
    if not isinstance(tree, _Storage):
        raise _Refused(f"embedded bytes hold a {type(tree).__name__}, not a storage")
    tree.data = buffers[tree.root]
    return tree


_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch.storage", "_load_from_bytes"): _load_from_bytes,
}


class _Unpickler(pickle.Unpickler):
    """Resolves only ``_ALLOWED`` and the typed storage classes; storages come from ``load``."""

    def __init__(self, f: IO[bytes], storages: dict[str, _Storage] | None = None,
                 foreign: str = "refuse"):
        super().__init__(f)
        self.storages = {} if storages is None else storages
        self.foreign = foreign

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name, STORAGE_DTYPES[name])
        if self.foreign == "skip":
            return type(name, (_Foreign,), {"qualname": f"{module}.{name}"})
        raise _Refused(f"refusing to unpickle {module}.{name} (only tensors, storages and "
                       "dicts are read from torch checkpoints)")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and pid and pid[0] in ("storage", b"storage")
                and len(pid) in (5, 6) and isinstance(pid[1], _StorageType)):
            raise _Refused(f"unsupported persistent id {str(pid)[:80]}")
        stype, key, numel = pid[1], str(pid[2]), int(pid[4])
        root = self.storages.setdefault(key, _Storage(key, stype.dtype, 0, numel))
        view = pid[5] if len(pid) == 6 else None
        if view is None:
            return root
        view_key, offset, size = view  # legacy only: a slice of the root storage
        return self.storages.setdefault(str(view_key),
                                        _Storage(key, stype.dtype, int(offset), int(size)))


def _materialise(tree: Any, buffers: Mapping[str, np.ndarray]) -> Any:
    """Replaces every _TensorRef in the unpickled tree with its NumPy array."""
    if isinstance(tree, _TensorRef):
        s = tree.storage
        raw = buffers[s.root] if s.data is None else s.data
        flat = raw.view(s.dtype)[s.offset: s.offset + s.numel]
        shape, stride = tree.shape, tree.stride
        if len(shape) != len(stride) or any(st < 0 for st in stride):
            raise _Refused(f"tensor with shape {shape} and stride {stride}")
        if 0 not in shape:
            last = tree.offset + sum((n - 1) * st for n, st in zip(shape, stride))
            if tree.offset < 0 or last >= flat.size:
                raise _Refused(f"tensor of shape {shape} reaches element {last} of a storage "
                               f"of {flat.size} (truncated or corrupt file)")
        base = flat[tree.offset:] if 0 not in shape else flat[:0]
        item = flat.dtype.itemsize
        return np.lib.stride_tricks.as_strided(
            base, shape, tuple(st * item for st in stride), writeable=False).copy()
    if isinstance(tree, Mapping):
        return {k: _materialise(v, buffers) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_materialise(v, buffers) for v in tree)
    return tree


def _bytes(raw: bytes, s: _Storage, what: str) -> np.ndarray:
    want = s.numel * np.dtype(s.dtype).itemsize
    if len(raw) < want:
        raise _Refused(f"storage {what} holds {len(raw)} bytes, {want} expected (truncated)")
    return np.frombuffer(raw, np.uint8, count=want)


def _read_zip(f: IO[bytes], storages: bool = True, foreign: str = "refuse") -> Any:
    with zipfile.ZipFile(f) as z:
        pkls = [n for n in z.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
        if len(pkls) != 1:
            raise _Refused("zip archive without exactly one data.pkl (not a torch.save file; "
                           "a TorchScript archive?)")
        prefix = pkls[0][: -len("data.pkl")]
        names = set(z.namelist())
        if f"{prefix}byteorder" in names and z.read(f"{prefix}byteorder") != b"little":
            raise _Refused("big-endian checkpoint")
        u = _Unpickler(io.BytesIO(z.read(pkls[0])), foreign=foreign)
        tree = _weights(u.load())
        used = _roots(tree)  # a training checkpoint's optimizer state beside them: not read
        buffers = {}
        for key, s in u.storages.items() if storages else ():
            if s.root == key and key in used:
                name = f"{prefix}data/{key}"
                if name not in names:
                    raise _Refused(f"storage {name} missing from the archive")
                buffers[key] = _bytes(z.read(name), s, name)
    return tree, buffers


def _weights(tree: Any) -> Any:
    """A top-level `state_dict` or `model` dict (training checkpoints), else the tree."""
    for key in ("state_dict", "model"):
        if isinstance(tree, Mapping) and isinstance(tree.get(key), Mapping):
            return tree[key]
    return tree


def _roots(tree: Any) -> set[str]:
    """The root storage keys the tensors of `tree` read."""
    if isinstance(tree, _TensorRef):
        return {tree.storage.root}
    if isinstance(tree, Mapping):
        return set().union(*(_roots(v) for v in tree.values()))
    if isinstance(tree, list | tuple):
        return set().union(*(_roots(v) for v in tree))
    return set()


def _read_legacy(f: IO[bytes], foreign: str = "refuse") -> Any:
    def small() -> Any:
        return _Unpickler(f).load()

    if small() != LEGACY_MAGIC:
        raise _Refused("not a torch.save file (bad magic number)")
    if (protocol := small()) != LEGACY_PROTOCOL:
        raise _Refused(f"unsupported legacy protocol version {protocol}")
    info = small()
    if isinstance(info, Mapping) and not info.get("little_endian", True):
        raise _Refused("big-endian checkpoint")
    u = _Unpickler(f, foreign=foreign)
    tree = u.load()
    keys = small()
    buffers = {}
    for key in keys:
        key = str(key)
        if key not in u.storages:
            raise _Refused(f"storage {key!r} listed but never used")
        s = u.storages[key]
        head = f.read(8)
        if len(head) < 8:
            raise _Refused(f"storage {key!r} missing (truncated file)")
        (numel,) = struct.unpack("<q", head)
        raw = f.read(numel * np.dtype(s.dtype).itemsize)
        buffers[key] = _bytes(raw, _Storage(key, s.dtype, 0, max(numel, s.numel)), repr(key))
    missing = {s.root for s in u.storages.values()} - set(buffers)
    if missing:
        raise _Refused(f"storages {sorted(missing)[:3]} have no data")
    return tree, buffers


def _read_object(f: IO[bytes], foreign: str = "refuse") -> tuple[Any, dict[str, np.ndarray]]:
    """(unpickled tree with _TensorRef leaves, root key -> bytes) of a torch.save stream."""
    head = f.read(262)
    f.seek(0)
    if head.startswith(b"PK"):
        return _read_zip(f, foreign=foreign)
    if head[:1] == b"\x80":
        return _read_legacy(f, foreign)
    if head[257:262] == b"ustar":
        raise _Refused("a tar archive: torch < 0.4's format is not supported (load and "
                       "re-save it with a newer torch)")
    raise _Refused("not a PyTorch checkpoint (neither a zip archive nor a pickle stream)")


def _flatten(tree: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(tree, np.ndarray | _Shape):
        out[prefix[:-1]] = tree
    elif isinstance(tree, _Foreign):
        raise _Refused(f"a {tree.qualname} object at {prefix[:-1]!r}, inside the tensor dict "
                       "(foreign='skip' skips other classes only outside it)")
    elif isinstance(tree, Mapping):
        for k, v in tree.items():
            _flatten(v, f"{prefix}{k}.", out)
    elif isinstance(tree, list | tuple):
        for i, v in enumerate(tree):
            _flatten(v, f"{prefix}{i}.", out)


def read_torch_checkpoint(path: str | os.PathLike, *,
                          foreign: str = "refuse") -> dict[str, np.ndarray]:
    """Every tensor of a ``torch.save`` file, by dotted name, as NumPy arrays.

    Args:
      path: a ``.pth`` / ``.bin`` / ``.th`` file in the zip or the legacy format.
      foreign: ``"refuse"`` any class beyond tensors and dicts, or ``"skip"`` such objects
        (inert placeholders, left out) when they lie outside the returned tensor dict.

    Returns:
      ``name -> array`` (own memory, C-contiguous); a top-level ``state_dict`` or ``model``
      entry is unwrapped first; non-tensor leaves are left out.

    Raises:
      CheckpointError: one line naming the file and the problem.
    """
    return _read(Path(path), shapes_only=False, foreign=foreign)


def read_torch_shapes(path: str | os.PathLike, *,
                      foreign: str = "refuse") -> dict[str, tuple[int, ...]]:
    """``name -> shape`` of every tensor of a ``torch.save`` file, from its object pickle
    alone (a zip file's storages are not read): a model's sizes without its weights.
    Same names, ``foreign`` and errors as ``read_torch_checkpoint``."""
    return _read(Path(path), shapes_only=True, foreign=foreign)


def _read(path: Path, shapes_only: bool, foreign: str = "refuse") -> dict[str, Any]:
    if foreign not in FOREIGN:
        raise ValueError(f"foreign must be one of {FOREIGN}, got {foreign!r}")
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        with open(path, "rb") as f:
            if shapes_only and f.read(2) == b"PK":
                f.seek(0)
                tree = _read_zip(f, storages=False, foreign=foreign)[0]
            else:
                f.seek(0)
                tree, buffers = _read_object(f, foreign)
                tree = _shapes(tree) if shapes_only else _materialise(tree, buffers)
        if shapes_only:
            tree = _shapes(tree)
    except _Refused as e:
        raise CheckpointError(f"{path}: {e}") from None
    except (zipfile.BadZipFile, EOFError, pickle.UnpicklingError, struct.error, ValueError,
            KeyError, TypeError, IndexError, AttributeError) as e:
        raise CheckpointError(f"{path}: not a readable PyTorch checkpoint, truncated or "
                              f"corrupt ({type(e).__name__}: {str(e)[:120]})") from None
    tree = _weights(tree)
    if isinstance(tree, np.ndarray | _Shape):
        raise CheckpointError(f"{path}: holds a single tensor, not a dict of tensors")
    out: dict[str, Any] = {}
    try:
        _flatten(tree, "", out)
    except _Refused as e:
        raise CheckpointError(f"{path}: {e}") from None
    return {k: tuple(v) for k, v in out.items()} if shapes_only else out


class _Shape(tuple):
    """A tensor's shape standing in for its array (``read_torch_shapes``)."""


def _shapes(tree: Any) -> Any:
    """``tree`` with every _TensorRef replaced by its shape."""
    if isinstance(tree, _TensorRef):
        return _Shape(tree.shape)
    if isinstance(tree, Mapping):
        return {k: _shapes(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple) and not isinstance(tree, _Shape):
        return type(tree)(_shapes(v) for v in tree)
    return tree
