"""Preemption and resume through the real command line, and restores across meshes.

SIGTERM at a random step -> a checkpoint at the next step boundary and exit 0;
the same command again, `kill -9` at a later random step; the same command a third
time finishes. Parameters and every logged metric equal, bit for bit, those of a run
that was never interrupted (same data order through the grain iterator state, same
dropout/pair-sampling keys from (seed, step)).
"""

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from configs.moviepuzzle.main import get_config
from tests import ROOT  # noqa: E402
from tests.helpers import checkpoint_arrays, train_once
from vnr import checkpoint, train

pytestmark = pytest.mark.e2e  # every test here trains (in process or in subprocesses)

STEPS = 60
OVERRIDES = {"total_steps": STEPS, "log_every": 1, "ckpt_every": 5, "eval_every": 30,
             "progress": False}
RUN_TIMEOUT = 300  # s per command on a loaded 2-core machine
VOLATILE = {"time", "train/examples_per_sec"}


def _config(data_dir: str):
    c = get_config("smoke")
    c.data.data_dir, c.data.test_splits = data_dir, ()
    c.update(OVERRIDES)
    return c


def _command(workdir: pathlib.Path, data_dir: str) -> list[str]:
    return [sys.executable, "-m", "vnr.train", "--config", "configs/moviepuzzle/main.py:smoke",
            "--workdir", str(workdir), f"--config.data.data_dir={data_dir}",
            "--config.data.test_splits=()", *(f"--config.{k}={v}" for k, v in OVERRIDES.items())]


def _rows(workdir: pathlib.Path) -> list[dict]:
    path = workdir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]


def _last_step(workdir: pathlib.Path) -> int:
    return max((r["step"] for r in _rows(workdir) if "train/loss" in r), default=0)


def _metrics(workdir: pathlib.Path) -> dict[tuple[int, str], float]:
    """(step, name) -> value; a step logged again after a resume keeps its last value."""
    return {(r["step"], k): v for r in _rows(workdir) for k, v in r.items()
            if k not in VOLATILE and k != "step" and not k.endswith("/eval_seconds")}


def _interrupt(cmd: list[str], workdir: pathlib.Path, at_step: int, sig: int
               ) -> tuple[int, str]:
    """Runs `cmd`, sends `sig` once step `at_step` is logged; returns (exit code, stderr)."""
    log = workdir.parent / f"{workdir.name}.{sig}.log"
    with log.open("w") as out:
        p = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + RUN_TIMEOUT
        try:
            while _last_step(workdir) < at_step:
                if p.poll() is not None:
                    pytest.fail(f"run ended ({p.returncode}) before step {at_step}:\n"
                                + log.read_text()[-3000:])
                if time.monotonic() > deadline:
                    pytest.fail(f"step {at_step} not reached in {RUN_TIMEOUT} s")
                time.sleep(0.02)
            p.send_signal(sig)
            code = p.wait(timeout=RUN_TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    return code, log.read_text()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[str, pathlib.Path]:
    """The uninterrupted run (in this process, the same 8 devices as the commands)."""
    return train_once(tmp_path_factory, "uninterrupted", _config)


@pytest.mark.faults
def test_sigterm_then_kill9_then_restart_is_bit_exact(reference, tmp_path):
    data_dir, ref = reference
    rng = random.Random()
    workdir = tmp_path / "run"
    cmd = _command(workdir, data_dir)

    term_at = rng.randrange(2, 20)
    code, log = _interrupt(cmd, workdir, term_at, signal.SIGTERM)
    assert code == 0, log[-3000:]
    saved = checkpoint.good_steps(workdir / "checkpoints")
    assert "preempted: saved step" in log and saved and term_at <= saved[-1] < STEPS, (
        term_at, saved, log[-2000:])
    stopped = saved[-1]

    kill_at = rng.randrange(stopped + 2, stopped + 20)
    code, log = _interrupt(cmd, workdir, kill_at, signal.SIGKILL)
    assert code == -signal.SIGKILL, log[-3000:]
    assert f"resumed from step {stopped}" in log

    done = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed from step" in done.stderr
    print(f"SIGTERM at step >= {term_at} saved step {stopped}; kill -9 at step >= {kill_at}")

    a, b = checkpoint_arrays(ref, STEPS), checkpoint_arrays(workdir, STEPS)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)
    want, got = _metrics(ref), _metrics(workdir)
    pairs = [(r["step"], k) for r in _rows(workdir) for k in r if k not in ("step", "time")]
    assert len(pairs) == len(set(pairs)), "a (step, metric) logged twice in metrics.jsonl"
    assert got.keys() == want.keys()
    assert {k: v for k, v in got.items() if want[k] != v} == {}
    assert not list(workdir.parent.glob("*.orbax-checkpoint-tmp*"))


@pytest.mark.parametrize("shape, devices", [((4, 2), 8), ((2, 1), 2)])
def test_checkpoint_of_8x1_mesh_restores_onto_other_meshes(reference, shape, devices):
    """The (8, 1)-mesh checkpoint restores exactly onto (4, 2) and onto 2 devices (2, 1)."""
    data_dir, ref = reference
    c = _config(data_dir)
    c.mesh.shape = shape
    s = train.setup(c, devices=jax.devices()[:devices])
    with checkpoint.manager(ref / "checkpoints") as mgr:
        state = checkpoint.restore(mgr, STEPS, s.state, s.state_shardings, None)
    restored = state.to_pure_dict()
    want = checkpoint_arrays(ref, STEPS)
    key = lambda k: str(getattr(k, "key", getattr(k, "idx", k)))  # noqa: E731
    got = {".".join(map(key, p)): np.asarray(v)
           for p, v in jax.tree_util.tree_flatten_with_path(jax.device_get(restored))[0]}
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    kernel = restored[0]["blocks"][0]["up"]["kernel"]
    assert dict(kernel.sharding.mesh.shape) == {"data": shape[0], "model": shape[1]}
    assert kernel.sharding.spec == s.state_shardings.to_pure_dict()[0]["blocks"][0]["up"][
        "kernel"].spec
