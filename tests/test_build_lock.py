"""One build of a dataset at a time (`tfds_builders.holder.wait_to_build`): a second build
of the same dataset waits, naming the builder, then reuses what it built; a builder killed
meanwhile is taken over (#44)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import pytest

from tfds_builders import holder, moviepuzzle

pytestmark = pytest.mark.faults  # the fault-injection suite (-m faults)


def test_a_second_build_waits_for_the_live_builder_then_holds(tmp_path):
    lock = tmp_path / ".1.0.0.building"
    builder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": builder.pid,
                                "token": "other"}))
    threading.Timer(1.0, builder.kill).start()  # the builder is killed mid-build
    said: list[str] = []
    with holder.wait_to_build(lock, "d/c", said.append, poll_s=0.05):
        assert json.loads(lock.read_text())["token"] != "other"
    builder.wait()
    assert said == [f"waiting: d/c is being built by pid {builder.pid} on "
                    f"{socket.gethostname()} ({lock})",
                    f"took over {lock}: its holder (pid {builder.pid} on "
                    f"{socket.gethostname()}) is gone"]
    assert not lock.exists()


def test_two_builds_of_one_dataset_at_once_build_it_once(tmp_path, caplog):
    """Two builds of the same dataset started together (a sweep on a fresh data_dir): one
    builds, the other waits and reuses it; no lock file is left."""
    built: list = []
    runs = [threading.Thread(target=lambda: built.append(
        moviepuzzle.prepare("synthetic_tiny", tmp_path))) for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join(timeout=300)
    assert len(built) == 2 and built[0].data_dir == built[1].data_dir
    waited = [r.getMessage() for r in caplog.records if r.getMessage().startswith("waiting:")]
    assert len(waited) == 1 and "moviepuzzle/synthetic_tiny is being built by pid" in waited[0]
    assert not list(tmp_path.rglob("*.building"))
    assert len(list(tmp_path.rglob("build_summary.json"))) == 1


def test_two_holders_racing_for_a_new_lock_never_both_hold_it(tmp_path):
    """The lock file is created with its content in one step: a second process that finds
    it cannot read it empty and take a live holder for a dead one (before: both held it in
    72 of 300 races of two threads)."""
    for i in range(200):
        path, got = tmp_path / f".{i}.building", []
        start = threading.Barrier(2)

        def race(path=path, got=got, start=start):
            h = holder.Holder(path, say=lambda s: None)
            start.wait()
            try:
                h.acquire()
                got.append(h)
            except holder.LockHeld:
                pass

        threads = [threading.Thread(target=race) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 1, f"race {i}: {len(got)} holders"
        got[0].release()
        assert not list(tmp_path.glob(f".{i}.building*"))  # no temporary file left
