"""A data_dir the build cannot create or write (tfds_builders/data_dir.py): one error line
naming it, exit status 2, from `python -m tfds_builders build` (before any input is read
when it cannot be created). The trainer's first-use build: tests/trainer/test_train.py."""

from __future__ import annotations

import os
import pathlib

import pytest

from tfds_builders import __main__ as build_cli
from tfds_builders import data_dir


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
