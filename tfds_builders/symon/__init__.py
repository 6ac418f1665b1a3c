"""SYMON TFDS builder (configs text_only / features / synthetic*) and the trainer's reader.

`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts, one per summary video: `{video_id, movie_id, franchise: str, is_asr: int,
sentences, names: list[str], starts, ends, cuts: float32 [n], duration: float,
trim: float32 [2], features: float32 [T, D] (feature configs)}`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders.common import ManualDirError
from tfds_builders.symon.symon import Builder, Symon, SymonConfig

__all__ = ["Builder", "ManualDirError", "Symon", "SymonConfig", "SymonSource", "data_source",
           "prepare", "split_names", "to_record", "metadata"]

CONFIGS = {c.name: c for c in Symon.BUILDER_CONFIGS}


def _text(x: Any) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def to_record(raw: dict) -> dict:
    rec = {k: _text(raw[k]) for k in ("video_id", "movie_id", "franchise")}
    rec["is_asr"] = int(raw["is_asr"])
    rec["sentences"] = [_text(s) for s in raw["sentences"]]
    rec["names"] = [_text(s) for s in raw["names"]]
    for k in ("starts", "ends", "cuts", "trim"):
        rec[k] = np.asarray(raw[k], np.float32)
    rec["duration"] = float(raw["duration"])
    if "features" in raw:
        rec["features"] = np.asarray(raw["features"], np.float32)
    return rec


def _builder(config: str | SymonConfig, data_dir: os.PathLike | str) -> Symon:
    if isinstance(config, str) and config not in CONFIGS:
        raise ValueError(f"unknown symon config {config!r}; choose one of {list(CONFIGS)}")
    return Symon(config=config, data_dir=os.path.abspath(data_dir))


def prepare(config: str | SymonConfig, data_dir: os.PathLike | str,
            manual_dir: os.PathLike | str | None = None, build: bool = True) -> Symon:
    """The builder with its dataset built (building it now if missing and `build`)."""
    manual_dir = manual_dir or None
    builder = _builder(config, data_dir)
    if builder.is_prepared():
        return builder
    name = config if isinstance(config, str) else config.name
    if not build:
        raise FileNotFoundError(
            f"symon/{name} is not built under {data_dir}; run: python -m tfds_builders build "
            f"symon --config {name} --manual_dir DIR --data_dir {data_dir}")
    if builder.builder_config.source == "manual":
        from tfds_builders.symon.symon import check_manual_dir

        check_manual_dir(manual_dir, name)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=os.fspath(manual_dir) if manual_dir is not None else None))
    return builder


def metadata(config: str | SymonConfig) -> tuple[int, float, bool]:
    """(feature_dim, fps, with_features) of a config."""
    cfg = CONFIGS[config] if isinstance(config, str) else config
    return cfg.feature_dim, cfg.fps, cfg.with_features


class SymonSource:
    """Random access to one split; picklable (the reader is reopened lazily per process)."""

    def __init__(self, config: str, split: str, data_dir: os.PathLike | str, length: int):
        self.config, self.split, self.data_dir, self._len = config, split, os.fspath(data_dir), \
            length
        self._source: Any = None

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        if not 0 <= index < self._len:
            raise IndexError(f"index {index} out of range for {self._len} records")
        if self._source is None:
            self._source = _builder(self.config, self.data_dir).as_data_source(self.split)
        return to_record(self._source[index])

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _source=None)


def data_source(config: str, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> SymonSource:
    builder = prepare(config, data_dir, manual_dir, build)
    splits = builder.info.splits
    if split not in splits:
        raise KeyError(f"symon/{config} has no split {split!r}; it has {sorted(splits)}")
    return SymonSource(config, split, os.path.abspath(data_dir), int(splits[split].num_examples))


def split_names(config: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build).info.splits)
