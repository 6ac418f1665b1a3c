"""Matched IoU of predicted clusters with ground-truth groups (Table 3's intermediate measure)."""

import numpy as np
import pytest

from vnr.benchmarks.moviepuzzle.cluster_metrics import matched_iou


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
