"""The checks the smoke runs make (`tests/reproduce/smoke.py`) fail on what they look for."""

import json

import pytest

from tests.reproduce import smoke
from vnr import config as config_lib


def test_check_metric_names_catches_a_metric_no_module_lists(tmp_path):
    run = tmp_path / "row"
    run.mkdir()
    config = config_lib.load("configs/moviepuzzle/main.py:smoke")
    (run / "config.json").write_text(config.to_json_best_effort())
    results = {"test_in_domain": {"os2": 50.0, "clips": 10.0},
               "selection": {"metric": None, "mode": "last", "step": 6, "value": None}}
    (run / "results.json").write_text(json.dumps(results))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 3, "train/loss": 1.0,
                                                   "val/os2": 40.0,
                                                   "val/eval_seconds": 0.5}) + "\n")
    tool = tmp_path / "tool"  # a tool's results hold no config: not checked
    tool.mkdir()
    (tool / "results.json").write_text(json.dumps({"tool": {"anything": 1.0}}))
    assert smoke.check_metric_names(tmp_path) == 1
    results["test_in_domain"]["os_2"] = 1.0
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(AssertionError, match=r"test_in_domain has \['os_2'\], not in "
                                             r"vnr.benchmarks.moviepuzzle.pairwise"):
        smoke.check_metric_names(tmp_path)
    del results["test_in_domain"]["os_2"]
    (run / "results.json").write_text(json.dumps(results))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 3, "val/pair_accuracy": 0.5}))
    with pytest.raises(AssertionError, match=r"val/pair_accuracy is not in the metric_columns "
                                             r"of evals.val"):
        smoke.check_metric_names(tmp_path)
