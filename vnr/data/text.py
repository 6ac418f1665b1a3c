"""Subtitle tokenizers: hashed words (encoders trained from scratch) or a checkpoint's own.

`data.tokenizer = "hash"` (the default) is the vocabulary-free word tokenizer below;
anything else names a checkpoint directory (or a `$VNR_ENCODERS_DIR` / Hugging Face cache
name, resolved offline by `vnr.pretrained.resolve`) whose fast tokenizer `encode` applies:
its special tokens included ([CLS] ... [SEP] for BERT/ALBERT, <|startoftext|> ...
<|endoftext|> for CLIP), truncated to `max_len` (the closing special token is kept), padded
with its pad id, with an attention mask. The tokenizer is loaded once per process (grain
workers included: `load_tokenizer` is cached), not per element.

Hashed words:

Words are lower-cased, split on non-alphanumerics (Unicode-aware) (punctuation marks kept as
their own tokens) and hashed with CRC32 into `vocab_size - 2` buckets. Id 0 is
padding, id 1 marks "no dialogue" so an empty subtitle still has one token.
Deterministic across processes and runs (no Python `hash`), needs no vocab
file, and works for any corpus; collisions are rare at 8k buckets for the
synthetic grammar. Pretrained encoders use their own tokenizers instead.
"""

from __future__ import annotations

import functools
import re
import threading
import zlib
from typing import Any

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


def resolve(name: str) -> str:
    """`"hash"`, or the absolute directory of the tokenizer `name` (no download)."""
    if name == HASH:
        return HASH
    from vnr import pretrained

    return str(pretrained.resolve(name))


# grain reads with several threads per process: one lock guards loading (once per process)
# and encoding (a fast tokenizer's truncation settings are shared, mutable state).
_LOCK = threading.RLock()


@functools.lru_cache(maxsize=4)
def _load(directory: str) -> Any:
    from pathlib import Path

    from vnr.models.encoders.factory import load_tokenizer as load

    tok = load(Path(directory))
    if tok is None:
        raise FileNotFoundError(f"{directory}: no tokenizer files (tokenizer.json, vocab.txt, "
                                "vocab.json + merges.txt or a sentencepiece model)")
    return tok


def load_tokenizer(directory: str) -> Any:
    """The fast tokenizer saved in `directory` (loaded once per process)."""
    with _LOCK:
        return _load(directory)


def info(name: str) -> dict[str, int | None]:
    """vocab (ids are < vocab), pad, cls, sep, bos, eos ids of the tokenizer `name`."""
    tok = load_tokenizer(resolve(name))
    return {"vocab": len(tok), "pad": tok.pad_token_id, "cls": tok.cls_token_id,
            "sep": tok.sep_token_id, "bos": tok.bos_token_id, "eos": tok.eos_token_id}


def encode(directory: str, texts: list[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """A checkpoint tokenizer on `texts`: (ids int32 [n, max_len], mask bool [n, max_len]).

    Special tokens are added as the tokenizer does for one sentence; longer texts are
    truncated to `max_len` tokens (the closing special token kept); padding uses the
    tokenizer's pad id (0 when it has none) and is False in the mask.
    """
    with _LOCK:
        tok = load_tokenizer(directory)
        got = tok(list(texts), truncation=True, max_length=max_len)["input_ids"]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    ids = np.full((len(texts), max_len), pad, np.int32)
    mask = np.zeros((len(texts), max_len), bool)
    for k, row in enumerate(got):
        ids[k, :len(row)] = row
        mask[k, :len(row)] = True
    return ids, mask
