"""Table 3's intermediate measures: matched IoU of predicted clusters with ground-truth
groups, and the ordering score of the predicted shots' order (the "shot" rows)."""

import numpy as np
import pytest

from vnr.benchmarks.moviepuzzle.cluster_metrics import matched_iou, unit_ordering_score


def _emb(groups, dim=4, seed=0):
    """One well-separated direction per ground-truth group, plus small noise."""
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)[: max(groups) + 1]
    return centres[np.asarray(groups)] + 0.01 * rng.normal(size=(len(groups), dim))


def test_perfect_clustering_scores_one_whatever_the_label_names():
    gt = np.array([[0, 0, 1, 1, 2, 2]])
    pred = np.array([[7, 7, 3, 3, 5, 5]])
    iou = matched_iou(_emb(gt[0])[None], pred, gt)
    np.testing.assert_allclose(np.asarray(iou), [1.0], atol=1e-6)


def test_merged_groups_pay_through_the_union():
    # groups {0,1} and {2,3} merged into one cluster: each matches it with IoU 2/4
    gt = np.array([[0, 0, 1, 1]])
    pred = np.array([[0, 0, 0, 0]])
    np.testing.assert_allclose(np.asarray(matched_iou(_emb(gt[0])[None], pred, gt)), [0.5],
                               atol=1e-6)


def test_split_group_matches_its_most_similar_part():
    # group of 4 split in two clusters of 2; a second group of 2 is exact
    gt = np.array([[0, 0, 0, 0, 1, 1]])
    pred = np.array([[0, 0, 2, 2, 1, 1]])
    emb = _emb([0, 0, 0, 0, 1, 1])
    emb[2:4] += np.array([0, 0, 0.5, 0])  # cluster 2 drifts away from group 0's centre
    iou = float(np.asarray(matched_iou(emb[None], pred, gt))[0])
    # group 0 -> cluster 0 (cosine closest): IoU 2/4; group 1 exact: 1; mean over groups
    assert iou == pytest.approx((0.5 + 1.0) / 2, abs=1e-6)


def test_padding_is_ignored_and_clips_are_independent():
    gt = np.array([[0, 0, 1, 1, -1, -1], [0, 1, 1, 1, 1, -1]])
    pred = np.array([[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 9]])
    mask = gt >= 0
    emb = np.stack([_emb([0, 0, 1, 1, 1, 1]), _emb([0, 1, 1, 1, 1, 1])])
    emb[0, 4:] = 100.0  # padding content must not move any centre
    iou = np.asarray(matched_iou(emb, pred, gt, mask))
    # clip 1: group {0} -> cluster {0, 1}: 1/2; group {1..4} -> cluster {2,3,4}: 3/4
    np.testing.assert_allclose(iou, [1.0, (0.5 + 0.75) / 2], atol=1e-6)


def test_bad_shapes_raise_naming_the_argument():
    with pytest.raises(ValueError, match="pred_labels"):
        matched_iou(np.zeros((1, 3, 2)), np.zeros((1, 4), int), np.zeros((1, 3), int))
    with pytest.raises(ValueError, match="emb"):
        matched_iou(np.zeros((3, 2)), np.zeros((1, 3), int), np.zeros((1, 3), int))


def test_shot_stage_os_scores_the_order_of_predicted_shots():
    """Clip 0: 6 frames in 3 true shots, input shuffled; Algorithm 1 output places the
    predicted shots as blocks B, A, C (frames inside blocks in any order): over shots
    OS2 = 2/3 ((A, C), (B, C) kept, (A, B) swapped), OS3 = 0, while the frame-level
    OS2 of the same output is 8/15 (true places 3 2 1 0 5 4: 7 of 15 pairs swapped).
    Clip 1: a predicted cluster {true 0, true 3} starts at true position 0, the other
    {1, 2} at 1; output puts {1, 2} first: OS2 = 0; two shots: OS3 undefined (NaN).
    Padding (clip 1 has 4 real frames) is ignored."""
    position = np.array([[4, 2, 0, 5, 3, 1], [3, 1, 2, 0, -1, -1]])  # true place per input
    labels = np.array([[9, 4, 7, 9, 4, 7], [5, 8, 8, 5, -1, -1]])  # predicted shot per input
    mask = position >= 0
    # predicted orders (input indices): clip 0 = B block, A block, C block; inside a
    # block the frames are reversed (must not matter); clip 1 = {1, 2} then {3, 0}
    pred = np.array([[4, 1, 5, 2, 3, 0], [2, 1, 0, 3, 4, 5]])
    os2 = unit_ordering_score(pred, labels, position, mask, 2)
    os3 = unit_ordering_score(pred, labels, position, mask, 3)
    np.testing.assert_allclose(os2, [2 / 3, 0.0], atol=1e-6)
    assert os3[0] == pytest.approx(0.0) and np.isnan(os3[1])
    # the true shot order scores 1 whatever the order inside the shots
    right = np.array([[5, 2, 4, 1, 3, 0], [0, 3, 1, 2, 4, 5]])
    np.testing.assert_allclose(unit_ordering_score(right, labels, position, mask, 2), [1, 1])
    # one unit per frame: the frame-level OS (Eq. 6) itself
    from vnr.benchmarks.moviepuzzle.order_metrics import ordering_score

    gt = np.argsort(np.where(mask, position, 99), axis=1, kind="stable")
    assert float(ordering_score(pred, gt, 2, mask)[0]) == pytest.approx(8 / 15)
    each = np.where(mask, np.arange(6)[None], -1)
    np.testing.assert_allclose(unit_ordering_score(pred, each, position, mask, 3),
                               np.asarray(ordering_score(pred, gt, 3, mask)), atol=1e-6)
    with pytest.raises(ValueError, match="unit_labels"):
        unit_ordering_score(pred, labels[:, :4], position, mask)


def test_nested_ordering_score_scores_units_inside_each_true_parent():
    """Tables 8 / 9's single-level rows: frames reversed inside shot 0, in order inside
    shot 1 (the shots themselves in order): OS 0 and 1 per shot, 50 % on average, while
    the whole clip's OS counts the right shot order too."""
    from vnr.benchmarks.moviepuzzle.cluster_metrics import (
        level_alone_scores,
        nested_ordering_score,
    )

    shot = np.array([[0, 0, 0, 1, 1, 1, -1]])
    mask = shot >= 0
    position = np.array([[0, 1, 2, 3, 4, 5, 6]])
    pred = np.array([[2, 1, 0, 3, 4, 5, 6]])
    frame = np.arange(7)[None]
    for beta in (2, 3):
        np.testing.assert_array_equal(
            nested_ordering_score(pred, frame, shot, position, mask, beta), [0.0, 1.0])
    cat = {"mask": mask, "shot_id": shot, "scene_id": np.zeros_like(shot), "position": position}
    got = level_alone_scores("frame", pred, cat)
    assert got == {"level_os2_groups": 2.0, "level_os2": 50.0,
                   "level_os3_groups": 2.0, "level_os3": 50.0}
    # a shot order inside one scene: shot 1 first is all wrong for the two shots
    shots_swapped = np.array([[3, 4, 5, 0, 1, 2, 6]])
    assert level_alone_scores("shot", shots_swapped, cat)["level_os2"] == 0.0
    assert "level_os3" not in level_alone_scores("shot", shots_swapped, cat)  # 2 units < 3
