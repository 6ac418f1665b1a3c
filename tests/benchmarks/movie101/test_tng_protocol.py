"""TNG protocol (Tables 4-6): NMS at m - 0.05 per IoU threshold, inclusive-index IoU and the
7-pick limit, against the plain restatement of Movie101's rule in bench/reference, on
hand-made proposals where the protocol choices change the answer, and on random ones."""

from __future__ import annotations

import numpy as np
import pytest

from bench.reference import movie101_tng as ref
from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import tng


def test_inclusive_iou_hand_cases() -> None:
    # [2, 4] vs [4, 6]: one shared index of 5 -> 1/5 (continuous IoU would say 0)
    assert gm.inclusive_iou([2, 4], [4, 6]) == pytest.approx(0.2) == ref.iou((2, 4), (4, 6))
    assert gm.temporal_iou([2, 4], [4, 6]) == 0.0
    assert gm.inclusive_iou([3, 3], [3, 3]) == 1.0 == ref.iou((3, 3), (3, 3))
    assert gm.inclusive_iou([0, 1], [5, 9]) == 0.0 == ref.iou((0, 1), (5, 9))
    assert gm.inclusive_iou([0, 9], [2, 3]) == pytest.approx(0.2)
    np.testing.assert_array_equal(gm.to_index_boxes(np.array([[2.0, 5.0], [2.5, 2.7]])),
                                  [[2, 4], [2, 2]])


def test_nms_threshold_follows_each_iou_threshold() -> None:
    """Hand-made: the 2nd proposal overlaps the best one by 1/3 (non-inclusive lengths).
    At m = 0.3 (NMS 0.25) it is suppressed, at m = 0.5 (NMS 0.45) it survives and is the
    R@5 hit; a fixed NMS 0.5 would also keep it at m = 0.3."""
    boxes = np.array([[0, 6], [3, 9], [20, 24], [30, 31], [40, 41]], float)
    scores = np.array([0.9, 0.8, 0.5, 0.4, 0.3])
    gt = np.array([5.0, 9.0])  # IoU 0.2 with the best, 5/7 with the second
    assert gm.nms_upstream(scores, boxes, 0.25) == ref.nms(list(scores), list(map(tuple, boxes)),
                                                           0.25) == [0, 2, 3, 4]
    assert gm.nms_upstream(scores, boxes, 0.45) == [0, 1, 2, 3, 4]
    got = gm.recall_upstream(scores[None], boxes, gt[None])
    want = ref.recall(list(scores), list(map(tuple, boxes)), tuple(gt))
    assert got == {k: float(v) for k, v in want.items()}
    assert got["R@5,IoU@0.5"] == 1.0 and got["R@5,IoU@0.3"] == 0.0 and got["R@1,IoU@0.1"] == 1


def test_seven_picks_ties_and_zero_length_boxes() -> None:
    boxes = np.array([[i * 10, i * 10 + 2] for i in range(9)] + [[50, 50], [50, 50]], float)
    scores = np.array([0.5] * 9 + [0.9, 0.9])  # ties: the later index is picked first
    picks = gm.nms_upstream(scores, boxes, 0.45)
    want = ref.nms(list(scores), list(map(tuple, boxes)), 0.45)
    assert picks == want and len(picks) == gm.MAX_PICKS and picks[0] == 10
    assert 9 not in picks  # [50, 50] twice: 0/0 overlap, the copy is dropped


def test_matches_the_reference_on_random_proposal_maps() -> None:
    rng = np.random.default_rng(0)
    spans, valid = gm.proposal_spans(8)
    boxes = gm.to_index_boxes(spans[valid])
    for _ in range(40):
        scores = rng.normal(size=len(boxes)).round(1)  # rounded: ties happen
        gt = np.sort(rng.integers(0, 8, 2)).astype(float)
        got = gm.recall_upstream(scores[None], boxes, gt[None])
        want = ref.recall(list(scores), list(map(tuple, boxes)), tuple(gt))
        assert got == {k: float(v) for k, v in want.items()}


def test_score_windows_uses_the_protocol() -> None:
    n = 4
    spans, valid = gm.proposal_spans(n)
    scores = np.full((1, n, n), -5.0)
    scores[0, 1, 2] = 3.0  # proposal clips 1..2
    out = tng.score_windows(scores, np.array([[1.0, 3.0]]), n)  # gt covers clips 1, 2
    assert out["R@1,IoU@0.7"] == 100.0
    out = tng.score_windows(scores, np.array([[2.0, 4.0]]), n)  # clips 2, 3: IoU 1/3
    assert out["R@1,IoU@0.3"] == 100.0 and out["R@1,IoU@0.5"] == 0.0


def test_two_stage_reranks_by_confidence_and_prior_is_an_option() -> None:
    rel = np.array([[0.0, 10.0], [10.0, 20.0]])
    shot = np.array([0.9, 0.1])
    local = np.array([[0.0, -3.0], [2.0, -4.0]])  # the 2nd window's first proposal wins
    spans, score = gm.two_stage_candidates(shot, np.array([100.0, 300.0]), rel, local, k=2)
    assert spans[np.argmax(score)].tolist() == [300.0, 310.0]
    spans1, score1 = gm.two_stage_candidates(shot, np.array([100.0, 300.0]), rel, local, k=1)
    assert len(spans1) == 2 and spans1[np.argmax(score1)].tolist() == [100.0, 110.0]
    _, prior = gm.two_stage_candidates(shot, np.array([100.0, 300.0]), rel, local, k=2,
                                       prior_weight=5.0)
    assert spans[np.argmax(prior)].tolist() == [100.0, 110.0]  # our cosine prior flips it


def test_table5_rnl_face_ablation_config() -> None:
    """RNL w/o f_v (`no_faces`): no face FC branch; the full RNL sums FC(faces) with V."""
    from flax import nnx

    from configs.movie101 import tng as tng_config

    full = tng.make_model(tng_config.get_config("smoke"), nnx.Rngs(0))
    c = tng_config.get_config("smoke,no_faces")
    assert c.data.faces == 0 and tng.make_model(c, nnx.Rngs(0)).encoder.face_fc is None
    assert full.encoder.face_fc.kernel.shape == (3 * c.data.face_dim, c.model.width)
    assert full.encoder.fc.kernel.shape[0] == c.data.frame_dim
