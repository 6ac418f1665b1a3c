"""Word vectors for Table 5's 2D-TAN row: the query as pretrained word vectors (GloVe), cut
into words the way the vector file allows.

2D-TAN (Zhang et al., 2020) reads a sentence as its GloVe vectors (glove.840B.300d, 300-d,
`TXT_INPUT_SIZE: 300`) through a 3-layer LSTM (`tng_model.TAN2D`). Movie101 runs 2D-TAN on
Chinese narrations, and neither the paper nor yuezih/Movie101 says which vectors or which
word segmentation: the release has no 2D-TAN code, and the IA-Net code it ships
(`RNL/utils.py: tokenize`) lower-cases, cuts with nltk.word_tokenize (whitespace and
punctuation: a whole Chinese sentence is one "word") and keeps the words in the vector file,
while its RNL reads precomputed BERT features instead. So the vector file is the user's
(`data.word_vectors`, a GloVe / word2vec text file or a word2vec .bin, `vnr.data.word_vectors`;
its width must be `data.word_dim`), and the segmentation is ours (`segment`):

* lower-cased (as upstream's `tokenize`); punctuation and other symbols dropped;
* a run of Latin letters / digits is one word;
* a run of Chinese characters is cut by forward maximum matching against the file's own
  vocabulary: at each position the longest word of at most `data.max_word_chars` characters
  the file has, else the single character (a character-vector file thus gives characters,
  a word-vector file words, with no segmenter to install);
* words the file lacks are dropped, the first `data.max_tokens` kept, zero padded
  (`WordVectors.embed`, as upstream's reader keeps only words in its word2vec).

Only the words the corpus can use are kept in memory: every substring of at most
`max_word_chars` characters of the config's narrations (`candidates`); the whole file is
still read and checked, so a file whose width is not `data.word_dim`, whose lines disagree in
width, or that has a word twice, stops the run with one line naming the file before
anything compiles (`check`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Container, Iterable
from typing import Any

import numpy as np

from vnr.data.word_vectors import WordVectors, WordVectorsError, read_word_vectors

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUNS = re.compile(f"[{CJK}]+|[a-z0-9]+")
_LOCK = threading.Lock()
_CACHE: dict[tuple, WordVectors] = {}


def _cjk(run: str) -> bool:
    return bool(re.match(f"[{CJK}]", run))


def segment(text: str, vocabulary: Container[str], max_chars: int) -> list[str]:
    """The words of `text` (module docstring), unknown ones included."""
    out: list[str] = []
    for run in _RUNS.findall(text.lower()):
        if not _cjk(run):
            out.append(run)
            continue
        i = 0
        while i < len(run):
            for n in range(min(max_chars, len(run) - i), 0, -1):
                if n == 1 or run[i:i + n] in vocabulary:
                    out.append(run[i:i + n])
                    i += n
                    break
    return out


def candidates(texts: Iterable[str], max_chars: int) -> set[str]:
    """Every word `segment` could return for `texts`: Latin runs and the substrings of at
    most `max_chars` characters of the Chinese runs."""
    out: set[str] = set()
    for t in texts:
        for run in _RUNS.findall(t.lower()):
            if not _cjk(run):
                out.add(run)
                continue
            for i in range(len(run)):
                out.update(run[i:i + n] for n in range(1, min(max_chars, len(run) - i) + 1))
    return out


def requested(d: Any) -> bool:
    """Whether the data config reads word vectors (`data.word_vectors` set)."""
    return bool(d.get("word_vectors", ""))


def _texts(d: Any) -> list[str]:
    from tfds_builders import movie101
    from vnr.benchmarks.movie101 import records

    splits = movie101.split_names(d.config, d.data_dir, d.manual_dir or None)
    out = []
    for s in splits:
        src = records.source(d, d.config, s)
        out += [str(src[i]["text"]) for i in range(len(src))]
    return out


def load(d: Any) -> WordVectors:
    """The vectors of the words the config's narrations can use, read once per process
    (`WordVectorsError`, one line naming the file, for a bad file or width)."""
    path = os.path.abspath(os.path.expanduser(d.word_vectors))
    st = os.stat(path) if os.path.isfile(path) else None
    key = (path, st and st.st_mtime_ns, st and st.st_size, int(d.word_dim),
           int(d.max_word_chars), d.config, os.path.abspath(d.data_dir), d.manual_dir or "")
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        wanted = candidates(_texts(d), int(d.max_word_chars))
        wv = read_word_vectors(path, vocabulary=wanted)
        if wv.dim != int(d.word_dim):
            raise WordVectorsError(f"{path}: vectors of {wv.dim} values, data.word_dim is "
                                   f"{d.word_dim} (the model's word input)")
        if not len(wv):
            raise WordVectorsError(f"{path}: none of its words occurs in the narrations of "
                                   f"movie101/{d.config} (a vector file for another "
                                   "language?)")
        _CACHE[key] = wv
        return wv


def check(d: Any) -> None:
    """Reads the file now (before anything compiles) when the config asks for vectors."""
    if requested(d):
        if int(d.max_word_chars) < 1:
            raise ValueError(f"data.max_word_chars={d.max_word_chars} must be >= 1")
        load(d)


def embed(wv: WordVectors, text: str, max_words: int, max_chars: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """([max_words, D] float32, mask [max_words] bool) of a narration."""
    return wv.embed(segment(text, wv.index, max_chars), max_words)


def write_smoke_vectors(path: os.PathLike | str, dim: int = 16, seed: int = 0) -> str:
    """A tiny GloVe text file for smoke runs: the words of the generated corpus's narrations
    (`tfds_builders.movie101.synthetic.ACTIONS`) and a few Chinese words and characters,
    random `dim`-d vectors; returns its path."""
    from tfds_builders.movie101 import synthetic

    words = sorted({w for phrase, _ in synthetic.ACTIONS for w in phrase.split()}
                   | {"老李", "小猫", "老", "李", "小", "猫", "走", "进", "房间"})
    rng = np.random.default_rng(seed)
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for w in words:
            f.write(w + " " + " ".join(f"{v:.5f}" for v in rng.normal(size=dim)) + "\n")
    return path
