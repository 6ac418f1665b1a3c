"""TNG global shot retrieval (§5.2) end to end through the train loop, the exact random
R@k level and Table 6's two-stage plumbing (its re-ranking rule: test_tng_protocol.py)."""

from __future__ import annotations

import numpy as np
import pytest

from configs.movie101 import tng as tng_config
from vnr.benchmarks.movie101 import grounding_metrics as gm


def test_random_retrieval_recall_exact() -> None:
    # 10 shots, 1 positive: R@1 = 0.1, R@5 = 0.5; 2 positives: R@1 = 0.2,
    # R@5 = 1 - C(8,5)/C(10,5) = 1 - 56/252; no positive: 0
    r = gm.random_retrieval_recall(np.array([10, 10, 10]), np.array([1, 2, 0]), (1, 5))
    assert r["R@1"] == pytest.approx((0.1 + 0.2) / 3)
    assert r["R@5"] == pytest.approx((0.5 + 1 - 56 / 252) / 3)
    # Monte-Carlo check of the same formula
    rng = np.random.default_rng(0)
    pos = np.zeros((4000, 10), bool)
    pos[:, :2] = True
    mc = gm.retrieval_recall(rng.random((4000, 10)), pos, (5,))["R@5"]
    assert mc == pytest.approx(1 - 56 / 252, abs=0.03)


@pytest.mark.e2e
def test_global_retrieval_end_to_end_beats_random(tmp_path) -> None:
    from vnr import train

    c = tng_config.get_config("global,smoke")
    c.data.data_dir = str(tmp_path / "tfds")
    c.progress = False
    res = train.run(c, str(tmp_path / "work"))
    m = res["test"]
    print({k: round(v, 1) for k, v in m.items()})
    assert m["narrations"] >= 20
    assert m["R@1"] <= m["R@5"] <= m["R@10"] <= 100
    assert m["R@1"] > m["random_R@1"] + 15
    assert m["R@5"] > m["random_R@5"]
    assert (tmp_path / "work" / "reports" / "test_grounding.png").stat().st_size > 5000

    # Table 6: the two trained runs combined (a few-step local run: checks the plumbing)
    from vnr.benchmarks.movie101 import tools

    lc = tng_config.get_config("smoke,tan2d")  # any local row: the plumbing is the same
    lc.data.data_dir = c.data.data_dir
    lc.progress = False
    # the 2D-TAN local run through the trainer: the same task path (loss, predict,
    # evaluation) as RNL at a smaller compile
    loc = train.run(lc, str(tmp_path / "local"))["test"]
    assert loc["narrations"] == 10 and 0 <= loc["R@1,IoU@0.5"] <= loc["R@5,IoU@0.5"] <= 100
    assert (tmp_path / "local" / "reports" / "test_grounding.png").stat().st_size > 5000
    two = tools.two_stage(str(tmp_path / "work"), str(tmp_path / "local"), "test", k=3,
                         max_examples=12)
    print(two)
    assert two["narrations"] == 12
    for m in (0.1, 0.3, 0.5, 0.7):
        assert 0 <= two[f"R@1,IoU@{m}"] <= two[f"R@5,IoU@{m}"] <= 100
    with pytest.raises(ValueError, match="stage=global"):
        tools.two_stage(str(tmp_path / "local"), str(tmp_path / "work"))
