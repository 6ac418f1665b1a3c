"""BLEU@1-4 and CIDEr-D against pycocoevalcap's scorers (the coco-caption code Movie101 and
most captioning papers report), on the same pre-tokenized text.

Both sides get identical tokens: ours tokenizes the raw text (`caption_metrics.tokens`:
one token per CJK character, as Movie101 scores Chinese), pycocoevalcap gets those tokens
joined by spaces (it splits on white space; its PTB tokenizer, METEOR and SPICE need Java
and are not used). pycocoevalcap's CIDEr-D takes document frequencies from the evaluated
corpus's references, as ours does, so the corpora compared are the same.

Known, deliberate difference: coco-caption's BLEU adds 1e-15 / 1e-9 to every n-gram
precision's numerator / denominator, ours is unsmoothed. An order with no match in the corpus
(or no n-gram at all: every hypothesis shorter than n) scores 0 with us; coco gets a
precision of at most 1e-6 there, so its BLEU-n is at most 1e-6^(1/n) (0.0316 for n = 4) times
the lower orders. Elsewhere the two agree to float rounding.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from vnr.benchmarks.movie101 import caption_metrics as cm

_WHY = "pycocoevalcap is a test requirement: pip install -r requirements-test.txt"
Bleu = pytest.importorskip("pycocoevalcap.bleu.bleu", reason=_WHY).Bleu
Cider = pytest.importorskip("pycocoevalcap.cider.cider", reason=_WHY).Cider


def coco(hyps: list[str], refs: list[list[str]]) -> tuple[list[float], float]:
    """pycocoevalcap's corpus BLEU-1..4 and CIDEr-D on our tokens joined by spaces."""
    join = lambda t: " ".join(cm.tokens(t))  # noqa: E731
    res = {i: [join(h)] for i, h in enumerate(hyps)}
    gts = {i: [join(r) for r in rs] for i, rs in enumerate(refs)}
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    cider, _ = Cider().compute_score(gts, res)
    return [float(b) for b in bleu], float(cider)


def assert_parity(hyps: list[str], refs: list[list[str]]) -> tuple[list[float], float]:
    ours_b, ours_c = cm.bleu(hyps, refs), cm.cider_d(hyps, refs)
    ref_b, ref_c = coco(hyps, refs)
    for n, (a, b) in enumerate(zip(ours_b, ref_b), 1):
        if a == 0.0:  # unsmoothed; coco's order-n precision is then at most 1e-6
            assert 0 < b <= 1e-6 ** (1 / n) * (1 + 1e-9), (n, a, b)
        else:
            assert a == pytest.approx(b, rel=1e-6, abs=1e-9), (n, ours_b, ref_b)
    assert ours_c == pytest.approx(ref_c, rel=1e-9, abs=1e-12)
    return ours_b, ours_c


def random_corpus(seed: int, vocab: list[str], n: int, max_refs: int
                  ) -> tuple[list[str], list[list[str]]]:
    """Hypotheses that are references with random edits, so every n-gram order matches
    somewhere; 1..max_refs references of varied lengths each."""
    rng = np.random.default_rng(seed)

    def sentence(k: int) -> list[str]:
        return [vocab[i] for i in rng.integers(0, len(vocab), k)]

    hyps, refs = [], []
    for _ in range(n):
        count = int(rng.integers(1, max_refs + 1))
        rs = [sentence(int(rng.integers(1, 16))) for _ in range(count)]
        h = list(rs[0])
        for _ in range(int(rng.integers(0, 4))):  # substitutions, deletions, insertions
            op, at = rng.integers(0, 3), int(rng.integers(0, len(h) + 1))
            if op == 0 and at < len(h):
                h[at] = sentence(1)[0]
            elif op == 1 and at < len(h) and len(h) > 1:
                del h[at]
            else:
                h.insert(at, sentence(1)[0])
        sep = "" if all(len(w) == 1 for w in vocab) else " "
        hyps.append(sep.join(h))
        refs.append([sep.join(r) for r in rs])
    return hyps, refs


LATIN = ["the", "a", "man", "woman", "door", "opens", "walks", "into", "room", "looks", "at",
         "car", "slowly", "and", "."]
HAN = list("老李端来食物倒入小猫的饭盆里轻抚摸着身体警觉地闪躲了一下他她走进房间")


@pytest.mark.parametrize("seed, vocab, refs", [(0, LATIN, 1), (1, LATIN, 4), (2, HAN, 1),
                                               (3, HAN, 3), (4, LATIN + HAN, 2)])
def test_bleu_and_cider_d_match_pycocoevalcap_on_random_text(seed, vocab, refs):
    hyps, rs = random_corpus(seed, vocab, 40, refs)
    bleu, cider = assert_parity(hyps, rs)
    assert min(bleu) > 0 and cider > 0  # every order and CIDEr-D compared on real overlap


def test_chinese_is_scored_per_character():
    """Movie101 scores Chinese one character per token: our tokens of a narration are its
    characters (Chinese punctuation dropped), what upstream feeds coco-caption."""
    assert cm.tokens("老李端来食物，轻轻抚摸着小猫。") == list("老李端来食物轻轻抚摸着小猫")
    assert_parity(["老李端来食物"], [["老李端来了食物"]])


def test_edge_cases_match_pycocoevalcap():
    """A hypothesis shorter than every reference (brevity penalty), orders with no match,
    repeated n-grams (clipping), one-token texts."""
    assert_parity(["a b"], [["a b c d", "x y z w v u"]])
    assert_parity(["the the the the", "a man walks"], [["the man"], ["a man walks in"]])
    assert_parity(["x", "y z"], [["x"], ["y q"]])


def test_parity_on_real_movie101_narrations(shared_data):
    """Movie101-N val narrations (Chinese): each scored against itself with edits and
    against its neighbour, with the corpus's own document frequencies."""
    path = shared_data / "movie101" / "v1" / "Movie101-N" / "val.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    texts = [r["content"] for r in json.loads(path.read_text(encoding="utf-8"))][:400]
    rng = np.random.default_rng(0)
    hyps = []
    for t in texts:
        chars = list(t)
        for _ in range(3):
            at = int(rng.integers(0, len(chars)))
            chars[at] = texts[int(rng.integers(0, len(texts)))][0]
        hyps.append("".join(chars))
    refs = [[t, texts[(i + 1) % len(texts)]] for i, t in enumerate(texts)]
    bleu, cider = assert_parity(hyps, refs)
    assert bleu[3] > 0.3 and cider > 1.0
    assert_parity(texts[1:] + texts[:1], [[t] for t in texts])  # unrelated pairs: low scores
