"""A data_dir the build cannot create or write (tfds_builders/data_dir.py): one error line
naming it, exit status 2, from `python -m tfds_builders build` (before any input is read
when it cannot be created). The trainer's first-use build: tests/trainer/test_train.py."""

from __future__ import annotations

import os
import pathlib

import pytest

from tfds_builders import __main__ as build_cli
from tfds_builders import data_dir

pytestmark = pytest.mark.faults  # the fault-injection suite (-m faults)


def _build(data: pathlib.Path, capfd: pytest.CaptureFixture) -> str:
    """The one error line of a MoviePuzzle build into `data` (exit status 2)."""
    code = build_cli.main(["build", "moviepuzzle", "--config", "synthetic_tiny", "--data_dir",
                           str(data)])
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def test_a_data_dir_that_cannot_be_created_is_one_line(tmp_path, capfd, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("a file where a folder should be")
    assert _build(afile / "data", capfd) == (
        f"error: --data_dir={afile}/data cannot be created: {afile} is a file, not a directory")
    assert _build(afile, capfd) == f"error: --data_dir={afile} is a file, not a directory"
    # A read-only parent, simulated: root (who runs these tests in CI) may write anywhere.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert _build(tmp_path / "ro" / "data", capfd) == (
        f"error: --data_dir={tmp_path}/ro/data cannot be created: {tmp_path} is not "
        f"writable by this user")


def test_a_build_that_cannot_write_into_the_data_dir_is_one_line(tmp_path, capfd):
    """An existing data_dir is only checked when the build writes (a dataset built in a
    read-only folder is still read); here the builder's folder is a file."""
    (tmp_path / "moviepuzzle").write_text("in the way")
    line = _build(tmp_path, capfd)
    assert line.startswith(f"error: --data_dir={tmp_path}: the build cannot write there "
                           f"(NotADirectoryError: Not a directory: {tmp_path}/moviepuzzle")


def test_only_errors_inside_the_data_dir_are_named_as_its(tmp_path):
    inside = PermissionError(13, "Permission denied", str(tmp_path / "d" / "x"))
    assert data_dir.failed_write(inside, tmp_path / "d", "data.data_dir") == (
        f"data.data_dir={tmp_path / 'd'}: the build cannot write there (PermissionError: "
        f"Permission denied: {tmp_path / 'd' / 'x'})")
    outside = PermissionError(13, "Permission denied", str(tmp_path / "manual" / "x"))
    assert data_dir.failed_write(outside, tmp_path / "d") is None
    assert data_dir.failed_write(OSError(28, "No space left on device"), tmp_path) is None
    data_dir.check(tmp_path / "new" / "deeper")  # creatable: fine, nothing created
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("error", [
    RuntimeError("Failed to finalize: INTERNAL: file write failed: No space left on device"),
    OSError(28, "No space left on device", "/data/moviepuzzle/x.array_record-00000-of-00001"),
], ids=["array_record", "oserror"])
def test_a_full_disk_during_a_build_is_one_line(tmp_path, capfd, monkeypatch, error):
    """A disk that fills while TFDS writes a split (simulated: the writer raises what
    array_record or the OS raise): one line, exit 2, no lock or partial build left (#44)."""
    import tensorflow_datasets as tfds

    def full(cls, path, iterator):
        raise error

    adapter = tfds.core.file_adapters.ArrayRecordFileAdapter
    monkeypatch.setattr(adapter, "write_examples", classmethod(full))
    line = _build(tmp_path, capfd)
    assert line.startswith(f"error: moviepuzzle/synthetic_tiny: the build ran out of disk "
                           f"space under {tmp_path} (") and line.endswith(
        "); free space or choose another data_dir, then build again"), line
    assert "No space left on device" in line
    assert not list(tmp_path.rglob("*.building"))
    assert not list(tmp_path.rglob("*.array_record*")), sorted(tmp_path.rglob("*"))
    monkeypatch.undo()
    assert build_cli.main(["build", "moviepuzzle", "--config", "synthetic_tiny", "--data_dir",
                           str(tmp_path)]) == 0  # space freed: the same command builds


def test_out_of_space_finds_the_cause_in_a_chain():
    try:
        try:
            raise OSError(28, "No space left on device", "/d/f")
        except OSError as e:
            raise RuntimeError("Failed to finalize") from e
    except RuntimeError as e:
        assert data_dir.out_of_space(e) == "No space left on device: /d/f"
    assert data_dir.out_of_space(ValueError("bad value")) is None
