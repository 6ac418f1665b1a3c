"""SYMON §7.2 retrieval metrics: three closest texts / clips correct, other videos of the
query's movie removed from the pool, the query's own clips kept."""

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
    # Pool: the query's 5 own items (3 correct) + the 50 other-movie items; a random
    # ranking puts at least one of 3 correct among the top 10 of 55 with p ~ 46%.
    assert 35 < chance < 60
    with pytest.raises(ValueError, match="must be"):
        rm.retrieval_metrics(np.zeros((3, 4)), video[:3], movie[:3], center[:3])


def test_vice_versa_is_computed_from_the_text_side():
    # Nearest three is not symmetric: text 0's three closest clips are 0, 1, 2, although
    # text 0 is not among clip 2's three closest texts (1, 2, 3).
    video = np.zeros(5, int)
    center = np.array([0.0, 10, 20, 30, 40])
    sim = np.zeros((5, 5))
    sim[2, 0] = 1.0  # clip 2 scores highest for text 0
    m = rm.retrieval_metrics(sim, video, np.arange(5) * 0, center)
    assert m["t2v_r@1"] == 100  # clip 2 is correct for text 0 ("vice versa")


def test_generated_corpus_two_videos_share_a_movie():
    """Videos 0 and 1 are two summaries of movie 0, video 2 is another movie. For a query
    of video 0 the other summary's items leave the pool; its own video's clips stay."""
    rng = np.random.default_rng(3)
    video = np.repeat([0, 1, 2], 6)
    movie = np.array([0, 0, 1]).repeat(6)
    center = np.tile(np.arange(6) * 20.0, 3)
    exc = rm.exclusion(video, movie)
    assert exc[0, 6:12].all() and not exc[0, :6].any() and not exc[0, 12:].any()
    assert not exc[12].any()  # the lone movie removes nothing
    base = rng.normal(size=(18, 18)) * 0.01
    q = 0  # clip 0: correct texts 0, 1, 2

    def rank_of(sim):
        return rm.ranks(sim, rm.relevance(video, center), exc)[q]

    sim = base.copy()
    sim[q, [0, 1, 2]] = 1.0
    sim[q, 6:12] = 5.0  # the other summary of the same movie scores higher: removed
    assert rank_of(sim) == 1
    sim[q, 4] = 5.0  # a far clip's text of the query's OWN video: stays, counts as wrong
    assert rank_of(sim) == 2
    sim[q, 13] = 5.0  # another movie: counts as wrong
    assert rank_of(sim) == 3
    # The old rule (drop the query's own other moments) would have hidden text 4.
    old = (movie[:, None] == movie[None, :]) & ~rm.relevance(video, center)
    assert rm.ranks(sim, rm.relevance(video, center), old)[q] == 2
    full = rm.retrieval_metrics(sim, video, movie, center)
    assert set(full) == {f"{d}_{m}" for d in ("v2t", "t2v")
                         for m in ("r@1", "r@5", "r@10", "medr")}


def test_same_movie_items_do_not_count_as_errors():
    # Two videos of one movie with identical narration: the other video's items would
    # outrank the query's own if they were not excluded.
    video = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    movie = np.zeros(8, int)
    center = np.tile([0.0, 100, 200, 300], 2)
    sim = np.tile(np.eye(4), (2, 2)) + 0.01 * np.kron([[0, 1], [1, 0]], np.eye(4))
    rel = rm.relevance(video, center)
    assert rm.summary(sim, rel, rm.exclusion(video, movie))["r@1"] == 100
    assert rm.summary(sim, rel, np.zeros_like(rel))["r@1"] < 100


def _items(seed: int, videos: int = 9):
    """Items of several videos (3 to 9 each), two videos per movie, some of one clip."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 10, videos)
    video = np.repeat(np.arange(videos), sizes)
    movie = video // 2
    center = np.concatenate([np.sort(rng.uniform(0, 60, s)) for s in sizes])
    text_center = center + rng.normal(0, 3, len(center))
    return video, movie, center, text_center


def test_blockwise_embeddings_equal_the_dense_matrix():
    """The evaluation path (blockwise over embeddings, positives as index lists) gives the
    same numbers as the dense [N, N] protocol, ties included (integer embeddings)."""
    video, movie, center, tc = _items(0)
    rng = np.random.default_rng(1)
    for v, t in ((rng.normal(size=(len(video), 8)), rng.normal(size=(len(video), 8))),
                 (rng.integers(-1, 2, (len(video), 4)), rng.integers(-1, 2, (len(video), 4)))):
        dense = rm.retrieval_metrics(np.asarray(v, np.float32) @ np.asarray(t, np.float32).T,
                                     video, movie, center, text_center=tc)
        block = rm.embedding_retrieval_metrics(v, t, video, movie, center, text_center=tc,
                                               block_queries=7, block_candidates=5)
        assert block == pytest.approx(dense, abs=1e-12), (block, dense)


def test_brute_force_protocol_per_query():
    """Each query by hand: the 3 same-video texts nearest in time are correct, the other
    videos of its movie are removed, rank = 1 + wrong candidates strictly above the best."""
    video, movie, center, tc = _items(2, videos=6)
    rng = np.random.default_rng(4)
    v, t = rng.normal(size=(len(video), 5)), rng.normal(size=(len(video), 5))
    sim = (v @ t.T).astype(np.float32)
    want = []
    for i in range(len(video)):
        same = [j for j in range(len(video)) if video[j] == video[i]]
        correct = sorted(same, key=lambda j: (abs(center[i] - tc[j]), j))[:3]
        pool = [j for j in range(len(video)) if movie[j] != movie[i] or video[j] == video[i]]
        best = max(sim[i, j] for j in correct)
        want.append(1 + sum(sim[i, j] > best for j in pool if j not in correct))
    got = rm.embedding_retrieval_metrics(v, t, video, movie, center, text_center=tc)
    want = np.array(want)
    assert got["v2t_medr"] == np.median(want)
    for k in rm.KS:
        assert got[f"v2t_r@{k}"] == pytest.approx(100 * (want <= k).mean())


def test_chance_is_exact_and_matches_random_scores():
    video, movie, center, _ = _items(5)
    exact = rm.chance_recall(video, movie, k=5)
    rng = np.random.default_rng(0)
    rel, exc = rm.relevance(video, center), rm.exclusion(video, movie)
    sampled = np.mean([rm.summary(rng.normal(size=rel.shape), rel, exc)["r@5"]
                       for _ in range(400)])
    assert sampled == pytest.approx(exact, abs=1.5)  # 400 x N queries: std ~0.4 points
    assert rm.random_expectation(video, movie, center, k=5) == exact
    # A lone video of 3 clips: every item is correct, R@1 is certain.
    assert rm.chance_recall(np.zeros(3, int), np.zeros(3, int), k=1) == 100.0
