"""SYMON §7.2 retrieval metrics: three nearest sentences correct, same-movie exclusion."""

import numpy as np
import pytest

from vnr.ops import retrieval_metrics as rm


def test_relevance_three_nearest_same_video():
    video = np.array([0, 0, 0, 0, 0, 1, 1])
    center = np.array([0.0, 10, 20, 30, 40, 5, 15])
    rel = rm.relevance(video, center)
    assert rel[0].tolist() == [True, True, True, False, False, False, False]
    assert rel[2].tolist() == [False, True, True, True, False, False, False]
    # A video with two sentences: only those two (never another video's).
    assert rel[5].tolist() == [False] * 5 + [True, True]
    assert np.all(np.diag(rel))


def test_ranks_exclusion_and_ties():
    rel = np.eye(3, dtype=bool)
    excluded = np.zeros((3, 3), bool)
    sim = np.array([[0.5, 0.9, 0.1], [0.2, 0.3, 0.3], [0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(rm.ranks(sim, rel, excluded), [2, 1, 1])  # tie: correct wins
    excluded[0, 1] = True  # the distractor of query 0 is from its movie: removed
    np.testing.assert_array_equal(rm.ranks(sim, rel, excluded), [1, 1, 1])


def test_perfect_and_random_scores():
    rng = np.random.default_rng(0)
    n = 60
    video = np.repeat(np.arange(12), 5)
    movie = video // 2  # two summaries per movie
    center = np.tile(np.arange(5) * 10.0, 12)
    perfect = rm.retrieval_metrics(np.eye(n) * 5, video, movie, center)
    assert perfect["v2t_r@1"] == 100 and perfect["t2v_r@1"] == 100
    assert perfect["v2t_medr"] == 1 and perfect["t2v_medr"] == 1
    rand = rm.retrieval_metrics(rng.normal(size=(n, n)), video, movie, center)
    assert rand["v2t_r@1"] < 40 and rand["v2t_medr"] > 3
    chance = rm.random_expectation(video, movie, center)
    # 3 correct among the 50 other-movie candidates + 3: R@10 ~ 1-(C(50,10)/C(53,10)) ~ 48%.
    assert 35 < chance < 60
    with pytest.raises(ValueError, match="must be"):
        rm.retrieval_metrics(np.zeros((3, 4)), video[:3], movie[:3], center[:3])


def test_same_movie_items_do_not_count_as_errors():
    # Two videos of one movie with identical narration: the other video's items would
    # outrank the query's own if they were not excluded.
    video = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    movie = np.zeros(8, int)
    center = np.tile([0.0, 100, 200, 300], 2)
    sim = np.tile(np.eye(4), (2, 2)) + 0.01 * np.kron([[0, 1], [1, 0]], np.eye(4))
    rel = rm.relevance(video, center)
    assert rm.summary(sim, rel, rm.exclusion(movie, rel))["r@1"] == 100
    assert rm.summary(sim, rel, np.zeros_like(rel))["r@1"] < 100
