"""M-SyMoN TFDS builder (configs text_only / features* / synthetic / videos) and the trainer's
reader.

`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts: `{video_id, language: str, sentences: list[str], begin/end/narr_begin/narr_end:
float32 [S], matched: bool [S], duration: float, features: float32 [T, D] (feature configs),
video_file: str (the `videos` config: the file under the release's `videos/`)}`.
`config` is a config name or an `MSymonConfig` (see `builder_config` for any dim / fps).

What a trainer reads of the builder is this module's `__all__` (tests/test_layers.py): the
readers, the release's `LANGUAGES` and `SPLITS`, the clip rules the builder and the
pipelines share (`fixed_clips`, `gt_clip_labels`), `write_synthetic` (the generated corpus in
the release layout) and the YMS builder, `tfds_builders.msymon.yms`.
"""

from __future__ import annotations

import os

import numpy as np

from tfds_builders import common
from tfds_builders.common import ManualDirError
from tfds_builders.msymon import inventory as _inventory
from tfds_builders.msymon.msymon import Builder, MSymon, MSymonConfig, builder_config
from tfds_builders.msymon.parse import LANGUAGES, SPLITS, fixed_clips, gt_clip_labels
from tfds_builders.msymon.synthetic import write_corpus as write_synthetic

__all__ = ["LANGUAGES", "SPLITS", "Builder", "MSymon", "MSymonConfig", "ManualDirError",
           "builder_config", "data_source", "fixed_clips", "gt_clip_labels", "prepare",
           "resolve_config", "split_names", "to_record", "write_synthetic", "inventory"]

_FLOATS = ("begin", "end", "narr_begin", "narr_end")


def to_record(raw: dict) -> dict:
    """A stored example as plain Python / NumPy."""
    rec = {"video_id": common.text(raw["video_id"]), "language": common.text(raw["language"]),
           "sentences": [common.text(s) for s in raw["sentences"]],
           "matched": np.asarray(raw["matched"]).astype(bool),
           "duration": float(raw["duration"])}
    for k in _FLOATS:
        rec[k] = np.asarray(raw[k], np.float32)
    if "features" in raw:
        rec["features"] = np.asarray(raw["features"], np.float32)
    if "video_file" in raw:
        rec["video_file"] = common.text(raw["video_file"])
    for k in ("clip_begin", "clip_end", "shot_begin", "shot_end"):  # YMS: its clips
        if k in raw:
            rec[k] = np.asarray(raw[k], np.float32)
    return rec


def resolve_config(config: str | MSymonConfig, dim: int = 0, fps: float = 1.0) -> MSymonConfig:
    """A named config, or `features` with a non-default `dim` / `fps` (e.g. from a trainer
    config), as an `MSymonConfig`."""
    if isinstance(config, MSymonConfig):
        return config
    c = common.named_config(MSymon, config)
    if c.source == "manual" and c.features and dim and (dim != c.dim or fps != c.fps):
        return builder_config(True, dim, fps)
    return c


def prepare(config: str | MSymonConfig, data_dir: os.PathLike | str,
            manual_dir: os.PathLike | str | None = None, build: bool = True) -> MSymon:
    """The builder with its dataset built (building it now if missing and `build`)."""
    cfg = resolve_config(config)
    return common.prepare(MSymon(config=cfg, data_dir=os.path.abspath(data_dir)), data_dir,
                          manual_dir, build, lambda m: MSymon.check_inputs(cfg, m))


def data_source(config: str | MSymonConfig, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True
                ) -> common.Source:
    builder = prepare(config, data_dir, manual_dir, build)
    return common.Source(MSymon, builder.builder_config, split, os.path.abspath(data_dir),
                         common.split_length(builder, split), to_record)


def split_names(config: str | MSymonConfig, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build).info.splits)


def inventory(manual_dir: os.PathLike | str, config: str | MSymonConfig = "text_only",
              dim: int = 0, fps: float = 1.0) -> dict[str, list]:
    """{split: [tfds_builders.Held]} of a release as config `config` (with `dim` / `fps`)
    splits it (`tfds_builders.msymon.inventory`)."""
    return _inventory.inventory(manual_dir, resolve_config(config, dim, fps))
