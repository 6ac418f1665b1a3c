"""Frozen towers as cached features: a frozen tower's per-frame embeddings, computed once
per built dataset (`python -m vnr.cache_features`), read by training and evaluation instead
of decoding the frames and running the tower.

**The task side.** A task opts in with the optional hook

    def feature_towers(config) -> dict[str, Tower]

naming each cacheable tower (e.g. "image", "text"): where its parameters live in the model
(`module`), how a record becomes the tower's inputs (`prepare`, NumPy, leading axis = the
record's frames; what the data pipeline does before the tower), the jit-able tower call
(`embed`), every preprocessing setting the two depend on, and the dataset (name, data_dir,
record source). `config.data.feature_cache` ("image", "text" or "image,text") then makes the
task read `<name>_features` [frames, D] float32 per record through `CachedSource`, and the
model skip the tower.

**The key.** A cache directory is named by a hash of everything its values depend on
(`identity`): the tower's module path; its weights, as the SHA-256 of every file of the
checkpoint directory the `pretrained` hook loads it from (for a run source, the files of
the step of that run it reads, `vnr.run_reader.run_step`; for a tower no source covers, its
random init: `config.seed` and `config.model`); the preprocessing settings; `config.dtype` and
`config.param_dtype`; the dataset's name, config and version. A run computes the key of its
own config, so a cache of another checkpoint or preprocessing is never read: `check` (called
by `vnr.train.setup` after `validate`, before anything compiles, and again on the built state
for the exact frozen test) stops with one line naming what differs. A tower counts as
frozen when a `config.frozen` pattern matches its path prefix (`encoders[.]frame[.]image[.]`).

**The layout**, next to the dataset:
`<data_dir>/feature_cache/<dataset>/<name>-<key>/` with `meta.json` (the identity, the
width, and per finished split its record and frame counts), `<split>.npy` (float32
[frames, D], memory-mapped by readers), `<split>.offsets.npy` (int64 [records + 1]: record r
is rows offsets[r]:offsets[r+1]) and `<split>.ids.json` (record ids, checked on every read so
a rebuilt dataset in another order is an error, not wrong features). `<split>.parts/` holds
the finished chunks of an interrupted build (resumable).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vnr.data.mapped import MappedRows

VERSION = 1  # of the layout; part of the key


@dataclasses.dataclass(frozen=True)
class Tower:
    """One cacheable tower of a task (see the module docstring)."""

    module: str  # dotted parameter path of the tower in the model, e.g. "encoders.frame.image"
    prepare: Callable[[dict], dict[str, np.ndarray]]  # record -> inputs [frames, ...]
    embed: Callable[[Any, dict[str, Any], bool], Any]  # (model, inputs, train) -> [frames, D]
    preprocessing: Mapping[str, Any]  # settings `prepare` and `embed` depend on (JSON values)
    dataset: str  # "<builder>/<config>/<version>"
    data_dir: str
    source: Callable[[str], Sequence[dict]]  # split -> random-access records
    splits: tuple[str, ...]  # the splits a run reads (train, val, tests)
    id_key: str = "clip_id"  # the record field that names a record


class CacheError(ValueError):
    """A missing, incomplete or stale cache, or a tower that cannot be cached."""


def requested(config: Any) -> tuple[str, ...]:
    """The tower names of `config.data.feature_cache` ("" = none)."""
    spec = config.data.get("feature_cache", "") or ""
    return tuple(n.strip() for n in spec.split(",") if n.strip())


@functools.lru_cache(maxsize=64)
def _digest_files(directory: str, listing: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for rel, size, _ in listing:
        h.update(f"{rel}\0{size}\0".encode())
        with open(os.path.join(directory, rel), "rb") as f:
            for block in iter(lambda: f.read(1 << 23), b""):
                h.update(block)
    return h.hexdigest()


def digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file or of every file under a directory (relative names, sizes and
    contents); memoised per process by (name, size, mtime) of each file."""
    path = pathlib.Path(path).absolute()
    if path.is_file():
        st = path.stat()
        return _digest_files(str(path.parent), ((path.name, st.st_size, st.st_mtime_ns),))
    files = sorted(p for p in path.rglob("*") if p.is_file())
    listing = tuple((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns)
                    for p in files)
    return _digest_files(str(path), listing)


def _weights(config: Any, task: Any, tower: Tower) -> dict[str, Any]:
    """The identity of the tower's weights (see the module docstring)."""
    from vnr import checkpoint, pretrained, run_reader
    from vnr.models.encoders import towers

    hook = getattr(task, "pretrained", None)
    sources = hook(config) if hook is not None else {}
    for prefix, source in sources.items():
        name, part, step = pretrained.unpack(source)
        if prefix and tower.module != prefix and not tower.module.startswith(prefix + "."):
            continue
        if part == pretrained.RUN:
            ckpts = pathlib.Path(name).absolute() / "checkpoints"
            if not checkpoint.good_steps(ckpts):
                raise CacheError(f"feature cache: tower {tower.module} comes from run {name}, "
                                 f"which has no finished checkpoint under {ckpts}")
            n = run_reader.run_step(name, step, f"feature cache: tower {tower.module}").step
            return {"run": str(ckpts.parent), "step": n, "sha256": digest(ckpts / str(n))}
        directory = towers.spec(name, part)[-1]
        return {"checkpoint": str(directory), "part": part, "sha256": digest(directory)}
    model = config.model.to_dict() if hasattr(config.model, "to_dict") else dict(config.model)
    return {"random_init": {"seed": config.seed, "model": model}}


def identity(config: Any, task: Any, name: str, tower: Tower) -> dict[str, Any]:
    """Everything the cached values depend on (hashed into the key), as JSON values."""
    return _json({"layout": VERSION, "tower": name, "module": tower.module,
            "weights": _weights(config, task, tower),
            "preprocessing": dict(tower.preprocessing),
            "dtype": config.get("dtype", "float32"),
            "param_dtype": config.get("param_dtype", "float32"),
            "dataset": tower.dataset})


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def key_of(ident: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def root(tower: Tower) -> pathlib.Path:
    """Where the caches of `tower`'s dataset live."""
    return pathlib.Path(tower.data_dir).absolute() / "feature_cache" / tower.dataset


def towers_of(config: Any, task: Any, names: Sequence[str] | None = None) -> dict[str, Tower]:
    """The task's towers named by `names` (default: `config.data.feature_cache`)."""
    names = requested(config) if names is None else tuple(names)
    hook = getattr(task, "feature_towers", None)
    have = hook(config) if hook is not None else {}
    for n in names:
        if n not in have:
            offered = ", ".join(sorted(have)) or "none"
            raise CacheError(f"data.feature_cache names tower {n!r}; this task and config "
                             f"offer: {offered}")
    return {n: have[n] for n in names}


def locate(config: Any, task: Any, name: str, tower: Tower) -> tuple[pathlib.Path, dict]:
    """(cache directory, identity) of `tower` under this config."""
    ident = identity(config, task, name, tower)
    return root(tower) / f"{name}-{key_of(ident)}", ident


def _differs(a: Mapping, b: Mapping, prefix: str = "") -> str:
    """The first differing key of two identities, as `key: a vs b`."""
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            if out := _differs(x, y, f"{prefix}{k}."):
                return out
        elif x != y:
            return f"{prefix}{k}: {y!r} there vs {x!r} in this run"
    return ""


def build_command(config_arg: str = "<the same --config>") -> str:
    return f"python -m vnr.cache_features --config {config_arg}"


def check(config: Any, task: Any, frozen: Callable[[str], bool]) -> dict[str, pathlib.Path]:
    """The cache directories this run reads, each complete for the run's splits and built
    from its own weights and preprocessing; else CacheError with one line.

    `frozen(module)`: whether every parameter under `module` is frozen (a trained tower's
    features change every step: caching it would silently freeze it)."""
    out = {}
    for name, tower in towers_of(config, task).items():
        if not frozen(tower.module):
            raise CacheError(f"data.feature_cache={name!r}: the {name} tower "
                             f"({tower.module}) is not frozen; add it to config.frozen or "
                             "drop the cache (a trained tower's features change every step)")
        directory, ident = locate(config, task, name, tower)
        meta_path = directory / "meta.json"
        if not meta_path.is_file():
            others = sorted(p for p in root(tower).glob(f"{name}-*") if (p / "meta.json").is_file())
            if others:
                old = json.loads((others[-1] / "meta.json").read_text())["identity"]
                raise CacheError(f"feature cache {others[-1]} is stale for this run "
                                 f"({_differs(ident, old)}); it is never read: build the "
                                 f"cache of this config with `{build_command()}`")
            raise CacheError(f"no {name} feature cache for this config under {root(tower)}: "
                             f"build it with `{build_command()}`")
        meta = json.loads(meta_path.read_text())
        if meta.get("identity") != ident:  # a hash collision or a hand-edited directory
            raise CacheError(f"feature cache {directory}: meta.json does not match this run "
                             f"({_differs(ident, meta.get('identity', {}))})")
        missing = [s for s in tower.splits if s not in meta.get("splits", {})]
        if missing:
            raise CacheError(f"feature cache {directory} has no finished split {missing[0]!r}"
                             f" (it has {sorted(meta.get('splits', {}))}): run "
                             f"`{build_command()}` again, it resumes")
        out[name] = directory
    return out


class Reader(MappedRows):
    """Rows of one split of one cache; picklable (memory maps reopen in each process)."""

    what, noun, fix, error = "feature cache", "cache", "rebuild the cache", CacheError

    def _rows_array(self, directory: pathlib.Path, offsets: np.ndarray) -> np.ndarray:
        return np.load(directory / f"{self.split}.npy", mmap_mode="r")

    def rows(self, index: int, record_id: str) -> np.ndarray:
        return np.array(self._record(index, record_id), np.float32)


class CachedSource:
    """A record source whose records also carry `<name>_features` [frames, D] from the
    caches; `drop` names record fields the cache replaces (not decoded downstream)."""

    def __init__(self, source: Sequence[dict], readers: Mapping[str, Reader],
                 id_key: str = "clip_id", drop: Mapping[str, str] | None = None):
        n = len(source)
        for r in readers.values():
            if len(r) != n:
                raise CacheError(f"feature cache {r.directory} ({r.split}) holds {len(r)} "
                                 f"records, the dataset {n}: rebuild the cache")
        self.source, self.readers, self.id_key = source, dict(readers), id_key
        self.drop = dict(drop or {})

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict:
        rec = dict(self.source[index])
        for name, reader in self.readers.items():
            rec[f"{name}_features"] = reader.rows(int(index), rec[self.id_key])
            if name in self.drop:
                rec.pop(self.drop[name], None)
        return rec


def wrap(source: Sequence[dict], directories: Mapping[str, str | os.PathLike], split: str,
         id_key: str = "clip_id", drop: Mapping[str, str] | None = None) -> Sequence[dict]:
    """`source` with the cached features of `split` (unchanged when `directories` is empty)."""
    if not directories:
        return source
    return CachedSource(source, {n: Reader(d, split) for n, d in directories.items()}, id_key,
                        drop)
