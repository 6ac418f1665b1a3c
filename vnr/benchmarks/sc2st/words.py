"""MoEE's text input for Sc2St's MoEE rows: a sentence as the word vectors of its words.

MoEE (Miech et al.) feeds each sentence as the 300-d word2vec vectors of its words, at most
30, zero padded, to NetVLAD. The Sc2St paper names no word-vector file, so the user's file is
read (`data.word_vectors`: GloVe text or word2vec binary, `vnr.data.word_vectors`; a
malformed file stops with one line naming it, before any training). Only the words of the
built corpus are kept (`vocabulary`).

Tokens (ours: the papers do not give MoEE's tokenisation): runs of letters and digits with
an optional apostrophe suffix ("someone's"); a token is looked up as written, then lower-cased
(word2vec is cased, GloVe lower-case); unknown tokens are dropped before the 30 are taken.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

MAX_WORDS = 30  # MoEE's `max_words`
TOKEN = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")


def tokens(sentence: str) -> list[str]:
    return TOKEN.findall(sentence)


def vocabulary(sentences: Iterable[str]) -> set[str]:
    """Every token of `sentences`, as written and lower-cased."""
    out: set[str] = set()
    for s in sentences:
        for t in tokens(s):
            out.update((t, t.lower()))
    return out


def embed(table: Any, sentences: Sequence[str], max_words: int = MAX_WORDS
          ) -> np.ndarray:
    """[len(sentences), max_words, D] float32: each sentence's known words (as written, else
    lower-cased), the first `max_words`, zero padded (`WordVectors.embed`)."""
    rows = []
    for s in sentences:
        toks = [t if t in table else t.lower() for t in tokens(s)]
        rows.append(table.embed(toks, max_words)[0])
    return np.stack(rows) if rows else np.zeros((0, max_words, table.dim), np.float32)


@functools.lru_cache(maxsize=2)
def load(path: str, words: frozenset[str]) -> Any:
    """The vectors of `words` from the file at `path` (every line of it checked)."""
    from vnr.data import word_vectors

    return word_vectors.read_word_vectors(path, vocabulary=words)


def corpus_table(cfg: Any) -> Any:
    """The word vectors of every word of the built corpus `cfg` (a training config's `data`:
    `config`, `data_dir`, `word_vectors`), read once per process."""
    if not cfg.get("word_vectors"):
        raise ValueError("the MoEE word-vector text needs data.word_vectors: a GloVe text or "
                         "word2vec binary file (MoEE used 300-d word2vec)")
    return _table(str(cfg.word_vectors), cfg.config, str(cfg.data_dir))


@functools.lru_cache(maxsize=2)
def _table(path: str, config: str, data_dir: str) -> Any:
    from tfds_builders import sc2st as builder

    sentences = []
    for split in builder.split_names(config, data_dir, build=False):
        src = builder.data_source(config, split, data_dir, build=False)
        sentences += [s for i in range(len(src)) for s in src[i]["sentences"]]
    return load(path, frozenset(vocabulary(sentences)))
