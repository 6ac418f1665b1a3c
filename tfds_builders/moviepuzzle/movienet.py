"""MoviePuzzle's curation rules for raw MovieNet (§2.2, §2.3, Appendix A): pure functions.

No file system access here (see `movienet_build.py` for the reading and counting):

- `decode_subtitle(data)`: .srt bytes -> text (BOM, UTF-8, then cp1252, then latin-1).
- `parse_srt(text)`: cues (start, end seconds, text) in file order + malformed block count.
- `order_cues(cues)`: sorted cues, how many were out of order, how many overlap the previous.
- `clean_utterance(text)`: strips non-verbal cues (`[...]`, `(...)`, `// ...`, music notes
  and sung lines, speaker labels, markup) and non-ASCII; "" if nothing verbal is left.
- `english_stats` / `is_english`: the "English subtitles" rule.
- `pair_frames(times, cues)`: the cue whose span contains each frame time (start <= t < end).
- `keep_middle(cue_of)`: of several frames on one utterance keep only the middle one.
- `cut_clips(paired)`: greedy clips of 10-20 frames with >= 80% paired frames.
- `split_movies` / `split_clips`: train / val / test_in_domain / test_out_domain, 70/6/12/12.

Choices the paper leaves open are written in each docstring and in README.md.
"""

from __future__ import annotations

import dataclasses
import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from tfds_builders.schema import Invalid, clock

DEFAULT_FPS = 24.0  # MovieNet frame indices are of the source video; used when fps is unknown
MIN_FRAMES, MAX_FRAMES, MIN_PAIRED = 10, 20, 0.8
SPLITS = ("train", "val", "test_in_domain", "test_out_domain")
FRACTIONS = {"train": 0.70, "val": 0.06, "test_in_domain": 0.12, "test_out_domain": 0.12}
NONE, AMBIGUOUS = -1, -2  # `pair_frames` codes: no cue, inside two or more overlapping cues


@dataclasses.dataclass(frozen=True)
class Cue:
    start: float  # seconds
    end: float  # seconds, > start
    text: str  # raw text, lines joined with "\n"


# ----------------------------------------------------------------------------- subtitles


def decode_subtitle(data: bytes) -> tuple[str, str]:
    """(text, encoding used). A BOM wins (UTF-8, UTF-16 LE/BE, UTF-32); then UTF-8; then
    UTF-16 if the first bytes hold NULs (BOM-less UTF-16); then cp1252; latin-1 last (it
    decodes any byte string, so this never fails)."""
    boms = (
        (b"\xef\xbb\xbf", "utf-8-sig"),
        (b"\xff\xfe\x00\x00", "utf-32"),
        (b"\x00\x00\xfe\xff", "utf-32"),
        (b"\xff\xfe", "utf-16"),
        (b"\xfe\xff", "utf-16"),
    )
    encodings = [enc for bom, enc in boms if data.startswith(bom)][:1] + ["utf-8"]
    head = data[:400]
    if head.count(b"\x00") > len(head) // 4:
        encodings.append("utf-16-le" if head[1:2] == b"\x00" else "utf-16-be")
    for enc in [*encodings, "cp1252"]:
        try:
            return data.decode(enc), enc
        except UnicodeDecodeError:
            pass
    return data.decode("latin-1"), "latin-1"


_TIME = r"(\d+):(\d{1,2}):(\d{1,2})(?:[,.:](\d{1,3}))?"
_TIMING = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}")


def _seconds(h: str, m: str, s: str, ms: str | None) -> float:
    """Seconds of an SRT time (a `schema.Clock`: minutes and seconds below 60, at most a day;
    `tfds_builders.schema.Invalid` otherwise)."""
    frac = int(ms.ljust(3, "0")) / 1000.0 if ms else 0.0
    return clock("cue_malformed", hours=int(h), minutes=int(m), seconds=int(s), fraction=frac)


def parse_srt(text: str, problems: list[str] | None = None) -> tuple[list[Cue], int]:
    """(cues in file order, number of malformed blocks).

    A block is a run of non-blank lines: an optional counter line, a timing line
    `HH:MM:SS,mmm --> HH:MM:SS,mmm` ("." also accepted as the decimal mark) and text lines.
    A block without a timing line, with a time whose minutes or seconds pass 59 (or beyond a
    day), or whose end is not after its start, is malformed; `problems`, if given, gets one
    entry per malformed block naming it (`block 3 (line 9): why`).
    A block with a timing line but no text is a valid, empty cue.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    cues, bad = [], 0
    for n, (first, block) in enumerate(_blocks(text), 1):
        lines = [ln for ln in block if ln.strip()]
        at = next((i for i, ln in enumerate(lines) if _TIMING.match(ln)), None)
        why = ""
        if at is None or at > 1:
            why = "no timing line HH:MM:SS,mmm --> HH:MM:SS,mmm"
        else:
            g = _TIMING.match(lines[at]).groups()
            try:
                start, end = _seconds(*g[:4]), _seconds(*g[4:])
            except Invalid as e:
                why = f"timing {lines[at].strip()[:40]!r}: {e.message}"
            else:
                if not end > start:
                    why = f"timing {lines[at].strip()[:40]!r}: end not after start"
        if why:
            bad += 1
            if problems is not None:
                problems.append(f"block {n} (line {first}): {why}")
            continue
        cues.append(Cue(start, end, "\n".join(ln.strip() for ln in lines[at + 1 :])))
    return cues, bad


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each block: runs of lines between lines holding only
    spaces or tabs; blocks of whitespace alone are left out."""
    out: list[tuple[int, list[str]]] = []
    run: list[str] = []
    for i, ln in enumerate([*text.split("\n"), ""], 1):
        if ln.strip(" \t"):
            if not run:
                start = i
            run.append(ln)
        elif run:
            if any(x.strip() for x in run):
                out.append((start, run))
            run = []
    return out


def order_cues(cues: Sequence[Cue]) -> tuple[list[Cue], int, int]:
    """(cues sorted by (start, end), #cues starting before their predecessor in the file,
    #cues that start before the previous sorted cue ends, i.e. overlap it)."""
    unordered = sum(b.start < a.start for a, b in zip(cues, cues[1:]))
    ordered = sorted(cues, key=lambda c: (c.start, c.end))
    overlaps = sum(b.start < a.end for a, b in zip(ordered, ordered[1:]))
    return ordered, unordered, overlaps


_PUNCT = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
     "\u2026": "...", "\u00a0": " "}
)
_MARKUP = re.compile(r"<[^>]*>|\{[^}]*\}")  # HTML-ish tags (<i>), ASS overrides ({\an8})
_BRACKETS = re.compile(r"\[[^\]]*(?:\]|$)|\([^)]*(?:\)|$)")  # [Door Opens], (laughs), unclosed
_MUSIC = "\u266a\u266b\u266c\u2669#"  # music notes and '#': sung lines
_SPEAKER = re.compile(r"^[A-Z][A-Z0-9 .'\-]*:\s*")  # "JOHN:" / "MAN 2:" speaker labels


def clean_utterance(text: str) -> str:
    """The verbal content of a cue: ASCII, one line, "" if nothing verbal is left.

    Removed: markup; lines that start with "//" (the release's non-dialogue mark, e.g.
    `// [Radio Playing Salsa]`) and anything after "//" in a line; bracketed and parenthesised
    cues; lines holding a music note (sung lyrics; ♪ or '#'); all-caps speaker labels; leading
    dialogue dashes. Typographic quotes/dashes/ellipses become ASCII, accents are stripped by
    NFKD decomposition, remaining non-ASCII characters are dropped. A result without any
    letter or digit (e.g. "...") counts as empty.
    """
    text = _MARKUP.sub("", text.translate(_PUNCT))
    kept = []
    for line in text.split("\n"):
        line = line.split("//", 1)[0]
        if any(ch in line for ch in _MUSIC):
            continue
        line = _BRACKETS.sub(" ", line).strip()
        line = _SPEAKER.sub("", line)
        line = re.sub(r"^-+\s*", "", line)
        if line:
            kept.append(line)
    out = unicodedata.normalize("NFKD", " ".join(kept)).encode("ascii", "ignore").decode()
    out = re.sub(r"\s+", " ", out).strip()
    out = re.sub(r"^-+\s*", "", out)
    return out if re.search(r"[A-Za-z0-9]", out) else ""


STOPWORDS = frozenset(
    "the a an and or but of to in on at for with is are was were be been it its this that "
    "i you he she we they me him her us them my your his our their not no do does did have "
    "has had what who where when why how there here all so just can will would what's i'm "
    "don't it's you're".split()
)


def english_stats(texts: Sequence[str]) -> tuple[float, float, int]:
    """(share of ASCII letters among all letters, share of English stop words among words,
    number of words) over raw cue texts."""
    joined = " ".join(texts)
    letters = [ch for ch in joined if ch.isalpha()]
    ascii_share = sum(ch.isascii() for ch in letters) / max(len(letters), 1)
    words = re.findall(r"[a-z']+", joined.lower())
    stop_share = sum(w in STOPWORDS for w in words) / max(len(words), 1)
    return ascii_share, stop_share, len(words)


def is_english(
    texts: Sequence[str], min_ascii: float = 0.9, min_stopwords: float = 0.12, min_words: int = 5
) -> bool:
    """The "English subtitles" rule as a heuristic over the text (MovieNet has no language
    field): mostly ASCII letters and at least `min_stopwords` of the words English function
    words (running English text has ~40%; other Latin-script languages < 10%)."""
    ascii_share, stop_share, n = english_stats(texts)
    return n >= min_words and ascii_share >= min_ascii and stop_share >= min_stopwords


# ----------------------------------------------------------------------------- pairing


def pair_frames(times: Sequence[float], cues: Sequence[Cue]) -> np.ndarray:
    """cue_of[f]: the index of the cue whose span holds times[f] (start <= t < end), NONE if
    there is none, AMBIGUOUS if two or more (overlapping) cues hold it."""
    times = np.asarray(times, np.float64)
    starts = np.array([c.start for c in cues], np.float64)
    ends = np.array([c.end for c in cues], np.float64)
    inside = (starts[None, :] <= times[:, None]) & (times[:, None] < ends[None, :])
    count = inside.sum(1)
    out = np.where(count == 1, inside.argmax(1) if len(cues) else 0, NONE)
    return np.where(count > 1, AMBIGUOUS, out).astype(np.int64)


def keep_middle(cue_of: Sequence[int]) -> np.ndarray:
    """keep[f] False for frames that share an utterance with others but are not its middle
    frame: of m frames on one cue (in time order) the one at index (m - 1) // 2 is kept (the
    earlier of the two middle frames when m is even). Frames without a cue are kept."""
    cue_of = np.asarray(cue_of)
    keep = np.ones(len(cue_of), bool)
    for c in np.unique(cue_of[cue_of >= 0]):
        idx = np.flatnonzero(cue_of == c)
        keep[idx] = False
        keep[idx[(len(idx) - 1) // 2]] = True
    return keep


def cut_clips(
    paired: Sequence[bool],
    min_frames: int = MIN_FRAMES,
    max_frames: int = MAX_FRAMES,
    min_paired: float = MIN_PAIRED,
) -> list[tuple[int, int]]:
    """Greedy clip cutting over one contiguous run of frames: [(start, stop), ...].

    From the current frame, the longest window of `max_frames` .. `min_frames` frames with
    at least `min_paired` of its frames paired becomes a clip and cutting resumes after it;
    if no window qualifies, the current frame is left out and the next one is tried.
    App. A.3 says "more than 80%", but the public release was curated with >= 80 %: 31 of
    its 100 in-domain clips have exactly 80 % of their frames subtitled (none fewer), so
    exactly 80 % qualifies here, as in the release (tfds_builders/moviepuzzle/README.md).
    """
    paired = np.asarray(paired, bool)
    n = len(paired)
    csum = np.concatenate([[0], np.cumsum(paired)])
    clips, i = [], 0
    while i + min_frames <= n:
        for length in range(min(max_frames, n - i), min_frames - 1, -1):
            if csum[i + length] - csum[i] >= math.ceil(min_paired * length - 1e-9):
                clips.append((i, i + length))
                i += length
                break
        else:
            i += 1
    return clips


# ----------------------------------------------------------------------------- splits


def split_movies(clips_per_movie: dict[str, int], seed: int = 0,
                 heldout_fraction: float = FRACTIONS["test_out_domain"]) -> list[str]:
    """The held-out (test_out_domain) movies: movies in a seeded permutation of their sorted
    ids are added one by one when that brings the held-out clip count closer to
    `heldout_fraction` of all clips. With two or more movies with clips, at least one is
    held out and at least one stays in domain."""
    movies = sorted(m for m, n in clips_per_movie.items() if n > 0)
    if len(movies) < 2:
        return []
    total = sum(clips_per_movie[m] for m in movies)
    target = heldout_fraction * total
    order = [movies[i] for i in np.random.default_rng([seed, 6]).permutation(len(movies))]
    held, have = [], 0
    for m in order:
        n = clips_per_movie[m]
        if abs(have + n - target) < abs(have - target) and len(held) < len(movies) - 1:
            held.append(m)
            have += n
    if not held:  # every movie alone overshoots: hold out the smallest
        held = [min(order, key=lambda m: (clips_per_movie[m], order.index(m)))]
    return sorted(held)


def _largest_remainder(quota: dict[str, float]) -> dict[str, int]:
    """Integers summing to round(sum(quota)), each floor or ceil of its quota."""
    base = {k: math.floor(v) for k, v in quota.items()}
    left = round(sum(quota.values())) - sum(base.values())
    for k in sorted(quota, key=lambda k: (-(quota[k] - base[k]), k))[: max(left, 0)]:
        base[k] += 1
    return base


def _spaced(candidates: list[int], k: int) -> list[int]:
    """k equally spaced members of `candidates` (centres of k equal parts)."""
    n = len(candidates)
    return [candidates[int((j + 0.5) * n / k)] for j in range(k)] if k else []


def split_clips(clips_per_movie: dict[str, int], seed: int = 0) -> dict[str, list[str]]:
    """Split name of every clip: {movie: [split of clip 0, clip 1, ...]} (clips in time order).

    Held-out movies (`split_movies`) give test_out_domain (~12% of clips). Of the in-domain
    movies' clips, val and test_in_domain take 6/88 and 12/88 (so 6% and 12% of all clips):
    the totals are rounded once and shared among movies by largest remainder (ties by movie
    id), and within a movie test_in_domain takes equally spaced clips, then val equally spaced
    ones of the rest; everything else is train.
    """
    held = set(split_movies(clips_per_movie, seed))
    inside = {m: n for m, n in clips_per_movie.items() if m not in held and n > 0}
    share = FRACTIONS["train"] + FRACTIONS["val"] + FRACTIONS["test_in_domain"]
    n_test = _largest_remainder(
        {m: n * FRACTIONS["test_in_domain"] / share for m, n in inside.items()})
    n_val = _largest_remainder({m: n * FRACTIONS["val"] / share for m, n in inside.items()})
    out: dict[str, list[str]] = {}
    for m, n in clips_per_movie.items():
        if m in held:
            out[m] = ["test_out_domain"] * n
            continue
        labels = ["train"] * n
        test = _spaced(list(range(n)), min(n_test.get(m, 0), n))
        for i in test:
            labels[i] = "test_in_domain"
        rest = [i for i in range(n) if labels[i] == "train"]
        for i in _spaced(rest, min(n_val.get(m, 0), len(rest))):
            labels[i] = "val"
        out[m] = labels
    return out


def split_movies_by_fraction(
    count_per_movie: dict[str, int], fractions: dict[str, float], seed: int = 0
) -> dict[str, str]:
    """Movie-disjoint splits ({movie: split}) for the synopsis pairs: movies in a seeded
    permutation of their sorted ids go one by one to the split furthest below its share
    (`fractions[split] * total - assigned`; ties by the order of `fractions`)."""
    movies = sorted(m for m, n in count_per_movie.items() if n > 0)
    total = sum(count_per_movie[m] for m in movies)
    have = dict.fromkeys(fractions, 0)
    out = {}
    for i in np.random.default_rng([seed, 7]).permutation(len(movies)):
        m = movies[int(i)]
        split = max(fractions, key=lambda s: fractions[s] * total - have[s])
        out[m] = split
        have[split] += count_per_movie[m]
    return out
