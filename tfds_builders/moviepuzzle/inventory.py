"""What a MoviePuzzle release's splits hold, for `vnr.contamination`: the clips
`clip_id.json` lists per split that the builder reads (`scan_split`), each with the IMDb id
of its movie (`info.json` `tt_id`). MovieNet-layout builds (`movienet*` configs) make their
splits at build time and are not read here."""

from __future__ import annotations

import os
import pathlib

from tfds_builders import Held, common
from tfds_builders.moviepuzzle.moviepuzzle import read_clip_ids, scan_split


def inventory(manual_dir: os.PathLike | str) -> dict[str, list[Held]]:
    """{split: [Held]} of the release at `manual_dir` (`ManualDirError` if it has no
    clip_id.json)."""
    root = pathlib.Path(manual_dir)
    if not (root / "clip_id.json").is_file():
        raise common.ManualDirError(f"{root} is not a MoviePuzzle release: it has no "
                                    "clip_id.json (a MovieNet-layout build draws its splits "
                                    "at build time; compare its release of clips instead)")
    counts = common.Counts()
    return {split: [Held(f"moviepuzzle:{m['clip_id']}", imdb=m["movie_id"])
                    for m in scan_split(root, split, ids, counts)]
            for split, ids in read_clip_ids(root).items()}
