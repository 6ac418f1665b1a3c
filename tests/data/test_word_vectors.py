"""Word-vector files (vnr.data.word_vectors): GloVe text and word2vec binary as published, and
their one-line errors. The binary files are written here as word2vec.c writes them
(`fprintf("%s ", word)`, the float32 values, `fprintf("\\n")`)."""

from pathlib import Path

import numpy as np
import pytest

from vnr.data import word_vectors as wv

WORDS = ["the", ",", "café", "naïve", "Movie", "rock'n'roll"]


def vectors(dim: int = 4, n: int = len(WORDS)) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)


def write_glove(path: Path, words=WORDS, vecs=None, header: bool = False) -> Path:
    vecs = vectors() if vecs is None else vecs
    lines = [f"{len(words)} {vecs.shape[1]}"] if header else []
    lines += [" ".join([w, *(repr(float(x)) for x in v)]) for w, v in zip(words, vecs)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_word2vec(path: Path, words=WORDS, vecs=None, count: int | None = None) -> Path:
    vecs = vectors() if vecs is None else vecs
    body = f"{len(words) if count is None else count} {vecs.shape[1]}\n".encode()
    for w, v in zip(words, vecs):
        body += w.encode("utf-8") + b" " + v.astype("<f4").tobytes() + b"\n"
    path.write_bytes(body)
    return path


def error(fn, *args, **kw) -> str:
    with pytest.raises(wv.WordVectorsError) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_glove_text(tmp_path):
    got = wv.read_text(write_glove(tmp_path / "glove.6B.4d.txt"))
    assert got.words == tuple(WORDS) and got.dim == 4 and len(got) == 6
    np.testing.assert_array_equal(got.vectors, vectors())
    assert "café" in got and "cafe" not in got
    some = wv.read_text(tmp_path / "glove.6B.4d.txt", vocabulary={"naïve", "the", "absent"})
    assert some.words == ("the", "naïve")
    np.testing.assert_array_equal(some.vectors, vectors()[[0, 3]])


def test_embed_is_moee_sentence_input(tmp_path):
    got = wv.read_text(write_glove(tmp_path / "g.txt"))
    x, mask = got.embed(["Movie", "zzz", "the", "the", "café"], max_words=3)
    np.testing.assert_array_equal(x, vectors()[[4, 0, 0]])
    assert mask.all()
    x, mask = got.embed(["zzz", ","], max_words=3)
    np.testing.assert_array_equal(x[0], vectors()[1])
    assert not x[1:].any() and mask.tolist() == [True, False, False]
    x, mask = got.embed([], max_words=2)
    assert x.shape == (2, 4) and not mask.any()


def test_text_header_and_dispatch(tmp_path):
    vec = wv.read_word_vectors(write_glove(tmp_path / "w.vec", header=True))
    np.testing.assert_array_equal(vec.vectors, vectors())
    bad = tmp_path / "bad.vec"
    bad.write_text("7 4\n" + (tmp_path / "w.vec").read_text().split("\n", 1)[1])
    assert "header says 7 words, the file has 6" in error(wv.read_text, bad)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        wv.read_word_vectors(tmp_path / "nope.txt")


def test_text_errors_name_file_and_line(tmp_path):
    p = write_glove(tmp_path / "g.txt")
    lines = p.read_text().splitlines()
    p.write_text("\n".join([*lines[:2], lines[2] + " 0.5", *lines[3:]]) + "\n")
    assert error(wv.read_text, p) == f"{p}:3: 5 values, the file's vectors have 4"
    p.write_text("\n".join([*lines[:4], " ".join(lines[4].split()[:-1])]) + "\n")
    assert error(wv.read_text, p) == f"{p}:5: 3 values, the file's vectors have 4"
    p.write_text("\n".join([*lines, lines[2]]) + "\n")
    assert error(wv.read_text, p) == f"{p}: word 'café' on line 3 and again on line 7"
    p.write_text("\n".join([*lines[:1], "x 1 2 nan? 4"]) + "\n")
    assert error(wv.read_text, p) == f"{p}:2: a value of 'x' is not a number"
    p.write_bytes(b"a 1 2\nb\xff 3 4\n")
    assert error(wv.read_text, p).startswith(f"{p}:2: not UTF-8")
    p.write_text("\n\n")
    assert error(wv.read_text, p) == f"{p}: no word vectors"


def test_words_with_spaces(tmp_path):
    p = write_glove(tmp_path / "glove.840B.txt", words=["a", ". . .", "at name@x.com"],
                    vecs=vectors(n=3))
    with pytest.raises(wv.WordVectorsError, match=r"840B\.txt:2: 6 values"):
        wv.read_text(p)
    got = wv.read_text(p, spaces_in_words=True)
    assert got.words == ("a", ". . .", "at name@x.com")
    np.testing.assert_array_equal(got.vectors, vectors(n=3))


def test_word2vec_binary(tmp_path):
    p = write_word2vec(tmp_path / "GoogleNews-vectors-negative300.bin")
    got = wv.read_word_vectors(p)
    assert got.words == tuple(WORDS)
    np.testing.assert_array_equal(got.vectors, vectors())
    assert wv.read_word2vec_binary(p, vocabulary=["Movie"]).words == ("Movie",)
    text = wv.read_text(write_glove(tmp_path / "same.txt"))
    np.testing.assert_array_equal(text.vectors, got.vectors)
    # no newline after each vector (some writers): still read
    body = b"2 4\n" + b"".join(w.encode() + b" " + v.tobytes() for w, v in
                               zip(WORDS[:2], vectors()))
    (tmp_path / "tight.bin").write_bytes(body)
    assert wv.read_word2vec_binary(tmp_path / "tight.bin").words == tuple(WORDS[:2])


def test_word2vec_binary_errors(tmp_path):
    p = write_word2vec(tmp_path / "w.bin", count=7)
    assert error(wv.read_word2vec_binary, p) == f"{p}: truncated at entry 7 of 7"
    p = write_word2vec(tmp_path / "w.bin", count=5)
    assert "data after the 5 entries" in error(wv.read_word2vec_binary, p)
    p = write_word2vec(tmp_path / "w.bin", words=[*WORDS[:3], "the"], vecs=vectors(n=4))
    assert error(wv.read_word2vec_binary, p) == f"{p}: word 'the' at entry 1 and again at entry 4"
    p.write_bytes(b"the 1 2 3\n")
    assert "no word2vec header" in error(wv.read_word2vec_binary, p)
    p.write_bytes(b"")
    assert "empty" in error(wv.read_word2vec_binary, p)
