"""Readers for the released Sc2St story files (Google Drive `Sc2St/`), schema inferred.

Upstream documents only this (README of hopeisme/Sc2St): ids are `l_<movie>_<clip>_<frame>`
(a frame) or `l_<movie>_<clip>` (a clip), indices into `data/lsmdc.json`, whose `i2n` maps
a movie index to `[movie folder, {clip index: clip folder}]` and `data` to frame counts;
frames are `frames/<movie>/<clip>/<frame>.jpg` (every 200 ms). `story10_all_<split>[_no].json`
hold storyboards of 10; `i2chars.json` maps a clip id to its characters, `parsed_clip.json`
a clip id to keyframe indices, `parsed_text.json` a clip id to its text(s).

The JSON layout itself is undocumented, so `read_stories` accepts the plausible shapes and
fails with `SchemaError` naming the file and the key path where the data stops matching:

* top level: a list of stories, or a dict of story id -> story, or a dict holding such a
  list/dict under one of `STORY_KEYS`;
* a story: a list of 10 items, or a dict with the items under one of `ITEM_KEYS`, or with
  parallel lists of ids (`ID_KEYS`) and texts (`TEXT_KEYS`); optional candidates under
  `CANDIDATE_KEYS` (one list of ids per asked position);
* an item: an id string, or a dict with an id under `ID_KEYS` and optionally a text under
  `TEXT_KEYS` (a string or a list of strings, joined).
"""

from __future__ import annotations

import collections
import pathlib
import re
from typing import Any

import numpy as np

from tfds_builders import common
from tfds_builders import schema as S
from tfds_builders.sc2st import candidates, keyframes, lsmdc, schema, text
from tfds_builders.sc2st.examples import Pair, check_dim, make_example
from tfds_builders.sc2st.skips import record

ID = re.compile(r"^l_(\d+)_(\d+)(?:_(\d+))?$")
STORY_KEYS = ("stories", "storyboards", "data", "items")
ITEM_KEYS = ("story", "items", "frames", "keyframes", "images", "ids")
ID_KEYS = ("id", "ids", "image", "images", "img", "frame", "frames", "keyframe", "keyframes",
           "image_id", "frame_id")
TEXT_KEYS = ("text", "texts", "sentence", "sentences", "caption", "captions", "description")
CANDIDATE_KEYS = ("candidates", "cands", "options", "choices")


class SchemaError(ValueError):
    """A released file whose layout is not one of the accepted shapes (names file and key)."""


def load_json(path: pathlib.Path, whole: bool = True) -> Any:
    """The file's JSON; a SchemaError naming it when it is missing or unreadable, or (with
    `whole`) naming the key path of a key given twice. Without `whole` a repeated key is left
    as `tfds_builders.schema.Duplicate` for the reader to refuse its story alone."""
    if not path.is_file():
        raise SchemaError(f"{path}: no such file")
    try:
        data = S.load_json(path)
    except S.Unreadable as e:
        raise SchemaError(f"{path}: not readable JSON ({S.detail(e)})") from None
    dup = S.find_duplicate(data) if whole else None
    if dup is not None:
        raise SchemaError(f"{path}: {dup}: key given more than once (which value is meant is "
                          "unknown)")
    return data


def parse_id(i: Any, where: str) -> tuple[int, int, int | None]:
    """`l_m_c_f` -> (m, c, f); `l_m_c` -> (m, c, None)."""
    m = ID.match(i) if isinstance(i, str) else None
    if not m:
        raise SchemaError(f"{where}: {i!r} is not an id l_<movie>_<clip>[_<frame>]")
    return int(m[1]), int(m[2]), None if m[3] is None else int(m[3])


def _text(v: Any, where: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list) and all(isinstance(s, str) for s in v):
        return " ".join(v)
    raise SchemaError(f"{where}: text must be a string or a list of strings, got "
                      f"{type(v).__name__}")


def _first(d: dict, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in d), None)


def _item(v: Any, where: str) -> dict:
    if isinstance(v, str):
        parse_id(v, where)
        return {"id": v, "text": None}
    if isinstance(v, dict):
        k = _first(v, ID_KEYS)
        if k is None:
            raise SchemaError(f"{where}: item has none of the id keys {ID_KEYS} "
                              f"(keys: {sorted(v)[:8]})")
        parse_id(v[k], f"{where}.{k}")
        t = _first(v, TEXT_KEYS)
        return {"id": v[k], "text": None if t is None else _text(v[t], f"{where}.{t}")}
    raise SchemaError(f"{where}: item must be an id string or an object, got {type(v).__name__}")


def _story(v: Any, where: str, length: int) -> dict:
    cands = None
    if isinstance(v, dict):
        ck = _first(v, CANDIDATE_KEYS)
        if ck is not None:
            c = v[ck]
            if not (isinstance(c, list) and all(isinstance(r, list) for r in c)):
                raise SchemaError(f"{where}.{ck}: candidates must be a list of id lists")
            for r, row in enumerate(c):
                for j, i in enumerate(row):
                    parse_id(i, f"{where}.{ck}[{r}][{j}]")
            cands = c
        ik, tk = _first(v, ITEM_KEYS), _first(v, TEXT_KEYS)
        if ik is None:
            raise SchemaError(f"{where}: story has none of the item keys {ITEM_KEYS} "
                              f"(keys: {sorted(v)[:8]})")
        items = v[ik]
        if not isinstance(items, list):
            raise SchemaError(f"{where}.{ik}: must be a list, got {type(items).__name__}")
        parsed = [_item(x, f"{where}.{ik}[{n}]") for n, x in enumerate(items)]
        if tk is not None:
            texts = v[tk]
            if not isinstance(texts, list) or len(texts) != len(parsed):
                raise SchemaError(f"{where}.{tk}: must be a list of {len(parsed)} texts")
            for n, (p, t) in enumerate(zip(parsed, texts, strict=True)):
                p["text"] = _text(t, f"{where}.{tk}[{n}]")
    elif isinstance(v, list):
        parsed = [_item(x, f"{where}[{n}]") for n, x in enumerate(v)]
    else:
        raise SchemaError(f"{where}: a story must be a list or an object, got "
                          f"{type(v).__name__}")
    if len(parsed) != length:
        raise WrongLength(f"{where}: a story must have {length} items, got {len(parsed)}")
    return {"items": parsed, "candidates": cands}


class WrongLength(SchemaError):
    """A story with other than `length` items (counted and skipped when `skips` is given)."""

    reason = "wrong_length_story"


class DuplicateKey(SchemaError):
    """A story holding a key given twice (counted and skipped when `skips` is given)."""

    reason = S.DUPLICATE_KEY


def read_stories(path: pathlib.Path, length: int = 10,
                 skips: collections.Counter | None = None) -> list[dict]:
    """`story10_all_*.json` -> [{"key", "items": [{"id", "text"}], "candidates"}].

    A story with fewer (or more) than `length` items raises `WrongLength`, or, given
    `skips`, is counted as `wrong_length_story` under this file and left out."""
    data = load_json(path, whole=False)
    where = str(path)
    if isinstance(data, dict):
        dup = next((k for k, v in data.items() if isinstance(v, S.Duplicate)), None)
        if dup is not None and dup in STORY_KEYS:
            raise SchemaError(f"{where}: {dup}: key given more than once")
        k = _first(data, STORY_KEYS)
        if k is not None and isinstance(data[k], list | dict):
            data, where = data[k], f"{where}:{k}"
    if isinstance(data, list):
        entries = [(str(n), x, f"{where}[{n}]") for n, x in enumerate(data)]
    elif isinstance(data, dict):
        entries = [(str(k), x, f"{where}[{k!r}]") for k, x in data.items()]
    else:
        raise SchemaError(f"{where}: top level must be a list or an object of stories")
    out = []
    for k, x, w in entries:
        try:
            dup = S.find_duplicate(x, w)
            if dup is not None:
                raise DuplicateKey(f"{dup}: key given more than once (which value is meant "
                                   "is unknown)")
            out.append(dict(_story(x, w, length), key=k))
        except (WrongLength, DuplicateKey) as e:
            if skips is None:
                raise
            record(skips, e.reason, path, w, _after(str(e), w))
    return out


def read_id_map(path: pathlib.Path, values: str) -> dict[str, list]:
    """`i2chars.json` (values="str"), `parsed_text.json` ("str") or `parsed_clip.json` ("int"):
    a clip id -> list of values (a single value is wrapped)."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: top level must be an object of clip id -> values")
    kind = {"str": str, "int": int}[values]
    out = {}
    for k, v in data.items():
        parse_id(k, f"{path}: key")
        v = v if isinstance(v, list) else [v]
        if not all(isinstance(x, kind) and not isinstance(x, bool) for x in v):
            raise SchemaError(f"{path}[{k!r}]: values must be {values}s, got {v[:3]!r}")
        out[k] = v
    return out


def read_lsmdc_index(path: pathlib.Path) -> dict[tuple[int, int], tuple[str, str]]:
    """`lsmdc.json` -> {(movie index, clip index): (movie folder, clip folder)}
    (`schema.I2nEntry` each; a SchemaError naming the key path where it stops matching)."""
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("i2n"), dict):
        raise SchemaError(f"{path}: needs an object with key 'i2n'")
    out = {}
    for m, v in data["i2n"].items():
        try:
            movie, clips = S.check(schema.I2nEntry, [m, v], "bad_index")[1]
        except S.Invalid as e:
            raise SchemaError(f"{path}: i2n[{m!r}] must be [movie name, {{clip index: clip}}] "
                              f"with digit indices ({e})") from None
        out.update({(int(m), int(c)): (movie, name) for c, name in clips.items()})
    return out


def frame_path(frame_id: str, index: dict[tuple[int, int], tuple[str, str]],
               where: str = "id") -> pathlib.Path:
    """`l_m_c_f` -> `frames/<movie>/<clip>/<f>.jpg` via the lsmdc.json index."""
    m, c, f = parse_id(frame_id, where)
    if f is None:
        raise SchemaError(f"{where}: {frame_id!r} names a clip, not a frame")
    if (m, c) not in index:
        raise SchemaError(f"{where}: {frame_id!r} has no movie {m} / clip {c} in lsmdc.json")
    movie, clip = index[(m, c)]
    return pathlib.Path("frames") / movie / clip / f"{f}.jpg"


def _distinct_and_new(story_: dict, where: str, path: pathlib.Path,
                      seen: dict[tuple[str, ...], str], skips: collections.Counter) -> bool:
    """False (counted `repeated_frame`) for a storyboard showing a frame twice; a storyboard
    given before is noted (`duplicate_storyboard`, with a warning naming both) and kept."""
    ids = tuple(item["id"] for item in story_["items"])
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        record(skips, "repeated_frame", path, where, f"{twice[0]} is shown "
               f"{ids.count(twice[0])} times ({len(set(ids))} distinct frames of {len(ids)})")
        return False
    if ids in seen:
        common.note(skips, "duplicate_storyboard", what=f"{where} = {seen[ids]}")
        common.log.warning("%s repeats the storyboard %s (kept as released)", where, seen[ids])
    else:
        seen[ids] = where
    return True


def _after(message: str, where: str) -> str:
    """`message` without its leading `where` (a skip names the story once)."""
    return message[len(where):].lstrip(": ") if message.startswith(where) else message


RELEASED_SPLITS = {"train": "story10_all_train_no.json", "val": "story10_all_val_no.json",
                   "test": "story10_all_test_no.json"}


def _find(root: pathlib.Path, name: str) -> pathlib.Path | None:
    for p in (root / name, root / "story10_all" / name, root / "data" / name):
        if p.is_file():
            return p
    return None


def build_released(root: pathlib.Path, cfg: Any, skips: collections.Counter,
                   stats: collections.Counter, scorer: keyframes.Embedder
                   ) -> dict[str, list[dict]]:
    """Storyboards of the released `story10_all_<split>_no.json` files (readers above).

    Frames resolve through `lsmdc.json`; a storyboard's sentences are its items' texts,
    else `parsed_text.json[l_<movie>_<clip>]`, cleaned as in §3.1.2 (markup only: the
    release is already split). Keyframe features are computed with the config's CLIP;
    candidate sets follow this builder's protocol (`candidates`) within each split, since
    the release's candidate format (if any) is undocumented; the release lists no isolated
    keyframes, so the pools are the storyboards' (`isolated` does not apply). A storyboard
    with an id lsmdc.json lacks, a missing or undecodable frame or no text is skipped
    (`unknown_id` / `no_frames` / `bad_frame` / `no_text`), one that shows a frame twice
    too (`repeated_frame`: the frame to find would also be context). A storyboard given
    again, in its own split or an earlier one, is kept as released and counted
    (`noted_duplicate_storyboard`, naming both places): a test storyboard also in train is a
    contamination the user should see.
    """
    index_path = _find(root, "lsmdc.json")
    if index_path is None:
        raise common.ManualDirError(f"{root}: released storyboards need lsmdc.json (upstream "
                                    "data/lsmdc.json) to resolve frame ids")
    index = read_lsmdc_index(index_path)
    text_path = _find(root, "parsed_text.json")
    texts = read_id_map(text_path, "str") if text_path else {}
    meta_path = _find(root, "meta.csv")  # upstream keeps it in data/, beside lsmdc.json
    if meta_path is None:
        common.log.warning("%s has no meta.csv (nor story10_all/ or data/meta.csv): genres are "
                           "left empty", root)
    meta = lsmdc.read_meta(meta_path, skips) if meta_path is not None else {}
    check_dim(scorer, cfg)
    no_meta: set[str] = set()
    seen: dict[tuple[str, ...], str] = {}  # a storyboard's frame ids -> where first given
    out = {}
    for code, (split, name) in enumerate(RELEASED_SPLITS.items()):
        path = _find(root, name)
        if path is None:
            common.log.warning("%s: no %s; split %s is left out", root, name, split)
            continue
        boards, feats, movies = [], [], []
        for story_ in read_stories(path, cfg.length, skips):
            where = f"{path}[{story_['key']!r}]"  # as read_stories names a story
            if not _distinct_and_new(story_, where, path, seen, skips):
                continue
            paths, sents = [], []
            try:
                for n, item in enumerate(story_["items"]):
                    paths.append(root / frame_path(item["id"], index, f"{where}[{n}]"))
                    m, c, _ = parse_id(item["id"], where)
                    sents.append(item["text"] or " ".join(texts.get(f"l_{m}_{c}", [])))
            except SchemaError as e:  # an id lsmdc.json does not know
                record(skips, "unknown_id", path, where, _after(str(e), where))
                continue
            missing = next((p for p in paths if not p.is_file()), None)
            if missing is not None:
                record(skips, "no_frames", path, where, f"{missing} is missing")
                continue
            empty = next((n for n, s in enumerate(sents) if not s.strip()), None)
            if empty is not None:
                record(skips, "no_text", path, where, f"[{empty}] {story_['items'][empty]['id']}"
                       " has no text (none in the story, none in parsed_text.json)")
                continue
            got, bad = keyframes.encode_frames(scorer, paths)
            if bad is not None:
                record(skips, "bad_frame", path, where, f"{bad[0]}: {bad[1]}")
                continue
            feats.append(got)
            movie = paths[0].parent.parent.name
            movies.append(movie)
            if lsmdc.normalise_movie(movie) not in meta:
                no_meta.add(movie)
            boards.append([Pair(lsmdc.Clip(p.parent.name, movie, 0.0, 0.0, s, where),
                                text.clean_sentence(s, cfg.names), str(p.relative_to(root)), f)
                           for p, s, f in zip(paths, sents, feats[-1], strict=True)])
        if not boards:
            continue
        ids = {m: i for i, m in enumerate(sorted(set(movies)))}
        cands, answer = candidates.sample_candidates(
            np.stack(feats), np.array([ids[m] for m in movies]), seed=cfg.seed,
            split_code=code, positions=tuple(range(1, cfg.length)),
            num_candidates=cfg.num_candidates, similar_frac=cfg.similar_frac,
            same_movie_frac=cfg.same_movie_frac, stats=stats)
        out[split] = [make_example(i, b, np.stack([p.feature for p in b]), c, a, meta)
                      for i, (b, c, a) in enumerate(zip(boards, cands, answer, strict=True))]
        stats[f"storyboards_{split}"] = len(boards)
    stats["movies_not_in_meta"] = len(no_meta)  # their storyboards have no genres
    if no_meta and meta:
        common.log.warning("%d movie(s) have no meta.csv line (no genres): %s", len(no_meta),
                           ", ".join(sorted(no_meta)[:5]))
    if not out:
        raise common.ManualDirError(f"{root}: none of {', '.join(RELEASED_SPLITS.values())} "
                                    "gave a usable storyboard")
    return out
