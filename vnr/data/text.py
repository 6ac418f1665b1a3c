"""Hashed-word tokenizer: vocabulary-free ids for encoders trained from scratch.

`data.tokenizer = "hash"` (the default) names this tokenizer; a checkpoint's own tokenizer
is `vnr.models.encoders.tokenizers` (a task joins it with its data pipeline).

Words are lower-cased, split on non-alphanumerics (Unicode-aware) (punctuation marks kept as
their own tokens) and hashed with CRC32 into `vocab_size - 2` buckets. Id 0 is
padding, id 1 marks "no dialogue" so an empty subtitle still has one token.
Deterministic across processes and runs (no Python `hash`), needs no vocab
file, and works for any corpus; collisions are rare at 8k buckets for the
synthetic grammar.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

HASH = "hash"

PAD, EMPTY = 0, 1
_CJK = "\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff"  # kana and CJK ideographs: one token each
_WORD = re.compile(rf"[{_CJK}]|(?:[^\W_{_CJK}]|')+|[?!.,]")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def tokenize(text: str, vocab_size: int, max_len: int) -> np.ndarray:
    """Returns int32 `[max_len]` ids, truncated on the right, padded with 0."""
    ids = [2 + zlib.crc32(w.encode()) % (vocab_size - 2) for w in words(text)] or [EMPTY]
    out = np.zeros((max_len,), np.int32)
    ids = ids[:max_len]
    out[: len(ids)] = ids
    return out
