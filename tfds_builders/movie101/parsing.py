"""Pure parsing helpers for the Movie101 releases (v1 and v2); no TFDS here.

Every reader returns what it could use plus `(reason, path, detail)` problems that the
builder counts (`tfds_builders.common.record_skip`); nothing is dropped silently. The file
formats are typed in `schema.py`.
"""

from __future__ import annotations

import hashlib
import pathlib
import re
from typing import Any

from tfds_builders import schema as S
from tfds_builders.movie101 import schema

ROLE_MARK = re.compile(r"\[([^\[\]]+)\]")  # v2: `[Name]` marks a role mention
POINTER = re.compile(r"@(\d+)")  # v1 narration_role and our pointer text: `@k` = cast index k
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
SPLIT_BUCKETS = (("train", 80), ("val", 90), ("test", 100))  # v2 movie-level hash split


class ParseError(ValueError):
    """One unusable input value; the message is the skip detail."""


def parse_time(value: Any) -> float:
    """Seconds from a number, a numeric string ("51") or `H:M:S` / `M:S` (not zero-padded;
    minutes and seconds below 60, at most a day: `schema.Time`), or a ParseError."""
    try:
        return schema.seconds(value)
    except ValueError as e:
        raise ParseError(str(e)) from None


def parse_span(start: Any, end: Any) -> tuple[float, float, bool]:
    """(start, end, swapped): times out of order are swapped and reported."""
    a, b = parse_time(start), parse_time(end)
    if b < a:
        return b, a, True
    return a, b, False


def language_mix(text: str, lang: str) -> bool:
    """True if `text` (expected language `lang`: zh|en) contains the other script."""
    body = ROLE_MARK.sub("", text)
    if lang == "en":
        return bool(_CJK.search(body))
    return bool(_LATIN_WORD.search(body))


def movie_split(movie_id: str) -> str:
    """Deterministic v2 movie-level split: sha256(movie_id) mod 100 -> train <80, val <90, test.

    Depends only on the id string (not on which other movies are present), so adding movies
    never moves an existing one.
    """
    bucket = int(hashlib.sha256(movie_id.encode()).hexdigest()[:8], 16) % 100
    return next(name for name, hi in SPLIT_BUCKETS if bucket < hi)


def load_json(path: pathlib.Path) -> Any:
    """JSON (duplicate keys kept as `tfds_builders.schema.Duplicate`, refused by `check`) or a
    ParseError naming the file."""
    try:
        return S.load_json(path)
    except S.Unreadable as e:
        raise ParseError(str(e)) from None


# ----------------------------------------------------------------------------- v2


def read_v2_cast(meta: Any, path: pathlib.Path) -> dict:
    """Movie metadata (`schema.V2Meta`): {genre: [str], title, cast: [{id, name, name_en,
    actor}]} in file order; a ParseError naming the file and key path when it does not
    validate (one bad role refuses the movie: dropping it would renumber the cast)."""
    try:
        m = S.check(schema.V2Meta, meta, "bad_meta")
    except S.Invalid as e:
        raise ParseError(f"{path}: {e}") from None
    cast = [dict(id=rid, name=(r.role or "").strip(), name_en=(r.role_en or "").strip(),
                 actor=(r.actor or "").strip()) for rid, r in m.role.items()]
    return dict(genre=m.genre, title=m.title or "", cast=cast)


def parse_v2_line(line: str) -> tuple[float, float, str, bool]:
    """`H:M:S|H:M:S|text` -> (start, end, text, swapped)."""
    parts = line.rstrip("\r\n").split("|", 2)
    if len(parts) != 3:
        raise ParseError(f"expected 'H:M:S|H:M:S|text', got {line.strip()[:60]!r}")
    start, end, swapped = parse_span(parts[0], parts[1])
    text = parts[2].strip()
    if not text:
        raise ParseError("empty narration text")
    return start, end, text, swapped


def resolve_roles(text: str, names: list[str], aliases: list[str] | None = None
                  ) -> tuple[str, str, list[int], list[str]]:
    """v2 `[Name]` marks -> (plain text, pointer text with `@k`, cast indices, unknown names).

    `names` are the cast names in the narration's language (index k = cast position);
    `aliases` (the other language) also resolve. A name not in the cast stays as plain
    text in both outputs and is returned in `unknown`.
    """
    lookup: dict[str, int] = {}
    for k, n in enumerate(names):
        if n:
            lookup.setdefault(n.strip().lower(), k)
    for k, n in enumerate(aliases or []):
        if n:
            lookup.setdefault(n.strip().lower(), k)
    roles: list[int] = []
    unknown: list[str] = []

    def plain(m: re.Match) -> str:
        return m.group(1).strip()

    def pointer(m: re.Match) -> str:
        name = m.group(1).strip()
        k = lookup.get(name.lower())
        if k is None:
            unknown.append(name)
            return name
        roles.append(k)
        return f"@{k}"

    pointer_text = ROLE_MARK.sub(pointer, text)
    plain_text = ROLE_MARK.sub(plain, text)
    return plain_text, pointer_text, roles, unknown


# ----------------------------------------------------------------------------- v1


def v1_cast(roles: dict[str, Any]) -> list[dict]:
    """A movie's validated meta_anno.json roles (role id -> `schema.V1Role`) as an ordered
    cast list."""
    return [dict(id=rid, name=r.rolename.strip(), name_en="", actor=r.name.strip())
            for rid, r in roles.items()]


def expand_pointers(pointer_text: str, names: list[str]) -> tuple[str, list[int], list[int]]:
    """`@k` -> cast name k; returns (text, valid indices, out-of-cast indices kept as `@k`)."""
    roles, bad = [], []

    def sub(m: re.Match) -> str:
        k = int(m.group(1))
        if k < len(names) and names[k]:
            roles.append(k)
            return names[k]
        bad.append(k)
        return m.group(0)

    return POINTER.sub(sub, pointer_text), roles, bad


def merge_paragraphs(narrations: list[tuple[float, float, str]],
                     lines: list[tuple[float, float]], gap: float = 5.0
                     ) -> list[tuple[float, float, str]]:
    """Movie101-N paragraphs from raw narration clips and actor lines (paper §3.1).

    Our reading: actor lines whose gap to the previous line is below `gap` seconds belong
    to one dialogue (§3.1: strictly shorter than 5 s; a gap of exactly 5 s starts a new
    one); a dialogue spans its first line's start to its last line's end. The
    narration clips between two consecutive dialogues (start >= the previous dialogue's
    end and start < the next dialogue's start) are concatenated, in time order, into one
    paragraph spanning the first clip's start to the last clip's end. Narrations before the
    first or after the last dialogue form a paragraph too. Texts are joined without a
    separator when the previous one ends in CJK punctuation, else with a space.
    """
    lines = sorted(lines)
    dialogues: list[list[float]] = []
    for s, e in lines:
        if dialogues and s - dialogues[-1][1] < gap:
            dialogues[-1][1] = max(dialogues[-1][1], e)
        else:
            dialogues.append([s, e])
    bounds = [d[0] for d in dialogues]
    groups: dict[int, list[tuple[float, float, str]]] = {}
    for s, e, t in sorted(narrations):
        k = sum(1 for b in bounds if b <= s)  # number of dialogues starting at or before s
        groups.setdefault(k, []).append((s, e, t))
    out = []
    for k in sorted(groups):
        g = groups[k]
        text = g[0][2]
        for _, _, t in g[1:]:
            text += t if (text and (_CJK.search(text[-1]) or text[-1] in "，。！？；：、")) \
                else " " + t
        out.append((g[0][0], max(e for _, e, _ in g), text))
    return out
