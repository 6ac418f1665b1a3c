"""`python -m bench retrieval` at a small N: the table prints, and the blockwise metrics
equal the dense [N, N] baseline's (the check the full-size run relies on)."""

import subprocess
import sys

import numpy as np

from bench import retrieval
from tests import ROOT
from vnr.ops import retrieval_metrics


def test_blockwise_equals_the_dense_baseline_in_process():
    data = retrieval.items(700, 16, seed=3)
    dense = retrieval.dense_metrics(*data)
    block = retrieval_metrics.embedding_retrieval_metrics(
        *data[:5], text_center=data[5], block_queries=64, block_candidates=128)
    assert dense["v2t_r@10"] > 0  # the items are not all ranked last
    for k, v in dense.items():
        assert np.isclose(block[k], v, rtol=0, atol=1e-9), (k, block[k], v)


def test_small_run_prints_the_table_with_agreement():
    out = subprocess.run(
        [sys.executable, "-m", "bench", "retrieval", "--n", "400", "--dim", "16",
         "--dense_sizes", "400", "--dense_budget_gb", "1", "--block", "64,128"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    table = out.stdout.split("| impl | N |", 1)[1]
    rows = [ln for ln in table.splitlines() if ln.startswith(("| dense", "| blockwise"))]
    assert len(rows) == 2 and rows[0].startswith("| dense | 400 | 16 |")
    assert rows[1].startswith("| blockwise | 400 | 16 |") and rows[1].endswith("| = dense |")
