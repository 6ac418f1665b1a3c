"""Every task names the metrics its `evaluate` reports (`metric_names(config)`), so a
`select.metric` naming none of them is one error line before anything compiles. That the
names match what evaluation writes is checked on every smoke run
(`tests/reproduce/smoke.py:check_metric_names`)."""

from __future__ import annotations

import pytest

from tests.helpers import task_names
from vnr import config as config_lib
from vnr import sharding, train
from vnr import task as task_lib

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
    assert callable(getattr(module, "metric_names", None)), f"{name} has no metric_names"
    names = module.metric_names(config_lib.load(SMOKE[name]))
    assert isinstance(names, tuple) and names and len(set(names)) == len(names), names
    assert all(isinstance(n, str) and n and "/" not in n for n in names), names


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
