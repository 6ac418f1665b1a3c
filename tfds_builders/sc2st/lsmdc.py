"""Reading LSMDC 2016 annotation CSVs, Sc2St's `meta.csv` and the frame folders (pure Python).

`LSMDC16_annos_{training,val,test}.csv`: one clip per line, tab-separated, no
header: ``clip_id  start_aligned  end_aligned  start_extracted  end_extracted
sentence``. Timestamps are ``hh.mm.ss.mmm``; ``clip_id`` is
``<movie>_<start>-<end>`` (the movie name has underscores of its own).

Encoding: the files are ISO-8859-1. Each line is decoded as UTF-8 if it is valid
UTF-8 (some redistributed copies were re-encoded), else as ISO-8859-1; a line
whose ISO-8859-1 reading contains C1 control characters (bytes 0x80-0x9F, which
ISO-8859-1 text never has: a sign of cp1252 or another encoding) is skipped as
``unknown_encoding`` rather than guessed.

Clip ids are not unique: repeated rows of one clip are merged (their sentences
joined in file order) and counted as ``kept_duplicate_clip_merged`` (kept with a fix: no
sentence is lost), naming the clip and both rows.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import re

from tfds_builders import common
from tfds_builders.sc2st import schema
from tfds_builders.sc2st.skips import record
from tfds_builders.schema import Invalid, check

ANNOTATION_FILES = {
    "training": "LSMDC16_annos_training.csv",
    "val": "LSMDC16_annos_val.csv",
    "test": "LSMDC16_annos_test.csv",
}
_TS = r"\d{1,2}\.\d{2}\.\d{2}\.\d{1,3}"
_CLIP = re.compile(rf"^(?P<movie>.+)_(?P<start>{_TS})-(?P<end>{_TS})$")
_C1 = re.compile("[\x80-\x9f]")


@dataclasses.dataclass
class Clip:
    """One annotated clip (times in seconds, from the aligned columns)."""

    clip_id: str
    movie: str
    start: float
    end: float
    sentence: str
    source: str  # annotation file name and line number


def parse_timestamp(ts: str) -> float:
    """``hh.mm.ss.mmm`` -> seconds (`schema.timestamp`: minutes and seconds below 60, at most a
    day); ValueError if malformed."""
    return schema.timestamp(ts)


def parse_clip_id(clip_id: str) -> tuple[str, float, float]:
    """``<movie>_<start>-<end>`` -> (movie, start s, end s); ValueError if malformed."""
    m = _CLIP.match(clip_id)
    if not m:
        raise ValueError(f"clip id {clip_id!r} is not <movie>_<hh.mm.ss.mmm>-<hh.mm.ss.mmm>")
    return m["movie"], parse_timestamp(m["start"]), parse_timestamp(m["end"])


def decode_line(raw: bytes) -> str | None:
    """UTF-8 if valid, else ISO-8859-1 unless that shows C1 controls (then None)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("iso-8859-1")
        return None if _C1.search(text) else text


def read_annotations(path: pathlib.Path, skips: collections.Counter) -> list[Clip]:
    """All usable rows of one annotation CSV; bad rows are counted by reason and warned."""
    clips = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            where = f"{path}:{n}"
            raw = raw.rstrip(b"\r\n")
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            line = decode_line(raw)
            if line is None:
                record(skips, "unknown_encoding", path, where,
                                   "neither UTF-8 nor ISO-8859-1 text")
                continue
            fields = line.split("\t")
            if len(fields) < 6 or not all(f.strip() for f in fields[:3]):
                record(skips, "missing_fields", path, where,
                       f"{len(fields)} tab-separated fields, need 6 (clip id and aligned "
                       "times non-empty)")
                continue
            clip_id, sa, ea = fields[0].strip(), fields[1], fields[2]
            sentence = "\t".join(fields[5:]).strip()
            try:
                movie, s_id, e_id = parse_clip_id(clip_id)
                start, end = parse_timestamp(sa), parse_timestamp(ea)
            except ValueError as e:
                record(skips, "malformed_csv_line", path, where, str(e))
                continue
            if end < start:
                record(skips, "malformed_csv_line", path, where, f"end {ea} before start {sa}")
                continue
            if not sentence:
                record(skips, "empty_sentence", path, where)
                continue
            clips.append(Clip(clip_id, movie, start, end, sentence, f"{path.name}:{n}"))
    return clips


def merge_duplicates(clips: list[Clip], skips: collections.Counter) -> list[Clip]:
    """One Clip per clip id (sentences of repeated rows joined in order)."""
    by_id: dict[str, Clip] = {}
    for c in clips:
        if c.clip_id in by_id:
            first = by_id[c.clip_id]
            first.sentence = f"{first.sentence} {c.sentence}"
            common.count(skips, f"{common.KEPT_PREFIX}duplicate_clip_merged",
                         f"{c.clip_id} ({c.source} merged into {first.source})")
        else:
            by_id[c.clip_id] = dataclasses.replace(c)
    return list(by_id.values())


def normalise_movie(name: str) -> str:
    """A movie name comparable across LSMDC folder names and meta.csv titles.

    ``1054_Harry_Potter_and_the_prisoner_of_azkaban`` and ``Harry Potter and the
    prisoner of azkaban`` both become ``harry potter and the prisoner of azkaban``;
    dashes count as spaces (``Spider-Man1`` = ``spider man1``), as upstream matches them.
    """
    name = re.sub(r"^\d{4}_", "", name.strip())
    return re.sub(r"[\s_-]+", " ", name).strip().casefold()


def read_meta(path: pathlib.Path, skips: collections.Counter | None = None) -> dict[str, dict]:
    """Sc2St `meta.csv` -> {normalised movie: {title, imdb, genres, colour}}.

    Tab-separated, no header: movie, IMDb URL, comma-separated genres, colour
    (``color``/``wb``), each line a `schema.MetaLine`. Some real lines separate fields by
    runs of spaces instead of tabs; those are split at the IMDb URL. Lines that still do not
    parse are counted as ``malformed_meta_line``; a movie given on two lines has no meta
    (which line is meant is unknown), each line counted as ``duplicate_meta_line``.
    """
    skips = skips if skips is not None else collections.Counter()
    out: dict[str, dict] = {}
    lines: dict[str, int] = {}
    text = path.read_bytes()
    for n, raw in enumerate(text.splitlines(), 1):
        line = decode_line(raw)
        if line is None or not line.strip():
            if line is None:
                record(skips, "malformed_meta_line", path, f"{path}:{n}", "encoding")
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != 4:
            m = re.match(r"^(.*?)\s+(https?://\S+)\s+(.*?)\s{2,}(\S+)\s*$", line)
            if not m:
                record(skips, "malformed_meta_line", path, f"{path}:{n}",
                       f"{len(fields)} fields")
                continue
            fields = [m[1], m[2], m[3], m[4]]
        try:
            row = check(schema.MetaLine, dict(zip(("title", "url", "genres", "colour"), fields)),
                        "malformed_meta_line")
        except Invalid as e:
            record(skips, e.reason, path, f"{path}:{n}", str(e))
            continue
        key = normalise_movie(row.title)
        if key in lines:
            if lines[key]:
                record(skips, "duplicate_meta_line", path, f"{path}:{lines[key]}", row.title)
            record(skips, "duplicate_meta_line", path, f"{path}:{n}", row.title)
            lines[key] = 0
            out.pop(key, None)
            continue
        lines[key] = n
        out[key] = {
            "title": row.title,
            "imdb": row.url,
            "genres": [g.strip() for g in row.genres.split(",") if g.strip()],
            "colour": row.colour,
        }
    return out


_FRAME = re.compile(r"^(\d+)\.(jpg|jpeg)$", re.IGNORECASE)


def list_frames(clip_dir: pathlib.Path) -> list[pathlib.Path]:
    """``<k>.jpg`` frames of one clip folder, in numeric order (other files ignored)."""
    if not clip_dir.is_dir():
        return []
    frames = [(int(m[1]), p) for p in clip_dir.iterdir() if (m := _FRAME.match(p.name))]
    return [p for _, p in sorted(frames)]
