r"""Hashed-word tokenizer: vocabulary-free ids for encoders trained from scratch.

`data.tokenizer = "hash"` (the default) names this tokenizer; a checkpoint's own tokenizer
is `vnr.models.encoders.tokenizers` (a task joins it with its data pipeline).

`words(text)`: the text is NFC-normalised and lower-cased; a word is a run of letters,
combining marks, numbers and apostrophes (Unicode properties through the `regex` module:
`\p{L}\p{M}\p{N}'`, so Devanagari vowel signs and viramas, Cyrillic and accented Latin stay
inside their word); every kana / CJK ideograph is a token of its own (with any combining
marks after it); `? ! . ,` are tokens; everything else (white space, other punctuation and
symbols) separates tokens and is dropped. Tokens are hashed with CRC32 into `vocab_size - 2`
buckets. Id 0 is padding, id 1 marks "no dialogue" so an empty subtitle still has one token.
Deterministic across processes and runs (no Python `hash`), needs no vocab
file, and works for any corpus; collisions are rare at 8k buckets for the
synthetic grammar.
"""

from __future__ import annotations

import unicodedata
import zlib

import numpy as np
import regex

HASH = "hash"

PAD, EMPTY = 0, 1
# Kana and CJK ideographs (the BMP's blocks, plus ideographs outside the BMP): one token each.
_CJK = r"\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\p{Han}"
_WORD = regex.compile(rf"[{_CJK}]\p{{M}}*|(?:[\p{{L}}\p{{M}}\p{{N}}'--[{_CJK}]])+|[?!.,]",
                      regex.V1)


def words(text: str) -> list[str]:
    """Tokens of `text` (see the module docstring): lower-cased, separators dropped."""
    return _WORD.findall(unicodedata.normalize("NFC", text).lower())


def tokenize(text: str, vocab_size: int, max_len: int) -> np.ndarray:
    """Returns int32 `[max_len]` ids, truncated on the right, padded with 0."""
    ids = [2 + zlib.crc32(w.encode()) % (vocab_size - 2) for w in words(text)] or [EMPTY]
    out = np.zeros((max_len,), np.int32)
    ids = ids[:max_len]
    out[: len(ids)] = ids
    return out
