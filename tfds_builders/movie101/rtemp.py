"""Movie101-R(temp) / GSR(temp): the release's global-shot retrieval pairs (§5.2, Table 4).

The release ships them as `Movie101v1/baseline/CNCLIP+RNL/data/Movie101-R-temp/{train,val,
test}.json`: a list of {"video_id": int, "video": "<movie>_<start>_<end>", "caption": [text]}.
Each entry is one 20-second shot that has aligned narrations (shots without one are left
out, so `video_id`, a running shot counter over the split's movies, has gaps) and its
caption is those narrations joined. A movie's shots lie on its own grid, start = offset +
20 k, where the offset (the first listed shot's start, e.g. 46 s) differs per movie: the
grid does not start at second 0. Entries become examples with the shot's span as start/end
and the caption as text, so the per-movie offsets reach training and evaluation unchanged.

Looked for under the v1 manual_dir as `Movie101-R-temp/` or `baseline/CNCLIP+RNL/data/
Movie101-R-temp/`. Bad entries are skipped and counted per reason (`bad_shot_entry`,
`bad_shot_name`, `bad_shot_span`, `empty_text`, `duplicate_shot`); kept oddities are
counted too (`kept_shot_off_grid`, `kept_shot_not_<L>s`, `kept_shot_movie_in_other_split`,
`kept_shot_movie_without_cast`).
"""

from __future__ import annotations

import collections
import pathlib
import re
from typing import Any

import numpy as np

from tfds_builders import common
from tfds_builders import schema as S
from tfds_builders.movie101 import parsing, schema
from tfds_builders.movie101.metadata import query_roles

RTEMP_DIRS = ("Movie101-R-temp", "baseline/CNCLIP+RNL/data/Movie101-R-temp")
SHOT_LEN = 20
_NAME = re.compile(r"^(\d+)_(\d+)_(\d+)$")


def rtemp_dir(root: pathlib.Path) -> pathlib.Path | None:
    """The first of RTEMP_DIRS under `root` that exists."""
    return next((root / d for d in RTEMP_DIRS if (root / d).is_dir()), None)


def parse_shot_name(video: Any) -> tuple[str, int, int]:
    """"<movie>_<start>_<end>" -> (movie, start, end) or a ParseError."""
    m = _NAME.match(video) if isinstance(video, str) else None
    if m is None:
        raise parsing.ParseError(f"video {video!r} is not '<movie>_<start>_<end>'")
    s, e = int(m.group(2)), int(m.group(3))
    if e <= s:
        raise parsing.ParseError(f"video {video!r} ends before it starts")
    return m.group(1), s, e


def read_split(path: pathlib.Path, skips: collections.Counter
               ) -> list[tuple[int, str, int, int, str]]:
    """(video_id, movie, start, end, caption) of one file; an entry that is not a
    `schema.Shot` is `bad_shot_entry` (an integer video_id, a name string, a caption string
    or list of strings), other bad entries are counted and skipped by their own reasons."""
    rows = parsing.load_json(path)
    if not isinstance(rows, list):
        raise common.ManualDirError(f"{path} must be a list of {{video_id, video, caption}}")
    out, seen = [], set()
    for idx, entry in enumerate(rows):
        try:
            shot = S.check(schema.Shot, entry, "bad_shot_entry", f"entry {idx}")
        except S.Invalid as e:
            S.skip(skips, e, path)
            continue
        try:
            mid, s, e = parse_shot_name(shot.video)
        except parsing.ParseError as err:
            reason = "bad_shot_span" if "ends before" in str(err) else "bad_shot_name"
            common.record_skip(skips, reason, path, f"entry {idx}: {err}")
            continue
        cap = [shot.caption] if isinstance(shot.caption, str) else shot.caption
        text = "".join(c.strip() for c in cap)
        if not text:
            common.record_skip(skips, "empty_text", path, f"entry {idx} ({shot.video})")
            continue
        key = (mid, s, e)
        if key in seen:
            common.record_skip(skips, "duplicate_shot", path, f"entry {idx} ({shot.video})")
            continue
        seen.add(key)
        out.append((shot.video_id, mid, s, e, text))
    return out


def movie_offsets(rows: list[tuple[int, str, int, int, str]]) -> dict[str, int]:
    """movie -> the start of its first listed shot (its grid's offset)."""
    out: dict[str, int] = {}
    for _, mid, s, _, _ in rows:
        out[mid] = min(s, out.get(mid, s))
    return out


def shot_examples(root: pathlib.Path, split_movies: dict[str, list[str]],
                  casts: dict[str, list[dict]], genres: dict[str, list[str]],
                  skips: collections.Counter) -> dict[str, list[dict]]:
    """split -> one example per listed shot (id `<movie>_shot<video_id>`, start/end = the
    shot, text = its caption, roles = cast names found in it)."""
    d = rtemp_dir(root)
    if d is None:
        raise common.ManualDirError(
            f"{root} has none of {', '.join(RTEMP_DIRS)}: v1_shots reads the release's "
            "Movie101-R-temp/{train,val,test}.json")
    movie_split = {m: s for s, ms in split_movies.items() for m in ms}
    out: dict[str, list[dict]] = {}
    for split in ("train", "val", "test"):
        path = d / f"{split}.json"
        out[split] = []
        if not path.is_file():
            common.record_skip(skips, "missing_split_file", path, "not in this copy")
            continue
        rows = read_split(path, skips)
        offsets = movie_offsets(rows)
        for vid, mid, s, e, text in rows:
            if (s - offsets[mid]) % SHOT_LEN:
                skips["kept_shot_off_grid"] += 1
            if e - s != SHOT_LEN:
                skips[f"kept_shot_not_{SHOT_LEN}s"] += 1
            if movie_split.get(mid, split) != split:
                skips["kept_shot_movie_in_other_split"] += 1
            if mid not in casts:
                common.count(skips, "kept_shot_movie_without_cast", mid)
            cast = casts.get(mid, [])
            names = [c["name"] for c in cast]
            roles = query_roles(text, names)
            if parsing.language_mix(text, "zh"):
                skips["kept_mixed_language"] += 1
            out[split].append({
                "id": f"{mid}_shot{vid}", "movie_id": mid, "start": np.float32(s),
                "end": np.float32(e), "text": text, "pointer_text": text,
                "roles": np.asarray(roles, np.int32), "cast_names": names,
                "genre": genres.get(mid, [])})
        common.note(skips, f"shots_{split}", len(out[split]))
        common.note(skips, f"shot_movies_{split}", len(offsets))
    return out
