"""Retrieval metrics for contextual retrieval (Sc2St Tables 3-5), pure and jit-able.

Given candidate scores and the index of the correct candidate, the rank of the
answer comes from the shared ranking op (`vnr.ops.ranking`) with the tie policy
"expected": ties are broken uniformly at random *in expectation*, so every metric
is its exact expected value under random tie-breaking (a constant scorer gets mean
rank (C + 1) / 2 and R@k = k / C, never a lucky 1 or an unlucky C):

* R@k  = P(rank <= k)           = clip((k - g) / (e + 1), 0, 1)
* rank = E[rank]                = g + (e + 2) / 2
* RR   = E[1 / rank]            = (H(g + e + 1) - H(g)) / (e + 1)

with g = #higher, e = #other candidates tied with the answer, H the harmonic
numbers. Rounds are grouped into stages for Table 4: early t = 2-4, middle 5-7,
late 8-10 (round t asks for keyframe t; index r = t - 2). The paper prints late as
"7-9", which would count round 7 twice and never round 10: read here as 8-10.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vnr.ops import ranking
from vnr.reports.results import Column, markdown

KS = (1, 5, 10)
STAGES = {"early": (2, 3, 4), "middle": (5, 6, 7), "late": (8, 9, 10)}
METRICS = ("r1", "r5", "r10", "mean_rank", "mrr")
# Every key `summarise` can report: overall, then per stage.
NAMES = (*METRICS, *(f"{stage}_{k}" for stage in STAGES for k in METRICS))
TIE = "expected"  # ours (the paper does not say how ties rank): random ties, in expectation


def per_query(scores: jax.Array, answer: jax.Array, ks: tuple[int, ...] = KS
              ) -> dict[str, jax.Array]:
    """Expected R@k, rank and reciprocal rank per query.

    Args:
      scores: float [..., C] candidate scores (higher = better).
      answer: int [...] index of the correct candidate.

    Returns:
      {"r<k>": [...], "rank": [...], "rr": [...]} float32.
    """
    scores = jnp.asarray(scores, jnp.float32)
    positive = jax.nn.one_hot(jnp.asarray(answer), scores.shape[-1], dtype=bool)
    stats = ranking.rank_stats(scores, positive)
    out = {f"r{k}": ranking.recall(stats, k, TIE) for k in ks}
    out["rank"] = ranking.rank(stats, TIE)
    out["rr"] = ranking.reciprocal_rank(stats, TIE)
    return out


def summarise(scores: np.ndarray, answer: np.ndarray, first_round: int = 2
              ) -> dict[str, float]:
    """Overall and per-stage R@1/5/10 (percent), mean rank and MRR.

    Args:
      scores: [N, T, C] scores of N storyboards over rounds first_round..first_round+T-1.
      answer: [N, T] correct indices.

    Returns:
      {"r1", "r5", "r10", "mean_rank", "mrr"} overall, and the same keys prefixed
      "early_", "middle_", "late_" for the stages (rounds outside 2..10 count only overall).
    """
    q = {k: np.asarray(v) for k, v in per_query(scores, answer).items()}
    rounds = np.arange(first_round, first_round + np.asarray(answer).shape[1])

    per_query_key = {"mean_rank": "rank", "mrr": "rr"}  # R@k: percent of the queries

    def agg(sel: np.ndarray) -> dict[str, float]:
        return {k: float(q[per_query_key.get(k, k)][:, sel].mean()) *
                (1 if k in per_query_key else 100) for k in METRICS}

    out = agg(np.ones(len(rounds), bool))
    for stage, ts in STAGES.items():
        sel = np.isin(rounds, ts)
        if sel.any():
            out.update({f"{stage}_{k}": v for k, v in agg(sel).items()})
    return out


def columns(stages: bool = True) -> list[Column]:
    """Results-table columns as the paper lays them out: R@1 R@5 R@10 MeanR MRR, overall
    then per stage (early / middle / late)."""
    groups = [("", "")] + ([(f"{s}_", f"{s} ") for s in STAGES] if stages else [])
    names = {"r1": "R@1", "r5": "R@5", "r10": "R@10", "mean_rank": "MeanR", "mrr": "MRR"}
    return [Column(prefix + k, label + names[k], "{:.3f}" if k == "mrr" else "{:.2f}")
            for prefix, label in groups for k in METRICS]


def table(results: dict[str, dict[str, float]], stages: bool = True) -> str:
    """Markdown table of `columns` (one row per run or split)."""
    return markdown(results, columns(stages))
