"""Sc2St keyframe columns beyond the storyboards' own: isolated keyframes and MoEE experts.

Isolated keyframes (§4.1.3): the pairs story formation dropped (an overflowing clip's
tail, a story's clips that never filled a storyboard) belong to no storyboard; the paper's
candidates "can include" them. Each goes to one split, so no candidate is shared across
splits: a dropped pair whose clip has pairs in a storyboard goes to that storyboard's
split (a clip's frames never straddle splits); the other clips are shuffled with the seed
and cut by the split fractions, whole clips at a time (choices made here: the paper does
not say how it split them). Per split they are stored beside the dataset in
`isolated_<split>.npz` (`features`, one `expert_<name>` per expert, `frame_ids`, `movies`)
and join that split's candidate pool after the storyboards' keyframes.

Experts (§4.3.2, MoEE rows): one `Expert` per name in the builder config's `experts`,
called once on every keyframe of the corpus (storyboards and isolated, all splits); its
rows become the column `expert_<name>` of the examples and of the isolated files.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfds_builders.sc2st import keyframes, story, text


def assign_isolated(dropped: Sequence[Any], boards: Sequence[Sequence[Any]],
                    splits: Mapping[str, np.ndarray], seed: int,
                    fractions: Sequence[float]) -> dict[str, list[Any]]:
    """Split name -> its isolated pairs (objects with `.clip.clip_id`), in dropped order."""
    split_of_clip = {p.clip.clip_id: s for s, idx in splits.items() for i in idx
                     for p in boards[i]}
    loose = list(dict.fromkeys(p.clip.clip_id for p in dropped
                               if p.clip.clip_id not in split_of_clip))
    cut = story.split_storyboards(len(loose), seed + 1, fractions)  # seed + 1: its own draw
    split_of_clip.update({loose[i]: s for s, idx in cut.items() for i in idx})
    out: dict[str, list[Any]] = {s: [] for s in splits}
    for p in dropped:
        out[split_of_clip[p.clip.clip_id]].append(p)
    return out


def keyframe_refs(pairs: Sequence[Any], root: pathlib.Path) -> list[keyframes.Keyframe]:
    """What the experts read of each pair (`Pair` of the builder): the names are those the
    release attaches in the clip's description that appear, as whole words, in the pair's
    own sub-sentence (with `names=False` the sub-sentence names nobody: none)."""
    out = []
    for p in pairs:
        is_jpeg = pathlib.Path(p.frame_id).suffix.lower() in (".jpg", ".jpeg")
        names = tuple(n for n in text.character_names(p.clip.sentence)
                      if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", p.sentence))
        out.append(keyframes.Keyframe(p.frame_id, p.clip.movie, p.sentence, names, p.feature,
                                      root / p.frame_id if is_jpeg else None))
    return out


def expert_columns(pairs: Sequence[Any], root: pathlib.Path,
                   experts: Mapping[str, keyframes.Expert], dims: Mapping[str, int],
                   stats: Any) -> dict[int, dict[str, np.ndarray]]:
    """id(pair) -> {`expert_<name>`: row}; checks each expert's width against the config
    and counts the keyframes an expert misses (`expert_<name>_missing`)."""
    if set(experts) != set(dims):
        raise ValueError(f"the builder config stores experts {sorted(dims)} but got "
                         f"{sorted(experts)}")
    refs = keyframe_refs(pairs, root)
    cols = {}
    for name, expert in experts.items():
        rows = np.asarray(expert.encode_keyframes(refs), np.float32)
        if rows.shape != (len(pairs), dims[name]):
            raise ValueError(f"expert {name!r} gave features of shape {rows.shape}; the builder "
                             f"config needs [{len(pairs)}, {dims[name]}]")
        if missing := int((~rows.any(-1)).sum()):
            stats[f"expert_{name}_missing"] += missing
        for k, v in getattr(expert, "counts", {}).items():
            stats[f"expert_{name}_{k}"] += v
        cols[name] = rows
    return {id(p): {f"expert_{n}": c[i] for n, c in cols.items()} for i, p in enumerate(pairs)}


def isolated_path(data_dir: os.PathLike | str, split: str) -> pathlib.Path:
    return pathlib.Path(os.fspath(data_dir)) / f"isolated_{split}.npz"


def write_isolated(data_dir: os.PathLike | str, split: str, columns: dict[str, np.ndarray],
                   frame_ids: Sequence[str], movies: Sequence[str]) -> None:
    path = isolated_path(data_dir, split)
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npz")
    np.savez(tmp, frame_ids=np.asarray(frame_ids, str), movies=np.asarray(movies, str),
             **columns)
    os.replace(tmp, path)


def read_isolated(data_dir: os.PathLike | str, split: str) -> dict[str, np.ndarray] | None:
    """The split's isolated keyframe columns, or None (built without, or released data)."""
    path = isolated_path(data_dir, split)
    if not path.is_file():
        return None
    with np.load(path) as f:
        return {k: f[k] for k in f.files}
