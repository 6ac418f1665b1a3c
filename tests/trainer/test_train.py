"""The train loop end to end on the tiny synthetic corpus: outputs, resume, NaN, bad input."""

import gzip
import json
import pathlib
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs.moviepuzzle.main import get_config
from tests import ROOT  # noqa: E402
from tests.helpers import checkpoint_arrays, named_arrays, override
from vnr import sharding, train

METRICS = {"lsd", "lmd", "sd", "ssd", "os2", "os3"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    """One tiny synthetic corpus built once for the module."""
    return str(tmp_path_factory.mktemp("tfds"))


def smoke(data_dir: str, **overrides):
    c = get_config("smoke")
    c.data.data_dir = data_dir
    return override(c, overrides)


@pytest.fixture(scope="module")
def finished(data_dir, tmp_path_factory) -> tuple[pathlib.Path, dict]:
    """One uninterrupted smoke run on a (4, 2) mesh (6 steps, checkpoints at 3 and 6)."""
    workdir = tmp_path_factory.mktemp("full")
    return workdir, train.run(smoke(data_dir, **{"mesh.shape": (4, 2)}), str(workdir))


@pytest.mark.e2e
def test_smoke_run_writes_results_reports_and_logs(finished):
    workdir, results = finished
    saved = json.loads((workdir / "results.json").read_text())
    assert saved.pop("selection") == {"metric": None, "mode": "last", "step": 6, "value": None}
    assert set(saved) == {"test_in_domain", "test_out_domain"}
    for split in saved.values():
        assert METRICS <= set(split)
        assert 0.0 <= split["os2"] <= 100.0 and split["clips"] == 10  # a full + a short batch
    assert saved == json.loads(json.dumps(results))
    for name in ("reports/curves.png", "reports/test_out_domain_orders.png", "config.json"):
        assert (workdir / name).stat().st_size > 1000, name
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert any("train/loss" in r for r in rows) and any("val/os2" in r for r in rows)
    assert list((workdir / "tb").glob("events.out.tfevents.*"))
    assert json.loads((workdir / "config.json").read_text())["task"] == "moviepuzzle.pairwise"


@pytest.mark.e2e
def test_restart_resumes_where_it_stopped(data_dir, finished, tmp_path, monkeypatch, capsys):
    """Killed after the step-3 checkpoint and restarted (relative workdir): the same
    parameters, bit for bit, as the run that never stopped. Its profiler window (step 2)
    is past: one line says so. Without a font for the figures' text (a font lacking the
    Latin letters stands in for a machine without a CJK font), the run's figures are
    written with one warning line, not one per figure."""
    from vnr.reports import plots

    full, _ = finished
    shutil.copytree(full, tmp_path / "cut")
    shutil.rmtree(tmp_path / "cut" / "checkpoints" / "6")
    (tmp_path / "cut" / "results.json").unlink()
    shutil.rmtree(tmp_path / "cut" / "reports")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plots, "fonts", lambda: ["STIXSizeFiveSym"])
    capsys.readouterr()
    train.run(smoke(data_dir, **{"mesh.shape": (4, 2), "profile.start_step": 2,
                                 "profile.num_steps": 1}), "cut")
    err = capsys.readouterr().err
    assert "profile window steps 2..2 skipped: this run resumed at step 4" in err, err
    assert not (tmp_path / "cut" / "profile").exists()
    figures = sorted(p.name for p in (tmp_path / "cut" / "reports").glob("*.png"))
    assert len(figures) >= 3 and "curves.png" in figures, figures
    (line,) = [x for x in err.splitlines() if x.startswith("warning:")]
    assert "no installed font has" in line and "the run's other reports" in line, line
    a, b = checkpoint_arrays(full, 6), checkpoint_arrays(tmp_path / "cut", 6)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.e2e
def test_profiler_window_writes_a_trace_and_changes_nothing(data_dir, finished, tmp_path,
                                                            capsys):
    """Steps 4-5 traced (config.profile): a TensorBoard/Perfetto trace appears under
    <workdir>/profile/, and parameters and results equal the untraced run's. Its
    `<workdir>/reports` cannot be created (a file is there): the run finishes, with one
    warning line about it."""
    full, results = finished
    (tmp_path / "reports").write_text("a file where the reports folder should be")
    capsys.readouterr()
    got = train.run(smoke(data_dir, **{"mesh.shape": (4, 2), "profile.start_step": 4,
                                       "profile.num_steps": 2}), str(tmp_path))
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning:")]
    assert line.startswith(f"warning: report {tmp_path}/reports/") and line.endswith(
        f"(nothing more is written to {tmp_path / 'reports'})"), line
    assert (tmp_path / "results.json").exists()
    traces = list((tmp_path / "profile").rglob("*.xplane.pb"))
    assert traces and traces[0].stat().st_size > 1000, traces
    perfetto = list((tmp_path / "profile").rglob("perfetto_trace.json.gz"))
    assert perfetto, sorted(p.name for p in (tmp_path / "profile").rglob("*"))
    events = json.loads(gzip.decompress(perfetto[0].read_bytes()))
    events = events["traceEvents"] if isinstance(events, dict) else events
    steps = {e.get("args", {}).get("step_num") for e in events if e.get("name") == "train"}
    assert {"4", "5"} <= {str(x) for x in steps}, steps  # the window's steps, annotated
    assert got == results
    a, b = checkpoint_arrays(full, 6), checkpoint_arrays(tmp_path, 6)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.e2e
def test_checkpoint_restores_onto_another_mesh(data_dir, finished):
    """A checkpoint written on (4, 2) restores exactly onto (2, 4) in the new shardings."""
    full, _ = finished
    from vnr import checkpoint

    s = train.setup(smoke(data_dir, **{"mesh.shape": (2, 4)}))
    with checkpoint.manager(full / "checkpoints") as mgr:
        state = checkpoint.restore(mgr, 6, s.state, s.state_shardings, None)
    restored = state.to_pure_dict()
    want = checkpoint_arrays(full, 6)
    got = named_arrays(jax.device_get(restored))
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    kernel = restored[0]["blocks"][0]["up"]["kernel"]  # state = (model, optimizer)
    assert dict(kernel.sharding.mesh.shape) == {"data": 2, "model": 4}
    assert kernel.sharding.spec == s.state_shardings.to_pure_dict()[0]["blocks"][0]["up"][
        "kernel"].spec


@pytest.mark.e2e
def test_checkpoint_of_another_model_names_the_parameter(data_dir, finished):
    full, _ = finished
    from vnr import checkpoint

    s = train.setup(smoke(data_dir, **{"model.mlp": 32}))
    with checkpoint.manager(full / "checkpoints") as mgr, pytest.raises(
            ValueError, match=r"checkpoint parameter 0\.blocks\.0\.down\.kernel has shape "
                              r"\(64, 32\), model expects \(32, 32\)"):
        checkpoint.restore(mgr, 6, s.state, s.state_shardings, None)


@pytest.mark.e2e
def test_train_step_skips_nonfinite_updates(data_dir, monkeypatch):
    """A NaN loss skips the update: every array of the state (optimizer's count included)
    is unchanged, and the step says so."""
    config = smoke(data_dir)
    s = train.setup(config)
    batch = next(iter(s.task.train_data(config, s.local_batch, 0, 1)))
    loss_fn = s.task.loss_fn
    monkeypatch.setattr(s.task, "loss_fn", lambda *a: (loss_fn(*a)[0] * jnp.nan, {}))
    before = jax.device_get(s.state.to_pure_dict())
    state, metrics = s.step_fn(s.state, sharding.global_batch(batch, s.mesh),
                             jnp.asarray(1, jnp.int32))
    assert int(metrics["nonfinite"]) == 1
    jax.tree.map(np.testing.assert_array_equal, before, jax.device_get(state.to_pure_dict()))


@pytest.mark.e2e
def test_nonfinite_parameters_are_never_checkpointed(data_dir, tmp_path, monkeypatch):
    """A NaN learning rate makes finite gradients NaN parameters (not undone): the run stops
    at the first checkpoint step, before saving, naming the first bad step; with a log
    cadence past the checkpoint's, only that check sees it."""
    from vnr import config as config_lib

    monkeypatch.delitem(config_lib.RULES, "lr")
    with pytest.raises(train.NonFiniteLoss, match=r"at step 1; no checkpoint was saved$"):
        train.run(smoke(data_dir, lr=float("nan"), log_every=100), str(tmp_path))
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()]


@pytest.mark.e2e
def test_nonfinite_loss_stops_run_and_keeps_last_good_checkpoint(data_dir, tmp_path,
                                                                 monkeypatch):
    original = train.train_step

    def poisoned(graphdef, task, config, state, batch, step):
        old = state.to_pure_dict()
        new, metrics = original(graphdef, task, config, state, batch, step)
        bad = step == 5
        metrics["nonfinite"] = jnp.where(bad, 1, metrics["nonfinite"])
        from flax import nnx

        nnx.replace_by_pure_dict(new, jax.tree.map(lambda n, o: jnp.where(bad, o, n),
                                                   new.to_pure_dict(), old))
        return new, metrics

    monkeypatch.setattr(train, "train_step", poisoned)
    with pytest.raises(train.NonFiniteLoss, match=r"step 5; .*\(step 3\)$"):
        train.run(smoke(data_dir), str(tmp_path))
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()) \
        == ["3"]
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("overrides, message", [
    ({"mesh.shape": (3, 1)}, r"mesh.shape \(3, 1\) needs 3 devices but there are 8"),
    ({"batch_size": 12}, r"batch_size=12 is not divisible by the mesh's data axis"),
    ({"data.config": "clips"}, r"^data.manual_dir is required for data.config='clips': "
                               r"moviepuzzle/clips needs --manual_dir: a directory holding "
                               r"clip_id.json"),
    ({"data.config": "clips", "data.manual_dir": "/nonexistent/dir"}, r"does not exist"),
    ({"task": "nope"}, r"task='nope': no module vnr/benchmarks/nope.py"),
    ({"eval.search": "exact", "data.max_frames": 21},
     r"eval.search='exact' handles clips of <= 20 frames"),
    ({"eval.search": "bem"}, r"eval.search='bem': use 'beam' or 'exact'"),
    ({"select.metric": "os2"}, r"select.metric='os2': name an evaluator's metric as "
                               r"<evaluator>/<metric>"),
    ({"select.metric": "val/nope"}, r"select.metric='val/nope': vnr.benchmarks.moviepuzzle."
                                    r"pairwise reports no 'nope'"),
    ({"select.metric": "val/os2", "eval_every": 100}, r"evals.val.every=100 > total_steps=6"),
    ({"evals.val.type": "moviepuzzle.nope"}, r"evals.val.type='moviepuzzle.nope': no module "
                                             r"vnr/benchmarks/moviepuzzle/nope.py"),
    ({"evals.val.every": -1}, r"eval_every=-1 must be >= 1"),  # the same reference
    ({"profile.start_step": 4, "profile.num_steps": 5}, r"profile window steps 4..8 ends past "
                                                        r"total_steps=6"),
])
def test_bad_config_fails_before_compile(data_dir, tmp_path, overrides, message):
    with pytest.raises(train.ConfigError, match=message):
        train.setup(smoke(data_dir, **overrides), workdir=tmp_path, check_splits=True)
    assert not (tmp_path / "config.json").exists()


def test_unknown_split_is_one_config_error_before_anything_compiles(data_dir, tmp_path,
                                                                    monkeypatch):
    def compiled(*args, **kwargs):
        raise AssertionError("the model was built before the split check")

    monkeypatch.setattr(sharding, "create_sharded", compiled)
    bad_data = smoke(data_dir, **{"data.test_splits": ("test",)})
    bad_evaluator = smoke(data_dir)
    bad_evaluator.evals.extra = dict(split="nope", every=3)
    for config, name in [(bad_data, "data.test_splits='test'"),
                         (bad_evaluator, "evals.extra.split='nope'")]:
        with pytest.raises(train.ConfigError, match=rf"^{name} is not a split of moviepuzzle/"
                           r"synthetic_tiny \(it has train, val, test_in_domain"):
            train.run(config, str(tmp_path))
        assert not (tmp_path / "config.json").exists()  # the corrected command may run here


def test_unwritable_data_dir_is_one_line_before_anything_compiles(tmp_path, monkeypatch):
    """A data_dir the first-use build cannot create stops the run before the model is
    built (`setup` compiles); nothing is written to the workdir."""
    afile = tmp_path / "afile"
    afile.write_text("a file where a folder should be")

    def compiles(*args, **kwargs):
        raise AssertionError("setup ran before the data_dir was checked")

    monkeypatch.setattr(train, "setup", compiles)
    with pytest.raises(train.ConfigError, match=(
            rf"^data.data_dir={afile}/tfds cannot be created: {afile} is a file, not a "
            rf"directory$")):
        train.run(smoke(str(afile / "tfds")), str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_a_build_that_cannot_write_into_data_dir_is_one_config_error(tmp_path):
    """An existing data_dir (a read-only one may hold a finished build) is found only when
    the build writes: one line naming it, not an OSError traceback; no config.json."""
    (tmp_path / "tfds").mkdir()
    (tmp_path / "tfds" / "moviepuzzle").write_text("in the way")
    with pytest.raises(train.ConfigError, match=(
            rf"^data.data_dir={tmp_path}/tfds: the build cannot write there "
            rf"\(NotADirectoryError: Not a directory: {tmp_path}/tfds/moviepuzzle")):
        train.run(smoke(str(tmp_path / "tfds")), str(tmp_path / "run"))
    assert not (tmp_path / "run" / "config.json").exists()


def test_a_resumed_run_past_the_profiler_window_says_it_traces_nothing(tmp_path):
    from vnr import profiling

    config = ml_collections.ConfigDict({"total_steps": 9, "profile": {"start_step": 4,
                                                                      "num_steps": 2}})
    assert profiling.Profiler(config, tmp_path, first_step=1).skipped is None
    assert profiling.Profiler(config, tmp_path, first_step=4).skipped is None  # resumed at 3
    late = profiling.Profiler(config, tmp_path, first_step=5)  # resumed from step 4's
    assert late.skipped == ("profile window steps 4..5 skipped: this run resumed at step 5, "
                            "after its start (to trace this run, set profile.start_step >= 6)")
    for step in range(5, 10):  # and it traces nothing
        with late.step(step):
            pass
        late.after(step, None)
    assert not late.active and not (tmp_path / "profile").exists()


def test_workdir_of_another_config_is_refused(data_dir, tmp_path):
    train.check_workdir(tmp_path, smoke(data_dir))
    train.check_workdir(tmp_path, smoke(data_dir, total_steps=99))  # resumable key: fine
    with pytest.raises(train.ConfigError, match=r"holds a run of another config .*model.width"):
        train.setup(smoke(data_dir, **{"model.width": 64}), workdir=tmp_path)


@pytest.mark.e2e
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
    code, errors = cli("--config.batch_size=0")
    assert code != 0 and errors == ["error: config key batch_size=0 must be >= 1"]


def test_optimizer_and_schedule_keys():
    """`optimizer`, `eps`, `schedule`, `end_lr_factor`, `grad_clip` 0 reach optax; unknown
    values are one error naming the key."""
    import optax

    from vnr.optim import make_lr, make_optimizer

    c = ml_collections.ConfigDict(dict(lr=1e-3, warmup_steps=0, total_steps=10, b1=0.9, b2=0.99,
                                       weight_decay=0.01, grad_clip=0.0, eps=1e-6,
                                       optimizer="adam", schedule="constant"))
    assert [float(make_lr(c)(s)) for s in (0, 5, 10)] == pytest.approx([1e-3] * 3)
    c.schedule, c.end_lr_factor = "cosine", 0.0
    assert float(make_lr(c)(0)) == pytest.approx(1e-3)
    assert float(make_lr(c)(10)) == pytest.approx(0.0, abs=1e-9)
    params = {"w": jnp.ones(3)}
    grads = {"w": jnp.full(3, 100.0)}
    upd, _ = make_optimizer(c).update(grads, make_optimizer(c).init(params), params)
    ref, _ = optax.adam(1e-3, b1=0.9, b2=0.99, eps=1e-6).update(
        grads, optax.adam(1e-3).init(params), params)
    np.testing.assert_allclose(upd["w"], ref["w"], rtol=1e-6)  # no clipping, no decay
    c.optimizer, c.momentum, c.weight_decay = "sgd", 0.5, 0.1
    upd, _ = make_optimizer(c).update(grads, make_optimizer(c).init(params), params)
    np.testing.assert_allclose(upd["w"], -1e-3 * (100.0 + 0.1), rtol=1e-6)  # L2 + momentum
    for key, bad in (("optimizer", "lamb"), ("schedule", "linear")):
        with pytest.raises(ValueError, match=f"{key}='"):
            make_optimizer(ml_collections.ConfigDict({**c.to_dict(), key: bad}))
