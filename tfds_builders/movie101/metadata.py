"""What Movie101 examples take from the releases' metadata beyond their own annotation files:
v1 genres from v2's per-movie metadata, and the cast members a grounding query names."""

from __future__ import annotations

import collections
import pathlib

from tfds_builders import common
from tfds_builders.movie101 import parsing

V2_META_DIRS = ("metadata/meta", "../v2/metadata/meta", "../Movie101v2/data/metadata/meta")


def v1_genres(root: pathlib.Path, movies: list[str], skips: collections.Counter
              ) -> dict[str, list[str]]:
    """Genres of v1 movies from the v2 release's metadata/meta/<movie>.json (same ids; v1
    ships no genre file: upstream's tag files are commented out and unreleased). Looked for
    in V2_META_DIRS relative to the v1 manual_dir; movies without one get [] (counted
    `kept_v1_without_genre`; when none has one the log says g is unavailable)."""
    d = next((root / p for p in V2_META_DIRS if (root / p).is_dir()), None)
    out: dict[str, list[str]] = {}
    if d is not None:
        for mid in movies:
            p = d / f"{mid}.json"
            if p.is_file():
                try:
                    out[mid] = parsing.read_v2_cast(parsing.load_json(p), p)["genre"]
                except parsing.ParseError as e:
                    common.record_skip(skips, "bad_meta", p, str(e))
    missing = sum(1 for m in movies if not out.get(m))
    skips["kept_v1_without_genre"] += missing
    if missing == len(movies):
        common.log.warning("movie101 v1: no v2 metadata/meta/<movie>.json found (looked in %s "
                           "under %s): genre g is unavailable, every example has genre []",
                           ", ".join(V2_META_DIRS), root)
    elif missing:
        common.log.warning("movie101 v1: %d of %d movies have no v2 genre (genre [])",
                           missing, len(movies))
    return out


def query_roles(text: str, names: list[str]) -> list[int]:
    """Cast indices whose name occurs in `text`, in order of first occurrence (a name inside
    a longer matched name is not counted twice)."""
    found: list[tuple[int, int, int]] = []
    for k, nm in enumerate(names):
        if nm and nm in text:
            found.append((text.index(nm), -len(nm), k))
    out, covered = [], []
    for pos, neg, k in sorted(found):
        if any(a <= pos < b for a, b in covered):
            continue
        covered.append((pos, pos - neg))
        out.append(k)
    return out
