"""clip_accuracy / sentence_iou / f1: hand-worked example, NumPy vs JAX, batching, jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vnr.benchmarks.msymon.metrics import (
    alignment_metrics,
    clip_accuracy,
    durations_from_times,
    f1,
    sentence_iou,
    summarize,
)
from vnr.ops.dtw import drop_dtw

# Six clips; sentence 2 has no ground-truth footage but gets clip 4; sentence 3 is unmatched
# on both sides. Clips 2 and 5 belong to no sentence.
DUR = np.array([1.0, 2.0, 3.0, 1.0, 2.0, 1.0])
GT = np.array([0, 0, -1, 1, 1, -1])
PRED = np.array([0, -1, -1, 1, 2, 1])
CLIP_ACC = (1 + 3 + 1) / 10  # clips 0, 2 (rightly unmatched), 3
IOU_S0 = 1 / 3  # predicted {0} (1 s) vs annotated {0, 1} (3 s)
IOU_S1 = 1 / 4  # {3, 5} vs {3, 4}: 1 s shared of 4 s
IOU_EXCLUDE = (IOU_S0 + IOU_S1) / 2
IOU_PENALIZE = (IOU_S0 + IOU_S1 + 0.0) / 3


def test_hand_worked_example():
    assert clip_accuracy(PRED, GT, DUR) == pytest.approx(CLIP_ACC)
    assert sentence_iou(PRED, GT, DUR, num_sentences=4) == pytest.approx(IOU_EXCLUDE)
    assert sentence_iou(PRED, GT, DUR) == pytest.approx(IOU_EXCLUDE)
    pen = sentence_iou(PRED, GT, DUR, 4, unmatched_sentences="penalize")
    assert pen == pytest.approx(IOU_PENALIZE)
    expected_f1 = 2 * CLIP_ACC * IOU_EXCLUDE / (CLIP_ACC + IOU_EXCLUDE)
    out = alignment_metrics(PRED, GT, DUR)
    assert out["f1"] == pytest.approx(expected_f1)
    assert isinstance(out["clip_accuracy"], np.ndarray | np.floating)
    # A perfect alignment scores 1 everywhere; an all-dropped prediction scores only the
    # annotated-unmatched clips.
    perfect = alignment_metrics(GT, GT, DUR)
    assert all(v == pytest.approx(1.0) for v in perfect.values())
    none = np.full_like(GT, -1)
    assert clip_accuracy(none, GT, DUR) == pytest.approx(4 / 10)
    assert sentence_iou(none, GT, DUR) == pytest.approx(0.0)


def test_numpy_and_jax_agree_batched_and_per_video():
    pred2 = np.array([1, 1, 1, -1, -1, -1])
    gt2 = np.array([0, 1, 1, 2, 0, 0])  # last two clips are padding (mask False)
    mask = np.array([[True] * 6, [True] * 4 + [False] * 2])
    preds, gts, durs = np.stack([PRED, pred2]), np.stack([GT, gt2]), np.stack([DUR, DUR])
    out_np = alignment_metrics(preds, gts, durs, num_sentences=4, mask=mask)
    out_jax = alignment_metrics(
        jnp.asarray(preds), jnp.asarray(gts), jnp.asarray(durs), 4, jnp.asarray(mask)
    )
    for k in out_np:
        assert isinstance(out_np[k], np.ndarray) and isinstance(out_jax[k], jax.Array)
        assert out_np[k].shape == (2,)
        np.testing.assert_allclose(out_jax[k], out_np[k], rtol=1e-6)
    # Batch row 1 equals the video alone with its padding cut off.
    alone = alignment_metrics(pred2[:4], gt2[:4], DUR[:4])
    for k in out_np:
        np.testing.assert_allclose(out_np[k][1], alone[k], rtol=1e-12)
    assert out_np["clip_accuracy"][1] == pytest.approx(5 / 7)  # clips 1, 2 (5 s) of 7 s
    jitted = jax.jit(lambda p, g, d, k: alignment_metrics(p, g, d, num_sentences=4, mask=k))
    np.testing.assert_allclose(jitted(preds, gts, durs, mask)["f1"], out_np["f1"], rtol=1e-6)


def test_edge_cases_summarize_and_times():
    assert np.isnan(clip_accuracy(PRED, GT, np.zeros(6)))
    assert np.isnan(sentence_iou(np.full(6, -1), np.full(6, -1), DUR))
    assert f1(0.0, 0.0) == 0.0 and np.isnan(f1(np.nan, 0.5))
    s = summarize([0.5, np.nan, 0.7], [0.2, 0.4, np.nan])
    assert s["clip_accuracy"] == pytest.approx(0.6) and s["sentence_iou"] == pytest.approx(0.3)
    assert s["f1"] == pytest.approx(2 * 0.6 * 0.3 / 0.9)
    np.testing.assert_allclose(durations_from_times([0.0, 3.21], [3.21, 7.23]), [3.21, 4.02])


def test_drop_dtw_output_feeds_the_metrics():
    rng = np.random.default_rng(0)
    gt = np.array([[0, 0, -1, 1, 1, 2, 2, -1]])
    cost = rng.uniform(0.5, 1.0, (1, 8, 3)).astype(np.float32)
    for i, j in enumerate(gt[0]):
        if j >= 0:
            cost[0, i, j] = 0.0
    _, match = drop_dtw(cost, 0.3)
    np.testing.assert_array_equal(match, gt)
    out = alignment_metrics(match, jnp.asarray(gt), jnp.ones((1, 8)), num_sentences=3)
    np.testing.assert_allclose(out["f1"], 1.0)


def test_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        clip_accuracy(PRED, GT[:5], DUR)
    with pytest.raises(ValueError, match="integer"):
        clip_accuracy(PRED.astype(float), GT, DUR)
    with pytest.raises(ValueError, match="durations"):
        clip_accuracy(PRED, GT, -DUR)
    with pytest.raises(ValueError, match="mask"):
        clip_accuracy(PRED, GT, DUR, mask=np.ones(5, bool))
    with pytest.raises(ValueError, match="unmatched_sentences"):
        sentence_iou(PRED, GT, DUR, unmatched_sentences="ignore")
    with pytest.raises(ValueError, match="num_sentences"):
        jax.jit(lambda p, g: sentence_iou(p, g, jnp.ones(6)))(PRED, GT)


def test_retrieval_recall_and_mean_rank_hand_worked():
    from vnr.benchmarks.msymon.retrieval_metrics import retrieval_metrics

    # One video, 12 clips (the last padding), 3 sentences; sentence 2 has no footage.
    sim = np.zeros((1, 12, 3), np.float32)
    sim[0, :, 0] = np.linspace(1, 0, 12)  # clip 0 ranks first for sentence 0
    sim[0, :, 1] = np.linspace(0, 1, 12)  # clip 10 first, clip 0 last (the padding excluded)
    labels = np.full((1, 12), -1)
    labels[0, [0, 3]] = 0
    labels[0, 4] = 1  # rank of clip 4 for sentence 1: clips 10..5 come first -> 7
    clip_mask = np.arange(12)[None] < 11
    sent_mask = np.ones((1, 3), bool)
    out = retrieval_metrics(sim, labels, clip_mask, sent_mask)
    assert out["queries"] == 2
    assert out["r1"] == 0.5 and out["r5"] == 0.5 and out["r10"] == 1.0
    assert out["mean_rank"] == (1 + 7) / 2


def test_appendix_d_pool_spans_every_test_video():
    """Appendix D: a sentence's clips compete with the clips of every video of the split.
    Three generated videos of 5, 4 and 6 clips (video 1 with two padding clips)."""
    from vnr.benchmarks.msymon.retrieval_metrics import pooled_retrieval_metrics, retrieval_metrics

    rng = np.random.default_rng(0)
    dim = 16
    clip_mask = np.zeros((3, 6), bool)
    for b, n in enumerate((5, 4, 6)):
        clip_mask[b, :n] = True
    labels = np.full((3, 6), -1)
    labels[0, :4] = [0, 0, 1, 2]
    labels[1, :4] = [0, 1, 1, 1]
    labels[2, :6] = [0, 1, 2, 3, -1, 3]
    sent_mask = np.zeros((3, 5), bool)
    sent_mask[0, :3] = sent_mask[1, :3] = sent_mask[2, :5] = True  # (1, 2), (2, 4): no clip
    sent = rng.normal(size=(3, 5, dim))
    clips = np.where(labels[..., None] >= 0,
                     np.take_along_axis(sent, np.maximum(labels, 0)[..., None], 1), 0.0)
    clips = clips + 0.3 * rng.normal(size=clips.shape)
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    v, t = unit(clips).astype(np.float32), unit(sent).astype(np.float32)
    v[1, 4:] = v[0, 0]  # padding clips: copies of a real clip, never candidates
    sim = np.einsum("bce,bse->bcs", v, t)
    own = retrieval_metrics(sim, labels, clip_mask, sent_mask)
    pooled = pooled_retrieval_metrics(v, t, labels, clip_mask, sent_mask)
    assert pooled["pool_clips"] == 15 and pooled["pool_videos"] == 3
    assert pooled["queries"] == own["queries"] == 3 + 2 + 4
    assert own["r1"] == 1.0 and own["mean_rank"] == 1.0  # easy inside one video
    # Sentence 0 of video 0 loses to a clip of video 2 made to look like it.
    v[2, 4] = unit(t[0, 0] + 0.01 * rng.normal(size=dim))
    pooled = pooled_retrieval_metrics(v, t, labels, clip_mask, sent_mask)
    assert pooled["r1"] == pytest.approx(8 / 9) and pooled["mean_rank"] == pytest.approx(10 / 9)
    # By hand: rank of each query among all 15 real clips (dense, ties by clip order).
    flat_v = v[clip_mask]
    ranks = []
    for b in range(3):
        for s in np.flatnonzero(sent_mask[b]):
            rel = np.zeros(len(flat_v), bool)
            hits = (labels[b] == s) & clip_mask[b]
            if not hits.any():
                continue
            offset = clip_mask[:b].sum()
            rel[offset + np.flatnonzero(hits[clip_mask[b]])] = True
            order = np.argsort(-(flat_v @ t[b, s]), kind="stable")
            ranks.append(1 + np.flatnonzero(rel[order])[0])
    assert pooled["mean_rank"] == pytest.approx(np.mean(ranks))
