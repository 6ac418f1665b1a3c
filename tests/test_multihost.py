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

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
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


def _params(workdir: pathlib.Path, step: int) -> dict[str, np.ndarray]:
    """Every saved array on one device (the checkpoint may come from another topology)."""
    path = workdir / "checkpoints" / str(step) / "state"
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    with ocp.StandardCheckpointer() as ckpt:
        target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=one),
                              ckpt.metadata(path).item_metadata)
        tree = ckpt.restore(path, target)
    key = lambda k: str(getattr(k, "key", getattr(k, "idx", k)))  # noqa: E731
    return {".".join(map(key, p)): np.asarray(v)
            for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _strides_records(data_dir: str) -> bool:
    """True if the MoviePuzzle pipeline gives process p records p, p+P, ... (strided)
    rather than the p-th block of each global batch; only block slices make the global
    batch of P processes the very batch one process would see."""
    from configs.moviepuzzle.main import get_config
    from vnr.data import moviepuzzle as mp

    cfg = get_config("smoke").data
    cfg.data_dir = data_dir
    one = next(iter(mp.train_dataset(cfg, 4, 0, 0, 1)))["position"]
    two = [next(iter(mp.train_dataset(cfg, 2, 0, p, 2)))["position"] for p in (0, 1)]
    return not np.array_equal(one, np.concatenate(two))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[str, pathlib.Path]:
    """The smoke config in this process: one process, 8 devices, mesh (8, 1)."""
    from configs.moviepuzzle.main import get_config
    from vnr import train

    data_dir = str(tmp_path_factory.mktemp("tfds"))
    workdir = tmp_path_factory.mktemp("one_process")
    c = get_config("smoke")
    c.data.data_dir, c.log_every, c.progress, c.data.test_splits = data_dir, 1, False, ()
    train.run(c, str(workdir))
    return data_dir, workdir


def test_two_processes_match_one(reference, tmp_path):
    """2 processes x 4 devices (gloo) give the losses and parameters of 1 process x 8."""
    data_dir, one = reference
    env = {"VNR_TEST_BLOCK_SLICES": "1"} if _strides_records(data_dir) else {}
    two = tmp_path / "two"
    codes = _wait_all(_launch(two, data_dir, 2, env_extra=env), RUN_TIMEOUT)
    assert codes == [0, 0], _log(two, 0)[-3000:] + _log(two, 1)[-3000:]
    want, got = _losses(one), _losses(two)
    assert sorted(got) == list(range(1, 7))
    np.testing.assert_allclose([got[s] for s in sorted(got)], [want[s] for s in sorted(got)],
                               rtol=2e-5)
    a, b = _params(one, 6), _params(two, 6)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=1e-6, err_msg=name)
    # Only process 0 writes logs and reports; every process wrote its checkpoint shards.
    assert len((two / "metrics.jsonl").read_text().splitlines()) == len(
        (one / "metrics.jsonl").read_text().splitlines())
    state = two / "checkpoints" / "6" / "state"
    assert (state / "ocdbt.process_0").is_dir() and (state / "ocdbt.process_1").is_dir()
    assert sorted(p.name for p in (two / "checkpoints" / "6" / "data").glob("*.json")) == [
        "process_0-of-2.json", "process_1-of-2.json"]


def test_dead_peer_stops_the_other_process(reference, tmp_path):
    """kill -9 of process 1 mid-run: process 0 exits with an error, within bounded time."""
    data_dir, _ = reference
    run = tmp_path / "dies"
    procs = _launch(run, data_dir, 2, "--config.total_steps=100000", "--config.eval_every=100000",
                    "--config.ckpt_every=100000", "--heartbeat_timeout=10")
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while not (run / "metrics.jsonl").exists() or len(_losses(run)) < 2:
            assert procs[0].poll() is None and procs[1].poll() is None, _log(run, 0)[-3000:]
            assert time.monotonic() < deadline, "the run never reached step 2"
            time.sleep(0.5)
        procs[1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        code = _wait_all(procs[:1], timeout=120)[0]
        took = time.monotonic() - killed
    finally:
        _wait_all(procs, timeout=30)
    assert code != 0, _log(run, 0)[-3000:]
    print(f"process 0 exited with {code} {took:.1f} s after process 1 was killed")


def _block_sliced_train_dataset(cfg, batch_size, seed, process_index=0, process_count=1):
    """`vnr.data.moviepuzzle.train_dataset` with whole batches sliced by process (the
    requested one-line change there: `.batch(...)` before `[process_index::process_count]`)."""
    from vnr.data import moviepuzzle as mp

    ds = mp.grain.MapDataset.source(mp._source(cfg, cfg.train_split))
    ds = ds.seed(seed).shuffle().repeat(None)
    ds = ds.map(mp._encode(cfg)).random_map(mp.ShuffleFrames())
    if cfg.get("augment", False):
        ds = ds.random_map(mp.AugmentClip())
    ds = ds.batch(batch_size, drop_remainder=True)[process_index::process_count]
    return mp._prefetch(ds.to_iter_dataset(), cfg.num_workers)


if __name__ == "__main__":  # one process of a test run: the trainer's command line
    sys.path.insert(0, str(ROOT))
    if os.environ.get("VNR_TEST_BLOCK_SLICES"):
        from vnr.data import moviepuzzle as _mp

        _mp.train_dataset = _block_sliced_train_dataset
    from absl import app

    from vnr import train

    train.check_overrides(sys.argv)
    app.run(train.main)
