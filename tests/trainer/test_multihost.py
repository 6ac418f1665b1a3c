"""Multi-process training on CPU: two processes of 4 devices each (gloo collectives over
127.0.0.1) against one process of 8 devices, and a peer dying mid-run.

The processes run `vnr.train`'s real command line through this file's `__main__`
driver. Every subprocess has a timeout: a stuck run fails the test, it never
hangs the suite.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests import ROOT  # noqa: E402
from tests.helpers import checkpoint_arrays, train_once

pytestmark = pytest.mark.e2e  # every test here trains (in process or in subprocesses)

SMOKE = "configs/moviepuzzle/main.py:smoke"
# Per-step logs (train/loss at every step); no test-split evaluation (not under test here).
ARGS = ["--config.log_every=1", "--config.progress=False", "--config.data.test_splits=()"]
RUN_TIMEOUT = 420  # s per multi-process run on a loaded 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _launch(workdir: pathlib.Path, data_dir: str, nproc: int, *extra: str,
            env_extra: dict | None = None) -> list[subprocess.Popen]:
    port = _free_port()
    procs = []
    for i in range(nproc):
        cmd = [sys.executable, str(pathlib.Path(__file__)), "--config", SMOKE,
               "--workdir", str(workdir), f"--config.data.data_dir={data_dir}", *ARGS, *extra,
               f"--coordinator_address=127.0.0.1:{port}", f"--num_processes={nproc}",
               f"--process_id={i}"]
        log = open(workdir.parent / f"{workdir.name}.proc{i}.log", "w")  # noqa: SIM115
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=_env(8 // nproc, **(env_extra or {})),
                                      stdout=log, stderr=subprocess.STDOUT))
    return procs


def _wait_all(procs: list[subprocess.Popen], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(timeout=max(1.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        pytest.fail(f"multi-process run still going after {timeout} s (hang)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return codes


def _log(workdir: pathlib.Path, i: int) -> str:
    return (workdir.parent / f"{workdir.name}.proc{i}.log").read_text()


def _losses(workdir: pathlib.Path) -> dict[int, float]:
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["train/loss"] for r in rows if "train/loss" in r}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[str, pathlib.Path]:
    """The smoke config in this process: one process, 8 devices, mesh (8, 1)."""
    from configs.moviepuzzle.main import get_config

    def config(data_dir: str):
        c = get_config("smoke")
        c.data.data_dir, c.log_every, c.progress, c.data.test_splits = data_dir, 1, False, ()
        return c

    return train_once(tmp_path_factory, "one_process", config)


def test_two_processes_match_one(reference, tmp_path):
    """2 processes x 4 devices (gloo) give the losses and parameters of 1 process x 8."""
    data_dir, one = reference
    two = tmp_path / "two"
    codes = _wait_all(_launch(two, data_dir, 2), RUN_TIMEOUT)
    assert codes == [0, 0], _log(two, 0)[-3000:] + _log(two, 1)[-3000:]
    want, got = _losses(one), _losses(two)
    assert sorted(got) == list(range(1, 7))
    np.testing.assert_allclose([got[s] for s in sorted(got)], [want[s] for s in sorted(got)],
                               rtol=2e-5)
    # Parameters: float summation order differs (gloo vs in-process all-reduce), and
    # Adam turns a (near-)zero gradient's rounding noise into steps of up to lr (e.g. the
    # attention key bias, whose true gradient is 0), so entries may differ by up to the
    # summed learning rate; entries with a real gradient agree far closer (rtol).
    from configs.moviepuzzle.main import get_config
    from vnr.optim import make_lr

    budget = float(sum(make_lr(get_config("smoke"))(s) for s in range(1, 7)))
    a = checkpoint_arrays(one, 6, one_device=True)
    b = checkpoint_arrays(two, 6, one_device=True)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-3, atol=budget, err_msg=name)
    # Only process 0 writes logs and reports; every process wrote its iterator state. The
    # smoke model's arrays are replicated and under REPLICA_SLICE_MIN_BYTES per replica, so
    # one replica (process 0) writes each whole rather than every replica a slice.
    assert len((two / "metrics.jsonl").read_text().splitlines()) == len(
        (one / "metrics.jsonl").read_text().splitlines())
    state = two / "checkpoints" / "6" / "state"
    assert (state / "ocdbt.process_0").is_dir() and not (state / "ocdbt.process_1").exists()
    assert sorted(p.name for p in (two / "checkpoints" / "6" / "data").glob("process_*.json")) == [
        "process_0-of-2.json", "process_1-of-2.json"]
    # The checksum manifests (written by process 0 once both wrote) cover both's files.
    from vnr import checkpoint, checksums

    listed = json.loads((state / checksums.MANIFEST).read_text())["files"]
    assert {n.split("/")[0] for n in listed} >= {"ocdbt.process_0"}
    data = two / "checkpoints" / "6" / "data" / checksums.MANIFEST
    assert set(json.loads(data.read_text())["files"]) == {"process_0-of-2.json",
                                                          "process_1-of-2.json"}
    assert checkpoint.verify_step(two / "checkpoints" / "6", whole=True)


def _wait_for_rows(run: pathlib.Path, procs: list[subprocess.Popen], rows: int) -> None:
    """Until metrics.jsonl has `rows` train rows (the processes must stay alive)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while _rows(run) < rows:
        assert all(p.poll() is None for p in procs), _log(run, 0)[-3000:]
        assert time.monotonic() < deadline, f"{rows} logged steps not reached"
        time.sleep(0.05)


def _rows(run: pathlib.Path) -> int:
    path = run / "metrics.jsonl"
    return path.read_text().count("train/loss") if path.exists() else 0


@pytest.mark.faults
def test_sigterm_saves_everywhere_then_a_dead_peer_stops_the_other(reference, tmp_path):
    """SIGTERM to process 1 only: both processes save the same step and exit 0. The same
    command resumes there; kill -9 of process 1 then makes process 0 exit with an error
    within bounded time (no hang)."""
    data_dir, _ = reference
    run = tmp_path / "pre"
    endless = ["--config.total_steps=100000", "--config.eval_every=100000",
               "--config.ckpt_every=100000", "--heartbeat_timeout=10"]
    t = [time.monotonic()]
    procs = _launch(run, data_dir, 2, *endless)
    try:
        _wait_for_rows(run, procs, 2)
        t.append(time.monotonic())
        procs[1].send_signal(signal.SIGTERM)
        codes = _wait_all(procs, timeout=180)
        t.append(time.monotonic())
    finally:
        _wait_all(procs, timeout=30)
    assert codes == [0, 0], _log(run, 0)[-3000:] + _log(run, 1)[-3000:]
    from vnr.checkpoint import good_steps

    saved = good_steps(run / "checkpoints")
    assert len(saved) == 1 and saved[0] >= 2, saved
    assert f"preempted: saved step {saved[0]}" in _log(run, 0)
    assert sorted(p.name for p in (run / "checkpoints" / str(saved[0]) / "data").glob(
        "process_*.json")) == ["process_0-of-2.json", "process_1-of-2.json"]

    before = _rows(run)
    procs = _launch(run, data_dir, 2, *endless)
    try:
        _wait_for_rows(run, procs, before + 2)
        t.append(time.monotonic())
        procs[1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        code = _wait_all(procs[:1], timeout=150)[0]
        took = time.monotonic() - killed
    finally:
        _wait_all(procs, timeout=30)
    assert f"resumed from step {saved[0]}" in _log(run, 0)  # verified, hashes split in two
    assert "unreadable" not in _log(run, 0) and "unverified" not in _log(run, 0)
    assert code != 0, _log(run, 0)[-3000:]
    print(f"SIGTERM: saved step {saved[0]}; after kill -9 of process 1, process 0 exited "
          f"with {code} in {took:.1f} s (launch to 2 steps {t[1] - t[0]:.1f} s, SIGTERM to "
          f"exit {t[2] - t[1]:.1f} s, relaunch to 2 more steps {t[3] - t[2]:.1f} s)")


@pytest.mark.parametrize("flags, message", [
    (["--num_processes=2"], "error: multi-process run without a cluster environment: also "
                            "set --coordinator_address, --process_id"),
    (["--num_processes=2", "--process_id=2", "--coordinator_address=127.0.0.1:1"],
     "error: --process_id=2 must be in [0, --num_processes=2)"),
    # Process 1 of 2 and nobody else: the join gives up after --init_timeout (JAX's
    # client then aborts the process: no Python exception to turn into one line).
    (["--num_processes=2", "--process_id=1", "--init_timeout=2", "--coordinator_address="
      "127.0.0.1:PORT"], "DEADLINE_EXCEEDED"),
])
def test_bad_or_unreachable_distributed_setup_fails_fast(tmp_path, flags, message):
    flags = [f.replace("PORT", str(_free_port())) for f in flags]
    t = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "vnr.train", "--config", SMOKE, "--workdir", str(tmp_path),
         *flags], cwd=ROOT, env=_env(4), capture_output=True, text=True, timeout=180)
    took = time.monotonic() - t
    assert out.returncode != 0 and message in out.stderr, out.stderr[-3000:]
    assert not (tmp_path / "config.json").exists()
    print(f"exit {out.returncode} after {took:.1f} s: {message}")


if __name__ == "__main__":  # one process of a test run: the trainer's command line
    sys.path.insert(0, str(ROOT))
    from vnr import train

    sys.exit(train.main(sys.argv[1:]))
