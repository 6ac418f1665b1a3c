"""Sc2St TFDS builder (configs lsmdc / lsmdc_scratch / synthetic*) and the trainer's reader.

`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts, one storyboard each (see `to_record`), and `pool(config, split, data_dir)` the split's
keyframe features in pool order (`[N * 10, D]`, candidate index `b * 10 + p`).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from tfds_builders import common
from tfds_builders.common import ManualDirError
from tfds_builders.sc2st.sc2st import Builder, Sc2St, Sc2StConfig

__all__ = ["Builder", "ManualDirError", "Sc2St", "Sc2StConfig", "Sc2StSource", "data_source",
           "pool", "prepare", "split_names", "to_record"]

CONFIGS = tuple(c.name for c in Sc2St.BUILDER_CONFIGS)
TEXT_FIELDS = ("storyboard_id", "movie")
TEXT_LISTS = ("genres", "clip_ids", "sentences", "frame_ids")
ARRAYS = {"index": np.int32, "start": np.float32, "end": np.float32, "features": np.float32,
          "candidates": np.int32, "answer": np.int32}


def to_record(raw: dict) -> dict:
    """A stored example as plain Python: str fields, lists of str, NumPy arrays."""
    rec: dict[str, Any] = {k: common.text(raw[k]) for k in TEXT_FIELDS}
    rec.update({k: [common.text(s) for s in raw[k]] for k in TEXT_LISTS})
    rec.update({k: np.asarray(raw[k], dtype=t) for k, t in ARRAYS.items()})
    return rec


def _builder(config: str, data_dir: os.PathLike | str) -> Sc2St:
    if config not in CONFIGS:
        raise ValueError(f"unknown sc2st config {config!r}; choose one of {list(CONFIGS)}")
    return Sc2St(config=config, data_dir=os.path.abspath(data_dir))


def prepare(config: str, data_dir: os.PathLike | str, manual_dir: os.PathLike | str | None = None,
            build: bool = True) -> Sc2St:
    """The builder with its dataset built (building it now if missing and `build`)."""
    return common.prepare(_builder(config, data_dir), data_dir, manual_dir, build,
                          lambda m: Sc2St.check_inputs(config, m))


class Sc2StSource:
    """Random access to one split, ordered by `index`; picklable (reader reopened lazily)."""

    def __init__(self, config: str, split: str, data_dir: os.PathLike | str, length: int):
        self.config, self.split, self.data_dir, self._len = config, split, os.fspath(data_dir), \
            length
        self._source: Any = None
        self._order: np.ndarray | None = None

    def __len__(self) -> int:
        return self._len

    def _open(self) -> None:
        if self._source is None:
            src = _builder(self.config, self.data_dir).as_data_source(self.split)
            order = np.empty(len(src), np.int64)
            for row in range(len(src)):  # TFDS stores by key hash; map index -> row
                order[int(src[row]["index"])] = row
            self._source, self._order = src, order

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(f"index {index} out of range for {self._len} storyboards")
        self._open()
        return to_record(self._source[int(self._order[index])])

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _source=None, _order=None)


def data_source(config: str, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> Sc2StSource:
    """A random-access source over `split` of sc2st/`config` (built first if needed)."""
    builder = prepare(config, data_dir, manual_dir, build)
    return Sc2StSource(config, split, os.path.abspath(data_dir),
                       common.split_length(builder, split))


def pool(config: str, split: str, data_dir: os.PathLike | str) -> pathlib.Path:
    """Path of `pool_<split>.npy` ([N * length, D] float32 in pool order), written on first use."""
    builder = _builder(config, data_dir)
    path = pathlib.Path(os.fspath(builder.data_dir)) / f"pool_{split}.npy"
    if not path.is_file():
        src = data_source(config, split, data_dir, build=False)
        feats = np.stack([src[i]["features"] for i in range(len(src))])
        tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npy")
        np.save(tmp, feats.reshape(-1, feats.shape[-1]))
        os.replace(tmp, path)
    return path


def split_names(config: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build).info.splits)
