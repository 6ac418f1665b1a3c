"""The ranking op: tie policies against brute-force enumeration, pools, dense = blockwise
(one device and queries sharded over 8), jit, bad input."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

from vnr.ops import ranking


def _brute(scores, positive, pool, tie, k):
    """(rank, R@k, reciprocal rank) of one query by sorting / enumerating tie orders."""
    idx = [j for j in range(len(scores)) if pool[j]]
    pos = [j for j in idx if positive[j]]
    if not pos:
        return np.nan, np.nan, np.nan
    best = max(scores[j] for j in pos)
    if tie == "index":
        order = sorted(idx, key=lambda j: (-scores[j], j))
        r = 1 + min(order.index(j) for j in pos)
        return r, float(r <= k), 1 / r
    higher = sum(scores[j] > best for j in idx)
    tied = [j for j in idx if scores[j] == best]
    t = sum(positive[j] for j in tied)
    if tie == "optimistic":
        r = 1 + higher
        return r, float(r <= k), 1 / r
    if tie == "pessimistic":
        r = 1 + higher + len(tied) - t
        return r, float(r <= k), 1 / r
    # expected: every placement of the t positives among the tied slots, equally likely
    placements = list(itertools.combinations(range(len(tied)), t))
    ranks = [higher + 1 + min(p) for p in placements]
    return (np.mean(ranks), np.mean([x <= k for x in ranks]),
            np.mean([1 / x for x in ranks]))


def test_policies_on_a_hand_worked_query():
    # candidates: 0 (0.9, other), 1 (0.5, positive), 2 (0.5, other), 3 (0.5, other, out of
    # the pool), 4 (0.5, positive), 5 (0.1, other)
    s = jnp.array([[0.9, 0.5, 0.5, 0.5, 0.5, 0.1]])
    positive = jnp.array([[False, True, False, False, True, False]])
    pool = jnp.array([[True, True, True, False, True, True]])
    st = ranking.rank_stats(s, positive, pool)
    assert (int(st.higher[0]), int(st.tied[0]), int(st.tied_before[0]),
            int(st.tied_pos[0])) == (1, 1, 0, 2)
    assert float(ranking.rank(st, "optimistic")[0]) == 2
    assert float(ranking.rank(st, "pessimistic")[0]) == 3
    assert float(ranking.rank(st, "index")[0]) == 2  # positive 1 precedes other 2
    # expected: 1 other + 2 positives shuffled: first positive at 1 w.p. 2/3, at 2 w.p. 1/3
    assert float(ranking.rank(st, "expected")[0]) == pytest.approx(1 + 1 + 1 / 3)
    assert float(ranking.recall(st, 2, "expected")[0]) == pytest.approx(2 / 3)
    assert float(ranking.reciprocal_rank(st, "expected")[0]) == pytest.approx(
        2 / 3 / 2 + 1 / 3 / 3)
    none = ranking.rank_stats(s, jnp.zeros_like(positive), pool)
    assert np.isnan(ranking.rank(none, "index")[0]) and not bool(none.valid[0])


@pytest.mark.parametrize("tie", ranking.TIES)
def test_dense_equals_brute_force_with_many_ties(tie):
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, (60, 9)).astype(np.float32)  # few values: ties everywhere
    positive = rng.random((60, 9)) < 0.3
    pool = rng.random((60, 9)) < 0.8
    st = ranking.rank_stats(scores, positive, pool)
    got = [np.asarray(f(st)) for f in (lambda x: ranking.rank(x, tie),
                                       lambda x: ranking.recall(x, 3, tie),
                                       lambda x: ranking.reciprocal_rank(x, tie))]
    want = np.array([_brute(scores[i], positive[i], pool[i], tie, 3) for i in range(60)])
    for g, w in zip(got, want.T, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, equal_nan=True)
    assert np.isnan(want[:, 0]).any() and (~np.isnan(want[:, 0])).sum() > 30


def _pool(q, c):
    return (q["group"][:, None] != c["group"][None, :]) | (q["own"][:, None] == c["own"][None, :])


def _problem(seed, n_q=37, n_c=53, dim=6):
    rng = np.random.default_rng(seed)
    q = rng.integers(-2, 3, (n_q, dim)).astype(np.float32)  # integer dots: exact, tied
    c = rng.integers(-2, 3, (n_c, dim)).astype(np.float32)
    c[7] = c[3]  # duplicate candidates tie exactly
    pos = np.full((n_q, 4), -1)
    for i in range(n_q):
        m = rng.integers(0, 5)
        pos[i, :m] = rng.choice(n_c, m, replace=False)
    qa = {"group": rng.integers(0, 4, n_q), "own": rng.integers(0, 6, n_q)}
    ca = {"group": rng.integers(0, 4, n_c), "own": rng.integers(0, 6, n_c)}
    valid = rng.random(n_c) < 0.9
    return q, c, pos, qa, ca, valid


def _dense(q, c, pos, qa, ca, valid):
    positive = np.zeros((len(q), len(c)), bool)
    for i, row in enumerate(pos):
        positive[i, row[row >= 0]] = True
    pool = np.asarray(_pool({k: jnp.asarray(v) for k, v in qa.items()},
                            {k: jnp.asarray(v) for k, v in ca.items()})) & valid[None]
    return ranking.rank_stats(q @ c.T, positive, pool)


@pytest.mark.parametrize("blocks", [(5, 8), (64, 64), (1, 53)])
def test_blockwise_equals_dense(blocks):
    q, c, pos, qa, ca, valid = _problem(1)
    want = _dense(q, c, pos, qa, ca, valid)
    got = ranking.rank_stats_blockwise(q, c, pos, pool_fn=_pool, query_attrs=qa,
                                       candidate_attrs=ca, candidate_valid=valid,
                                       block_queries=blocks[0], block_candidates=blocks[1])
    for name, g, w in zip(ranking.RankStats._fields, got, want, strict=True):
        np.testing.assert_array_equal(g, np.asarray(w), err_msg=name)
    assert got.valid.sum() > 10 and (got.tied > 0).any()


def test_blockwise_sharded_over_eight_devices_equals_one():
    q, c, pos, qa, ca, valid = _problem(2, n_q=45)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(8, 1), ("data", "model"))
    kw = dict(pool_fn=_pool, query_attrs=qa, candidate_attrs=ca, candidate_valid=valid,
              block_queries=4, block_candidates=16)
    one = ranking.rank_stats_blockwise(q, c, pos, **kw)
    eight = ranking.rank_stats_blockwise(q, c, pos, mesh=mesh, **kw)
    for g, w in zip(eight, one, strict=True):
        np.testing.assert_array_equal(g, w)


def test_metrics_jit_and_bad_input():
    rng = np.random.default_rng(3)
    s = rng.normal(size=(4, 20)).astype(np.float32)
    positive = np.eye(4, 20, dtype=bool)

    @jax.jit
    def metrics(s, p):
        st = ranking.rank_stats(s, p)
        return {tie: (ranking.rank(st, tie), ranking.recall(st, 5, tie),
                      ranking.reciprocal_rank(st, tie)) for tie in ranking.TIES}

    got = metrics(s, positive)
    eager = ranking.rank_stats(s, positive)
    for tie in ranking.TIES:
        np.testing.assert_allclose(got[tie][0], ranking.rank(eager, tie), rtol=1e-6)
    with_nan = s.copy()
    with_nan[0, 0] = np.nan  # a NaN positive scores -inf: last, never first
    assert float(ranking.rank(ranking.rank_stats(with_nan, positive), "optimistic")[0]) == 20
    with pytest.raises(ValueError, match="tie='random'"):
        ranking.rank(eager, "random")
    with pytest.raises(ValueError, match="must be"):
        ranking.rank_stats_blockwise(s, s[:, :3], np.zeros((4, 1), int))
    with pytest.raises(ValueError, match="positives"):
        ranking.rank_stats_blockwise(s, s, np.full((4, 1), 4))
