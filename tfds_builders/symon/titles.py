"""Movie keys from YouTube summary-video titles (SYMON, YMS) and movie names, and the rules by
which two titles name the same movie.

`parse(title)` -> `Title` (words per segment, year); `movie_key(title)` is its key,
`"<name>"` or `"<name> (<year>)"`, "" when nothing is left:

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
   Age of Ultron"), a number between two words ("Terminator 4 Salvation"), "Part 1"
   anywhere ("Back to the Future Part 1", "Mockingjay - Part 1"), a final "1" ("Mission
   Impossible 1"). Roman II-IX become digits.
6. Words: lower case, accents folded, "&" = "and", "v"/"versus" = "vs", apostrophes and
   hyphens joined ("Ant-Man" = "Antman"), articles (the, a, an) dropped, letters of any
   script kept; the name is the words concatenated ("guardiansofgalaxy").

`match(a, b)`: the rule by which two titles name the same movie, "" when none. Years must
agree where both titles have one; then, first that applies:

  exact      equal names (`same_movie`)
  reordered  the same words in another order, >= 2 words ("Catching Fire - The Hunger
             Games" = "The Hunger Games: Catching Fire")
  contained  one title, of >= 2 content words (not numbers, "part", "of", ...), is the
             last segment(s) of the other ("Man of Steel" = "Superman - Man of Steel"), or
             its first segment(s) when both have the same year ("Catching Fire (2013)" =
             "Catching Fire - The Hunger Games (2013)")
  one_edit   >= 2 words, all equal but one pair of words of >= 7 letters one letter apart,
             not a plural "s" ("Judgement" = "Judgment", YMS's typo "Dealthly" = "Deathly")

Numbers and "Part N" are words every rule compares, so sequels never match ("Iron Man" vs
"Iron Man 2", "Deathly Hallows Part 1" vs "Part 2"), nor do titles of different years. A
title with no year can match more than one movie ("The Last Stand" is "X-Men - The Last
Stand (2006)" by `contained`): the YMS exclusion removes such a video (a test movie must
not leak into training) and logs every removal that no exact match made.

`ALIASES`: official titles of YMS movies whose YMS spelling hides them, facts no rule can
know ("Captain America (2011)" is "Captain America: The First Avenger", not "Civil War").
`group(titles)`: the movies of a title list (`Movie`): titles joined by `match` (or an
alias); a title without a year joins only when it matches exactly one movie with a year.
"""

from __future__ import annotations

import dataclasses
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
_NOT_CONTENT = frozenset({"part", "chapter", "episode", "ep", "vol", "volume", "of", "and",
                          "in", "on", "to", "vs"})
RULES = ("exact", "alias", "reordered", "contained", "one_edit")  # best first

ALIASES: dict[str, tuple[str, ...]] = {  # YMS movie key -> its official title(s)
    "captainamerica (2011)": ("Captain America: The First Avenger (2011)",),
    "x2xmen2 (2003)": ("X2 (2003)", "X2: X-Men United (2003)", "X-Men 2 (2003)"),
    "xmenwolverine (2013)": ("The Wolverine (2013)",),
    "insurgent (2015)": ("The Divergent Series: Insurgent (2015)",),
    "rogueone (2016)": ("Rogue One: A Star Wars Story (2016)",),
}


@dataclasses.dataclass(frozen=True)
class Title:
    """A title's normalised words per segment and its year ("" when it has none)."""
    segments: tuple[tuple[str, ...], ...]
    year: str = ""

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(w for seg in self.segments for w in seg)

    @property
    def name(self) -> str:
        return "".join(self.words)

    @property
    def key(self) -> str:
        name = self.name
        return f"{name} ({self.year})" if name and self.year else name


def _words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = text.replace("&", " and ").replace("’", "'")
    text = re.sub(r"(?<=\w)['-](?=\w)", "", text)  # ant-man, king's
    words = [_ROMAN.get(w, w) for w in re.findall(r"[^\W_]+", text)]
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


def _segment_words(segs: list[str]) -> tuple[tuple[str, ...], ...]:
    """Step 5-6: sequel markers dropped, words per segment."""
    out: list[tuple[str, ...]] = []
    for i, seg in enumerate(segs):
        if i + 1 < len(segs):
            seg = _EPISODE.sub("", seg)
            seg = re.sub(r"(?<!part)(?<!chapter)\s+\d+$", "", seg, flags=re.I)
        words = _words(seg)
        words = [w for j, w in enumerate(words)
                 if not (w.isdigit() and 0 < j < len(words) - 1 and len(w) < 3
                         and words[j - 1] not in ("part", "chapter", "vol", "episode"))]
        kept: list[str] = []
        for w in words:
            if w in ("1", "one") and kept and kept[-1] in ("part", "chapter"):
                kept.pop()  # "Part 1"
            else:
                kept.append(w)
        kept = [w for w in kept if w not in _ARTICLES]
        if kept:
            out.append(tuple(kept))
    if out and sum(map(len, out)) > 1 and out[-1][-1] == "1":
        out[-1] = out[-1][:-1]
        out = [s for s in out if s]
    return tuple(out)


def parse(title: str) -> Title:
    """The `Title` of a video title or movie name (rules in the module docstring)."""
    title = unicodedata.normalize("NFKC", str(title)).replace("\t", " ")
    years = _YEAR.findall(title)
    title = _FILE_TAIL.sub("", _BRACKETS.sub("  ", title))
    segments = _segment_words(_segments(title))
    return Title(segments, years[-1] if years and segments else "")


def movie_key(title: str) -> str:
    """`"<name>"` or `"<name> (<year>)"` of a video title or movie name; "" if nothing is left
    (rules in the module docstring). Idempotent: a key is its own key."""
    return parse(title).key


def split_key(key: str) -> tuple[str, str]:
    """(name, year or "") of a key."""
    m = re.fullmatch(r"(.*) \(((?:19|20)\d\d)\)", key)
    return (m.group(1), m.group(2)) if m else (key, "")


def same_movie(a: str, b: str) -> bool:
    """Equal names and equal years, or a year missing on one side (rule `exact` on keys)."""
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


def title_of(display: str, key: str) -> Title:
    """The `Title` of a record's movie (`movie_id`, `movie_key`): the words of its display name
    when they make the key's name, else the key as one word; the year is the key's (which
    may come from another video of the movie, `merge`)."""
    name, year = split_key(key)
    t = parse(display)
    if t.name != name:
        t = parse(name)
    return dataclasses.replace(t, year=year)


def _content(words: tuple[str, ...]) -> list[str]:
    return [w for w in words if not w.isdigit() and w not in _NOT_CONTENT]


def _part_of(short: Title, long: Title) -> bool:
    """`short` has >= 2 content words and is the last segment(s) of `long`, or its first
    segment(s) when both have the same year ("Catching Fire (2013)" of "Catching Fire - The
    Hunger Games (2013)"; without the year a franchise name would match its sequels)."""
    if len(_content(short.words)) < 2:
        return False
    segs = long.segments
    if any("".join(w for seg in segs[k:] for w in seg) == short.name for k in range(1, len(segs))):
        return True
    return bool(short.year and short.year == long.year) and any(
        "".join(w for seg in segs[:k] for w in seg) == short.name for k in range(1, len(segs)))


def _one_letter_apart(x: str, y: str) -> bool:
    if len(x) > len(y):
        x, y = y, x
    if len(y) - len(x) > 1:
        return False
    i = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), len(x))
    return x[i + 1:] == y[i + 1:] if len(x) == len(y) else x[i:] == y[i + 1:]


def _one_edit(a: Title, b: Title) -> bool:
    wa, wb = a.words, b.words
    if len(wa) != len(wb) or len(wa) < 2:
        return False
    diff = [(x, y) for x, y in zip(wa, wb) if x != y]
    if len(diff) != 1:
        return False
    x, y = diff[0]
    return (min(len(x), len(y)) >= 7 and x.isalpha() and y.isalpha()
            and x + "s" != y and y + "s" != x and _one_letter_apart(x, y))


def match(a: Title, b: Title) -> str:
    """The rule (`RULES`) by which `a` and `b` name the same movie, "" when none."""
    if not a.name or not b.name or (a.year and b.year and a.year != b.year):
        return ""
    if a.name == b.name:
        return "exact"
    if len(a.words) > 1 and sorted(a.words) == sorted(b.words):
        return "reordered"
    if _part_of(a, b) or _part_of(b, a):
        return "contained"
    return "one_edit" if _one_edit(a, b) else ""


def names(title: str) -> list[tuple[Title, bool]]:
    """(Title, is an alias) of a title and of its `ALIASES`."""
    t = parse(title)
    return [(t, False)] + [(parse(a), True) for a in ALIASES.get(t.key, ())]


def _rule(x: tuple[Title, bool], y: tuple[Title, bool]) -> str:
    rule = match(x[0], y[0])
    return "alias" if rule == "exact" and (x[1] or y[1]) else rule


def _best(rules: list[str]) -> str:
    return min((r for r in rules if r), key=RULES.index, default="")


@dataclasses.dataclass
class Movie:
    """One movie of a title list: its key (the name of its first title, with the year of
    any of its titles), its titles, their names with the title each is of (`names`), and the
    non-exact matches that joined its titles ("'title' ~ 'title' (rule)")."""
    key: str
    titles: list[str]
    names: list[tuple[Title, bool, str]]
    joined_by: list[str]


def group(titles: list[str]) -> list[Movie]:
    """The movies of a title list (module docstring), in the order of their first title;
    titles that normalise to nothing are left out."""
    titles = [t for t in titles if parse(t).name]
    ns = [names(t) for t in titles]
    years = [next((n.year for n, _ in x if n.year), "") for x in ns]
    parent = list(range(len(titles)))
    joins: dict[int, list[str]] = {}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int, rule: str) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[rj] = ri
            joins[ri] = joins.pop(ri, []) + joins.pop(rj, [])
            if rule != "exact":
                joins[ri].append(f"{titles[i]!r} ~ {titles[j]!r} ({rule})")

    rules = {(i, j): r for i in range(len(titles)) for j in range(i + 1, len(titles))
             if (r := _best([_rule(x, y) for x in ns[i] for y in ns[j]]))}
    for (i, j), rule in rules.items():  # the same year, or neither has one
        if years[i] == years[j]:
            join(i, j, rule)
    comps: dict[int, list[int]] = {}
    for i in range(len(titles)):
        comps.setdefault(find(i), []).append(i)
    for idx in list(comps.values()):  # a movie without a year joins the one yeared it matches
        if years[idx[0]]:
            continue
        hits = {find(b if a in idx else a): (a, b, r) for (a, b), r in rules.items()
                if (a in idx) != (b in idx) and years[b if a in idx else a]}
        if len(hits) == 1:
            join(*next(iter(hits.values())))
    members: dict[int, list[int]] = {}
    for i in range(len(titles)):
        members.setdefault(find(i), []).append(i)
    movies = []
    for root, idx in members.items():
        all_names = [(n, alias, titles[i]) for i in idx for n, alias in ns[i]]
        name = ns[idx[0]][0][0].name
        year = next((years[i] for i in idx if years[i]), "")
        movies.append(Movie(f"{name} ({year})" if year else name, [titles[i] for i in idx],
                            all_names, joins.get(root, [])))
    return movies


def movies_of(title: Title, movies: list[Movie]) -> list[tuple[Movie, str, str]]:
    """(movie, rule, the movie's title it matched) of every movie `title` names, the best
    rule per movie."""
    out = []
    for movie in movies:
        hits = [(_rule((title, False), (n, alias)), listed) for n, alias, listed in movie.names]
        hits = [h for h in hits if h[0]]
        if hits:
            rule, listed = min(hits, key=lambda h: RULES.index(h[0]))
            out.append((movie, rule, listed))
    return out
