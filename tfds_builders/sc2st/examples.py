"""Sc2St keyframe-sentence pairs and the stored example of one storyboard (shared by the
LSMDC and the released-storyboard builds)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tfds_builders.sc2st import keyframes, lsmdc


@dataclasses.dataclass
class Pair:
    clip: lsmdc.Clip
    sentence: str
    frame_id: str
    feature: np.ndarray


def check_dim(scorer: keyframes.Embedder, cfg: Any, encoder: str | None = None) -> None:
    """The stored features' embedder (the keyframe embedder, or the `feature_encoder`'s when
    the config names one) must embed in the config's `feature_dim`."""
    if scorer.dim != cfg.feature_dim:
        raise ValueError(f"encoder {encoder or cfg.encoder!r} embeds in {scorer.dim} dims but "
                         f"the builder config says feature_dim={cfg.feature_dim}")


def make_example(index: int, board: list[Pair], feats: np.ndarray, cands: np.ndarray,
                 answer: np.ndarray, meta: dict, cols: dict | None = None) -> dict:
    """One stored example (a storyboard); `cols`: id(pair) -> its expert columns."""
    movie = board[0].clip.movie
    experts = {k: np.stack([cols[id(p)][k] for p in board]) for k in cols[id(board[0])]
               } if cols else {}
    return {
        **experts,
        "storyboard_id": f"{board[0].frame_id}",
        "index": index,
        "movie": movie,
        "genres": meta.get(lsmdc.normalise_movie(movie), {}).get("genres", []),
        "clip_ids": [p.clip.clip_id for p in board],
        "sentences": [p.sentence for p in board],
        "frame_ids": [p.frame_id for p in board],
        "start": np.array([p.clip.start for p in board], np.float32),
        "end": np.array([p.clip.end for p in board], np.float32),
        "features": feats,
        "candidates": cands.astype(np.int32),
        "answer": answer.astype(np.int32),
    }
