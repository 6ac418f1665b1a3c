"""M-SyMoN TFDS builder (configs text_only / features* / synthetic) and the trainer's reader.

`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts: `{video_id, language: str, sentences: list[str], begin/end/narr_begin/narr_end:
float32 [S], matched: bool [S], duration: float, features: float32 [T, D] (feature configs)}`.
`config` is a config name or an `MSymonConfig` (see `builder_config` for any dim / fps).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tfds_builders.common import ManualDirError
from tfds_builders.msymon.msymon import Builder, MSymon, MSymonConfig, builder_config
from tfds_builders.msymon.parse import LANGUAGES

__all__ = ["LANGUAGES", "Builder", "MSymon", "MSymonConfig", "ManualDirError", "Source",
           "builder_config", "data_source", "prepare", "resolve_config", "split_names",
           "to_record"]

_FLOATS = ("begin", "end", "narr_begin", "narr_end")


def _text(x: Any) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def to_record(raw: dict) -> dict:
    """A stored example as plain Python / NumPy."""
    rec = {"video_id": _text(raw["video_id"]), "language": _text(raw["language"]),
           "sentences": [_text(s) for s in raw["sentences"]],
           "matched": np.asarray(raw["matched"]).astype(bool),
           "duration": float(raw["duration"])}
    for k in _FLOATS:
        rec[k] = np.asarray(raw[k], np.float32)
    if "features" in raw:
        rec["features"] = np.asarray(raw["features"], np.float32)
    for k in ("clip_begin", "clip_end"):  # YMS records share this reader's consumers
        if k in raw:
            rec[k] = np.asarray(raw[k], np.float32)
    return rec


def resolve_config(config: str | MSymonConfig, dim: int = 0, fps: float = 1.0) -> MSymonConfig:
    """A named config, or `features` with a non-default `dim` / `fps` (e.g. from a trainer
    config), as an `MSymonConfig`."""
    if isinstance(config, MSymonConfig):
        return config
    named = {c.name: c for c in MSymon.BUILDER_CONFIGS}
    if config not in named:
        raise ValueError(f"unknown msymon config {config!r}; choose one of {sorted(named)}")
    c = named[config]
    if c.source == "manual" and c.features and dim and (dim != c.dim or fps != c.fps):
        return builder_config(True, dim, fps)
    return c


def prepare(config: str | MSymonConfig, data_dir: os.PathLike | str,
            manual_dir: os.PathLike | str | None = None, build: bool = True) -> MSymon:
    """The builder with its dataset built (building it now if missing and `build`)."""
    import tensorflow_datasets as tfds

    cfg = resolve_config(config)
    builder = MSymon(config=cfg, data_dir=os.path.abspath(data_dir))
    if builder.is_prepared():
        return builder
    if not build:
        raise FileNotFoundError(f"msymon/{cfg.name} is not built under {data_dir}; run: python -m "
                                f"tfds_builders build msymon --config {cfg.name} "
                                f"--manual_dir DIR --data_dir {data_dir}")
    MSymon.check_inputs(cfg, manual_dir or None)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=os.fspath(manual_dir) if manual_dir else None))
    return builder


class Source:
    """Random access to one split; picklable (the reader reopens lazily per process)."""

    def __init__(self, builder_cls: type, config: Any, split: str, data_dir: str, length: int):
        self.builder_cls, self.config, self.split = builder_cls, config, split
        self.data_dir, self._len, self._source = data_dir, length, None

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        if not 0 <= index < self._len:
            raise IndexError(f"index {index} out of range for {self._len} records")
        if self._source is None:
            b = self.builder_cls(config=self.config, data_dir=self.data_dir)
            self._source = b.as_data_source(self.split)
        return to_record(self._source[index])

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _source=None)

    def __repr__(self) -> str:
        return f"Source({self.builder_cls.name}/{self.config.name}, {self.split!r}, {self._len})"


def data_source(config: str | MSymonConfig, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> Source:
    builder = prepare(config, data_dir, manual_dir, build)
    splits = builder.info.splits
    if split not in splits:
        raise KeyError(f"msymon/{builder.builder_config.name} has no split {split!r}; it has "
                       f"{sorted(splits)}")
    return Source(MSymon, builder.builder_config, split, os.path.abspath(data_dir),
                  int(splits[split].num_examples))


def split_names(config: str | MSymonConfig, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build).info.splits)
