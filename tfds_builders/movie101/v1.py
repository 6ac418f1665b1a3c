"""Movie101 v1 narration, grounding and raw-merged examples (Movie101v1/ layout).

Every narration of a split file is kept when its time and text parse, whatever its movie
lacks: a movie without a meta_anno.json entry gives an empty cast (as upstream's reader,
which then uses no role features), counted per split as `kept_movie_without_cast_<split>`
(narrations; the movies named); a movie absent from public_split.json is counted
`kept_movie_not_in_split_<split>`. Whether the trainer can use a narration (its movie's
features) is decided when it reads them (vnr/benchmarks/movie101/records.py, `usable`).

Role pointers (narration configs) come from `roles.RoleFile`, matched by (movie, start,
end); the augmentation entries of `train_merge.json` become the `train_clips` split.
Counted per split: `noted_pointer_targets_<split>` (narrations with at least one `@k` role
of their cast), `kept_no_role_pointer_entry` (a narration no role entry matches; names
stay plain text), `role_entry_without_narration` (an entry of a non-augmented file that
matches no narration; not used).
"""

from __future__ import annotations

import collections
import pathlib
from typing import Any

import numpy as np

from tfds_builders import common
from tfds_builders import schema as S
from tfds_builders.movie101 import parsing, roles, schema
from tfds_builders.movie101.metadata import query_roles, v1_genres

V1_SPLITS = ("train", "val", "test")


def v1_read(root: pathlib.Path, skips: collections.Counter | None = None
            ) -> tuple[dict, dict]:
    """(split -> movie ids, movie -> cast list) of a v1 release. public_split.json must be a
    `schema.PublicSplit` and meta_anno.json an object (else one line naming the file and key
    path); a meta_anno movie whose roles do not validate has no cast (`bad_meta_anno_entry`,
    counted in `skips`)."""
    path = root / "public_split.json"
    meta_path = root / "metadata" / "meta_anno.json"
    try:
        split = S.check(schema.PublicSplit, parsing.load_json(path), "bad_split_file")
        meta = S.check(dict[str, Any], parsing.load_json(meta_path), "bad_meta_anno", depth=0)
    except S.Invalid as e:
        raise common.ManualDirError(f"{meta_path if e.reason == 'bad_meta_anno' else path}: "
                                    f"must be an object ({e})") from None
    casts = {}
    for mid, cast in S.each(schema.V1Cast, meta.items(), "bad_meta_anno_entry", meta_path,
                            skips if skips is not None else collections.Counter()):
        casts[mid] = parsing.v1_cast(cast)
    return {s: getattr(split, s) for s in V1_SPLITS}, casts


def span(item: dict, path: pathlib.Path, skips: collections.Counter) -> tuple | None:
    """(start, end) of a row (swapped when reversed, counted) or None (skipped, counted)."""
    try:
        s, e, swapped = parsing.parse_span(item.get("start_time"), item.get("end_time"))
    except parsing.ParseError as err:
        common.record_skip(skips, "bad_time", path, str(err))
        return None
    if swapped:
        skips["kept_times_out_of_order_swapped"] += 1
        common.log.warning("%s: end < start for %s; swapped", path, item.get("movie_id"))
    if isinstance(item.get("start_time"), str) or isinstance(item.get("end_time"), str):
        skips["kept_times_given_as_strings"] += 1
    return s, e


def example(movie_id: str, key: str, start: float, end: float, text: str, pointer_text: str,
            roles_: list[int], cast: list[dict], genre: list[str]) -> dict:
    return {"id": key, "movie_id": movie_id, "start": np.float32(start), "end": np.float32(end),
            "text": text, "pointer_text": pointer_text, "roles": np.asarray(roles_, np.int32),
            "cast_names": [c["name"] for c in cast], "genre": genre}


def check_language(text: str, lang: str, skips: collections.Counter) -> None:
    if parsing.language_mix(text, lang):
        skips["kept_mixed_language"] += 1


class _Movies:
    """What a v1 narration needs of its movie: split, cast, genre; counts the gaps."""

    def __init__(self, root: pathlib.Path, skips: collections.Counter):
        split_movies, self.casts = v1_read(root, skips)
        self.split = {m: s for s, ms in split_movies.items() for m in ms}
        self.genres = v1_genres(root, sorted(set(self.casts) | set(self.split)), skips)
        self.skips = skips

    def cast(self, mid: str, split: str) -> list[dict]:
        home = self.split.get(mid)
        if home is None:
            common.count(self.skips, f"kept_movie_not_in_split_{split}", mid)
        elif home != split.removesuffix("_clips"):  # train_clips: train movies
            common.count(self.skips, "kept_movie_in_other_split", mid)
        if mid not in self.casts:
            common.count(self.skips, f"kept_movie_without_cast_{split}", mid)
        return self.casts.get(mid, [])


def v1_examples(root: pathlib.Path, kind: str, skips: collections.Counter
                ) -> dict[str, list[dict]]:
    """split -> examples of a v1 narration / grounding / raw config (narration: plus
    `train_clips`, the augmentation entries of train_merge.json, when it is there)."""
    movies = _Movies(root, skips)
    out: dict[str, list[dict]] = {s: [] for s in V1_SPLITS}
    for split in V1_SPLITS:
        items = _items(root, kind, split, skips)
        if items is None:
            continue
        path, rows, role_file = items
        for idx, row in S.each(schema.Narration, enumerate(rows), "bad_entry", path, skips,
                               lambda k: f"entry {k}"):
            mid = row.movie_id
            sp = span(rows[idx], path, skips)
            text = row.content.strip()
            if sp is None:
                continue
            if not text:
                common.record_skip(skips, "empty_text", path, f"entry {idx}")
                continue
            cast = movies.cast(mid, split)
            names = [c["name"] for c in cast]
            pointer_text, found = text, []
            if role_file is not None:
                pt = role_file.sentence(mid, *sp)
                if pt is None:
                    common.count(skips, "kept_no_role_pointer_entry", f"{path} entry {idx}")
                else:
                    _, found, bad = parsing.expand_pointers(pt, names)
                    if bad:
                        skips["kept_role_pointer_not_in_cast"] += len(bad)
                        common.log.warning("%s: @%s not in the cast of %s (%d roles)",
                                           role_file.path, bad, mid, len(names))
                        found = []  # names stay plain text
                    else:
                        pointer_text = pt
            if kind == "grounding":  # Movie101-G has no role file: names in the text
                found = query_roles(text, names)
                common.note(skips, "grounding_queries_with_roles" if found else
                            "grounding_queries_without_roles")
                common.note(skips, "grounding_role_mentions", len(found))
            elif found:
                common.note(skips, f"pointer_targets_{split}")
            check_language(text, "zh", skips)
            out[split].append(example(mid, f"{mid}_{split}_{idx}", *sp, text, pointer_text,
                                      found, cast, movies.genres.get(mid, [])))
        if role_file is not None:
            extra = _unused_entries(role_file, split, movies, skips)
            if extra:
                out[roles.CLIPS_SPLIT] = extra
    return out


def _unused_entries(role_file: roles.RoleFile, split: str, movies: _Movies,
                    skips: collections.Counter) -> list[dict]:
    """train_merge.json's augmentation entries as examples; other files' unmatched entries
    are counted and not used."""
    unused = role_file.unused()
    if role_file.path.name != roles.AUGMENTED:
        for eid, *_ in unused:
            common.record_skip(skips, "role_entry_without_narration", role_file.path,
                               f"entry {eid}")
        return []
    out = []
    for eid, mid, sentence, s, e in unused:
        cast = movies.cast(mid, roles.CLIPS_SPLIT)
        text, found, bad = parsing.expand_pointers(sentence, [c["name"] for c in cast])
        if bad:  # no plain text to fall back on: the entry has only the pointer sentence
            common.record_skip(skips, "augmentation_pointer_not_in_cast", role_file.path,
                               f"entry {eid}: @{bad} of {mid}")
            continue
        if found:
            common.note(skips, f"pointer_targets_{roles.CLIPS_SPLIT}")
        check_language(text, "zh", skips)
        out.append(example(mid, f"{mid}_{roles.CLIPS_SPLIT}_{eid}", s, e, text, sentence,
                           found, cast, movies.genres.get(mid, [])))
    common.note(skips, "augmentation_entries", len(unused))
    return out


def _items(root: pathlib.Path, kind: str, split: str, skips: collections.Counter
           ) -> tuple | None:
    """(path, rows, RoleFile or None) for one split; a missing file is counted."""
    if kind == "raw":
        return _raw_items(root, split, skips)
    folder = "Movie101-N" if kind == "narration" else "Movie101-G"
    path = root / folder / f"{split}.json"
    if not path.is_file():
        common.record_skip(skips, "missing_split_file", path, "not in this copy of the release")
        return None
    rows = parsing.load_json(path)
    if not isinstance(rows, list):
        raise common.ManualDirError(f"{path} must be a list of narrations")
    role_file = None
    if kind == "narration":
        rpath = roles.role_file(root, split, skips)
        if rpath is not None:
            role_file = roles.RoleFile(rpath, skips)
        else:
            common.record_skip(skips, "missing_role_file", roles.looked_for(root, split),
                               "no pointer targets; names kept as plain text")
    return path, rows, role_file


def _raw_items(root: pathlib.Path, split: str, skips: collections.Counter) -> tuple | None:
    """Movie101-raw clips merged into paragraphs by `parsing.merge_paragraphs` (rows that
    do not validate are counted once, with the first split)."""
    ann = root / "Movie101-raw" / "annotation"
    clips_p, lines_p = ann / "narration_clips.json", ann / "lines.json"
    for p in (clips_p, lines_p):
        if not p.is_file():
            if split == "train":
                common.record_skip(skips, "missing_raw_file", p, "v1_narration_raw needs it")
            return None
    split_movies = getattr(S.check(schema.PublicSplit, parsing.load_json(
        root / "public_split.json"), "bad_split_file"), split)
    counts = skips if split == V1_SPLITS[0] else collections.Counter()
    clips = _raw_rows(parsing.load_json(clips_p), clips_p, counts, skips)
    lines = _raw_rows(parsing.load_json(lines_p), lines_p, counts, skips)
    rows = []
    for mid in split_movies:
        lin = [(s, e) for s, e, _ in lines.get(mid, [])]
        for s, e, t in parsing.merge_paragraphs(clips.get(mid, []), lin):
            rows.append({"movie_id": mid, "start_time": s, "end_time": e, "content": t})
    return clips_p, rows, None


def _raw_rows(data: Any, path: pathlib.Path, counts: collections.Counter,
              skips: collections.Counter) -> dict[str, list[tuple[float, float, str]]]:
    """movie -> (start, end, text) rows of a Movie101-raw file, a list of rows or a {movie:
    [rows]} object (`schema.RawRow`; a row that does not validate is counted in `counts` by
    reason, `bad_entry` / `bad_time` / `duplicate_key`, naming its key path)."""
    if isinstance(data, dict):
        movies = S.each(list[Any], data.items(), "bad_entry", path, counts, depth=0)
        items = [(f"{m}[{i}]", dict(r, movie_id=r.get("movie_id", m)) if isinstance(r, dict)
                  else r) for m, rs in movies for i, r in enumerate(rs)]
    elif isinstance(data, list):
        items = [(f"entry {i}", r) for i, r in enumerate(data)]
    else:
        raise common.ManualDirError(f"{path}: must be a list of rows or an object "
                                    "{movie: [rows]}")
    out: dict[str, list[tuple[float, float, str]]] = {}
    for key, r in items:
        try:
            row = S.check(schema.RawRow, r, "bad_entry", key)
        except S.Invalid as e:
            S.skip(counts, e, path)
            continue
        s, e = span(r, path, skips)  # valid times: only swaps and strings are counted
        out.setdefault(row.movie_id, []).append((s, e, (row.content or row.text).strip()))
    return out
