"""MoviePuzzle TFDS builder (configs clips / synthetic*) and the trainer's reader.

`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts in true order, frames as undecoded JPEG bytes:
`{clip_id: str, movie_id: str, frames: list[bytes], subtitles: list[str],
img_id/shot_id/scene_id/position: np.int32 [n]}`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders.common import ManualDirError
from tfds_builders.moviepuzzle.moviepuzzle import (
    Builder,
    MoviePuzzle,
    MoviePuzzleConfig,
)

__all__ = [
    "Builder",
    "ManualDirError",
    "MoviePuzzle",
    "MoviePuzzleConfig",
    "MoviePuzzleSource",
    "data_source",
    "prepare",
    "split_names",
    "to_record",
]

INT_FIELDS = ("img_id", "shot_id", "scene_id", "position")
CONFIGS = tuple(c.name for c in MoviePuzzle.BUILDER_CONFIGS)


class _KeepBytes(tfds.decode.SkipDecoding):
    """SkipDecoding that also works on the NumPy path (no tensorflow) for Sequence(Image)."""

    def decode_batch_example_np(self, serialized: Any) -> Any:
        return serialized


def _text(x: Any) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def to_record(raw: dict) -> dict:
    """A stored example as plain Python: str ids, JPEG bytes, str subtitles, int32 arrays."""
    record = {
        "clip_id": _text(raw["clip_id"]),
        "movie_id": _text(raw["movie_id"]),
        "frames": [bytes(f) for f in raw["frames"]],
        "subtitles": [_text(s) for s in raw["subtitles"]],
    }
    for k in INT_FIELDS:
        record[k] = np.asarray(raw[k], dtype=np.int32)
    return record


def _builder(config: str, data_dir: os.PathLike | str) -> MoviePuzzle:
    if config not in CONFIGS:
        raise ValueError(f"unknown moviepuzzle config {config!r}; choose one of {list(CONFIGS)}")
    return MoviePuzzle(config=config, data_dir=os.path.abspath(data_dir))


def prepare(
    config: str,
    data_dir: os.PathLike | str,
    manual_dir: os.PathLike | str | None = None,
    build: bool = True,
) -> MoviePuzzle:
    """The builder with its dataset built (building it now if missing and `build`)."""
    manual_dir = manual_dir or None  # "" (an unset config string) means none
    builder = _builder(config, data_dir)
    if builder.is_prepared():
        return builder
    if not build:
        raise FileNotFoundError(
            f"moviepuzzle/{config} is not built under {data_dir}; run: python -m tfds_builders "
            f"build moviepuzzle --config {config} --data_dir {data_dir}"
        )
    MoviePuzzle.check_inputs(config, manual_dir)
    dl_config = tfds.download.DownloadConfig(
        manual_dir=os.fspath(manual_dir) if manual_dir is not None else None
    )
    builder.download_and_prepare(download_config=dl_config)
    return builder


class MoviePuzzleSource:
    """Random access to one split; picklable (the TFDS reader is reopened lazily per process)."""

    def __init__(self, config: str, split: str, data_dir: os.PathLike | str, length: int):
        self.config, self.split, self.data_dir, self._len = (
            config,
            split,
            os.fspath(data_dir),
            length,
        )
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
            builder = _builder(self.config, self.data_dir)
            self._source = builder.as_data_source(self.split, decoders={"frames": _KeepBytes()})
        return to_record(self._source[index])

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_source"] = None
        return state

    def __repr__(self) -> str:
        return (
            f"MoviePuzzleSource(config={self.config!r}, split={self.split!r}, "
            f"data_dir={self.data_dir!r}, len={self._len})"
        )


def data_source(
    config: str,
    split: str,
    data_dir: os.PathLike | str,
    manual_dir: os.PathLike | str | None = None,
    build: bool = True,
) -> MoviePuzzleSource:
    """A random-access source over `split` of moviepuzzle/`config` (built first if needed)."""
    builder = prepare(config, data_dir, manual_dir, build)
    splits = builder.info.splits
    if split not in splits:
        raise KeyError(f"moviepuzzle/{config} has no split {split!r}; it has {sorted(splits)}")
    return MoviePuzzleSource(
        config, split, os.path.abspath(data_dir), int(splits[split].num_examples)
    )


def split_names(
    config: str,
    data_dir: os.PathLike | str,
    manual_dir: os.PathLike | str | None = None,
    build: bool = True,
) -> list[str]:
    """The split names of moviepuzzle/`config` (built first if needed)."""
    return list(prepare(config, data_dir, manual_dir, build).info.splits)
