"""Frames preprocessed once and stored next to their dataset (uint8, memory-mapped), so that
an epoch reads pixels instead of decoding and resizing JPEGs (`data.frame_store`).

Why: at 224 px a MovieNet 240p keyframe costs ~3 ms of one core to decode and resize the way
CLIP's processor does (bicubic); an accelerator training CLIP towers end to end takes tens of
thousands of frames a second (`python -m bench input`). The stored frames are the
exact output of the pipeline's own `prepare` (e.g. `vnr.data.images.decode_frames`), so a run
reading them gets the same batches, bit for bit, as one decoding JPEGs.

**Layout**: `<data_dir>/frame_store/<dataset>/<key>/` with `meta.json` (the identity, the
frame shape, per split its record and frame counts), and per split `<split>.u8` (raw uint8
[frames, *shape], memory-mapped by readers), `<split>.offsets.npy` (int64 [records + 1]:
record r is frames offsets[r]:offsets[r+1]) and `<split>.ids.json` (record ids, checked on
every read, so a rebuilt dataset in another order is an error, not wrong frames).

**Key**: a hash of the identity the caller gives (dataset name, config and version, digests
of the built dataset's metadata, and the preprocessing, `vnr.data.images.describe`), so
another preprocessing or a rebuilt dataset never reads these frames. A store is written to
a temporary directory and renamed into place when complete: an interrupted build leaves
nothing that can be read, and processes racing to build the same store cannot corrupt it.
Size: 147 KiB per 224 px frame.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import multiprocessing
import os
import pathlib
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from vnr.data.mapped import MappedRows

LAYOUT = 1  # of the files; part of the key


class StoreError(ValueError):
    """A store that does not match its dataset."""


def key_of(identity: Mapping[str, Any]) -> str:
    ident = {"layout": LAYOUT, **identity}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def location(data_dir: str | os.PathLike, dataset: str, identity: Mapping[str, Any]
             ) -> pathlib.Path:
    """Where the store of `dataset` ("<builder>/<config>/<version>") under `identity` lives."""
    return pathlib.Path(data_dir).absolute() / "frame_store" / dataset / key_of(identity)


_JOB: dict[str, Any] = {}


def _init(sources: Mapping[str, Sequence[dict]], prepare: Callable, id_key: str) -> None:
    _JOB.update(sources=sources, prepare=prepare, id_key=id_key)


def _one(job: tuple[str, int]) -> tuple[str, np.ndarray]:
    split, index = job
    rec = _JOB["sources"][split][index]
    return str(rec[_JOB["id_key"]]), np.ascontiguousarray(_JOB["prepare"](rec), np.uint8)


@contextlib.contextmanager
def _mapper(sources: Mapping[str, Sequence[dict]], prepare: Callable, id_key: str,
            workers: int) -> Iterator[Callable[[str], Iterator[tuple[str, np.ndarray]]]]:
    """A function giving (record id, frames) of every record of a split, in order: in this
    process, or in `workers` spawned processes when > 1 (one pool for every split: a spawned
    process imports the caller's modules, which takes seconds)."""
    def jobs(split: str) -> Iterator[tuple[str, int]]:
        return ((split, i) for i in range(len(sources[split])))

    if workers <= 1:
        _init(sources, prepare, id_key)
        yield lambda split: map(_one, jobs(split))
        return
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers, _init, (sources, prepare, id_key)) as pool:
        yield lambda split: pool.imap(_one, jobs(split), chunksize=4)


def _write_split(tmp: pathlib.Path, split: str, prepared: Iterator[tuple[str, np.ndarray]],
                 shape: list[int] | None, splits: dict) -> list[int] | None:
    """Writes one split's files; returns the frame shape (checked against `shape`)."""
    offsets, ids = [0], []
    with open(tmp / f"{split}.u8", "wb") as f:
        for rec_id, frames in prepared:
            if shape is None:
                shape = list(frames.shape[1:])
            if list(frames.shape[1:]) != shape:
                raise StoreError(f"frame store: record {rec_id!r} ({split}) has frames "
                                 f"{frames.shape[1:]}, the others {tuple(shape)}")
            f.write(frames.tobytes())
            offsets.append(offsets[-1] + len(frames))
            ids.append(rec_id)
    np.save(tmp / f"{split}.offsets.npy", np.asarray(offsets, np.int64))
    (tmp / f"{split}.ids.json").write_text(json.dumps(ids))
    splits[split] = {"records": len(ids), "frames": offsets[-1]}
    return shape


def build(directory: pathlib.Path, sources: Mapping[str, Sequence[dict]],
          prepare: Callable[[dict], np.ndarray], identity: Mapping[str, Any],
          id_key: str = "clip_id", workers: int = 0,
          say: Callable[[str], None] = print) -> pathlib.Path:
    """Writes the store of `sources` ({split: records}) at `directory` unless it is there.

    `prepare(record)` -> uint8 [frames, ...] (the same shape after the first axis for every
    record). Returns `directory`."""
    if (directory / "meta.json").is_file():
        return directory
    tmp = directory.with_name(f"{directory.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shape, splits = None, {}
    with _mapper(sources, prepare, id_key, workers) as prepared:
        for split in sources:
            shape = _write_split(tmp, split, prepared(split), shape, splits)
            say(f"frame store {directory.name}: {split} {splits[split]['records']} records, "
                f"{splits[split]['frames']} frames")
    meta = {"identity": dict(identity), "layout": LAYOUT, "shape": shape, "splits": splits}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    try:
        tmp.rename(directory)
    except OSError:  # another process finished the same store first: keep that one
        shutil.rmtree(tmp, ignore_errors=True)
        if not (directory / "meta.json").is_file():
            raise
    return directory


@functools.lru_cache(maxsize=8)
def _meta(directory: str) -> dict:
    return json.loads((pathlib.Path(directory) / "meta.json").read_text())


class Reader(MappedRows):
    """Frames of one split of a store; picklable (the memory map reopens in each process)."""

    what, noun, fix, error = "frame store", "store", "delete the store to rebuild it", StoreError

    def __init__(self, directory: str | os.PathLike, split: str):
        super().__init__(directory, split)
        meta = _meta(self.directory)
        if split not in meta["splits"]:
            raise StoreError(f"frame store {self.directory} has no split {split!r} (it has "
                             f"{sorted(meta['splits'])}): delete it to rebuild")
        self.shape = tuple(meta["shape"])

    def _rows_array(self, directory: pathlib.Path, offsets: np.ndarray) -> np.ndarray:
        return np.memmap(directory / f"{self.split}.u8", np.uint8, "r",
                         shape=(int(offsets[-1]), *self.shape))

    def rows(self, index: int, record_id: str) -> np.ndarray:
        """Record `index`'s frames (a read-only view of the map), after checking its id."""
        return self._record(index, record_id)


class StoredFrames:
    """A record source whose `field` (encoded frames) is replaced by the stored uint8 frames."""

    def __init__(self, source: Sequence[dict], reader: Reader, field: str = "frames",
                 id_key: str = "clip_id"):
        if len(reader) != len(source):
            raise StoreError(f"frame store {reader.directory} ({reader.split}) holds "
                             f"{len(reader)} records, the dataset {len(source)}: delete the "
                             "store to rebuild it")
        self.source, self.reader, self.field, self.id_key = source, reader, field, id_key

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict:
        rec = dict(self.source[index])
        rec[self.field] = self.reader.rows(int(index), str(rec[self.id_key]))
        return rec
