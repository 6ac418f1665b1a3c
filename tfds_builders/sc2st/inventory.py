"""What a released Sc2St's splits hold, for `vnr.contamination`: the LSMDC clips of the
storyboards of `story10_all_<split>_no.json`, resolved through `lsmdc.json`, each with its
movie (the LSMDC movie folder, e.g. `1004_Juno`) and the IMDb id `meta.csv` gives it. A
build from LSMDC annotations draws its storyboard splits at build time (seeded) and is not
read here."""

from __future__ import annotations

import os
import pathlib

from tfds_builders import Held, common
from tfds_builders.sc2st import lsmdc
from tfds_builders.sc2st.released import (
    RELEASED_SPLITS,
    SchemaError,
    _find,
    parse_id,
    read_lsmdc_index,
    read_stories,
)


def inventory(manual_dir: os.PathLike | str) -> dict[str, list[Held]]:
    """{split: [Held]} (one per LSMDC clip) of the released story files at `manual_dir`;
    `ManualDirError` naming what is missing, or the file and key of an unreadable one."""
    root = pathlib.Path(manual_dir)
    index_path = _find(root, "lsmdc.json")
    splits = {s: p for s, n in RELEASED_SPLITS.items() if (p := _find(root, n)) is not None}
    if index_path is None or not splits:
        raise common.ManualDirError(
            f"{root}: the Sc2St inventory reads the released story files "
            f"({', '.join(RELEASED_SPLITS.values())}) and lsmdc.json; found "
            f"{'no story file' if not splits else 'no lsmdc.json'}")
    counts = common.Counts()
    meta_path = _find(root, "meta.csv")
    meta = lsmdc.read_meta(meta_path, counts) if meta_path is not None else {}
    try:
        index = read_lsmdc_index(index_path)
        out = {}
        for split, path in splits.items():
            clips: dict[tuple[int, int], None] = {}
            for story in read_stories(path, skips=counts):
                for n, item in enumerate(story["items"]):
                    m, c, _ = parse_id(item["id"], f"{path}[{story['key']!r}][{n}]")
                    clips[(m, c)] = None
            unknown = [k for k in clips if k not in index]
            if unknown:
                common.log.warning("%s: %d clip(s) lsmdc.json does not know are left out "
                                   "(first: l_%d_%d)", path, len(unknown), *unknown[0])
            held = []
            for m, c in (k for k in clips if k in index):
                movie, clip = index[(m, c)]
                name = lsmdc.normalise_movie(movie)
                held.append(Held(f"lsmdc:{movie}/{clip}", (name,),
                                        meta.get(name, {}).get("imdb", "")))
            out[split] = held
    except SchemaError as e:
        raise common.ManualDirError(str(e)) from None
    return out
