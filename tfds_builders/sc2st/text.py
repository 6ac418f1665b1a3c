"""Sc2St text processing (paper §3.1.2), pure Python.

A LSMDC description becomes one or more *sub-sentences*, each later paired with
its own keyframe:

1. markup cleaned: LSMDC anonymises names as ``SOMEONE``; releases with names
   mark them as ``<PERSON>Name</PERSON>`` or attach them to the placeholder or a
   pronoun (``SOMEONE<Name>``, ``He<Name>``). Person spans and bare
   ``<PERSON>`` / ``[PERSON]`` become ``someone``, attached ``<Name>`` tags are
   dropped (the word before them stays), ``SOMEONE`` becomes ``someone``
   (``Someone`` at the start of a sentence); whitespace is collapsed;
2. sentence split at ``.``/``!``/``?`` followed by whitespace and an upper-case
   letter or a quote, except after common abbreviations (``Mr.``, ``Dr.``, ...);
3. sub-sentence split at semicolons, at dash runs (``--``, ``---``, en/em
   dashes, a spaced single ``-``) and before the conjunctions in
   ``CONJUNCTIONS`` (``then`` and ``and then`` by default, also after a comma).
   A split is kept only if both sides have at least ``min_words`` words, so
   ``until then`` or ``then`` at the start of a sentence never split.

Choices the paper leaves open, made here: ``then`` preceded by ``just``,
``since``, ``until``, ``by``, ``till`` or ``from`` is a time adverb, not a
conjunction; the conjunction itself is dropped from the second part; each part
is capitalised and ends with a full stop.
"""

from __future__ import annotations

import re

CONJUNCTIONS = ("and then", "then")
ABBREVIATIONS = ("mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "mt", "vs", "lt", "sgt",
                 "capt", "col", "gen", "no")
_NOT_CONJ_BEFORE_THEN = ("just", "since", "until", "by", "till", "from", "even", "only")

_PERSON_SPAN = re.compile(r"<\s*person\s*>.*?<\s*/\s*person\s*>", re.IGNORECASE)
_ATTACHED_NAME = re.compile(r"(?<=[\w'])<[^<>/]+>")
_MARKUP = re.compile(r"</?\s*person\s*>|\[\s*person\s*\]|\bSOMEONE\b", re.IGNORECASE)
_MID_SOMEONE = re.compile(r"\bSomeone\b")
_SPACES = re.compile(r"\s+")
_SENT_END = re.compile(r"([.!?]+)[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_DASHES = re.compile(r"\s*(?:-{2,}|[\u2013\u2014]+)\s*|\s+-\s+")


def clean_markup(text: str) -> str:
    """Replaces name markup by ``Someone`` (lower-cased later, mid-sentence); collapses spaces."""
    text = _PERSON_SPAN.sub("Someone", text)
    text = _ATTACHED_NAME.sub("", text)
    text = _MARKUP.sub("Someone", text)  # capital so the sentence split sees a new sentence
    text = _SPACES.sub(" ", text).strip()
    return text


def clean_sentence(sentence: str) -> str:
    """Markup cleaning only (for already split text): capitalised, "someone" mid-sentence."""
    s = clean_markup(sentence)
    return s[:1].upper() + _MID_SOMEONE.sub("someone", s[1:])


def split_sentences(text: str) -> list[str]:
    """Sentence split at terminal punctuation followed by a capital (not after abbreviations)."""
    parts, start = [], 0
    for m in _SENT_END.finditer(text):
        before = text[start:m.start()].split()
        if m.group(1) == "." and before and before[-1].lower().rstrip(".") in ABBREVIATIONS:
            continue
        parts.append(text[start:m.end()].strip())
        start = m.end()
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _words(s: str) -> int:
    return len(re.findall(r"[\w']+", s))


def _conj_pattern(conjunctions: tuple[str, ...]) -> re.Pattern:
    alts = "|".join(re.escape(c).replace(r"\ ", r"\s+")
                    for c in sorted(conjunctions, key=len, reverse=True))
    return re.compile(rf",?\s+\b({alts})\b,?\s+", re.IGNORECASE)


def split_subsentences(sentence: str, conjunctions: tuple[str, ...] = CONJUNCTIONS,
                       min_words: int = 2) -> list[str]:
    """Splits one sentence at semicolons, dash runs and conjunctions (see module doc)."""
    pieces = []
    for chunk in re.split(r"\s*;\s*", sentence):
        pieces.extend(_DASHES.split(chunk))
    pattern = _conj_pattern(tuple(conjunctions)) if conjunctions else None
    out: list[str] = []
    for piece in pieces:
        piece = piece.strip(" ,")
        if not piece:
            continue
        rest = piece
        while pattern is not None:
            for m in pattern.finditer(rest):
                left, right = rest[:m.start()], rest[m.end():]
                prev = left.split()[-1].lower().strip(",") if left.split() else ""
                if prev in _NOT_CONJ_BEFORE_THEN:
                    continue
                if _words(left) >= min_words and _words(right) >= min_words:
                    out.append(left)
                    rest = right
                    break
            else:
                break
        out.append(rest)
    # Merge pieces too short to stand alone into their neighbour.
    merged: list[str] = []
    for piece in out:
        if merged and _words(piece) < min_words:
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    if len(merged) > 1 and _words(merged[0]) < min_words:
        merged[1] = f"{merged[0]} {merged[1]}"
        merged.pop(0)
    return [_finish(p) for p in merged if p.strip(" .,;")]


def _finish(part: str) -> str:
    part = part.strip(" ,;-")
    part = part[0].upper() + part[1:] if part else part
    if part and part[-1] not in ".!?\"'":
        part += "."
    return part


def process_description(text: str, conjunctions: tuple[str, ...] = CONJUNCTIONS,
                        min_words: int = 2) -> list[str]:
    """A raw LSMDC description -> its ordered list of cleaned sub-sentences."""
    out = []
    for sentence in split_sentences(clean_markup(text)):
        for part in split_subsentences(sentence, conjunctions, min_words):
            out.append(part[:1] + _MID_SOMEONE.sub("someone", part[1:]))
    return out
