"""Movie101 TFDS builder (v1 / v2 / synthetic configs) and the trainer's readers.

`data_source(config, split, data_dir, manual_dir)` returns a picklable random-access source
of plain dicts (narration configs: id, movie_id, start, end, text, pointer_text, roles,
cast_names, genre; movies configs: movie_id, cast_*, portraits (JPEG bytes, b"" = missing),
clip, s3d, face, face_score, portrait_face, portrait_face_mask as NumPy arrays).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders.common import ManualDirError
from tfds_builders.movie101.movie101 import Builder, Movie101, Movie101Config

__all__ = ["Builder", "ManualDirError", "Movie101", "Movie101Config", "Movie101Source",
           "data_source", "prepare", "split_names", "to_record"]

CONFIGS = tuple(c.name for c in Movie101.BUILDER_CONFIGS)


def _plain(x: Any) -> Any:
    if isinstance(x, bytes):
        try:
            return x.decode("utf-8")
        except UnicodeDecodeError:
            return x
    return x


def to_record(raw: dict) -> dict:
    """A stored example as plain Python / NumPy values."""
    out = {}
    for k, v in raw.items():
        if k == "portraits":
            out[k] = [bytes(p) for p in v]
        elif k == "roles":
            out[k] = np.asarray(v, np.int32).reshape(-1)
        elif isinstance(v, list | tuple):
            out[k] = [_plain(x) for x in v]
        elif isinstance(v, np.ndarray) and v.dtype == object:
            out[k] = [_plain(x) for x in v.tolist()]
        else:
            out[k] = _plain(v)
    return out


def _builder(config: str, data_dir: os.PathLike | str) -> Movie101:
    if config not in CONFIGS:
        raise ValueError(f"unknown movie101 config {config!r}; choose one of {list(CONFIGS)}")
    return Movie101(config=config, data_dir=os.path.abspath(data_dir))


def prepare(config: str, data_dir: os.PathLike | str, manual_dir: Any = None,
            build: bool = True) -> Movie101:
    """The builder with its dataset built (building it now if missing and `build`)."""
    manual_dir = manual_dir or None
    builder = _builder(config, data_dir)
    if builder.is_prepared():
        return builder
    if not build:
        raise FileNotFoundError(f"movie101/{config} is not built under {data_dir}; run: python -m "
                                f"tfds_builders build movie101 --config {config} --data_dir "
                                f"{data_dir} --manual_dir DIR")
    Movie101.check_inputs(config, manual_dir)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=os.fspath(manual_dir) if manual_dir is not None else None))
    return builder


class Movie101Source:
    """Random access to one split; picklable (the reader reopens lazily per process)."""

    def __init__(self, config: str, split: str, data_dir: os.PathLike | str, length: int):
        self.config, self.split, self.data_dir, self._len = config, split, os.fspath(data_dir), \
            length
        self._source: Any = None

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(f"index {index} out of range for {self._len} records")
        if self._source is None:
            self._source = _builder(self.config, self.data_dir).as_data_source(self.split)
        return to_record(self._source[index])

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _source=None)

    def __repr__(self) -> str:
        return f"Movie101Source({self.config!r}, {self.split!r}, len={self._len})"


def data_source(config: str, split: str, data_dir: os.PathLike | str, manual_dir: Any = None,
                build: bool = True) -> Movie101Source:
    """A random-access source over `split` of movie101/`config` (built first if needed)."""
    builder = prepare(config, data_dir, manual_dir, build)
    splits = builder.info.splits
    if split not in splits:
        raise KeyError(f"movie101/{config} has no split {split!r}; it has {sorted(splits)}")
    return Movie101Source(config, split, os.path.abspath(data_dir), int(splits[split].num_examples))


def split_names(config: str, data_dir: os.PathLike | str, manual_dir: Any = None,
                build: bool = True) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build).info.splits)
