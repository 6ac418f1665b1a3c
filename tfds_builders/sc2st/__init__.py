"""Sc2St TFDS builder (configs lsmdc / lsmdc_scratch / synthetic*) and the trainer's reader.

Building needs a keyframe embedder (`embedder=`, see `keyframes`); reading does not.
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
from tfds_builders.sc2st.keyframes import MakeEmbedder
from tfds_builders.sc2st.sc2st import Builder, Sc2St, Sc2StConfig

__all__ = ["Builder", "ManualDirError", "Sc2St", "Sc2StConfig", "data_source",
           "pool", "prepare", "split_names", "to_record"]

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


def prepare(config: str, data_dir: os.PathLike | str, manual_dir: os.PathLike | str | None = None,
            build: bool = True, embedder: MakeEmbedder | None = None) -> Sc2St:
    """The builder with its dataset built (building it now if missing and `build`, with the
    keyframe `embedder`, see `keyframes`)."""
    builder = common.open_builder(Sc2St, config, data_dir)
    builder.embedder = embedder
    return common.prepare(builder, data_dir, manual_dir, build,
                          lambda m: Sc2St.check_inputs(config, m))


def data_source(config: str, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True,
                embedder: MakeEmbedder | None = None) -> common.Source:
    """A random-access source over `split` of sc2st/`config` (built first if needed), in
    storyboard `index` order."""
    builder = prepare(config, data_dir, manual_dir, build, embedder)
    return common.Source(Sc2St, config, split, os.path.abspath(data_dir),
                         common.split_length(builder, split), to_record, order_by="index")


def pool(config: str, split: str, data_dir: os.PathLike | str) -> pathlib.Path:
    """Path of `pool_<split>.npy` ([N * length, D] float32 in pool order), written on first use."""
    builder = common.open_builder(Sc2St, config, data_dir)
    path = pathlib.Path(os.fspath(builder.data_dir)) / f"pool_{split}.npy"
    if not path.is_file():
        src = data_source(config, split, data_dir, build=False)
        feats = np.stack([src[i]["features"] for i in range(len(src))])
        tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npy")
        np.save(tmp, feats.reshape(-1, feats.shape[-1]))
        os.replace(tmp, path)
    return path


def split_names(config: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True,
                embedder: MakeEmbedder | None = None) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build, embedder).info.splits)
