"""Movie Synopsis Association data (MoviePuzzle Table 4): segment <-> synopsis paragraph.

Two sources, same features (the clip features plus `synopsis: Text`):

- `movienet_synopsis`: MovieNet's synopsis alignment (`annotation/<imdb>.json` `story[]`:
  a shot range and its synopsis paragraph), read by `movienet_build.movie_story_pairs`.
- `synthetic_synopsis*`: the synthetic corpus's clips (same clips as `synthetic*` for the
  same seed and sizes; `synthetic.make_clip` is pure) each with a paragraph written from
  the clip's latent story by `describe_clip`. Nothing is written to disk.

`data_source(config, split, data_dir)` is the trainer's reader (records as in
`tfds_builders.moviepuzzle.data_source`, plus `synopsis: str`).
"""

from __future__ import annotations

import os
from typing import Any

from tfds_builders import common
from tfds_builders import moviepuzzle as mp
from tfds_builders.moviepuzzle.synopsis_corpus import describe_clip, synthetic_pairs

__all__ = ["data_source", "describe_clip", "synthetic_pairs", "to_record"]


def to_record(raw: dict) -> dict:
    """A stored synopsis example: the clip record of `moviepuzzle.to_record` plus `synopsis`."""
    return dict(mp.to_record(raw), synopsis=common.text(raw["synopsis"]))


def data_source(config: str, split: str, data_dir: os.PathLike | str,
                manual_dir: os.PathLike | str | None = None, build: bool = True) -> Any:
    """A random-access source over `split` of a synopsis config (built first if needed)."""
    if "synopsis" not in config:
        raise ValueError(f"moviepuzzle/{config} has no synopses; use a *synopsis config")
    return mp.data_source(config, split, data_dir, manual_dir, build, to_record=to_record)
