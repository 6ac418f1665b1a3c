"""SYMON TFDS builder (configs text_only / features / synthetic*) and the trainer's reader.

`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts, one per summary video: `{video_id, movie_id, movie_key, movie_source, franchise: str,
is_asr: int, sentences, names: list[str], starts, ends, cuts: float32 [n], duration: float,
trim: float32 [2], features: float32 [T, D] (feature configs)}` (movie identity:
`movies.py`; `movie_key` "" when the movie is unknown).

What a trainer reads of the builder is this module's `__all__` (tests/test_layers.py): the
readers, `CONFIGS` and `metadata`, and the helpers other code shares with the builder: movie
keys of titles and the movies of a title list (`movie_key`, `same_movie`, `split_key`,
`merge_movie_keys`, `group_titles`, `movies_of`, `title_of`, `TitleMovie`), person names of
sentences, feature-distance `scene_cuts`, the WebVTT reader (`parse_vtt`, `Word`), and the
generated corpus in the release layout (`write_generated_release`, for smoke inputs) and the
words it can make (`generated_word_shapes`, for smoke tokenizers).
"""

from __future__ import annotations

import os

import numpy as np

from tfds_builders import common
from tfds_builders.common import ManualDirError
from tfds_builders.symon.inventory import inventory
from tfds_builders.symon.narration import person_names
from tfds_builders.symon.symon import (
    Builder,
    Symon,
    SymonConfig,
    check_manual_dir,
    detect_cuts,
)
from tfds_builders.symon.synthetic import word_shapes as generated_word_shapes
from tfds_builders.symon.synthetic import write_corpus as write_generated_release
from tfds_builders.symon.titles import Movie as TitleMovie
from tfds_builders.symon.titles import group as group_titles
from tfds_builders.symon.titles import merge as merge_movie_keys
from tfds_builders.symon.titles import movie_key, movies_of, same_movie, split_key, title_of
from tfds_builders.symon.vtt import Word
from tfds_builders.symon.vtt import parse as parse_vtt

__all__ = ["CONFIGS", "Builder", "ManualDirError", "Symon", "SymonConfig", "TitleMovie", "Word",
           "data_source", "group_titles", "merge_movie_keys", "metadata", "movie_key",
           "movie_titles", "movies_of", "parse_vtt", "person_names", "prepare", "same_movie",
           "scene_cuts", "split_key", "split_names", "title_of", "to_record",
           "write_generated_release", "generated_word_shapes", "inventory"]

CONFIGS = {c.name: c for c in Symon.BUILDER_CONFIGS}


def movie_titles(path: os.PathLike | str) -> list[str]:
    """The titles of a movie list: YMS `movie_list.txt` (`<id>\t<YouTube title>` lines) or one
    title per line; a file that is not UTF-8 text is one line naming it (`schema.Unreadable`)."""
    from tfds_builders.schema import read_text

    return [t for t in (line.split("\t", 1)[-1].strip() for line in read_text(path).splitlines())
            if t]


def to_record(raw: dict) -> dict:
    rec = {k: common.text(raw[k]) for k in ("video_id", "movie_id", "movie_key", "movie_source",
                                            "franchise")}
    rec["is_asr"] = int(raw["is_asr"])
    rec["sentences"] = [common.text(s) for s in raw["sentences"]]
    rec["names"] = [common.text(s) for s in raw["names"]]
    for k in ("starts", "ends", "cuts", "trim"):
        rec[k] = np.asarray(raw[k], np.float32)
    rec["duration"] = float(raw["duration"])
    if "features" in raw:
        dim = int(raw["feature_dim"])
        rec["features"] = np.asarray(raw["features"], np.float32).reshape(-1, dim)
    return rec


def _check(builder: Symon, manual_dir: os.PathLike | str | None) -> None:
    if builder.builder_config.source == "manual":
        check_manual_dir(manual_dir, builder.builder_config.name)


def prepare(config: str | SymonConfig, data_dir: os.PathLike | str,
            manual_dir: os.PathLike | str | None = None, build: bool = True) -> Symon:
    """The builder with its dataset built (building it now if missing and `build`)."""
    builder = common.open_builder(Symon, config, data_dir)
    return common.prepare(builder, data_dir, manual_dir, build, lambda m: _check(builder, m))


def metadata(config: str | SymonConfig, data_dir: os.PathLike | str | None = None,
             manual_dir: os.PathLike | str | None = None) -> tuple[int, float, bool]:
    """(feature_dim, fps, with_features) of a config. A config whose width comes from the
    files (feature_dim 0) needs `data_dir`: the width is read from its first record
    (the dataset is built first if missing)."""
    cfg = CONFIGS[config] if isinstance(config, str) else config
    dim = cfg.feature_dim
    if cfg.with_features and not dim:
        if data_dir is None:
            raise ValueError(f"symon/{cfg.name}: the feature width comes from the files; "
                             "pass data_dir (and manual_dir) to read it")
        builder = prepare(cfg, data_dir, manual_dir, build=True)
        split = next(iter(builder.info.splits))
        dim = data_source(cfg, split, data_dir, manual_dir, build=False)[0]["features"].shape[1]
    return dim, cfg.fps, cfg.with_features


def data_source(config: str | SymonConfig, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True
                ) -> common.Source:
    builder = prepare(config, data_dir, manual_dir, build)
    return common.Source(Symon, config, split, os.path.abspath(data_dir),
                         common.split_length(builder, split), to_record)


def split_names(config: str | SymonConfig, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build).info.splits)


def scene_cuts(features: np.ndarray, fps: float) -> np.ndarray:
    """Cut times (seconds) where consecutive feature rows change abruptly, by the rule and
    default thresholds the builder cuts a video without cut files with (`SymonConfig`)."""
    return detect_cuts(features, fps, SymonConfig.cut_min, SymonConfig.cut_mads)
