"""YMS TFDS builder (configs {sentences,phrases}[_text_only]) and the trainer's reader.

Records are those of `tfds_builders.msymon` plus `clip_begin` / `clip_end` float32 [C]
(from clip_segmentation.txt; empty when a video has none, then the pipeline cuts
fixed-length clips).
"""

from __future__ import annotations

import os

from tfds_builders import common
from tfds_builders.common import ManualDirError
from tfds_builders.msymon import to_record
from tfds_builders.msymon.yms import synthetic  # the generated corpus (smoke inputs, tests)
from tfds_builders.msymon.yms.inventory import inventory
from tfds_builders.msymon.yms.yms import Builder, Yms, YmsConfig, builder_config

__all__ = ["Builder", "ManualDirError", "Yms", "YmsConfig", "builder_config", "data_source",
           "prepare", "resolve_config", "split_names", "synthetic", "inventory"]


def resolve_config(config: str | YmsConfig, dim: int = 0, fps: float = 1.0) -> YmsConfig:
    if isinstance(config, YmsConfig):
        return config
    c = common.named_config(Yms, config)
    if c.features and dim and (dim != c.dim or fps != c.fps):
        return builder_config(c.text, True, dim, fps)
    return c


def prepare(config: str | YmsConfig, data_dir: os.PathLike | str,
            manual_dir: os.PathLike | str | None = None, build: bool = True, *, dim: int = 0,
            fps: float = 1.0) -> Yms:
    cfg = resolve_config(config, dim, fps)
    return common.prepare(Yms(config=cfg, data_dir=os.path.abspath(data_dir)), data_dir,
                          manual_dir, build, lambda m: Yms.check_inputs(cfg, m))


def data_source(config: str | YmsConfig, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True, *,
                dim: int = 0, fps: float = 1.0) -> common.Source:
    builder = prepare(config, data_dir, manual_dir, build, dim=dim, fps=fps)
    return common.Source(Yms, builder.builder_config, split, os.path.abspath(data_dir),
                         common.split_length(builder, split), to_record)


def split_names(config: str | YmsConfig, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True, *,
                dim: int = 0, fps: float = 1.0) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build, dim=dim, fps=fps).info.splits)
