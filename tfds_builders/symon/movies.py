"""Movie identity of SYMON videos, from what the release tells users to download.

Each video gets `movie_id` (a display name), `movie_key` (`titles.movie_key`, merged over
the release so a key without a year joins the one yeared key of its name; "" when the
movie is unknown) and `movie_source`, the first of:

  movies.tsv   `<video_id>\\t<movie>` in manual_dir (the user's word: `movie_id` verbatim)
  info.json    yt-dlp's `info/<id>.info.json` (`--write-info-json`): a "Movie name: X" /
               "Movie: X" / "Film: X" line of its description, else its title
  description  yt-dlp's `info/<id>.description` (`--write-description`, the command the
               SYMON README gives): such a line
  narration    the title the narrator announces ("a film called X", `narration.py`)
  ""           unknown: the video is a movie of its own (`movie_id` = its id)

Counted in the build summary: `movie_source:<source>` per video; bad input, each named in
a warning (the first few and the total when many): `movies_tsv:bad_line`,
`movies_tsv:unknown_video` (a line naming a video that is not in the release),
`info_json:bad_json`, `info_json:bad_field` (a title or description that is not a string),
`info_json:duplicate_key`, `info_json:no_title`, `description:unreadable` (not UTF-8),
`movie:title_normalises_to_nothing` (a title, movie line or movies.tsv name that is only
channel names, recap tags and punctuation, e.g. "Movie Recap": the video takes the next
source).
"""

from __future__ import annotations

import collections
import logging
import pathlib
import re

from tfds_builders.schema import Invalid, Unreadable, check, first_line, load_json, read_text
from tfds_builders.symon import titles
from tfds_builders.symon.schema import InfoJson

log = logging.getLogger(__name__)
SOURCES = ("movies.tsv", "info.json", "description", "narration")
_MOVIE_LINE = re.compile(r"^[^\w\n]*(?:movie|film)(?:\s*(?:name|title))?\s*[:：]\s*(.+?)\s*$",
                         re.I | re.M)
_SHOWN = 5


def _warn(skips: collections.Counter, reason: str, named: list[str]) -> None:
    """Counts `named` under `reason` and warns once with the first few of them."""
    if named:
        skips[reason] += len(named)
        more = f" (first {_SHOWN} of {len(named)})" if len(named) > _SHOWN else ""
        log.warning("symon %s%s: %s", reason, more, "; ".join(named[:_SHOWN]))


def read_movies_tsv(path: pathlib.Path, ids: set[str], skips: collections.Counter
                    ) -> dict[str, str]:
    """`<video_id>\\t<movie>` lines (blank and `#` lines ignored) of the videos in `ids`."""
    out, bad, unknown = {}, [], []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            bad.append(f"{path}:{n} {line[:60]!r}")
            continue
        vid = parts[0].strip()
        if vid not in ids:
            unknown.append(f"{path}:{n} {vid}")
            continue
        out[vid] = parts[1].strip()
    _warn(skips, "movies_tsv:bad_line", bad)
    _warn(skips, "movies_tsv:unknown_video", unknown)
    return out


def _movie_line(text: str) -> str:
    m = _MOVIE_LINE.search(text or "")
    return m.group(1) if m else ""


def _info_json(path: pathlib.Path, problems: dict[str, list[str]]) -> InfoJson | None:
    """The `schema.InfoJson` of a yt-dlp info file, or None with the problem named:
    `info_json:bad_json` (not a JSON object), `info_json:bad_field` (a title or description
    that is not a string), `info_json:duplicate_key`."""
    try:
        return check(InfoJson, load_json(path), "bad_field")
    except Unreadable as e:
        problems["info_json:bad_json"].append(first_line(e)[:120])
    except Invalid as e:
        reason = "bad_json" if not e.where else e.reason
        problems[f"info_json:{reason}"].append(f"{path} ({str(e)[:80]})")
    return None


def from_download(root: pathlib.Path, vid: str, problems: dict[str, list[str]]
                  ) -> tuple[str, str, str]:
    """(movie_id, movie_key, source) from yt-dlp's files in `root/info/`, or ("", "", "")."""
    info = root / "info" / f"{vid}.info.json"
    candidates: list[tuple[str, str, str]] = []  # (text, source, what)
    if info.is_file():
        meta = _info_json(info, problems)
        line = _movie_line(meta.description or "") if meta else ""
        if line:
            candidates.append((line, "info.json", f"{info} description"))
        title = (meta.title or "").strip() if meta else ""
        if title:
            candidates.append((title, "info.json", f"{info} title"))
        elif meta:
            problems["info_json:no_title"].append(str(info))
    desc = root / "info" / f"{vid}.description"
    if desc.is_file():
        try:
            line = _movie_line(read_text(desc))
        except Unreadable as e:
            problems["description:unreadable"].append(first_line(e)[:120])
            line = ""
        if line:
            candidates.append((line, "description", str(desc)))
    for text, source, what in candidates:
        key = titles.movie_key(text)
        if key:
            return text, key, source
        problems["movie:title_normalises_to_nothing"].append(f"{what} {text[:60]!r}")
    return "", "", ""


def assign(videos: list[dict], root: pathlib.Path, skips: collections.Counter,
           release_ids: set[str]) -> None:
    """Sets `movie_id`, `movie_key`, `movie_source` of every video (module docstring);
    `release_ids`: every video of the release, usable or not (what movies.tsv may name)."""
    tsv = root / "movies.tsv"
    movies = read_movies_tsv(tsv, release_ids, skips) if tsv.is_file() else {}
    problems: dict[str, list[str]] = collections.defaultdict(list)
    for v in videos:
        vid = v["video_id"]
        found = ("", "", "")
        if vid in movies:
            key = titles.movie_key(movies[vid])
            if key:
                found = (movies[vid], key, "movies.tsv")
            else:
                problems["movie:title_normalises_to_nothing"].append(
                    f"{tsv} {vid} {movies[vid][:60]!r}")
        if not found[2]:
            found = from_download(root, vid, problems)
        if not found[2] and v.get("title"):
            key = titles.movie_key(v["title"])
            if key:
                found = (v["title"], key, "narration")
            else:
                problems["movie:title_normalises_to_nothing"].append(
                    f"{vid} narration {v['title'][:60]!r}")
        v["movie_id"], v["movie_key"], v["movie_source"] = found if found[2] else (vid, "", "")
        skips[f"movie_source:{v['movie_source'] or 'unknown'}"] += 1
    for reason, named in sorted(problems.items()):
        _warn(skips, reason, named)
    merged = titles.merge([v["movie_key"] for v in videos if v["movie_key"]])
    for v in videos:
        v["movie_key"] = merged.get(v["movie_key"], "")
