"""Appendix E.1 inference: Drop-DTW on d = 1 - cosine with separate clip / sentence drop
costs (d_v, d_t), against exhaustive search; (d_v, d_t) tuned on validation."""

import ml_collections
import numpy as np
import pytest

from bench.reference.drop_dtw import alignment_cost, exhaustive
from configs.msymon.main import get_config
from vnr.benchmarks.msymon import alignment as task
from vnr.benchmarks.msymon import inference

B, N, M = 6, 5, 4
LX = np.array([5, 4, 3, 5, 2, 5])
LY = np.array([4, 3, 4, 2, 2, 1])


def _out(rng: np.random.Generator) -> dict:
    sim = rng.uniform(-1.0, 1.0, (B, N, M)).astype(np.float32)
    clip_mask = np.arange(N)[None] < LX[:, None]
    sent_mask = np.arange(M)[None] < LY[:, None]
    labels = np.where(clip_mask, np.sort(rng.integers(-1, 2, (B, N)), -1), -1)
    labels = np.where(labels < LY[:, None], labels, -1).astype(np.int32)
    t = np.tile(np.arange(N, dtype=np.float32), (B, 1))
    return {"sim": sim, "clip_mask": clip_mask, "sent_mask": sent_mask, "labels": labels,
            "clip_begin": t, "clip_end": t + 1}


def _ev(**kw) -> ml_collections.ConfigDict:
    ev = get_config("smoke").eval
    ev.update(kw)
    return ev


@pytest.mark.parametrize("contiguous", [True, False])
def test_alignment_is_the_exhaustive_optimum_of_one_minus_cosine(contiguous):
    out = _out(np.random.default_rng(0))
    # d_t != d_v - 1: not expressible with one drop value on the -cosine cost.
    for d_v, d_t in ((0.9, 0.2), (0.4, 1.3)):
        ev = _ev(drop="fixed", d_v=d_v, d_t=d_t, contiguous=contiguous)
        pred = task.drop_dtw_alignment(out, ev)
        for b in range(B):
            n, m = LX[b], LY[b]
            d = 1.0 - out["sim"][b, :n, :m].astype(np.float64)
            dx, dy = np.full(n, d_v), np.full(m, d_t)
            best, _ = exhaustive(d, dx, dy, contiguous)
            a = tuple(int(v) for v in pred[b, :n])
            assert np.all(pred[b, n:] == -1)
            np.testing.assert_allclose(alignment_cost(a, d, dx, dy), best, rtol=1e-5)


def test_drop_costs_are_tuned_on_validation_and_window_blocks_far_matches():
    out = _out(np.random.default_rng(1))
    ev = _ev(drop="tune", drop_grid=(0.2, 0.6, 1.0, 1.4))
    d_v, d_t = task.tune_drop_costs(out, ev)
    f1 = {(a, b): task.score(out, task.drop_dtw_alignment(out, ev, a, b))["f1"]
          for a in ev.drop_grid for b in ev.drop_grid}
    assert f1[d_v, d_t] == max(f1.values()) and len(set(f1.values())) > 1
    assert get_config("window").eval.window == 1.0 and get_config().eval.window == 0.0
    ev = _ev(drop="fixed", d_v=5.0, d_t=5.0, window=1.0)  # dropping costs more than any d
    out.update(clip_begin=np.tile(np.arange(N, dtype=np.float32) * 10, (B, 1)),
               clip_end=np.tile(np.arange(N, dtype=np.float32) * 10 + 10, (B, 1)),
               narr_begin=np.tile(np.arange(M, dtype=np.float32) * 10, (B, 1)),
               narr_end=np.tile(np.arange(M, dtype=np.float32) * 10 + 10, (B, 1)))
    pred = task.drop_dtw_alignment(out, ev)
    allowed = inference.window_mask(out, 1.0)
    for b in range(B):
        for i in range(LX[b]):
            assert pred[b, i] < 0 or allowed[b, i, pred[b, i]]


def test_percentile_rule_stays_a_named_option():
    out = _out(np.random.default_rng(2))
    assert get_config("percentile").eval.drop == "percentile"
    assert get_config().eval.drop == "tune"
    pred = task.drop_dtw_alignment(out, _ev(drop="percentile", keep_percentile=0.3))
    assert pred.shape == (B, N) and (pred < LY[:, None]).all()
