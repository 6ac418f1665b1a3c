"""Sc2St text processing (paper §3.1.2), pure Python plus spaCy's rule-based sentencizer.

A LSMDC description becomes one or more *sub-sentences*, each later paired with
its own keyframe:

1. names (`clean_markup`). LSMDC writes characters as ``SOMEONE``; the release
   with names attaches them: ``<PERSON>Name</PERSON>``, ``SOMEONE<Name>``,
   ``SOMEONE's<Name>`` and a pronoun with the name (``He<Name>``). The paper's
   figures print names (Fig. 2, A1-A3: "William ... as William reaches", "Chet
   glances back") and keep ``SOMEONE`` where the release has no name (Fig. A3:
   "Onstage, SOMEONE's thrusters fire up"), so with `names=True` (default):
   a person span and ``SOMEONE<Name>`` become ``Name``, ``SOMEONE's<Name>``
   becomes ``Name's``, a subject/object pronoun with a name (he, she, him) becomes
   the name, ``his<Name>`` becomes ``Name's``; any other ``word<Name>`` keeps the
   word (``her`` is possessive or object: not guessed); a bare ``SOMEONE`` stays
   ``SOMEONE`` and a bare ``<PERSON>`` / ``[PERSON]`` becomes ``SOMEONE``.
   `names=False` (the anonymised variant, an option of ours) writes ``SOMEONE``
   for every person. Whitespace is collapsed.
2. sentences: spaCy's rule-based ``sentencizer`` on a blank English pipeline (no
   model download; its tokenizer keeps ``Mr.``, ``Dr.`` as one token).
3. sub-sentences (`split_subsentences`), the rules read off the paper's text and
   figures: at semicolons, at runs of two or more dashes (``--``), and before the
   conjunctions in `CONJUNCTIONS`: ``then`` / ``and then`` (Fig. 2: "...lays down
   the receiver | then crosses to the window"; Fig. A2) and ``who`` after a comma
   (Fig. A1: "...headlights to Nick. | who glances ..."). The conjunction stays at
   the start of the second part, as the figures print it; delimiters (``;``,
   ``--``) and the comma before a conjunction are dropped; nothing is capitalised
   or added (the figures print "then presses ...", "who glances ...").

Choices the paper leaves open, made here (ours): a split is kept only if both
sides have at least `min_words` words (2; the conjunction not counted), so
``until then`` or a leading ``Then`` never split; ``then`` preceded by
``just``, ``since``, ``until``, ``by``, ``till``, ``from``, ``even``, ``only``
is a time adverb, not a conjunction; ``who`` splits only after a comma (a
restrictive "the man who ..." stays whole).
"""

from __future__ import annotations

import functools
import re

# (conjunction, needs a comma before it)
CONJUNCTIONS: tuple[tuple[str, bool], ...] = (("and then", False), ("then", False),
                                              ("who", True))
_NOT_CONJ_BEFORE_THEN = ("just", "since", "until", "by", "till", "from", "even", "only")

_PERSON_SPAN = re.compile(r"<\s*person\s*>\s*(.*?)\s*<\s*/\s*person\s*>", re.IGNORECASE)
_ATTACHED = re.compile(r"\b([A-Za-z]+(?:'s)?)<([^<>/]+)>")
_BARE_PERSON = re.compile(r"</?\s*person\s*>|\[\s*person\s*\]", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_DASHES = re.compile(r"\s*-{2,}\s*")
_SUBJECT_OBJECT = ("he", "she", "him")


def _attached(m: re.Match, names: bool) -> str:
    word, name = m[1], m[2].strip()
    low = word.lower()
    if not names:
        return "SOMEONE's" if low in ("someone's", "his") else (
            "SOMEONE" if low in ("someone", *_SUBJECT_OBJECT) else word)
    if low == "someone" or low in _SUBJECT_OBJECT:
        return name
    if low in ("someone's", "his"):
        return f"{name}'s"
    return word


def clean_markup(text: str, names: bool = True) -> str:
    """Person markup -> names (or ``SOMEONE`` when not `names`); spaces collapsed."""
    text = _PERSON_SPAN.sub(lambda m: m[1] if names and m[1] else "SOMEONE", text)
    text = _ATTACHED.sub(lambda m: _attached(m, names), text)
    text = _BARE_PERSON.sub("SOMEONE", text)
    return _SPACES.sub(" ", text).strip()


def character_names(text: str) -> list[str]:
    """The character names the release attaches in a raw description (person spans and
    ``word<Name>``), in order of appearance, each once; bare ``SOMEONE`` names nobody."""
    found = [(m.start(), m[1].strip()) for m in _PERSON_SPAN.finditer(text) if m[1].strip()]
    found += [(m.start(), m[2].strip()) for m in _ATTACHED.finditer(text)]
    return list(dict.fromkeys(n for _, n in sorted(found)))


@functools.lru_cache(maxsize=1)
def _nlp():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` by spaCy's rule-based sentencizer (blank English pipeline)."""
    return [s.text.strip() for s in _nlp()(text).sents if s.text.strip()]


def _words(s: str) -> int:
    return len(re.findall(r"[\w']+", s))


def _conj_pattern(conjunctions: tuple[tuple[str, bool], ...]) -> re.Pattern:
    alts = []
    for word, comma in sorted(conjunctions, key=lambda c: len(c[0]), reverse=True):
        w = re.escape(word).replace(r"\ ", r"\s+")
        alts.append(rf",\s*(?P<c{len(alts)}>{w})\b" if comma
                    else rf",?\s+(?P<c{len(alts)}>{w})\b")
    return re.compile("|".join(alts), re.IGNORECASE)


def _split_at_conjunctions(piece: str, pattern: re.Pattern, min_words: int) -> list[str]:
    out, rest = [], piece
    while True:
        for m in pattern.finditer(rest):
            word = next(g for g in m.groupdict().values() if g)
            left, right = rest[:m.start()], rest[m.end() - len(word):]
            prev = left.split()[-1].lower().strip(",") if left.split() else ""
            if word.lower() == "then" and prev in _NOT_CONJ_BEFORE_THEN:
                continue
            if _words(left) >= min_words and _words(right) - _words(word) >= min_words:
                out.append(left)
                rest = right
                break
        else:
            break
    out.append(rest)
    return out


def split_subsentences(sentence: str,
                       conjunctions: tuple[tuple[str, bool], ...] = CONJUNCTIONS,
                       min_words: int = 2) -> list[str]:
    """Splits one sentence at semicolons, dash runs and conjunctions (see module doc)."""
    pieces: list[str] = []
    for chunk in re.split(r"\s*;\s*", sentence):
        pieces.extend(_DASHES.split(chunk))
    pattern = _conj_pattern(tuple(conjunctions)) if conjunctions else None
    out: list[str] = []
    for piece in pieces:
        piece = piece.strip(" ,")
        if not piece:
            continue
        out.extend(_split_at_conjunctions(piece, pattern, min_words) if pattern else [piece])
    # A delimiter split leaving a piece too short to stand alone joins its neighbour.
    merged: list[str] = []
    for piece in out:
        if merged and _words(piece) < min_words:
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    if len(merged) > 1 and _words(merged[0]) < min_words:
        merged[1] = f"{merged[0]} {merged[1]}"
        merged.pop(0)
    return [p.strip(" ,") for p in merged if p.strip(" .,;")]


def process_description(text: str,
                        conjunctions: tuple[tuple[str, bool], ...] = CONJUNCTIONS,
                        min_words: int = 2, names: bool = True) -> list[str]:
    """A raw LSMDC description -> its ordered list of sub-sentences."""
    return [part for sentence in split_sentences(clean_markup(text, names))
            for part in split_subsentences(sentence, conjunctions, min_words)]


def clean_sentence(sentence: str, names: bool = True) -> str:
    """Markup cleaning only, for text the release has already split."""
    return clean_markup(sentence, names)
