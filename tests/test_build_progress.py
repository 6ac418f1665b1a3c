"""A dataset build's lines (tfds_builders/progress.py): one per split with its examples and
time, progress on a long split, the total; none of TFDS's bars, carriage returns or
"Unknown size" banner; nothing when the dataset is reused."""

from __future__ import annotations

import io
import pathlib
import time

import pytest

from tfds_builders import moviepuzzle, progress


def test_first_build_prints_a_line_per_split_and_reuse_prints_nothing(
        tmp_path: pathlib.Path, capfd: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)  # a progress line per example
    builder = moviepuzzle.prepare("synthetic_tiny", tmp_path)
    out, err = capfd.readouterr()
    assert "\r" not in out + err and "Unknown size" not in out + err
    assert "Downloading and preparing" not in out and "Variant folder" not in err
    beats = ("preparing its inputs (", ": writing ")  # the background lines, at any time
    lines = [line for line in err.splitlines() if not any(b in line for b in beats)]
    assert lines[0] == f"building moviepuzzle/synthetic_tiny into {builder.data_dir}"
    for split, info in builder.info.splits.items():
        n = info.num_examples
        assert sum(line.startswith(f"  {split}: {n} examples in ") for line in lines) == 1
        assert f"  {split}: {n} examples so far (" in err
    total = sum(s.num_examples for s in builder.info.splits.values())
    assert lines[-1].startswith(f"built moviepuzzle/synthetic_tiny: {total} examples in "
                                f"{len(builder.info.splits)} splits in ")
    moviepuzzle.prepare("synthetic_tiny", tmp_path)
    assert capfd.readouterr() == ("", "")


def test_reading_inputs_and_writing_a_split_say_how_long_they_take(
        capfd: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A builder that reads its inputs for a while, then a split that TFDS takes a while
    to write: lines from the background thread, none after the build."""
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.02)
    lines = progress.BuildLines("d/c", "/data")

    def split_generators(dl_manager: object) -> dict:
        time.sleep(0.3)  # reading the inputs
        return {"train": iter(range(3))}

    generators = lines.counted(split_generators)(None)
    examples = list(generators["train"])
    time.sleep(0.3)  # TFDS shuffles and writes the split
    lines.done()
    err = capfd.readouterr().err
    time.sleep(0.1)
    assert capfd.readouterr().err == ""  # the thread stopped
    assert examples == [0, 1, 2]
    assert "  d/c: preparing its inputs (0." in err and "  train: writing 3 examples (0." in err
    *_, split_line, total_line = err.splitlines()
    assert split_line.startswith("  train: 3 examples in ")
    assert total_line.startswith("built d/c: 3 examples in 1 splits in ")


def test_tfds_banner_is_dropped_and_other_output_kept() -> None:
    sink = io.StringIO()
    out = progress._WithoutBanner(sink)  # noqa: SLF001
    out.write("\x1b[1mDownloading and preparing dataset Unknown size (download: Unknown "
              "size) to /d...\x1b[0m\nkept ")
    out.write("line\nDataset moviepuzzle downloaded and prepared to /d. Subsequent calls "
              "will reuse this data.\n")
    out.write("Dataset sizes differ\ntail")
    out.flush()
    assert sink.getvalue() == "kept line\nDataset sizes differ\ntail"


def test_took() -> None:
    assert [progress.took(s) for s in (0.042, 4.25, 187, 3900)] == [
        "0.04 s", "4.2 s", "3m07s", "1h05m"]
