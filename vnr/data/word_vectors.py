"""Pretrained word vectors read from their published files: GloVe text and word2vec binary.

MoEE (Miech et al. 2018), the model of Sc2St's V-MoEE / C-CMoEE rows, represents a sentence
by the word2vec vectors of its words (the 300-d GoogleNews vectors), at most 30 of them,
zero-padded, and pools them with NetVLAD (`vnr.models.netvlad`). The Sc2St paper names no
word-vector file for those rows, so both common formats are read:

* text (`read_text`; GloVe as published, also word2vec / fastText text output): one entry
  per line, `word v1 ... vd`, fields separated by single spaces, UTF-8. An optional first
  line of two integers `count dim` (word2vec / fastText text) is a header; GloVe has none,
  and its width is then the first entry's. Blank lines are skipped.
* word2vec binary (`read_word2vec_binary`; `GoogleNews-vectors-negative300.bin`): an ASCII
  header line `count dim`, then per entry the word's UTF-8 bytes, one space, `dim`
  little-endian float32 values, and (as word2vec writes it) a newline.

Errors are one line naming the file: an entry whose width differs from the file's (with its
line or entry number), a value that is not a number, a word seen twice (the word and both
line / entry numbers), a truncated binary file, a header count that does not match.

`vocabulary` keeps only the words a data set uses (a GloVe or GoogleNews file holds millions);
every line is still checked. `spaces_in_words=True` reads text files whose words may contain
spaces (glove.840B.300d has a few): the last `dim` fields of a line are its vector (`dim`
from the header or the first entry), what comes before is the word.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np


class WordVectorsError(ValueError):
    """A malformed word-vector file (one line naming the file)."""


@dataclasses.dataclass(frozen=True)
class WordVectors:
    """Words (file order) and their vectors [V, D] float32."""

    words: tuple[str, ...]
    vectors: np.ndarray
    index: dict[str, int] = dataclasses.field(repr=False, compare=False)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.index

    def embed(self, tokens: Sequence[str], max_words: int) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of the known tokens in order, the first `max_words` of them, zero
        padded (MoEE's sentence input): ([max_words, D] float32, mask [max_words] bool)."""
        rows = [self.index[t] for t in tokens if t in self.index][:max_words]
        out = np.zeros((max_words, self.dim), np.float32)
        out[:len(rows)] = self.vectors[rows]
        return out, np.arange(max_words) < len(rows)


def _build(words: list[str], rows: list[np.ndarray], dim: int) -> WordVectors:
    vectors = np.stack(rows).astype(np.float32) if rows else np.zeros((0, dim), np.float32)
    return WordVectors(tuple(words), vectors, {w: i for i, w in enumerate(words)})


def _keep(vocabulary: Iterable[str] | None):
    if vocabulary is None:
        return lambda w: True
    wanted = set(vocabulary)
    return wanted.__contains__


def _header(fields: list[str]) -> tuple[int, int] | None:
    if len(fields) == 2 and all(f.isdigit() for f in fields):
        return int(fields[0]), int(fields[1])
    return None


def read_text(path: str | os.PathLike, *, vocabulary: Iterable[str] | None = None,
              spaces_in_words: bool = False) -> WordVectors:
    """A GloVe-style text file (module docstring)."""
    path = Path(path)
    keep = _keep(vocabulary)
    seen: dict[str, int] = {}
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim = header = None
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise WordVectorsError(f"{path}:{lineno}: not UTF-8 ({e.reason})") from None
            if not line.strip():
                continue
            fields = line.split(" ")
            if lineno == 1 and (header := _header(fields)):
                dim = header[1]
                continue
            if dim is None:
                dim = len(fields) - 1
                if dim < 1:
                    raise WordVectorsError(f"{path}:{lineno}: a word without a vector")
            if spaces_in_words and len(fields) > dim + 1:
                fields = [" ".join(fields[:-dim]), *fields[-dim:]]
            if len(fields) != dim + 1:
                raise WordVectorsError(f"{path}:{lineno}: {len(fields) - 1} values, the file's "
                                       f"vectors have {dim}")
            word = fields[0]
            if word in seen:
                raise WordVectorsError(f"{path}: word {word!r} on line {seen[word]} and again "
                                       f"on line {lineno}")
            seen[word] = lineno
            if keep(word):
                try:
                    rows.append(np.asarray(fields[1:], dtype=np.float32))
                except ValueError:
                    raise WordVectorsError(f"{path}:{lineno}: a value of {word!r} is not a "
                                           "number") from None
                words.append(word)
    if dim is None:
        raise WordVectorsError(f"{path}: no word vectors")
    if header and header[0] != len(seen):
        raise WordVectorsError(f"{path}: header says {header[0]} words, the file has "
                               f"{len(seen)}")
    return _build(words, rows, dim)


def read_word2vec_binary(path: str | os.PathLike, *,
                         vocabulary: Iterable[str] | None = None) -> WordVectors:
    """A word2vec binary file (module docstring)."""
    path = Path(path)
    keep = _keep(vocabulary)
    if path.stat().st_size == 0:
        raise WordVectorsError(f"{path}: empty file, no word2vec header")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        end = mm.find(b"\n")
        header = _header(mm[:end].decode("ascii", "replace").split()) if end > 0 else None
        if header is None:
            raise WordVectorsError(f"{path}: no word2vec header line `count dim`")
        count, dim = header
        size, pos = len(mm), end + 1
        seen: dict[str, int] = {}
        words: list[str] = []
        rows: list[np.ndarray] = []
        for entry in range(1, count + 1):
            while pos < size and mm[pos:pos + 1] == b"\n":
                pos += 1
            stop = mm.find(b" ", pos)
            if stop < 0 or stop + 1 + 4 * dim > size:
                raise WordVectorsError(f"{path}: truncated at entry {entry} of {count}")
            try:
                word = mm[pos:stop].decode("utf-8")
            except UnicodeDecodeError as e:
                raise WordVectorsError(f"{path}: entry {entry}: word not UTF-8 "
                                       f"({e.reason})") from None
            if not word or "\n" in word:
                raise WordVectorsError(f"{path}: entry {entry}: no word before its vector "
                                       f"(not a {dim}-d word2vec binary file?)")
            if word in seen:
                raise WordVectorsError(f"{path}: word {word!r} at entry {seen[word]} and "
                                       f"again at entry {entry}")
            seen[word] = entry
            if keep(word):
                words.append(word)
                rows.append(np.frombuffer(mm, "<f4", dim, stop + 1).copy())
            pos = stop + 1 + 4 * dim
        if mm[pos:].strip():
            raise WordVectorsError(f"{path}: data after the {count} entries the header "
                                   f"announces (not {dim}-d vectors?)")
    return _build(words, rows, dim)


def read_word_vectors(path: str | os.PathLike, *, vocabulary: Iterable[str] | None = None,
                      binary: bool | None = None, spaces_in_words: bool = False
                      ) -> WordVectors:
    """Either format; `binary=None` takes a `.bin` suffix as word2vec binary."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no word-vector file (GloVe text or word2vec binary)")
    if binary is None:
        binary = path.suffix == ".bin"
    if binary:
        return read_word2vec_binary(path, vocabulary=vocabulary)
    return read_text(path, vocabulary=vocabulary, spaces_in_words=spaces_in_words)
