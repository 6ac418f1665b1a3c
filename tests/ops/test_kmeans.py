"""Batched k-means: blob recovery, padding invariance, determinism, silhouette, bad input."""

import jax
import numpy as np
import pytest

from vnr.ops import kmeans as km

N, D = 16, 6
LENS = np.array([16, 12, 9, 5])
KS = np.array([4, 3, 2, 1])


def _blobs(seed=0, spread=0.2):
    rng = np.random.default_rng(seed)
    x = np.zeros((len(LENS), N, D), np.float32)
    true = np.full((len(LENS), N), -1)
    for b, (n, k) in enumerate(zip(LENS, KS, strict=True)):
        centres = rng.normal(size=(k, D)) * 5
        lab = rng.permutation(np.arange(n) % k)
        x[b, :n] = centres[lab] + spread * rng.normal(size=(n, D))
        x[b, n:] = 1e3  # junk in padding must not matter
        true[b, :n] = lab
    return x, true, np.arange(N)[None] < LENS[:, None]


def _same_partition(a, b):
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_recovers_blobs_with_per_clip_counts(distance):
    x, true, mask = _blobs()
    labels = np.asarray(km.kmeans(x, KS, mask, jax.random.key(3), distance))
    assert (labels[~mask] == -1).all()
    for b, (n, k) in enumerate(zip(LENS, KS, strict=True)):
        assert set(labels[b, :n].tolist()) == set(range(k))
        assert _same_partition(labels[b, :n], true[b, :n])


@pytest.mark.parametrize("init", ["kmeans++", "random"])
def test_padding_invariance_and_determinism(init):
    x, _, mask = _blobs(1, spread=1.5)  # overlapping blobs: init matters
    key = jax.random.key(7)
    batch = np.asarray(km.kmeans(x, KS, mask, key, init=init))
    np.testing.assert_array_equal(batch, np.asarray(km.kmeans(x, KS, mask, key, init=init)))
    for b in (0, 2):
        n = LENS[b]
        alone = np.asarray(km.kmeans(x[b : b + 1, :n], int(KS[b]), None, key, init=init))
        np.testing.assert_array_equal(alone[0], batch[b, :n])


def test_random_init_draws_distinct_points_and_stops_at_max_iters():
    x, _, mask = _blobs(2)
    # k = n with one Lloyd step: only distinct initial centres give n non-empty clusters
    labels = np.asarray(km.kmeans(x, LENS, mask, jax.random.key(1), max_iters=1,
                                  init="random"))
    for b, n in enumerate(LENS):
        assert sorted(labels[b, :n].tolist()) == list(range(n))
    x = np.random.default_rng(5).normal(size=(len(LENS), N, D)).astype(np.float32)  # no blobs
    one = np.asarray(km.kmeans(x, KS, mask, jax.random.key(2), max_iters=1, init="random"))
    many = np.asarray(km.kmeans(x, KS, mask, jax.random.key(2), max_iters=1000,
                                init="random"))
    assert (one != many).any()  # the first assignment is not yet a fixed point here
    with pytest.raises(ValueError, match="init"):
        km.kmeans(x, KS, mask, init="forgy")


def test_edge_counts_and_empty_clusters():
    x, _, mask = _blobs(2)
    labels = np.asarray(km.kmeans(x, LENS, mask))  # k = n: every point its own cluster
    for b, n in enumerate(LENS):
        assert sorted(labels[b, :n].tolist()) == list(range(n))
    # two tight blobs asked for 4 clusters: none may stay empty
    rng = np.random.default_rng(3)
    pts = np.concatenate([rng.normal(size=(8, D)) * 0.01, 10 + rng.normal(size=(8, D)) * 0.01])
    lab = np.asarray(km.kmeans(pts[None].astype(np.float32), 4, None, jax.random.key(0)))
    assert set(lab[0].tolist()) == {0, 1, 2, 3}


def test_silhouette_matches_numpy():
    x, true, mask = _blobs(4, spread=1.0)
    got = np.asarray(km.silhouette(x, np.maximum(true, 0), mask))
    for b, n in enumerate(LENS):
        pts, lab = x[b, :n].astype(np.float64), true[b, :n]
        d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
        s = []
        for i in range(n):
            own = (lab == lab[i]) & (np.arange(n) != i)
            if not own.any() or len(set(lab)) == 1:
                s.append(0.0)
                continue
            a = d[i, own].mean()
            bb = min(d[i, lab == c].mean() for c in set(lab.tolist()) if c != lab[i])
            s.append((bb - a) / max(a, bb))
        assert got[b] == pytest.approx(np.mean(s), abs=1e-4)


def test_estimate_num_clusters():
    x, _, mask = _blobs(5, spread=0.1)
    est = km.estimate_num_clusters(x, mask, jax.random.key(1), max_clusters=5)
    np.testing.assert_array_equal(est, KS)
    # a single noisy blob per clip is one cluster, not a split of the noise
    rng = np.random.default_rng(6)
    blob = (rng.normal(size=(1, 1, D)) * 5 + rng.normal(size=x.shape)).astype(np.float32)
    est = km.estimate_num_clusters(blob, mask, jax.random.key(1), max_clusters=5)
    np.testing.assert_array_equal(est, [1, 1, 1, 1])


def test_bad_input():
    x, _, mask = _blobs()
    with pytest.raises(ValueError, match="num_clusters"):
        km.kmeans(x, np.array([4, 3, 10, 1]), mask)  # 10 > 9 real points
    with pytest.raises(ValueError, match="num_clusters"):
        km.kmeans(x, 0, mask)
    with pytest.raises(ValueError, match="mask"):
        km.kmeans(x, 1, np.zeros((4, N), bool))
    with pytest.raises(ValueError, match="distance"):
        km.kmeans(x, 1, mask, distance="manhattan")
    with pytest.raises(ValueError, match="x"):
        km.kmeans(x[0], 1)
    bad = x.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="x"):
        km.kmeans(bad, 1, mask)


def test_softdtw_distance_recovers_blobs_and_checks_its_segments():
    x, true, mask = _blobs(2)
    labels = np.asarray(km.kmeans(x, KS, mask, jax.random.key(3), "softdtw", dtw_segments=3,
                                  dtw_gamma=0.01))
    for b, n in enumerate(LENS):
        assert _same_partition(labels[b, :n], true[b, :n])
    # monotone alignment: a time-warped copy is nearer than the same values misaligned
    p, q = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    seqs = np.stack([np.r_[p, q, q, q], np.r_[p, p, p, q], np.r_[q, p, q, p]])[None]
    d = np.asarray(km._sdtw_div(seqs, seqs, 4, 0.01))[0]
    assert d[0, 1] < 0.1 < d[0, 2] and np.allclose(np.diag(d), 0, atol=1e-3)
    sil = km.silhouette(x, np.maximum(true, 0), mask, "softdtw", dtw_segments=3)
    assert np.asarray(sil)[0] > 0.5
    with pytest.raises(ValueError, match="dtw_segments"):
        km.kmeans(x, KS, mask, distance="softdtw", dtw_segments=4)
