"""Dataset fingerprints: a data_dir built from one manual_dir is never reused for another
(tfds_builders/fingerprint.py): the builder's prepare (every trainer's path), the build CLI
and the trainer stop with one line saying what differs and how to rebuild; --rebuild does."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from configs.moviepuzzle.main import get_config
from tfds_builders import __main__ as cli
from tfds_builders import fingerprint
from tfds_builders import moviepuzzle as mp
from tfds_builders.moviepuzzle import synthetic
from vnr import train

MICRO = dict(movies=3, heldout=1, train=4, val=2, test_in_domain=2, test_out_domain=2)


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """Two small releases in the public per-clip layout, with different clips."""
    base = tmp_path_factory.mktemp("releases")
    for name, seed in (("a", 3), ("b", 4)):
        synthetic.write_corpus(base / name, seed=seed, sizes=MICRO)
    return base / "a", base / "b"


@pytest.fixture
def new_process(monkeypatch):
    """Forget the checks this process already made (a fresh trainer start)."""
    monkeypatch.setattr(fingerprint, "_checked", set())


def _record(data_dir: pathlib.Path) -> dict:
    return json.loads(next(data_dir.rglob(fingerprint.SOURCE_FILE)).read_text())


def test_prepare_reuses_a_build_only_for_its_own_source(releases, tmp_path, new_process,
                                                        caplog):
    a, b = releases
    data = tmp_path / "data"
    mp.prepare("clips", data, manual_dir=a)
    rec = _record(data)
    assert rec["manual_dir"] == os.path.realpath(a) and rec["options"]["source"] == "clips"
    assert sum(n for n, _, _ in rec["files"].values()) > 20
    mp.prepare("clips", data, manual_dir=a)  # the same source: reused
    mp.prepare("clips", data)  # a reader naming no source: reused
    with pytest.raises(fingerprint.SourceChanged) as e:
        mp.prepare("clips", data, manual_dir=b)
    msg = str(e.value)
    assert "\n" not in msg and f"was built from manual_dir {os.path.realpath(a)} (" in msg
    assert f"not {os.path.realpath(b)} (" in msg
    assert "top-level entries differ, e.g. clip_id.json)" in msg
    assert (f"python -m tfds_builders build moviepuzzle --config clips --manual_dir {b} "
            f"--data_dir {data} --rebuild (or use another data_dir)") in msg

    # A copy keeping names, sizes and times is the same source.
    shutil.copytree(a, tmp_path / "copy")
    mp.prepare("clips", data, manual_dir=tmp_path / "copy")
    # The release edited in place (one subtitle file) after the build: another source.
    fingerprint._checked.clear()
    sub = next((a / "val").rglob("subtitle.json"))
    sub.write_text(sub.read_text().replace("]", ', "edited"]', 1))
    with pytest.raises(fingerprint.SourceChanged,
                       match=r"whose files changed since \(val \d+ files \d+ B -> \d+ files "):
        mp.prepare("clips", data, manual_dir=a)


def test_generated_configs_are_fingerprinted_by_their_options(tmp_path, new_process, caplog):
    data = tmp_path / "data"
    mp.prepare("synthetic_tiny", data)
    path = next(data.rglob(fingerprint.SOURCE_FILE))
    rec = json.loads(path.read_text())
    assert rec["manual_dir"] is None and rec["options"]["seed"] == 0
    mp.prepare("synthetic_tiny", data, manual_dir=tmp_path)  # reads none: ignored
    rec["options"]["seed"] = 1  # as if built by code whose config had another seed
    path.write_text(json.dumps(rec))
    fingerprint._checked.clear()
    with pytest.raises(fingerprint.SourceChanged,
                       match=r"built with other builder options \(seed: 1 then, 0 now\); "
                             r"rebuild it: python -m tfds_builders build moviepuzzle "
                             r"--config synthetic_tiny --data_dir"):
        mp.prepare("synthetic_tiny", data)
    # A build made before sources were recorded: adopted once, with one warning.
    path.unlink()
    fingerprint._checked.clear()
    mp.prepare("synthetic_tiny", data)
    assert "had no record of its source" in caplog.text and path.is_file()


def test_build_cli_stops_on_another_source_and_rebuilds(releases, tmp_path, capsys):
    a, b = releases
    data = str(tmp_path / "data")

    def build(*args: str) -> tuple[int, str, str]:
        code = cli.main(["build", "moviepuzzle", "--config", "clips", "--data_dir", data, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    assert build("--manual_dir", str(a))[0] == 0
    code, out, err = build("--manual_dir", str(a))
    assert code == 0 and "already built from this source; reusing it" in out
    code, out, err = build("--manual_dir", str(b))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: moviepuzzle/clips:")
    assert f"built from manual_dir {os.path.realpath(a)}" in lines[0] and "--rebuild" in err
    code, out, err = build("--manual_dir", str(b), "--rebuild")
    assert code == 0 and "examples: 10" in out
    assert _record(pathlib.Path(data))["manual_dir"] == os.path.realpath(b)
    code, out, err = build("--manual_dir", str(a))
    assert code == 2 and f"built from manual_dir {os.path.realpath(b)}" in err


@pytest.mark.faults
def test_verify_catches_an_edit_that_keeps_sizes_and_times(releases, tmp_path, capsys,
                                                           new_process, monkeypatch):
    """A release file edited in place at the same size and modification time: the default
    fingerprint (names, sizes, times) reuses the build; `--verify` compares the bytes (#44)."""
    monkeypatch.setattr(fingerprint, "VERIFY", False)  # the CLI sets it per command
    release = tmp_path / "release"
    shutil.copytree(releases[0], release)
    data = str(tmp_path / "data")

    def build(*args: str) -> tuple[int, str, str]:
        code = cli.main(["build", "moviepuzzle", "--config", "clips", "--data_dir", data,
                         "--manual_dir", str(release), *args])
        fingerprint._checked.clear()  # each command is a new process
        out = capsys.readouterr()
        return code, out.out, out.err

    assert build()[0] == 0
    code, _, err = build("--verify")  # nothing recorded to compare with: one line
    assert code == 2 and "was built without --verify" in err and "--rebuild --verify" in err
    assert build("--rebuild", "--verify")[0] == 0
    assert "contents" in _record(pathlib.Path(data))
    edited = next(p for p in sorted(release.rglob("*.json")))
    st = edited.stat()
    text = edited.read_text()
    edited.write_text(text.replace("1", "2", 1) if "1" in text else text.replace("0", "1", 1))
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert edited.stat().st_size == st.st_size and edited.read_text() != text
    assert build()[0] == 0  # sizes and times alike: the stale build is reused
    code, _, err = build("--verify")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "was built from other file contents (" in lines[0]
    assert edited.relative_to(release).parts[0] in lines[0]


def _clips(data_dir: pathlib.Path, manual_dir: pathlib.Path):
    c = get_config("clips,smoke")
    c.data.data_dir, c.data.manual_dir, c.progress = str(data_dir), str(manual_dir), False
    c.total_steps = c.ckpt_every = c.eval_every = 2
    c.data.test_splits, c.evals.test.max_examples = ("test_in_domain",), 0
    return c


@pytest.mark.e2e
def test_trainer_stops_on_another_manual_dir_until_rebuilt(releases, tmp_path, capsys):
    a, b = releases
    data = tmp_path / "data"
    train.run(_clips(data, a), str(tmp_path / "run_a"))
    with pytest.raises(train.ConfigError) as e:
        train.run(_clips(data, b), str(tmp_path / "run_b"))
    msg = str(e.value)
    assert "\n" not in msg and f"was built from manual_dir {os.path.realpath(a)}" in msg
    assert f"--manual_dir {b} --data_dir {data} --rebuild" in msg
    assert not (tmp_path / "run_b" / "config.json").exists()  # the same command reruns
    assert cli.main(["build", "moviepuzzle", "--config", "clips", "--manual_dir", str(b),
                     "--data_dir", str(data), "--rebuild"]) == 0
    capsys.readouterr()
    results = train.run(_clips(data, b), str(tmp_path / "run_b"))
    assert results["test_in_domain"]["clips"] == 2


@pytest.mark.faults
@pytest.mark.e2e  # three short trainings
def test_a_run_is_never_resumed_or_reevaluated_on_other_data(releases, tmp_path, capsys):
    """#44: rerunning a finished run's command with another manual_dir and a new data_dir
    refuses in one line, before config.json or results.json are rewritten; the same data
    at another path (an `rsync -a` copy, another data_dir) resumes."""
    a, b = releases
    run = tmp_path / "run"
    train.run(_clips(tmp_path / "data_a", a), str(run))
    recorded = json.loads((run / "data.json").read_text())["datasets"]
    assert list(recorded) == ["moviepuzzle/clips"] and recorded["moviepuzzle/clips"]
    config, results = (run / "config.json").read_text(), (run / "results.json").read_text()
    with pytest.raises(train.ConfigError) as e:
        train.run(_clips(tmp_path / "data_b", b), str(run))
    msg = str(e.value)
    assert "\n" not in msg and "holds a run on moviepuzzle/clips built from other data" in msg
    assert "python -m vnr.evaluate --workdir" in msg
    assert (run / "config.json").read_text() == config
    assert (run / "results.json").read_text() == results
    copy = tmp_path / "copy_of_a"
    shutil.copytree(a, copy, copy_function=shutil.copy2)  # names, sizes and times kept
    capsys.readouterr()
    train.run(_clips(tmp_path / "data_copy", copy), str(run))
    assert "resumed from step" in "".join(capsys.readouterr())
