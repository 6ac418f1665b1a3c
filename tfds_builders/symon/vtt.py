"""YouTube WebVTT -> timed words, with the auto-caption rolling duplicates removed.

YouTube serves two kinds of English captions, and SYMON's `timestamped_text/` holds both:

* auto captions (ASR, `align:start position:0%` cues): every line is shown twice.
  A long cue carries the PREVIOUS line followed by the new line with word-timing
  tags (`word<00:00:01.234><c> next</c>...`), then a ~10 ms cue repeats the
  finished line without tags. Words before the first tag start at the cue start.
* uploaded captions: plain cues, a sentence often split across cues, no tags.

Rolling-duplicate rule (one rule for both kinds): compare the cue's non-empty
lines (tags stripped) with the previous kept cue's lines; the longest prefix of
the current lines that equals a suffix of the previous lines is a repeat and is
dropped. A cue left with no new line is a rolling duplicate (counted, not a
defect). Word times: a tagged line gives each word its tag time (the first
words the cue start); an untagged new line spreads its words uniformly over the
cue by character offset. A word ends where the next word starts (the last word
of a cue at the cue end), but lasts at most 1.5 s (tags give only start times; a
pause after a sentence's last word is not part of the sentence).

Malformed cues are skipped with a reason (`bad_timing`: no timing line, or a time whose
minutes or seconds pass 59 or that lies beyond a day (`schema.py`); `end_before_start`,
`bad_word_timing`: tag times out of range, decreasing or outside the cue by > 1 s), each
named by file and line (`<id>.en.vtt:12 (cue 4: ...)`); rolling duplicates are information
(`noted`), not skips. NOTE/STYLE/REGION blocks are ignored. WebVTT requires cues in order
of start time; cues given out of order are read in that order (a stable sort) and noted
(`cue:out_of_order`, naming the first such cue): read as given, the rolling repeats survive
(each cue is compared with the one before it) and the words run backwards in time, so the
narration's sentences no longer match them.
"""

from __future__ import annotations

import collections
import dataclasses
import html
import os
import re

from tfds_builders import common
from tfds_builders.schema import Invalid
from tfds_builders.symon import schema

_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{3})"
_TIMING = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?$")
_TAG_TIME = re.compile(r"<(\d+:\d{2}:\d{2}[.,]\d{3}|\d{1,2}:\d{2}[.,]\d{3})>")
_ANY_TAG = re.compile(r"</?[^>]*>")
TOLERANCE = 1.0  # seconds a word tag may fall outside its cue
MAX_WORD = 1.5  # seconds: a word ends at the next word's start, at most this long


@dataclasses.dataclass
class Word:
    text: str
    start: float
    end: float


def parse_time(text: str) -> float:
    """`HH:MM:SS.mmm` or `MM:SS.mmm` -> seconds (`schema.Clock`: minutes and seconds below 60,
    at most a day; `tfds_builders.schema.Invalid` otherwise)."""
    nums = re.split(r"[:.,]", text)
    return schema.clock(tuple([None, *nums] if len(nums) == 3 else nums), "cue:bad_word_timing")


def _timing(line: str) -> tuple[float, float] | None:
    """(start, end) of a cue timing line; None when it is malformed or a time is out of
    range (minutes or seconds past 59, longer than a day)."""
    m = _TIMING.match(line)
    if not m:
        return None
    g = m.groups()
    try:
        return schema.clock(g[:4], "cue:bad_timing"), schema.clock(g[4:], "cue:bad_timing")
    except Invalid:
        return None


def _clean(text: str) -> str:
    return " ".join(html.unescape(_ANY_TAG.sub("", text)).split())


def _tagged_words(line: str, start: float, end: float) -> list[Word] | None:
    """Words of a line with timing tags; None if the tag times are inconsistent."""
    pieces = _TAG_TIME.split(line)  # [text, time, text, time, text, ...]
    try:
        times = [start] + [parse_time(t) for t in pieces[1::2]]
    except Invalid:  # a tag time out of range
        return None
    if any(b < a for a, b in zip(times, times[1:])) or any(
            t < start - TOLERANCE or t > end + TOLERANCE for t in times):
        return None
    words: list[Word] = []
    for t, text in zip(times, pieces[0::2]):
        for w in _clean(text).split():
            words.append(Word(w, t, t))
    return words


def _spread_words(lines: list[str], start: float, end: float) -> list[Word]:
    """Untagged lines: words spread uniformly over [start, end] by character offset."""
    text = " ".join(_clean(x) for x in lines)
    words, pos, total = [], 0, max(len(text), 1)
    for w in text.split():
        pos = text.index(w, pos)
        words.append(Word(w, start + (end - start) * pos / total, 0.0))
        pos += len(w)
    return words


def _blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each block of a document (blocks are separated by blank
    lines; line numbers count from 1 in the file)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    body = text.lstrip("\n")
    line = 1 + len(text) - len(body)
    out = []
    parts = re.split(r"(\n\n+)", body.rstrip("\n"))
    for block, sep in zip(parts[0::2], [*parts[1::2], ""]):
        out.append((line, block))
        line += block.count("\n") + len(sep)
    return out


def _start(block: str) -> float | None:
    """A cue block's start time (None: not a cue, or a malformed timing line)."""
    lines = block.split("\n")
    k = next((i for i, ln in enumerate(lines[:2]) if "-->" in ln), None)
    timing = _timing(lines[k]) if k is not None else None
    return None if timing is None else timing[0]


def _in_time_order(blocks: list[tuple[int, str]], skips: collections.Counter,
                   path: os.PathLike | str) -> list[tuple[int, str]]:
    """The blocks sorted by cue start (stable; a block without a valid timing stays after
    the cue before it); each cue that starts before an earlier one is noted."""
    keys, last, late = [], float("-inf"), 0
    for line, block in blocks:
        t = _start(block)
        if t is not None and t < last:
            late += 1
            if late == 1:
                common.log.warning("%s:%d: cue starts at %.3f s, before an earlier cue's "
                                   "%.3f s: cues read in time order", path, line, t, last)
        last = max(last, t) if t is not None else last
        keys.append(last if t is None else t)
    if late:
        common.note(skips, "cue:out_of_order", late, what=path)
        return [b for _, b in sorted(zip(keys, blocks), key=lambda kb: kb[0])]
    return blocks


def parse(text: str, skips: collections.Counter | None = None,
          path: os.PathLike | str = "<vtt>") -> list[Word]:
    """Timed words of a WebVTT document in reading order (duplicates removed).

    `skips` counts per reason: `cue:<reason>` for malformed cues, each named by `path` and
    its line, and the noted `cue:rolling_duplicate` for the removed repeats.
    """
    skips = skips if skips is not None else collections.Counter()
    blocks = _blocks(text)
    if not blocks or not blocks[0][1].lstrip("\ufeff").startswith("WEBVTT"):
        raise ValueError("not a WebVTT file (no WEBVTT header)")
    blocks = blocks[:1] + _in_time_order(blocks[1:], skips, path)
    words: list[Word] = []
    prev: list[str] = []

    def bad(reason: str, line: int, n: int, detail: str) -> None:
        common.record_skip(skips, f"cue:{reason}", f"{path}:{line}", f"cue {n}: {detail}")

    for n, (line, block) in enumerate(blocks[1:], 1):
        lines = block.split("\n")
        if lines[0].startswith(("NOTE", "STYLE", "REGION")):
            continue
        k = next((i for i, ln in enumerate(lines[:2]) if "-->" in ln), None)
        timing = _timing(lines[k]) if k is not None else None
        if timing is None:
            bad("bad_timing", line, n, "no timing line" if k is None else
                f"timing {lines[k].strip()[:40]!r} malformed or out of range")
            continue
        start, end = timing
        if end < start:
            bad("end_before_start", line + k, n, f"ends at {end:.3f} s before its start "
                f"{start:.3f} s")
            continue
        payload = [ln for ln in lines[k + 1:] if _clean(ln)]
        plain = [_clean(ln) for ln in payload]
        overlap = next((n for n in range(min(len(plain), len(prev)), 0, -1)
                        if plain[:n] == prev[-n:]), 0)
        new = payload[overlap:]
        if plain:
            prev = plain
        if not new:
            if plain:
                common.note(skips, "cue:rolling_duplicate", what=path)
            continue
        cue_words: list[Word] = []
        untagged: list[str] = []
        broken = None
        for ln in new:
            if _TAG_TIME.search(ln):
                tagged = _tagged_words(ln, start, end)
                if tagged is None:
                    broken = ln
                    break
                cue_words += tagged
            else:
                untagged.append(ln)
        if broken is not None:
            bad("bad_word_timing", line + lines.index(broken), n,
                f"word times out of range, decreasing or outside the cue {start:.3f}-"
                f"{end:.3f} s")
            continue
        cue_words = _spread_words(untagged, start, end) + cue_words if untagged and \
            cue_words and untagged[0] == new[0] else cue_words + _spread_words(untagged, start, end)
        for i, w in enumerate(cue_words):
            w.end = cue_words[i + 1].start if i + 1 < len(cue_words) else end
            w.end = min(max(w.end, w.start), w.start + MAX_WORD)
        words += cue_words
    return words
