"""MoviePuzzle TFDS builder: fixture with broken clips, the real public clips, reader, CLI."""

from __future__ import annotations

import io
import json
import logging
import os
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from tests import ROOT as REPO  # noqa: E402
from tfds_builders import common
from tfds_builders import moviepuzzle as mp
from tfds_builders.moviepuzzle import synthetic

MICRO = dict(movies=3, heldout=1, train=4, val=2, test_in_domain=2, test_out_domain=2)
BROKEN = {  # clip id -> expected skip reason
    "901": "bad_json",
    "902": "missing_frame",
    "903": "length_mismatch",
    "904": "too_few_frames",
    "905": "bad_frame",
    "906": "missing_clip_dir",
}


def _copy_clip(src: pathlib.Path, dst: pathlib.Path, new_id: str) -> None:
    dst.mkdir(parents=True)
    old_id = src.name
    for f in src.iterdir():
        name = f.name.replace(f"{old_id}_", f"{new_id}_", 1) if f.suffix == ".jpg" else f.name
        (dst / name).write_bytes(f.read_bytes())


def make_fixture(root: pathlib.Path) -> pathlib.Path:
    """A micro synthetic corpus plus deliberately broken clips in the train split."""
    synthetic.write_corpus(root, seed=3, sizes=MICRO)
    train = root / "train"
    good = sorted(train.iterdir(), key=lambda p: int(p.name))[0]
    for clip_id in list(BROKEN)[:5]:
        _copy_clip(good, train / clip_id, clip_id)
    (train / "901" / "subtitle.json").write_text('[["unterminated"], [')
    (train / "902" / "902_3.jpg").unlink()
    info = json.loads((train / "903" / "info.json").read_text())
    info["shot_id"] = info["shot_id"][:-1]
    (train / "903" / "info.json").write_text(json.dumps(info))
    info = json.loads((train / "904" / "info.json").read_text())
    info.update(img_num=1, img_id=[0], shot_id=info["shot_id"][:1], scene_id=info["scene_id"][:1])
    (train / "904" / "info.json").write_text(json.dumps(info))
    (train / "904" / "subtitle.json").write_text('[["only one frame"]]')
    (train / "905" / "905_0.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    ids = json.loads((root / "clip_id.json").read_text())
    ids["train"] += [int(c) for c in BROKEN]
    (root / "clip_id.json").write_text(json.dumps(ids))
    _copy_clip(good, train / "907", "907")  # a clip folder clip_id.json does not list
    return root


@pytest.fixture(scope="module")
def fixture_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    base = tmp_path_factory.mktemp("mp")
    manual = make_fixture(base / "manual")
    mp.prepare("clips", base / "data", manual_dir=manual)
    return manual, base / "data"


def test_fixture_builds_and_counts_skips(fixture_build, caplog) -> None:
    manual, data_dir = fixture_build
    builder = mp.prepare("clips", data_dir, manual_dir=manual)
    counts = {k: int(v.num_examples) for k, v in builder.info.splits.items()}
    assert counts == {"train": 4, "val": 2, "test_in_domain": 2, "test_out_domain": 2}
    summary = json.loads((pathlib.Path(builder.data_dir) / "build_summary.json").read_text())
    assert summary["skipped"] == {reason: 1 for reason in BROKEN.values()}
    assert summary["noted"]["clip_dir_not_in_clip_id"] == 1  # left out, named
    assert summary["examples"] == counts


def test_skip_warnings_name_file_and_reason(tmp_path: pathlib.Path, caplog) -> None:
    manual = make_fixture(tmp_path / "manual")
    with caplog.at_level(logging.WARNING, logger="tfds_builders"):
        mp.prepare("clips", tmp_path / "data", manual_dir=manual)
    text = caplog.text
    assert "901/subtitle.json: bad_json" in text
    assert "902_3.jpg: missing_frame" in text
    assert "903/info.json: length_mismatch" in text and "shot_id=" in text
    assert "904/info.json: too_few_frames" in text
    assert "905_0.jpg: bad_frame" in text
    assert "906: missing_clip_dir" in text
    assert "split train: 1 clip folder(s) not listed in clip_id.json are left out: 907" in text


def test_records_match_files_in_true_order(fixture_build) -> None:
    manual, data_dir = fixture_build
    src = mp.data_source("clips", "train", data_dir, manual_dir=manual)
    assert len(src) == 4
    for index in range(len(src)):
        r = src[index]
        clip_dir = manual / "train" / r["clip_id"]
        info = json.loads((clip_dir / "info.json").read_text())
        subs = json.loads((clip_dir / "subtitle.json").read_text())
        n = info["img_num"]
        assert r["movie_id"] == info["tt_id"]
        assert r["frames"] == [
            (clip_dir / f"{r['clip_id']}_{k}.jpg").read_bytes() for k in info["img_id"]
        ]
        assert r["subtitles"] == [" ".join(s for s in lines if s.strip()) for lines in subs]
        for k in ("img_id", "shot_id", "scene_id", "position"):
            assert r[k].dtype == np.int32 and r[k].shape == (n,)
        np.testing.assert_array_equal(r["position"], np.arange(n))
        np.testing.assert_array_equal(r["img_id"], info["img_id"])
        for key in ("shot_id", "scene_id"):  # renumbered 0.. by first appearance, same grouping
            raw = np.asarray(info[key])
            assert r[key][0] == 0 and np.all(np.diff(r[key]) >= 0)
            np.testing.assert_array_equal(r[key][1:] != r[key][:-1], raw[1:] != raw[:-1])


def test_source_is_picklable_and_grain_readable(fixture_build) -> None:
    import grain.python as grain

    manual, data_dir = fixture_build
    src = mp.data_source("clips", "val", data_dir, manual_dir=manual)
    first = src[0]
    clone = pickle.loads(pickle.dumps(src))
    assert clone[0]["frames"] == first["frames"]
    assert pickle.loads(pickle.dumps(first))["clip_id"] == first["clip_id"]
    assert src[-1]["clip_id"] == src[len(src) - 1]["clip_id"]
    with pytest.raises(IndexError):
        src[len(src)]
    lengths = list(grain.MapDataset.source(src).map(lambda r: len(r["frames"])))
    assert len(lengths) == 2 and all(10 <= n <= 20 for n in lengths)
    assert mp.split_names("clips", data_dir) == [
        "train",
        "val",
        "test_in_domain",
        "test_out_domain",
    ]


def test_missing_manual_dir_is_one_clear_line(tmp_path: pathlib.Path) -> None:
    with pytest.raises(mp.ManualDirError) as e:
        mp.data_source("clips", "train", tmp_path / "data", manual_dir=tmp_path / "nope")
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "nope") in msg and "clip_id.json" in msg
    with pytest.raises(mp.ManualDirError, match="needs --manual_dir"):
        mp.data_source("clips", "train", tmp_path / "data")
    with pytest.raises(FileNotFoundError, match="not built"):
        mp.data_source("synthetic_tiny", "train", tmp_path / "data", build=False)
    assert not (tmp_path / "data" / "moviepuzzle").exists()


def test_not_built_error_gives_the_build_command(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(FileNotFoundError) as e:
        mp.prepare("synthetic_tiny", data, build=False)
    assert str(e.value).endswith(
        f"run: python -m tfds_builders build moviepuzzle --config synthetic_tiny --data_dir {data}")
    with pytest.raises(FileNotFoundError) as e:  # a config that reads input files says so
        mp.prepare("clips", data, build=False)
    assert f"--config clips --manual_dir DIR --data_dir {data}" in str(e.value)


def test_summary_prints_kept_counts_apart_from_skips() -> None:
    summary = {"dataset": "d", "config": "c", "version": "1.0.0", "data_dir": "/x",
               "examples": {"train": 3},
               "skipped": {"bad_json": 2, "kept_lines_sorted": 5, "missing_frame": 1}}
    lines = common.format_summary(summary).splitlines()
    assert lines[2:] == ["  train: 3", "skipped: 3", "  bad_json: 2", "  missing_frame: 1",
                         "kept with a fix or warning: 5", "  lines_sorted: 5"]
    no_kept = dict(summary, skipped={"bad_json": 2})
    assert common.format_summary(no_kept).splitlines()[-2:] == ["skipped: 2", "  bad_json: 2"]


def test_synthetic_config_builds_without_manual_dir(tmp_path: pathlib.Path) -> None:
    src = mp.data_source("synthetic_tiny", "test_out_domain", tmp_path)
    assert len(src) == synthetic.PRESETS["tiny"]["test_out_domain"]
    names = mp.split_names("synthetic_tiny", tmp_path)
    assert names == ["train", "val", "test_in_domain", "test_out_domain"]
    r = src[0]
    assert r["frames"][0][:2] == b"\xff\xd8" and 10 <= len(r["frames"]) <= 20
    assert Image.open(io.BytesIO(r["frames"][0])).size == (64, 64)


def test_public_clips_build(shared_data: pathlib.Path, tmp_path: pathlib.Path) -> None:
    manual = shared_data / "moviepuzzle_public"
    ids = json.loads((manual / "clip_id.json").read_text())
    builder = mp.prepare("clips", tmp_path, manual_dir=manual)
    summary = json.loads((pathlib.Path(builder.data_dir) / "build_summary.json").read_text())
    present = {k: v for k, v in ids.items() if (manual / k).is_dir()}
    missing = sum(len(v) for k, v in ids.items() if k not in present)
    assert summary["examples"] == {"in_domain": len(ids["in_domain"])}
    assert summary["skipped"] == ({"missing_split_dir": missing} if missing else {})
    src = mp.data_source("clips", "in_domain", tmp_path)
    records = {r["clip_id"]: r for r in (src[i] for i in range(len(src)))}
    assert set(records) == {str(c) for c in ids["in_domain"]}
    for clip_id, r in records.items():
        info = json.loads((manual / "in_domain" / clip_id / "info.json").read_text())
        assert len(r["frames"]) == len(r["subtitles"]) == info["img_num"]
        assert np.all(np.diff(r["shot_id"]) >= 0) and np.all(np.diff(r["scene_id"]) >= 0)
        assert r["movie_id"].startswith("tt")
    # subtitle.json follows the true order of info.json: a sentence split over frames 2-3
    r = records["5"]
    assert r["subtitles"][2].endswith("marriages have")
    assert r["subtitles"][3].startswith('started "under the gun"')
    assert records["1060"]["subtitles"][-1] == "// [Radio Playing Salsa]"
    assert records["1060"]["subtitles"][-2] == ""


def _cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "tfds_builders", "build", "moviepuzzle", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_builds_and_prints_summary(tmp_path: pathlib.Path) -> None:
    manual = make_fixture(tmp_path / "manual")
    out = _cli("--config", "clips", "--manual_dir", str(manual), "--data_dir", str(tmp_path / "d"))
    assert out.returncode == 0, out.stderr
    assert "examples: 10" in out.stdout and "  train: 4" in out.stdout
    assert "skipped: 6" in out.stdout and "  bad_json: 1" in out.stdout
    assert "missing_frame" in out.stderr  # the warnings name the file
    assert "  train: 4 examples in " in out.stderr and "\r" not in out.stdout + out.stderr
    assert "Unknown size" not in out.stdout  # TFDS's banner (tfds_builders/progress.py)
    again = _cli(
        "--config", "clips", "--manual_dir", str(manual), "--data_dir", str(tmp_path / "d")
    )
    assert (
        again.returncode == 0 and "already built" in again.stdout and "bad_json: 1" in again.stdout
    )


def test_cli_missing_manual_dir_one_error_line(tmp_path: pathlib.Path) -> None:
    out = _cli(
        "--config", "clips", "--manual_dir", str(tmp_path / "nope"), "--data_dir", str(tmp_path)
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and out.stderr.startswith("error: manual_dir")
    assert str(tmp_path / "nope") in out.stderr
    assert not (tmp_path / "moviepuzzle").exists()
