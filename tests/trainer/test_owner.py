"""One run per workdir (`vnr.workdir.Owner`): a live holder is refused in one line, a holder
gone after `kill -9` (dead pid here, or no heartbeat from another host) is taken over."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from vnr import config as config_lib
from vnr import train, workdir

pytestmark = pytest.mark.faults  # the fault-injection suite (-m faults)


def _hold(path, pid, host=None, age=0.0):
    path.write_text(json.dumps({"host": host or socket.gethostname(), "pid": pid,
                                "token": "other"}))
    if age:
        os.utime(path, (time.time() - age, time.time() - age))


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_live_holder_is_refused_by_name(tmp_path, sleeper):
    _hold(tmp_path / workdir.OWNER, sleeper)
    owner = workdir.Owner(tmp_path)
    want = rf"workdir {tmp_path} is in use by another run \(pid {sleeper} on "
    with pytest.raises(config_lib.ConfigError, match=want):
        owner.check()
    with pytest.raises(config_lib.ConfigError, match=want):
        owner.acquire()
    assert json.loads((tmp_path / workdir.OWNER).read_text())["pid"] == sleeper


def test_a_holder_killed_on_this_host_is_taken_over(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _hold(tmp_path / workdir.OWNER, gone.pid)
    said = []
    with workdir.Owner(tmp_path, said.append) as owner:
        owner.check()
        owner.acquire()
        assert json.loads((tmp_path / workdir.OWNER).read_text())["pid"] == os.getpid()
    assert said == [f"took over {tmp_path / workdir.OWNER}: its holder (pid {gone.pid} on "
                    f"{socket.gethostname()}) is gone"]
    assert not (tmp_path / workdir.OWNER).exists()  # released


def test_another_hosts_holder_counts_until_its_heartbeat_stops(tmp_path):
    _hold(tmp_path / workdir.OWNER, 1, host="elsewhere")
    with pytest.raises(config_lib.ConfigError, match="pid 1 on elsewhere"):
        workdir.Owner(tmp_path).acquire()
    _hold(tmp_path / workdir.OWNER, 1, host="elsewhere", age=workdir.STALE_S + 5)
    owner = workdir.Owner(tmp_path, lambda _: None)
    owner.acquire()
    owner.release()
    assert not (tmp_path / workdir.OWNER).exists()


def test_release_leaves_a_file_that_is_no_longer_ours(tmp_path, sleeper):
    owner = workdir.Owner(tmp_path)
    owner.acquire()
    _hold(tmp_path / workdir.OWNER, sleeper)  # replaced by hand
    owner.release()
    assert json.loads((tmp_path / workdir.OWNER).read_text())["pid"] == sleeper


def test_training_in_a_workdir_in_use_stops_before_writing(tmp_path, sleeper):
    _hold(tmp_path / workdir.OWNER, sleeper)
    config = config_lib.load("configs/moviepuzzle/main.py:smoke")
    with pytest.raises(config_lib.ConfigError, match="is in use by another run"):
        train.run(config, str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [workdir.OWNER]


def test_a_workdir_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "run").write_text("")
    config = config_lib.load("configs/moviepuzzle/main.py:smoke")
    with pytest.raises(config_lib.ConfigError, match=r"--workdir .*/run is a file, not a "
                                                     r"directory$"):
        train.run(config, str(tmp_path / "run"))


def test_a_cut_config_json_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{"task": "moviepuzzle.pair')  # cut mid-write
    config = config_lib.load("configs/moviepuzzle/main.py:smoke")
    with pytest.raises(config_lib.ConfigError, match=r"config.json is unreadable \(.*\): "
                                                     r"this workdir's run cannot be resumed"):
        workdir.check_workdir(tmp_path, config, write=False)
