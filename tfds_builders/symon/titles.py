"""Movie keys from YouTube summary-video titles (SYMON, YMS) and movie names.

`movie_key(title)` -> `"<name>"` or `"<name> (<year>)"`, "" when nothing is left:

1. A year in brackets, "(2015)", is kept apart; every other bracketed part goes
   ("(Marvel Phase Two Recap)", "[Full Movie]"), as do "_BK" and ".mp4"-style file tails.
2. The title is cut into segments at " - ", ":", "|", " / " and runs of two or more spaces
   (YMS file names lost their colons and quotes to double spaces).
3. Recap tags are deleted inside every segment: "in N minutes", "(movie|film|story)
   recap(s|ped)", "summary", "explained", "ending explained", "spoiler alert(s)",
   "full movie", "video summary", "YouTube". A leading segment that held a tag is the
   channel ("Movie Spoiler Alerts - X", "Mystery Recapped: X") and goes when another
   segment is left; segments left empty, or with only generic words ("Movie", "Official")
   after their tags went, go.
4. A leading possessive segment ("Stephen King's  It") goes.
5. Sequel markers that the other naming of the same movie lacks: a number or "Ep(isode) N"
   ending a segment that another segment follows ("Avengers 2 - Age of Ultron" = "Avengers:
   Age of Ultron"), a number between two words ("Terminator 4 Salvation"), a final "1" or
   "Part 1" ("Mission Impossible 1", "Back to the Future Part 1"). Roman II-IX become digits.
6. Words: lower case, accents folded, "&" = "and", "v"/"versus" = "vs", apostrophes and
   hyphens joined ("Ant-Man" = "Antman"), articles (the, a, an) dropped; the name is the
   words concatenated ("guardiansofgalaxy").

Two keys name the same movie (`same_movie`) when their names are equal and their years
are equal or one of them has none. Different official names of one movie ("Captain America
(2011)" vs "Captain America: The First Avenger") are not merged: give such videos a
`movies.tsv` line. The function is idempotent (a key is its own key).
"""

from __future__ import annotations

import re
import unicodedata

_YEAR = re.compile(r"[(\[]\s*((?:19|20)\d\d)\s*[)\]]")
_BRACKETS = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_FILE_TAIL = re.compile(r"(?:_bk|\.(?:mp4|mkv|webm))\s*$", re.I)
_SEGMENTS = re.compile(r"\s+[-–—|/]\s+|\s*[:|]\s*|\s{2,}")
_TAGS = re.compile(
    r"\b(?:in\s+(?:under\s+)?\d+\s+min(?:ute)?s?|ending\s+explained|full\s+movie"
    r"|video\s+summary|spoilers?(?:\s+alerts?)?|youtube"
    r"|(?:(?:movie|film|story|plot|series|show)\s+)?(?:recap(?:s|ped)?|summary|explained))\b",
    re.I)
_POSSESSIVE = re.compile(r"^\S.*['’]s$")
_EPISODE = re.compile(r"(?:^|\s+)(?:ep|episode)\.?\s*(?:\d+|[ivx]+)$", re.I)
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "vi": "6", "vii": "7", "viii": "8", "ix": "9"}
_ARTICLES = frozenset({"the", "a", "an"})
_GENERIC = frozenset({"movie", "movies", "film", "films", "channel", "official", "video",
                      "videos", "the", "a", "full", "hd", "new"})  # what tags leave of a channel


def _words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = text.replace("&", " and ").replace("’", "'")
    text = re.sub(r"(?<=\w)['-](?=\w)", "", text)  # ant-man, king's
    words = re.findall(r"[a-z0-9]+", text)
    words = [_ROMAN.get(w, w) for w in words]
    return ["vs" if w in ("v", "versus") else w for w in words]


def _segments(title: str) -> list[str]:
    """Step 2-4: the title's segments without channel, tag and possessive segments."""
    segs = [s.strip() for s in _SEGMENTS.split(title)]
    tagged = [bool(_TAGS.search(s)) for s in segs]
    segs = [_TAGS.sub(" ", s).strip(" -–—") for s in segs]
    segs = ["" if t and set(_words(s)) <= _GENERIC else s for s, t in zip(segs, tagged)]
    if tagged and tagged[0] and any(segs[1:]):
        segs[0] = ""  # the channel's name
    segs = [s for s in segs if _words(s)]
    if len(segs) > 1 and _POSSESSIVE.match(segs[0]):
        segs = segs[1:]
    return segs


def _name(segs: list[str]) -> str:
    """Step 5-6: sequel markers dropped, words joined."""
    out: list[str] = []
    for i, seg in enumerate(segs):
        if i + 1 < len(segs):
            seg = _EPISODE.sub("", seg)
            seg = re.sub(r"(?<!part)(?<!chapter)\s+\d+$", "", seg, flags=re.I)
        words = _words(seg)
        words = [w for j, w in enumerate(words)
                 if not (w.isdigit() and 0 < j < len(words) - 1 and len(w) < 3
                         and words[j - 1] not in ("part", "chapter", "vol", "episode"))]
        out += words
    if out[-2:] in (["part", "1"], ["part", "one"], ["chapter", "1"]):
        out = out[:-2]
    elif len(out) > 1 and out[-1] == "1":
        out = out[:-1]
    return "".join(w for w in out if w not in _ARTICLES)


def movie_key(title: str) -> str:
    """`"<name>"` or `"<name> (<year>)"` of a video title or movie name; "" if nothing is left
    (rules in the module docstring)."""
    title = unicodedata.normalize("NFKC", str(title)).replace("\t", " ")
    years = _YEAR.findall(title)
    title = _FILE_TAIL.sub("", _BRACKETS.sub("  ", title))
    name = _name(_segments(title))
    if not name:
        return ""
    return f"{name} ({years[-1]})" if years else name


def split_key(key: str) -> tuple[str, str]:
    """(name, year or "") of a key."""
    m = re.fullmatch(r"(.*) \(((?:19|20)\d\d)\)", key)
    return (m.group(1), m.group(2)) if m else (key, "")


def same_movie(a: str, b: str) -> bool:
    """Equal names and equal years, or a year missing on one side."""
    (na, ya), (nb, yb) = split_key(a), split_key(b)
    return bool(na) and na == nb and (ya == yb or not ya or not yb)


def merge(keys: list[str]) -> dict[str, str]:
    """key -> the movie it merges into: a key without a year joins the one yeared key of its
    name (it stays apart when the name has several years, e.g. two "Ghostbusters")."""
    years: dict[str, set[str]] = {}
    for k in keys:
        n, y = split_key(k)
        years.setdefault(n, set())
        if y:
            years[n].add(y)
    out = {}
    for k in keys:
        n, y = split_key(k)
        out[k] = k if y or len(years[n]) != 1 else f"{n} ({next(iter(years[n]))})"
    return out
