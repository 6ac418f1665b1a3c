"""The train loop end to end on the tiny synthetic corpus: outputs, resume, NaN, bad input."""

import json
import pathlib
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from configs.moviepuzzle.main import get_config
from vnr import train

ROOT = pathlib.Path(__file__).resolve().parents[1]
METRICS = {"lsd", "lmd", "sd", "ssd", "os2", "os3"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    """One tiny synthetic corpus built once for the module."""
    return str(tmp_path_factory.mktemp("tfds"))


def smoke(data_dir: str, **overrides):
    c = get_config("smoke")
    c.data.data_dir = data_dir
    for k, v in overrides.items():
        node = c
        *parents, leaf = k.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = v
    return c


def _final_params(workdir: pathlib.Path, step: int) -> dict:
    with ocp.StandardCheckpointer() as ckpt:
        return ckpt.restore(workdir / "checkpoints" / str(step) / "state")


def test_smoke_run_writes_results_reports_and_logs(data_dir, tmp_path):
    results = train.run(smoke(data_dir), str(tmp_path))
    saved = json.loads((tmp_path / "results.json").read_text())
    assert set(saved) == {"test_in_domain", "test_out_domain"}
    for split in saved.values():
        assert METRICS <= set(split)
        assert 0.0 <= split["os2"] <= 100.0 and split["clips"] > 0
    assert saved == json.loads(json.dumps(results))
    for name in ("reports/curves.png", "reports/test_out_domain_orders.png", "config.json"):
        assert (tmp_path / name).stat().st_size > 1000, name
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert any("train/loss" in r for r in rows) and any("val/os2" in r for r in rows)
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert json.loads((tmp_path / "config.json").read_text())["task"] == "moviepuzzle"


def test_restart_resumes_where_it_stopped(data_dir, tmp_path):
    """Kill after the step-3 checkpoint, restart: same params as never stopping."""
    full, cut = tmp_path / "full", tmp_path / "cut"
    train.run(smoke(data_dir), str(full))
    train.run(smoke(data_dir), str(cut))
    shutil.rmtree(cut / "checkpoints" / "6")  # as if killed between steps 3 and 6
    (cut / "results.json").unlink()
    train.run(smoke(data_dir), str(cut))
    a, b = _final_params(full, 6), _final_params(cut, 6)
    jax.tree.map(np.testing.assert_array_equal, a, b)


def test_resume_onto_another_mesh_with_relative_workdir(data_dir, tmp_path, monkeypatch):
    """A (4, 2) run cut at step 3 and resumed on (2, 4) ends where a (4, 2) run ends."""
    monkeypatch.chdir(tmp_path)
    train.run(smoke(data_dir, **{"mesh.shape": (4, 2)}), "full")
    train.run(smoke(data_dir, **{"mesh.shape": (4, 2)}), "run")
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "6")
    train.run(smoke(data_dir, **{"mesh.shape": (2, 4)}), "run")
    a, b = _final_params(tmp_path / "full", 6), _final_params(tmp_path / "run", 6)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6), a, b)


def test_train_step_skips_nonfinite_updates(data_dir):
    config = smoke(data_dir, lr=float("nan"))
    s = train.setup(config)
    batch = next(iter(s.task.train_data(config, s.local_batch, 0, 1)))
    from vnr import sharding

    before = jax.device_get(s.state.to_pure_dict())
    state, metrics = s.step_fn(s.state, sharding.global_batch(batch, s.mesh),
                               jnp.asarray(1, jnp.int32))
    assert int(metrics["nonfinite"]) == 1
    jax.tree.map(np.testing.assert_array_equal, before, jax.device_get(state.to_pure_dict()))


def test_nonfinite_loss_stops_run_and_keeps_last_good_checkpoint(data_dir, tmp_path,
                                                                 monkeypatch):
    original = train.train_step

    def poisoned(graphdef, task, config, state, batch, step):
        new, metrics = original(graphdef, task, config, state, batch, step)
        bad = step == 5
        metrics["nonfinite"] = jnp.where(bad, 1, metrics["nonfinite"])
        new = jax.tree.map(lambda n, o: jnp.where(bad, o, n), new, state)
        return new, metrics

    monkeypatch.setattr(train, "train_step", poisoned)
    with pytest.raises(train.NonFiniteLoss, match=r"step 5 .*step 3\)"):
        train.run(smoke(data_dir), str(tmp_path))
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()) \
        == ["3"]
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("overrides, message", [
    ({"mesh.shape": (3, 1)}, r"mesh.shape \(3, 1\) needs 3 devices but there are 8"),
    ({"batch_size": 12}, r"batch_size=12 is not divisible by the mesh's data axis"),
    ({"data.config": "clips"}, r"data.manual_dir is required"),
    ({"data.config": "clips", "data.manual_dir": "/nonexistent/dir"}, r"does not exist"),
    ({"task": "nope"}, r"task='nope': no module vnr/tasks/nope.py"),
    ({"eval.search": "exact"}, r"eval.search='exact' handles clips of <= 18 frames"),
    ({"eval.search": "bem"}, r"eval.search='bem': use 'beam' or 'exact'"),
    ({"best_metric": "os2", "ckpt_every": 2}, r"needs ckpt_every \(2\) to be a multiple"),
])
def test_bad_config_fails_before_compile(data_dir, tmp_path, overrides, message):
    with pytest.raises(train.ConfigError, match=message):
        train.setup(smoke(data_dir, **overrides), workdir=tmp_path)
    assert not (tmp_path / "config.json").exists()


def test_unknown_split_is_one_config_error(data_dir, tmp_path):
    with pytest.raises(train.ConfigError, match=r"data.test_splits='test' is not a split of "
                       r"moviepuzzle/synthetic_tiny \(it has train, val, test_in_domain"):
        train.run(smoke(data_dir, **{"data.test_splits": ("test",)}), str(tmp_path))


def test_workdir_of_another_config_is_refused(data_dir, tmp_path):
    train.check_workdir(tmp_path, smoke(data_dir))
    train.check_workdir(tmp_path, smoke(data_dir, total_steps=99))  # resumable key: fine
    with pytest.raises(train.ConfigError, match=r"holds a run of another config .*model.width"):
        train.setup(smoke(data_dir, **{"model.width": 64}), workdir=tmp_path)


def test_cli_errors_are_one_line(tmp_path):
    def cli(*args):
        out = subprocess.run(
            [sys.executable, "-m", "vnr.train", "--config", "configs/moviepuzzle/main.py:smoke",
             "--workdir", str(tmp_path), *args],
            cwd=ROOT, capture_output=True, text=True, timeout=240)
        errors = [x for x in out.stderr.splitlines() if x.startswith("error:")]
        return out.returncode, errors

    code, errors = cli("--config.model.widht=3")
    assert code != 0 and errors == [
        "error: unknown config key --config.model.widht (not in configs/moviepuzzle/main.py)"]
    code, errors = cli("--config.mesh.shape=(3,1)")
    assert code != 0 and len(errors) == 1 and "mesh.shape (3, 1)" in errors[0]
