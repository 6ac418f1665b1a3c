"""Movie101 TFDS builder (v1 / v2 / synthetic configs) and the trainer's readers.

`data_source(config, split, data_dir, manual_dir)` returns a picklable random-access source
of plain dicts (narration configs: id, movie_id, start, end, text, pointer_text, roles,
cast_names, genre; movies configs: movie_id, cast_*, portraits (JPEG bytes, b"" = missing),
clip, s3d, face, face_score, portrait_face, portrait_face_mask as NumPy arrays).

What a trainer reads of the builder is this module's `__all__` (tests/test_layers.py): the
readers, `feature_dims` of a config, and where the release's role files are
(`role_file`, `role_files_looked_for`) and a config's pointer targets come from
(`pointer_targets`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tfds_builders import common
from tfds_builders.common import ManualDirError
from tfds_builders.movie101 import synthetic  # the generated corpus (smoke inputs, tests)
from tfds_builders.movie101.inventory import inventory
from tfds_builders.movie101.movie101 import (
    Builder,
    Movie101,
    Movie101Config,
    feature_dims,
    pointer_targets,
)
from tfds_builders.movie101.roles import looked_for as role_files_looked_for
from tfds_builders.movie101.roles import role_file

__all__ = ["inventory", "Builder", "ManualDirError", "Movie101", "Movie101Config", "data_source",
           "feature_dims", "pointer_targets", "prepare", "role_file", "role_files_looked_for",
           "split_names", "to_record", "synthetic"]


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


def prepare(config: str, data_dir: os.PathLike | str, manual_dir: Any = None,
            build: bool = True) -> Movie101:
    """The builder with its dataset built (building it now if missing and `build`)."""
    builder = common.open_builder(Movie101, config, data_dir)
    return common.prepare(builder, data_dir, manual_dir, build,
                          lambda m: Movie101.check_inputs(config, m))


def data_source(config: str, split: str, data_dir: os.PathLike | str, manual_dir: Any = None,
                build: bool = True) -> common.Source:
    """A random-access source over `split` of movie101/`config` (built first if needed)."""
    builder = prepare(config, data_dir, manual_dir, build)
    return common.Source(Movie101, config, split, os.path.abspath(data_dir),
                         common.split_length(builder, split), to_record)


def split_names(config: str, data_dir: os.PathLike | str, manual_dir: Any = None,
                build: bool = True) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build).info.splits)
