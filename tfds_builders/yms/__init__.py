"""YMS TFDS builder (configs {sentences,phrases}[_text_only]) and the trainer's reader.

Records are those of `tfds_builders.msymon` plus `clip_begin` / `clip_end` float32 [C]
(from clip_segmentation.txt; empty when a video has none, then the pipeline cuts
fixed-length clips).
"""

from __future__ import annotations

import os

from tfds_builders.common import ManualDirError
from tfds_builders.msymon import Source
from tfds_builders.yms.yms import Builder, Yms, YmsConfig, builder_config

__all__ = ["Builder", "ManualDirError", "Yms", "YmsConfig", "builder_config", "data_source",
           "prepare", "resolve_config", "split_names"]


def resolve_config(config: str | YmsConfig, dim: int = 0, fps: float = 1.0) -> YmsConfig:
    if isinstance(config, YmsConfig):
        return config
    named = {c.name: c for c in Yms.BUILDER_CONFIGS}
    if config not in named:
        raise ValueError(f"unknown yms config {config!r}; choose one of {sorted(named)}")
    c = named[config]
    if c.features and dim and (dim != c.dim or fps != c.fps):
        return builder_config(c.text, True, dim, fps)
    return c


def prepare(config: str | YmsConfig, data_dir: os.PathLike | str,
            manual_dir: os.PathLike | str | None = None, build: bool = True, *, dim: int = 0,
            fps: float = 1.0) -> Yms:
    import tensorflow_datasets as tfds

    cfg = resolve_config(config, dim, fps)
    builder = Yms(config=cfg, data_dir=os.path.abspath(data_dir))
    if builder.is_prepared():
        return builder
    if not build:
        raise FileNotFoundError(f"yms/{cfg.name} is not built under {data_dir}")
    Yms.check_inputs(cfg, manual_dir or None)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=os.fspath(manual_dir) if manual_dir else None))
    return builder


def data_source(config: str | YmsConfig, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True, *,
                dim: int = 0, fps: float = 1.0) -> Source:
    builder = prepare(config, data_dir, manual_dir, build, dim=dim, fps=fps)
    splits = builder.info.splits
    if split not in splits:
        raise KeyError(f"yms/{builder.builder_config.name} has no split {split!r}; it has "
                       f"{sorted(splits)}")
    return Source(Yms, builder.builder_config, split, os.path.abspath(data_dir),
                  int(splits[split].num_examples))


def split_names(config: str | YmsConfig, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True, *,
                dim: int = 0, fps: float = 1.0) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build, dim=dim, fps=fps).info.splits)
