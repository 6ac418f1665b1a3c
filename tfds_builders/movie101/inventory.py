"""What a Movie101 release's splits hold, for `vnr.contamination`: movies (Xigua album ids,
the same id space in v1 and v2), in v1 by `public_split.json` and the movies of each split's
Movie101-N / -G rows (the builder keeps a row whose movie the split file puts elsewhere, and
`train_clips` holds train_merge.json's augmentation entries), in v2 by the builder's
`parsing.movie_split` of each `metadata/meta/<movie>.json`; titles from v1's
`video_src.json` or v2's metadata, without the " 无障碍版" (accessible version) suffix every
title carries."""

from __future__ import annotations

import os
import pathlib

from tfds_builders import Held, common
from tfds_builders.movie101 import parsing, v1
from tfds_builders.movie101.movie101 import v2_movies_meta

ACCESSIBLE = "无障碍版"


def _title(title: str) -> str:
    title = title.strip()
    return title[: -len(ACCESSIBLE)].strip() if title.endswith(ACCESSIBLE) else title


def _v1_titles(root: pathlib.Path) -> dict[str, str]:
    """{album id: title} of `video_src.json` (optional; entries without both are logged)."""
    path = root / "video_src.json"
    if not path.is_file():
        return {}
    try:
        rows = parsing.load_json(path)
    except parsing.ParseError as e:
        common.log.warning("%s: unreadable (%s): movies are compared by id only", path, e)
        return {}
    rows = rows if isinstance(rows, list) else []
    good = {str(r["albumId"]): r["title"] for r in rows if isinstance(r, dict)
            and isinstance(r.get("albumId"), str | int) and isinstance(r.get("title"), str)}
    if len(good) < len(rows) or not rows:
        common.log.warning("%s: %d entr(ies) without albumId and title (of %d) give no title",
                           path, len(rows) - len(good), len(rows))
    return good


def inventory(manual_dir: os.PathLike | str) -> dict[str, list[Held]]:
    """{split: [Held]} of a v1 (`public_split.json`) or v2 (`metadata/meta/`) release."""
    root = pathlib.Path(manual_dir)
    counts = common.Counts()
    if (root / "public_split.json").is_file():
        split_movies, _ = v1.v1_read(root, counts)
        movies = {s: dict.fromkeys(ms) for s, ms in split_movies.items()}
        for kind in ("narration", "grounding"):  # a split's rows may name other movies
            for split, rows in v1.v1_examples(root, kind, counts).items():
                movies.setdefault(split, {}).update(dict.fromkeys(r["movie_id"] for r in rows))
        titles = _v1_titles(root)
        return {s: [Held(f"xigua:{m}", tuple(filter(None, [_title(titles.get(m, ""))])))
                    for m in ms] for s, ms in movies.items() if ms}
    if (root / "metadata" / "meta").is_dir():
        out: dict[str, list[Held]] = {}
        for m, meta in v2_movies_meta(root, counts).items():
            out.setdefault(parsing.movie_split(m), []).append(
                Held(f"xigua:{m}", tuple(filter(None, [_title(meta["title"])]))))
        return out
    raise common.ManualDirError(f"{root} is not a Movie101 release: it has neither "
                                "public_split.json (v1) nor metadata/meta/ (v2)")
