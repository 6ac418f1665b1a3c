"""Timed sentences, person names and movie keys from SYMON's text files.

Sentences. `preprocessed_text/<id>.txt` is the narration with punctuation
restored (one line); it is split after `.`, `!` or `?` (optionally followed by a
closing quote) and whitespace, except after a single letter or a common
abbreviation (Mr. Dr. St. ...), and then aligned to the timed words of the WebVTT (`vtt.parse`):
both word streams are normalised (lower case, letters and digits only) and
matched with difflib's longest-matching-blocks (autojunk off). A sentence spans
its first to its last matched word (literal `\\xHH` byte escapes, a defect of some
upstream files, and backslash-escaped quotes `\\'` are decoded first and counted as
`kept_text:escaped_utf8_bytes`); a sentence with no matched word is dropped (counted as
`sentence:unaligned`). A "sentence" of more than 60 words (a preprocessed file
without punctuation) is re-split at pauses of >= 1 s or every 30 words of its
timed words (kept with that fix: `kept_sentence:resplit_unpunctuated`). Sentences made
only of bracketed cues such as `[Music]` are dropped (`sentence:non_speech`). Without a
preprocessed file the timed words are split at sentence punctuation when the captions have
it, else at pauses of >= 1 s or every 30 words (kept: `kept_video:no_preprocessed_text`).

Person names (the named-entity pass of Eq. 6, offline and deterministic):
a word is a name if it is capitalised (`Xxxx`, possessive `'s` stripped), is
not the first word of its sentence, is not in a small list of capitalised
function words / titles / calendar words, and its lower-case form never occurs
lower-cased in the same video's narration (which removes ordinary words that are
capitalised somewhere, e.g. "Spoilers"). Auto captions lower-case most words,
so names there are the ones YouTube's ASR capitalised.

Announced title (one of the movie-identity sources of `movies.py`): the title the
narrator announces in the first 60 words ("... film/movie/series/show
called|named|titled X", up to the next punctuation, normalised to lower-case
alphanumerics).
"""

from __future__ import annotations

import collections
import difflib
import re
from collections.abc import Sequence

from tfds_builders.symon.vtt import Word

_SPLIT = re.compile(r"(?<=[.!?])([\"”’')\]]?)\s+")
_ABBREV = re.compile(r"(?:^|\s)(?:[A-Za-z]|mr|mrs|ms|dr|st|vs|jr|sr|no|mt|lt|sgt|capt|prof)\.$",
                     re.I)
_ESCAPED = re.compile(r"(?:\\x[0-9a-fA-F]{2})+")
MAX_WORDS = 60
_NORM = re.compile(r"[^0-9a-z]+")
_NAME = re.compile(r"^[A-Z][a-z]+$")
NOT_NAMES = frozenset("""
I The A An And But Or So Then When While After Before Meanwhile However Later Soon Now Here
There This That These Those He She They We You It His Her Their Our Your My Its Him Them
Mr Mrs Ms Miss Dr Sir Lady Lord Madam Captain Officer Agent Detective Doctor Professor Uncle
Aunt King Queen Prince Princess President Sergeant General Colonel Lieutenant Father Mother
God Christmas Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March
April May June July August September October November December English American Okay Oh Yes
No Not Well Also Even Just Still Yet Once Meanwhile Finally Eventually Suddenly Back On In At
Of For With From To By As If Because Although Since Until Unless What Who Why How Where Which
""".split())
_TITLE = re.compile(
    r"\b(?:film|movie|series|show|documentary|anime|season|episode)s?[,:]?\s+"
    r"(?:called|named|titled)[,:]?\s+[\"“‘']?([^.,!?\"”’;:()]{1,60})", re.I)


def norm(word: str) -> str:
    return _NORM.sub("", word.lower())


def is_non_speech(text: str) -> bool:
    """Only bracketed cues ([Music], [Applause]) and punctuation."""
    return not norm(re.sub(r"\[[^\]]*\]", " ", text))


def split_sentences(text: str) -> list[str]:
    """Split after . ! ? (+ closing quote) and whitespace, except after abbreviations."""
    parts = _SPLIT.split(" ".join(text.split()))
    pieces = [parts[i] + (parts[i + 1] if i + 1 < len(parts) else "")
              for i in range(0, len(parts), 2)]
    out: list[str] = []
    for p in pieces:
        if out and _ABBREV.search(out[-1]):
            out[-1] += " " + p
        else:
            out.append(p)
    return [s.strip() for s in out if s.strip()]


def unescape_bytes(text: str) -> tuple[str, int]:
    """Literal `\\xHH` UTF-8 byte escapes (a defect of some upstream files) decoded;
    returns (text, number of escaped runs)."""
    runs = _ESCAPED.findall(text) + re.findall(r"\\['\"]", text)
    if not runs:
        return text, 0
    text = re.sub(r"\\(['\"])", r"\1", text)

    def dec(m: re.Match) -> str:
        return bytes.fromhex(m.group(0).replace("\\x", "")).decode("utf-8", errors="replace")

    return _ESCAPED.sub(dec, text), len(runs)


def _fallback_sentences(words: Sequence[Word], use_punct: bool = True
                        ) -> list[tuple[str, float, float]]:
    has_punct = use_punct and any(w.text[-1:] in ".!?" for w in words)
    out, cur = [], []
    for i, w in enumerate(words):
        cur.append(w)
        nxt = words[i + 1] if i + 1 < len(words) else None
        stop = nxt is None or (w.text[-1:] in ".!?" if has_punct else
                               (nxt.start - w.end >= 1.0 or len(cur) >= 30))
        if stop:
            out.append((" ".join(x.text for x in cur), cur[0].start, cur[-1].end))
            cur = []
    return out


def timed_sentences(words: Sequence[Word], preprocessed: str | None,
                    skips: collections.Counter) -> list[tuple[str, float, float]]:
    """(sentence, start, end) in narration order (see the module docstring)."""
    if preprocessed is None:
        found = _fallback_sentences(words)
    else:
        sents = split_sentences(preprocessed)
        sent_words = [[norm(w) for w in s.split()] for s in sents]
        flat = [(k, w) for k, ws in enumerate(sent_words) for w in ws if w]
        timed = [(i, norm(w.text)) for i, w in enumerate(words) if norm(w.text)]
        sm = difflib.SequenceMatcher(None, [w for _, w in flat], [w for _, w in timed],
                                     autojunk=False)
        spans: dict[int, list[int]] = {}
        for a, b, size in sm.get_matching_blocks():
            for d in range(size):
                spans.setdefault(flat[a + d][0], []).append(timed[b + d][0])
        found = []
        for k, s in enumerate(sents):
            idx = spans.get(k)
            if not idx:
                skips["sentence:non_speech" if is_non_speech(s) else "sentence:unaligned"] += 1
                continue
            if len(s.split()) > MAX_WORDS:  # unpunctuated stretch: split at pauses instead
                skips["kept_sentence:resplit_unpunctuated"] += 1  # re-split at pauses
                found += _fallback_sentences(words[min(idx):max(idx) + 1], use_punct=False)
                continue
            found.append((s, words[min(idx)].start, words[max(idx)].end))
    out = []
    for s, start, end in found:
        if is_non_speech(s):
            skips["sentence:non_speech"] += 1
            continue
        out.append((s, float(start), float(max(end, start))))
    return out


def person_names(sentences: Sequence[str]) -> list[list[str]]:
    """Per sentence, the sorted set of person names (the heuristic in the docstring)."""
    lower = set()
    for s in sentences:
        lower.update(w for w in re.findall(r"[A-Za-z']+", s) if w[:1].islower())
    out = []
    for s in sentences:
        toks = re.findall(r"[A-Za-z']+", s)
        names = set()
        for i, t in enumerate(toks):
            t = re.sub(r"'s$|'$", "", t)
            if i == 0 or not _NAME.match(t) or t in NOT_NAMES or t.lower() in lower:
                continue
            names.add(t)
        out.append(sorted(names))
    return out


def announced_title(text: str, words: int = 60) -> str:
    """The normalised title the narrator announces early on, or ''."""
    head = " ".join(text.split()[:words])
    m = _TITLE.search(head)
    if not m:
        return ""
    return " ".join(norm(w) for w in m.group(1).split() if norm(w))
