"""Sc2St TFDS builder (configs lsmdc / lsmdc_scratch / synthetic*) and the trainer's reader.

Building needs a keyframe embedder (`embedder=`, see `keyframes`); reading does not.
`data_source(config, split, data_dir)` returns a picklable random-access source of plain
dicts, one storyboard each (see `to_record`), and `pool(config, split, data_dir, column)` the
split's keyframe `features` (or an expert column) in pool order: the N storyboards' keyframes
(candidate index `b * 10 + p`), then the split's M isolated keyframes (`N * 10 + k`).

What a trainer reads of the builder is this module's `__all__` (tests/test_layers.py): the
readers, `CONFIGS`, and the types of the model functions a build is handed (`Embedder`,
`MakeEmbedder`, `Expert`, `MakeExpert`, `Keyframe`, with `normalise`).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from tfds_builders import common
from tfds_builders.common import ManualDirError
from tfds_builders.sc2st import (
    extras,
    synthetic,  # the generated corpus (smoke inputs, tests)
)
from tfds_builders.sc2st.inventory import inventory
from tfds_builders.sc2st.keyframes import (
    Embedder,
    Expert,
    Keyframe,
    MakeEmbedder,
    MakeExpert,
    normalise,
)
from tfds_builders.sc2st.sc2st import Builder, Sc2St, Sc2StConfig

__all__ = ["inventory", "CONFIGS", "Builder", "Embedder", "Expert", "Keyframe", "MakeEmbedder",
           "MakeExpert", "ManualDirError", "Sc2St", "Sc2StConfig", "data_source",
           "isolated_keyframes", "normalise", "pool", "prepare", "split_names", "synthetic",
           "to_record"]

CONFIGS = {c.name: c for c in Sc2St.BUILDER_CONFIGS}

# The model functions a build may be handed (keyword arguments of `Sc2St` and `prepare`).
MODELS = ("embedder", "experts", "candidate_embedder", "feature_embedder")
TEXT_FIELDS = ("storyboard_id", "movie")
TEXT_LISTS = ("genres", "clip_ids", "sentences", "frame_ids")
ARRAYS = {"index": np.int32, "start": np.float32, "end": np.float32, "features": np.float32,
          "candidates": np.int32, "answer": np.int32}


def to_record(raw: dict) -> dict:
    """A stored example as plain Python: str fields, lists of str, NumPy arrays."""
    rec: dict[str, Any] = {k: common.text(raw[k]) for k in TEXT_FIELDS}
    rec.update({k: [common.text(s) for s in raw[k]] for k in TEXT_LISTS})
    rec.update({k: np.asarray(raw[k], dtype=t) for k, t in ARRAYS.items()})
    rec.update({k: np.asarray(v, np.float32) for k, v in raw.items() if k.startswith("expert_")})
    return rec


def prepare(config: str, data_dir: os.PathLike | str, manual_dir: os.PathLike | str | None = None,
            build: bool = True, **models: Any) -> Sc2St:
    """The builder with its dataset built (building it now if missing and `build`). `models`
    are the builder's model functions (see `Sc2St.__init__` and `keyframes`): `embedder`,
    and those the config needs of `experts`, `candidate_embedder`, `feature_embedder`."""
    unknown = set(models) - set(MODELS)
    if unknown:
        raise TypeError(f"sc2st.prepare: unknown model functions {sorted(unknown)} (choose "
                        f"from {', '.join(MODELS)})")
    builder = common.open_builder(Sc2St, config, data_dir)
    builder.embedder = models.get("embedder")
    builder.experts = models.get("experts") or {}
    builder.candidate_embedder = models.get("candidate_embedder")
    builder.feature_embedder = models.get("feature_embedder")
    return common.prepare(builder, data_dir, manual_dir, build,
                          lambda m: Sc2St.check_inputs(config, m))


def data_source(config: str, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True,
                **models: Any) -> common.Source:
    """A random-access source over `split` of sc2st/`config` (built first if needed, with
    `models` as `prepare`), in storyboard `index` order."""
    builder = prepare(config, data_dir, manual_dir, build, **models)
    return common.Source(Sc2St, config, split, os.path.abspath(data_dir),
                         common.split_length(builder, split), to_record, order_by="index")


def isolated_keyframes(config: str, split: str, data_dir: os.PathLike | str
                       ) -> dict[str, np.ndarray]:
    """The split's isolated keyframes (the candidates past the storyboards' keyframes in
    pool order), column -> array; empty when the build has none (released data)."""
    builder = common.open_builder(Sc2St, config, data_dir)
    return extras.read_isolated(pathlib.Path(os.fspath(builder.data_dir)), split) or {}


def pool(config: str, split: str, data_dir: os.PathLike | str,
         column: str = "features") -> pathlib.Path:
    """Path of `pool_<split>[_<column>].npy` ([N * length + M, D] float32 in pool order:
    storyboards, then isolated keyframes), written on first use."""
    builder = common.open_builder(Sc2St, config, data_dir)
    root = pathlib.Path(os.fspath(builder.data_dir))
    path = root / (f"pool_{split}.npy" if column == "features" else f"pool_{split}_{column}.npy")
    if not path.is_file():
        src = data_source(config, split, data_dir, build=False)
        if len(src) and column not in src[0]:
            raise KeyError(f"sc2st/{config} has no column {column!r} (experts: "
                           f"{[n for n, _ in builder.builder_config.experts]})")
        feats = np.stack([src[i][column] for i in range(len(src))])
        feats = feats.reshape(-1, feats.shape[-1])
        isolated = extras.read_isolated(root, split)
        if isolated is not None:
            feats = np.concatenate([feats, isolated[column].reshape(-1, feats.shape[-1])])
        tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npy")
        np.save(tmp, feats)
        os.replace(tmp, path)
    return path


def split_names(config: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True,
                **models: Any) -> list[str]:
    return list(prepare(config, data_dir, manual_dir, build, **models).info.splits)
