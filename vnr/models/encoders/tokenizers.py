"""A checkpoint's own tokenizer: found by name, loaded once per process, applied to texts.

A data config names its tokenizer `"hash"` (the vocabulary-free hashed words of
`vnr.data.text`, for encoders trained from scratch) or a checkpoint (a directory, a
`$VNR_ENCODERS_DIR` name or a Hugging Face cache name, found offline by
`loading.resolve`). `encode` applies the checkpoint's fast tokenizer with its special tokens
([CLS] ... [SEP] for BERT/ALBERT, <|startoftext|> ... <|endoftext|> for CLIP), truncated to
`max_len` (the closing special token kept), padded with its pad id, with an attention mask.
The tokenizer is loaded once per process (grain workers included: `load_tokenizer` is
cached), not per element. The encoder factory imports `saved_tokenizer` from here.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import numpy as np

from vnr.models.encoders import loading

HASH = "hash"  # the name of vnr.data.text's hashed words: no checkpoint tokenizer

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)

# grain reads with several threads per process: one lock guards loading (once per process)
# and encoding (a fast tokenizer's truncation settings are shared, mutable state).
_LOCK = threading.RLock()


def saved_tokenizer(directory: str | Path) -> Any | None:
    """A new fast tokenizer from the files saved with a checkpoint; None when it has none."""
    d = Path(directory)
    if not any((d / f).is_file() for f in TOKENIZER_FILES):
        return None
    if (d / "vocab.txt").is_file() and not any(
            (d / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "config.json")):
        # A bare WordPiece vocabulary, as UniVL ships `modules/bert-base-uncased/`: its
        # loaders use BERT's uncased tokenizer, which is what a vocab.txt alone implies.
        from transformers import BertTokenizerFast

        return BertTokenizerFast(vocab_file=str(d / "vocab.txt"), do_lower_case=True)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), use_fast=True)


def resolve(name: str) -> str:
    """`"hash"`, or the absolute directory of the checkpoint tokenizer `name` (no download)."""
    return HASH if name == HASH else str(loading.resolve(name))


@functools.lru_cache(maxsize=4)
def _load(directory: str) -> Any:
    tok = saved_tokenizer(directory)
    if tok is None:
        raise FileNotFoundError(f"{directory}: no tokenizer files (tokenizer.json, vocab.txt, "
                                "vocab.json + merges.txt or a sentencepiece model)")
    return tok


def load_tokenizer(directory: str) -> Any:
    """The fast tokenizer saved in `directory`, loaded once per process (shared: call it
    under `encode`'s lock, or use `encode`)."""
    with _LOCK:
        return _load(str(directory))


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
