"""Rank metrics: exact values, ties in expectation, stages, and the Prior row."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vnr.benchmarks.sc2st import metrics as rm
from vnr.benchmarks.sc2st.model import prior_scores


def test_per_query_exact_values():
    scores = np.array([[0.9, 0.1, 0.5, 0.3],   # answer 0: rank 1
                       [0.9, 0.1, 0.5, 0.3],   # answer 3: rank 3
                       [0.2, 0.2, 0.2, 0.9]])  # answer 0: 1 higher, 2 tied -> ranks 2..4
    q = rm.per_query(scores, np.array([0, 3, 0]), ks=(1, 2, 3))
    q = {k: np.asarray(v) for k, v in q.items()}
    np.testing.assert_allclose(q["rank"], [1, 3, 3])
    np.testing.assert_allclose(q["r1"], [1, 0, 0])
    np.testing.assert_allclose(q["r2"], [1, 0, 1 / 3])
    np.testing.assert_allclose(q["r3"], [1, 1, 2 / 3])
    np.testing.assert_allclose(q["rr"], [1, 1 / 3, (1 / 2 + 1 / 3 + 1 / 4) / 3], rtol=1e-6)


def test_constant_scores_give_expected_prior_exactly():
    m = rm.summarise(np.zeros((4, 9, 100)), np.zeros((4, 9), np.int32))
    assert m["r1"] == pytest.approx(1.0) and m["r5"] == pytest.approx(5.0)
    assert m["r10"] == pytest.approx(10.0) and m["mean_rank"] == pytest.approx(50.5)
    assert m["mrr"] == pytest.approx(np.mean(1 / np.arange(1, 101)), rel=1e-5)


def test_prior_baseline_row():
    """The Prior row: random scores over 100 candidates, 20k storyboards x 9 rounds."""
    n = 20_000
    idx = jnp.arange(n)
    scores = np.asarray(jax.jit(lambda i: prior_scores(jax.random.key(0), i, (9, 100)))(idx))
    answer = np.random.default_rng(1).integers(0, 100, (n, 9))
    m = rm.summarise(scores, answer)
    # 180k queries: std of R@1 ~0.023 pts, R@10 ~0.07 pts, mean rank ~0.07
    assert m["r1"] == pytest.approx(1.0, abs=0.15)
    assert m["r5"] == pytest.approx(5.0, abs=0.35)
    assert m["r10"] == pytest.approx(10.0, abs=0.45)
    assert m["mean_rank"] == pytest.approx(50.5, abs=0.45)
    assert m["mrr"] == pytest.approx(np.mean(1 / np.arange(1, 101)), abs=0.004)
    for stage in rm.STAGES:
        assert m[f"{stage}_r1"] == pytest.approx(1.0, abs=0.3)


def test_stages_select_their_rounds():
    # perfect at rounds 2-4, worst at 5-10
    scores = np.zeros((2, 9, 10))
    answer = np.zeros((2, 9), np.int32)
    scores[:, :3, 0] = 1.0
    scores[:, 3:, 0] = -1.0
    m = rm.summarise(scores, answer)
    assert m["early_r1"] == 100 and m["early_mean_rank"] == 1
    assert m["middle_r1"] == 0 and m["late_mean_rank"] == 10
    assert m["r1"] == pytest.approx(100 / 3)
    assert "| test |" in rm.table({"test": m})


def test_per_query_jits_and_matches_eager():
    s = np.random.default_rng(0).normal(size=(3, 9, 100)).astype(np.float32)
    a = np.random.default_rng(1).integers(0, 100, (3, 9))
    eager = rm.per_query(s, a)
    jitted = jax.jit(rm.per_query)(s, a)
    for k in eager:
        np.testing.assert_allclose(eager[k], jitted[k], rtol=1e-6)
