"""MoviePuzzle TFDS builder (configs clips / synthetic*) and the trainer's reader.

`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts in true order, frames as undecoded JPEG bytes:
`{clip_id: str, movie_id: str, frames: list[bytes], subtitles: list[str],
img_id/shot_id/scene_id/position: np.int32 [n]}`; `synopsis_source` the same plus
`synopsis: str` for a `*synopsis` config. What a trainer reads of the builder is this
module's `__all__` (tests/test_layers.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import common
from tfds_builders.common import ManualDirError
from tfds_builders.moviepuzzle.inventory import inventory
from tfds_builders.moviepuzzle.moviepuzzle import (
    VERSION,
    Builder,
    MoviePuzzle,
    MoviePuzzleConfig,
)

__all__ = ["inventory",
    "Builder",
    "ManualDirError",
    "MoviePuzzle",
    "MoviePuzzleConfig",
    "data_source",
    "dataset_name",
    "keep_frame_bytes",
    "prepare",
    "split_names",
    "synopsis_record",
    "synopsis_source",
    "to_record",
]

INT_FIELDS = ("img_id", "shot_id", "scene_id", "position")


class _KeepBytes(tfds.decode.SkipDecoding):
    """SkipDecoding that also works on the NumPy path (no tensorflow) for Sequence(Image)."""

    def decode_batch_example_np(self, serialized: Any) -> Any:
        return serialized


def to_record(raw: dict) -> dict:
    """A stored example as plain Python: str ids, JPEG bytes, str subtitles, int32 arrays."""
    record = {
        "clip_id": common.text(raw["clip_id"]),
        "movie_id": common.text(raw["movie_id"]),
        "frames": [bytes(f) for f in raw["frames"]],
        "subtitles": [common.text(s) for s in raw["subtitles"]],
    }
    for k in INT_FIELDS:
        record[k] = np.asarray(raw[k], dtype=np.int32)
    return record


def keep_frame_bytes() -> dict:
    """Decoders that leave the frames as stored JPEG bytes."""
    return {"frames": _KeepBytes()}


def prepare(
    config: str,
    data_dir: os.PathLike | str,
    manual_dir: os.PathLike | str | None = None,
    build: bool = True,
) -> MoviePuzzle:
    """The builder with its dataset built (building it now if missing and `build`)."""
    builder = common.open_builder(MoviePuzzle, config, data_dir)
    return common.prepare(builder, data_dir, manual_dir, build,
                          lambda m: MoviePuzzle.check_inputs(config, m))


def data_source(
    config: str,
    split: str,
    data_dir: os.PathLike | str,
    manual_dir: os.PathLike | str | None = None,
    build: bool = True,
    to_record: Callable[[dict], dict] = to_record,
) -> common.Source:
    """A random-access source over `split` of moviepuzzle/`config` (built first if needed);
    `to_record` makes a record of a stored example (`synopsis_record` adds the text)."""
    builder = prepare(config, data_dir, manual_dir, build)
    return common.Source(MoviePuzzle, config, split, os.path.abspath(data_dir),
                         common.split_length(builder, split), to_record, keep_frame_bytes)


def split_names(
    config: str,
    data_dir: os.PathLike | str,
    manual_dir: os.PathLike | str | None = None,
    build: bool = True,
) -> list[str]:
    """The split names of moviepuzzle/`config` (built first if needed)."""
    return list(prepare(config, data_dir, manual_dir, build).info.splits)


def synopsis_source(config: str, split: str, data_dir: os.PathLike | str,
                    manual_dir: os.PathLike | str | None = None, build: bool = True
                    ) -> common.Source:
    """`data_source` of a `*synopsis` config (Movie Synopsis Association): its records also
    hold `synopsis: str`."""
    if "synopsis" not in config:
        raise ValueError(f"moviepuzzle/{config} has no synopses; use a *synopsis config")
    return data_source(config, split, data_dir, manual_dir, build, to_record=synopsis_record)


def synopsis_record(raw: dict) -> dict:
    """A stored synopsis example: the clip record of `to_record` plus `synopsis`."""
    return dict(to_record(raw), synopsis=common.text(raw["synopsis"]))


def dataset_name(config: str) -> str:
    """`moviepuzzle/<config>/<version>`: where a build of `config` lies under its data_dir
    (and what names it in caches derived from it)."""
    return f"moviepuzzle/{config}/{VERSION}"
