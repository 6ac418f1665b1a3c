"""Faults in the train loop: a damaged latest checkpoint (bytes replaced, truncated, a file
deleted), a full disk while saving.

(NaN/inf halting at the offending step is tested in tests/trainer/test_train.py; a peer
process dying mid-run in tests/trainer/test_multihost.py.)
"""

import errno
import json
import pathlib
import shutil

import numpy as np
import pytest
from etils import epath

from configs.moviepuzzle.main import get_config
from tests.helpers import checkpoint_arrays, train_once
from vnr import train
from vnr.workdir import split_results

# every test here trains (in process or in subprocesses) and injects a fault
pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def smoke(data_dir: str, **overrides):
    c = get_config("smoke")
    c.data.data_dir, c.progress, c.data.test_splits = data_dir, False, ("test_in_domain",)
    for k, v in overrides.items():
        c[k] = v
    return c


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[str, pathlib.Path]:
    """One uninterrupted smoke run (6 steps, checkpoints at 3 and 6)."""
    return train_once(tmp_path_factory, "full", smoke)


def _replace_bytes(path: pathlib.Path) -> None:
    """Same size, other bytes: what Orbax restores without noticing (no chunk checksum)."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0x5A for b in data[middle:middle + 16])
    path.write_bytes(bytes(data))


def _truncate(path: pathlib.Path) -> None:
    """A crash mid-write: the file is cut short."""
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


@pytest.mark.parametrize("damage", [_replace_bytes, _truncate, pathlib.Path.unlink],
                         ids=["bytes_replaced", "truncated", "deleted"])
def test_damaged_latest_checkpoint_falls_back_to_the_previous(finished, tmp_path, capsys,
                                                              damage):
    data_dir, full = finished
    run = tmp_path / "run"
    shutil.copytree(full, run)
    step = run / "checkpoints" / "6"
    biggest = max((p for p in (step / "state").rglob("*") if p.is_file()),
                  key=lambda p: p.stat().st_size)
    name = biggest.relative_to(step).as_posix()
    damage(biggest)
    capsys.readouterr()
    results = train.run(smoke(data_dir), str(run))
    err = capsys.readouterr().err
    # One warning line, naming the step and the file; the details go to a file.
    warnings = [line for line in err.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: checkpoint step 6 in "), err
    assert f"is unreadable ({name} " in warnings[0] and len(warnings[0]) < 600, warnings[0]
    assert "resumed from step 3" in err
    aside = list((run / "checkpoints").glob("corrupt-*"))
    assert [p.name.split("-")[:2] for p in aside] == [["corrupt", "6"]]
    assert name in (aside[0] / "restore_error.process0.txt").read_text()
    # Steps 4..6 were trained again from step 3: the uninterrupted run's parameters, bit for
    # bit, and its results.
    a, b = checkpoint_arrays(full, 6), checkpoint_arrays(run, 6)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(b[key], a[key], err_msg=key)
    assert json.loads(json.dumps(results)) == split_results(
        json.loads((full / "results.json").read_text()))


def test_every_checkpoint_damaged_trains_from_scratch_bit_exact(finished, tmp_path, capsys):
    """A workdir with checkpoints resumes from their shapes (no random init); when no step
    can be read, the run initialises after all: the uninterrupted run, bit for bit."""
    data_dir, full = finished
    run = tmp_path / "run"
    shutil.copytree(full, run)
    for step in (3, 6):
        d = run / "checkpoints" / str(step)
        _replace_bytes(max((p for p in (d / "state").rglob("*") if p.is_file()),
                           key=lambda p: p.stat().st_size))
    capsys.readouterr()
    results = train.run(smoke(data_dir), str(run))
    err = capsys.readouterr().err
    assert "resumed" not in err and err.count("is unreadable (") == 2, err
    a, b = checkpoint_arrays(full, 6), checkpoint_arrays(run, 6)
    for key in a:
        np.testing.assert_array_equal(b[key], a[key], err_msg=key)
    assert json.loads(json.dumps(results)) == split_results(
        json.loads((full / "results.json").read_text()))

def _disk_full_at(monkeypatch, step_dir: str) -> None:
    """Every file write inside a checkpoint directory of `step_dir` fails with ENOSPC."""
    original = epath.Path.write_text

    def write_text(self, *args, **kwargs):
        if f"/checkpoints/{step_dir}" in str(self):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(epath.Path, "write_text", write_text)


def test_disk_full_on_a_save_warns_and_training_goes_on(finished, tmp_path, capsys,
                                                        monkeypatch):
    data_dir, full = finished
    _disk_full_at(monkeypatch, "3")
    results = train.run(smoke(data_dir), str(tmp_path))
    err = capsys.readouterr().err
    assert "warning: checkpoint at step 3 failed" in err, err
    assert "No space left on device" in err
    assert "Traceback" not in err and "RESOURCE_EXHAUSTED" not in err, err  # one line (#44)
    # The state in memory was not lost: the step-6 checkpoint is the uninterrupted run's.
    assert train.checkpoint.good_steps(tmp_path / "checkpoints") == [6]
    a, b = checkpoint_arrays(full, 6), checkpoint_arrays(tmp_path, 6)
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)
    assert (tmp_path / "results.json").exists() and "test_in_domain" in results


def test_disk_full_on_the_final_save_is_an_error_naming_the_last_good_step(
        finished, tmp_path, capsys, monkeypatch):
    data_dir, _ = finished
    _disk_full_at(monkeypatch, "6")
    with pytest.raises(train.CheckpointError,
                       match=r"final checkpoint \(step 6\) could not be written .*"
                             r"newest good checkpoint is step 3"):
        train.run(smoke(data_dir), str(tmp_path))
    assert "No space left on device" in capsys.readouterr().err
    assert (tmp_path / "results.json").exists()  # evaluation still ran on the final state
    assert train.checkpoint.good_steps(tmp_path / "checkpoints") == [3]


def test_a_record_the_config_cannot_take_is_one_line_and_leaves_the_workdir_free(tmp_path):
    """A clip longer than data.max_frames fails in the training input: one line (not a
    grain worker's traceback), and the workdir keeps no config.json, so the corrected
    command runs there (#44)."""
    data_dir = str(tmp_path / "data")
    bad = smoke(data_dir, total_steps=1, eval_every=1, ckpt_every=1)
    bad.data.max_frames = 2
    with pytest.raises(train.InputError, match=r"^the training input failed before step 1: "
                       r"ValueError: clip '\w+' has \d+ frames > data.max_frames=2$"):
        train.run(bad, str(tmp_path / "run"))
    assert not (tmp_path / "run" / "config.json").exists()
    good = smoke(data_dir, total_steps=1, eval_every=1, ckpt_every=1)
    assert train.run(good, str(tmp_path / "run"))["test_in_domain"]
