"""Every task declares the metrics its `evaluate` reports (`metric_columns(config)`), so a
`select.metric` naming none of them is one error line before anything compiles. That the
names match what evaluation writes is checked on every smoke run
(`tests/reproduce/smoke.py:check_metric_names`)."""

from __future__ import annotations

import pytest

from tests.helpers import task_names
from vnr import config as config_lib
from vnr import sharding, train
from vnr import task as task_lib
from vnr.reports import results as results_lib

# A smoke config of each task (the bad select.metric is set on it).
SMOKE = {
    "moviepuzzle.pairwise": "configs/moviepuzzle/main.py:smoke",
    "moviepuzzle.hcmc": "configs/moviepuzzle/hcmc.py:smoke",
    "moviepuzzle.synopsis": "configs/moviepuzzle/synopsis.py:smoke",
    "moviepuzzle.video_pairs": "configs/moviepuzzle/video_pairs.py:smoke",
    "moviepuzzle.singularity_pairs": "configs/moviepuzzle/singularity_pairs.py:smoke",
    "moviepuzzle.singularity_synopsis": "configs/moviepuzzle/singularity_synopsis.py:smoke",
    "sc2st.task": "configs/sc2st/main.py:smoke",
    "symon.order": "configs/symon/order.py:smoke",
    "symon.retrieval": "configs/symon/retrieval.py:smoke",
    "symon.yms_transfer": "configs/symon/yms_transfer.py:smoke",
    "msymon.alignment": "configs/msymon/main.py:smoke",
    "msymon.punctuation": "configs/msymon/main.py:punctuation,smoke",
    "movie101.mcn": "configs/movie101/mcn.py:smoke",
    "movie101.tng": "configs/movie101/tng.py:smoke",
}


def test_every_task_module_has_a_smoke_config_here():
    assert sorted(SMOKE) == task_names()


@pytest.mark.parametrize("name", task_names())
def test_every_task_names_its_metrics(name):
    module = task_lib.load(name)
    assert callable(getattr(module, "metric_columns", None)), f"{name} has no metric_columns"
    config = config_lib.load(SMOKE[name])
    declared = module.metric_columns(config)
    assert all(isinstance(c, results_lib.Column) for c in declared), declared
    names = task_lib.metric_names(module, config)
    assert names and len(set(names)) == len(names), names
    assert all(isinstance(n, str) and n and "/" not in n for n in names), names
    assert any(c.table for c in declared), f"{name}: no results-table column"


def test_the_table_shows_the_declared_columns_the_results_hold():
    """`task.columns`: declared order, `table=False` left out, absent metrics left out; no
    declaration (or nothing shown): every metric."""
    module = task_lib.load("moviepuzzle.hcmc")
    config = config_lib.load(SMOKE["moviepuzzle.hcmc"])
    results = {"test": {"clips": 4.0, "shot_iou": 0.5, "os3": 1.0, "os2": 2.0, "lsd": 3.0}}
    assert [c.key for c in task_lib.columns(module, config, results)] == [
        "lsd", "os2", "os3", "shot_iou"]
    assert task_lib.columns(module, config, {"test": {"clips": 4.0}}) is None
    assert task_lib.columns(object(), config, results) is None
    assert task_lib.metric_names(object(), config) == ()


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_unknown_select_metric_is_one_line_before_anything_compiles(name, monkeypatch,
                                                                     tmp_path):
    config = config_lib.load(SMOKE[name])
    assert config.task == name
    config.select = dict(metric="val/nope", mode="max")

    def compiled(*args, **kwargs):
        raise AssertionError("the model was built before the select.metric check")

    monkeypatch.setattr(sharding, "create_sharded", compiled)
    with pytest.raises(train.ConfigError) as e:
        train.setup(config, workdir=tmp_path / "run")
    message = str(e.value)
    assert message.startswith(f"select.metric='val/nope': vnr.benchmarks.{name} reports no "
                              f"'nope' (it reports "), message
    assert "\n" not in message
    assert not (tmp_path / "run").exists()
