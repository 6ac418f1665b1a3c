"""Grain worker processes (data.num_workers > 0) on the MoviePuzzle main job's pipeline.

grain's `mp_prefetch` gives worker i the elements i, i + W, ... and interleaves the
workers round-robin, so with W workers the stream must be the in-process stream,
batch for batch; its iterator state must restore mid-stream; and a training run
must stop every worker it started. Each test has a timeout: a stuck worker fails
the test instead of hanging the suite.
"""

import gc
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from configs.moviepuzzle.main import get_config
from vnr import train
from vnr.benchmarks.moviepuzzle import pairwise as task

pytestmark = pytest.mark.timeout(420)
from tests import ROOT  # noqa: E402
from vnr.workdir import split_results  # noqa: E402

BATCH = 8  # the smoke batch; synthetic_tiny has 40 training clips: 5 batches an epoch
AHEAD = 7  # batches compared: across the first epoch boundary (reshuffled clips and frames)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    """The tiny synthetic corpus, built once (in this process, not by racing workers)."""
    d = str(tmp_path_factory.mktemp("tfds"))
    it = iter(task.train_data(_config(d, 0), BATCH, 0, 1))
    next(it)
    it.close()
    return d


def _config(data_dir: str, workers: int):
    c = get_config("smoke")
    c.data.data_dir, c.data.num_workers = data_dir, workers
    return c


def _take(it, n: int) -> list[dict[str, np.ndarray]]:
    # Plain copies: the comparison must not depend on shared-memory arrays staying mapped.
    return [{k: np.array(v) for k, v in next(it).items()} for _ in range(n)]


def _assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.keys() == w.keys(), i
        for k in w:
            assert g[k].dtype == w[k].dtype, (i, k)
            np.testing.assert_array_equal(g[k], w[k], err_msg=f"batch {i}, {k}")


def _children() -> set[int]:
    """Live child processes of this process, except multiprocessing's resource tracker
    (one per interpreter, started by the first shared-memory use, by design)."""
    from multiprocessing import resource_tracker

    me, out = str(os.getpid()), set()
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited while listing
            continue
        if fields[1] == me:  # ppid
            out.add(int(stat.parent.name))
    return out - {resource_tracker._resource_tracker._pid}


@pytest.fixture(scope="module")
def in_process(data_dir) -> list[dict]:
    it = iter(task.train_data(_config(data_dir, 0), BATCH, 0, 1))
    try:
        return _take(it, AHEAD)
    finally:
        it.close()


def test_two_workers_yield_the_in_process_stream(data_dir, in_process):
    before = _children()
    it = iter(task.train_data(_config(data_dir, 2), BATCH, 0, 1))
    try:
        got = _take(it, AHEAD)
        assert len(_children() - before) == 2  # really two worker processes
    finally:
        it.close()
    _assert_same(got, in_process)
    # Batches differ from each other (so equality above is not trivially true).
    assert not np.array_equal(in_process[0]["position"], in_process[1]["position"])
    assert _children() - before == set()  # close() stopped both workers


def test_worker_iterator_state_restores_mid_stream(data_dir, in_process):
    """The state after 3 batches, saved as the checkpoint does (JSON), restored into a
    fresh 2-worker iterator: it continues with batches 4.. of the uninterrupted stream."""
    cut = 3
    first = iter(task.train_data(_config(data_dir, 2), BATCH, 0, 1))
    try:
        head = _take(first, cut)
        state = json.loads(json.dumps(first.get_state()))
        tail = _take(first, AHEAD - cut)
    finally:
        first.close()
    _assert_same(head + tail, in_process)
    restored = iter(task.train_data(_config(data_dir, 2), BATCH, 0, 1))
    try:
        next(restored)  # running workers (prefetched batches) must not leak into the restore
        restored.set_state(state)
        _assert_same(_take(restored, AHEAD - cut), in_process[cut:])
    finally:
        restored.close()


@pytest.mark.e2e
def test_train_run_with_workers_finishes_and_stops_them(data_dir, tmp_path):
    """A short run with 2 workers (training, a validation pass and a test split all read
    through workers): it finishes, writes results and leaves no child process behind."""
    c = _config(data_dir, 2)
    # The smoke schedule (6 steps: the optimizer, so the compiled step, depends on it) is
    # the one tests/test_faults.py and test_multihost.py compile: a compile-cache hit.
    c.eval_every, c.log_every = 6, 1
    c.progress, c.data.test_splits = False, ("test_in_domain",)
    gc.collect()  # children of earlier tests' unreferenced iterators are not this run's
    before = _children()
    results = train.run(c, str(tmp_path))
    assert results["test_in_domain"]["clips"] == 10
    assert split_results(json.loads((tmp_path / "results.json").read_text())) == json.loads(
        json.dumps(results))
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "train/loss" in r] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in rows if "val/os2" in r] == [6]
    left = _children() - before
    assert left == set(), f"worker processes still running after run(): {sorted(left)}"


def test_batches_alive_at_exit_leave_no_shared_memory_behind(data_dir):
    """A script (no absl flag parsing) reads batches through 2 workers and still holds
    them when it exits: it runs, and the resource tracker finds no shared-memory block
    left to clean up (grain alone left one per array: 'leaked shared_memory' warning)."""
    script = (
        "import sys\n"
        "from configs.moviepuzzle.main import get_config\n"
        "from vnr.benchmarks.moviepuzzle import pairwise as task\n"
        "c = get_config('smoke')\n"
        "c.data.data_dir, c.data.num_workers = sys.argv[1], 2\n"
        "it = iter(task.train_data(c, 8, 0, 1))\n"
        "held = [next(it) for _ in range(4)]\n"
        "it.close()\n"
        "print(sum(int(b['mask'].sum()) for b in held))\n")
    out = subprocess.run([sys.executable, "-c", script, data_dir], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) > 0
    assert "leaked shared_memory" not in out.stderr, out.stderr[-3000:]


@pytest.mark.faults
def test_workers_end_when_their_trainer_is_killed(data_dir):
    """`kill -9` of the process reading through workers: its workers (and the resource
    tracker) end within seconds instead of running on as orphans (#44)."""
    import signal
    import time

    script = (
        "import os, sys, time\n"
        "from configs.moviepuzzle.main import get_config\n"
        "from vnr.benchmarks.moviepuzzle import pairwise as task\n"
        "c = get_config('smoke')\n"
        "c.data.data_dir, c.data.num_workers = sys.argv[1], 2\n"
        "it = iter(task.train_data(c, 8, 0, 1))\n"
        "next(it)\n"
        "print('ready', flush=True)\n"
        "time.sleep(300)\n")
    p = subprocess.Popen([sys.executable, "-c", script, data_dir], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        kids = {int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                              text=True).stdout.split()}
        assert len(kids) >= 2  # the workers (and the resource tracker)
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_running(k) for k in kids):
            time.sleep(0.2)
        assert not [k for k in kids if _running(k)], "orphaned worker processes"
    finally:
        if p.poll() is None:
            p.kill()


def _running(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
