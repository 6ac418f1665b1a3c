"""`vnr.ops.kmeans.silhouette` against scikit-learn's `silhouette_score` (Rousseeuw 1987).

Same conventions on both sides: a point alone in its cluster scores 0, the clip's score is
the mean over its real points. Ours computes a padded batch of clips at once; each clip is
compared with scikit-learn on its real points only. Our "cosine" is the chord distance of
unit vectors, i.e. scikit-learn's euclidean metric on normalised points; "softdtw" is
compared through scikit-learn's precomputed-distance path.
"""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from vnr.ops import kmeans as km
from vnr.ops.dtw import pairwise_cost, soft_dtw_divergence

metrics = pytest.importorskip(
    "sklearn.metrics", reason="scikit-learn is a test requirement: pip install -r "
    "requirements-test.txt")


def padded_clips(seed: int, lens: list[int], ks: list[int], d: int, spread: float):
    """A batch of clips of `lens` real points (junk in the padding), labels with every one
    of k clusters used, points around per-cluster centres."""
    rng = np.random.default_rng(seed)
    n = max(lens)
    x = rng.normal(size=(len(lens), n, d)).astype(np.float32) * 1e3  # padding junk
    labels = np.zeros((len(lens), n), np.int32)
    for b, (m, k) in enumerate(zip(lens, ks, strict=True)):
        lab = rng.permutation(np.arange(m) % k)
        centres = rng.normal(size=(k, d)) * 2
        x[b, :m] = centres[lab] + spread * rng.normal(size=(m, d))
        labels[b, :m] = lab
    return x, labels, np.arange(n)[None] < np.asarray(lens)[:, None]


@pytest.mark.parametrize("seed, spread", [(0, 0.3), (1, 1.0), (2, 3.0)])
@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_silhouette_matches_sklearn_on_random_points(seed, spread, distance):
    lens, ks = [24, 17, 9, 6, 3], [4, 3, 2, 5, 2]  # 6 points in 5 clusters: singletons
    x, labels, mask = padded_clips(seed, lens, ks, 5, spread)
    ours = np.asarray(km.silhouette(x, labels, mask, distance=distance))
    for b, m in enumerate(lens):
        pts = x[b, :m].astype(np.float64)
        if distance == "cosine":
            pts /= np.linalg.norm(pts, axis=-1, keepdims=True)
        want = metrics.silhouette_score(pts, labels[b, :m], metric="euclidean")
        assert ours[b] == pytest.approx(want, abs=2e-5), (b, ours[b], want)


def test_silhouette_softdtw_matches_sklearn_precomputed():
    """The soft-DTW reading (sqrt of the clamped divergence between 4-segment sequences),
    distances built independently from vnr.ops.dtw and fed to scikit-learn as a matrix."""
    segs, gamma = 4, 0.1
    x, labels, mask = padded_clips(3, [12, 8], [3, 2], 8, 0.5)
    ours = np.asarray(km.silhouette(x, labels, mask, distance="softdtw", dtw_segments=segs,
                                    dtw_gamma=gamma))
    for b, m in enumerate([12, 8]):
        seq = jnp.asarray(x[b, :m].reshape(m, segs, -1))
        xi = jnp.repeat(seq, m, axis=0)
        xj = jnp.tile(seq, (m, 1, 1))
        div = soft_dtw_divergence(pairwise_cost(xi, xj), pairwise_cost(xi, xi),
                                  pairwise_cost(xj, xj), gamma)
        dist = np.sqrt(np.maximum(np.asarray(div, np.float64), 0.0)).reshape(m, m)
        np.fill_diagonal(dist, 0.0)
        want = metrics.silhouette_score(dist, labels[b, :m], metric="precomputed")
        assert ours[b] == pytest.approx(want, abs=1e-4), (b, ours[b], want)


def test_silhouette_matches_sklearn_on_real_narration_text(shared_data):
    """Points: character-count vectors of real Movie101-N val narrations (Chinese), clusters:
    their movies; one clip per movie group of four."""
    path = shared_data / "movie101" / "v1" / "Movie101-N" / "val.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    rows = json.loads(path.read_text(encoding="utf-8"))
    movies = sorted({r["movie_id"] for r in rows})[:8]
    chars = sorted({c for r in rows for c in r["content"]})
    col = {c: i for i, c in enumerate(chars)}
    clips = []
    for group in (movies[:4], movies[4:8]):
        pts, lab = [], []
        for k, movie in enumerate(group):
            for r in [r for r in rows if r["movie_id"] == movie][:10]:
                v = np.zeros(len(col), np.float32)
                for c in r["content"]:
                    v[col[c]] += 1
                pts.append(v)
                lab.append(k)
        clips.append((np.stack(pts), np.asarray(lab, np.int32)))
    n = max(len(p) for p, _ in clips)
    x = np.zeros((len(clips), n, len(col)), np.float32)
    labels = np.zeros((len(clips), n), np.int32)
    mask = np.zeros((len(clips), n), bool)
    for b, (p, lab) in enumerate(clips):
        x[b, :len(p)], labels[b, :len(p)], mask[b, :len(p)] = p, lab, True
    for distance in ("euclidean", "cosine"):
        ours = np.asarray(km.silhouette(x, labels, mask, distance=distance))
        for b, (p, lab) in enumerate(clips):
            pts = p.astype(np.float64)
            if distance == "cosine":
                pts /= np.linalg.norm(pts, axis=-1, keepdims=True)
            want = metrics.silhouette_score(pts, lab, metric="euclidean")
            assert ours[b] == pytest.approx(want, abs=2e-5), (distance, b, ours[b], want)
