"""Sc2St on its release, end to end (issue 27's must-show): a manual_dir in the release's
layout (`release_layout.py`: story10_all_<split>_no.json, parsed_text.json, i2chars.json,
parsed_clip.json, data/lsmdc.json, data/meta.csv, frames/<movie>/<clip>/<k>.jpg at 640x360)
in which its awkward cases occur (a 9-frame story, a story id given twice, an id lsmdc.json
lacks, a frame missing on disk, a clip without text, a clip with two descriptions, a movie
without a meta.csv line, meta.csv's space-separated line) -> `python -m tfds_builders build`
(its `build` function) -> train the SA model a few steps with the trainer (smoke sizes) ->
evaluate every test storyboard -> metrics; the same clips' LSMDC 2016 CSVs build through the
LSMDC path (`test_lsmdc_rows_of_the_release_clips_build`).

`meta.csv` is the real public file (`../shared/data/sc2st`, the only public Sc2St file; the
`real` case skips, saying why, without it); the `generated` case writes its lines for the same
movies, so the test runs without ../shared. The keyframe CLIP is a random tiny CLIP saved under
the `released` config's encoder name (clip-vit-base-patch32, with its 512-d projection) in a
temporary $VNR_ENCODERS_DIR: the pretrained weights are not here, the shapes are the release's.
"""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import pytest
from PIL import Image

from configs.sc2st.main import get_config
from tests.benchmarks.sc2st import release_layout
from tfds_builders import common
from tfds_builders import sc2st as sc2st_lib
from tfds_builders.__main__ import build

CLIP = "clip-vit-base-patch32"  # the `released` config's keyframe encoder
EMBEDDER = "vnr.benchmarks.sc2st.embedders:clip_embedder"  # what the trainer hands the build
METRICS = {"r1", "r5", "r10", "mean_rank", "storyboards"}


@pytest.fixture(params=["real", "generated"])
def release(request, tmp_path_factory) -> release_layout.Release:
    meta = None
    if request.param == "real":
        meta = request.getfixturevalue("shared_data") / "sc2st" / "meta.csv"
        if not meta.is_file():
            pytest.skip(f"no public Sc2St meta.csv at {meta}")
    return release_layout.write_release(tmp_path_factory.mktemp(request.param) / "Sc2St", meta)


@pytest.fixture(scope="module")
def encoders(tmp_path_factory) -> pathlib.Path:
    """A $VNR_ENCODERS_DIR holding a random tiny CLIP named as the config's encoder."""
    from vnr.models.encoders import testing

    root = tmp_path_factory.mktemp("encoders")
    testing.write_tiny_checkpoint("clip-p32", root / CLIP, "msgpack",
                                  config_overrides={"projection_dim": 512})
    return root


def _check_build(summary: dict, rel: release_layout.Release, data_dir: pathlib.Path) -> None:
    """The build kept every usable storyboard and counted each awkward case by name."""
    assert summary["examples"] == rel.stories
    assert summary["skipped"] == rel.skipped  # the real meta.csv parses whole
    for named in summary["named"].values():  # file and key path of each story
        assert named[0].startswith(str(rel.root / "story10_all" / "story10_all_")), named
    assert "['test_dup']" in summary["named"]["duplicate_key"][0]
    firsts = dict(rel.sentences)
    for split, n in rel.stories.items():
        src = sc2st_lib.data_source("released", split, data_dir, build=False)
        assert len(src) == n
        for i in range(n):
            r = src[i]
            assert r["index"] == i and r["genres"] == rel.genres[r["movie"]]
            assert r["features"].shape == (10, 512) and r["features"].dtype == np.float32
            np.testing.assert_allclose(np.linalg.norm(r["features"], axis=1), 1, rtol=1e-5)
            assert r["candidates"].shape == (9, 100)
            gt = r["candidates"][np.arange(9), r["answer"]]
            np.testing.assert_array_equal(gt, i * 10 + np.arange(1, 10))
            assert not any("<" in s for s in r["sentences"])  # LSMDC markup cleaned
            frame = r["frame_ids"][0]
            assert frame.startswith(f"frames/{r['movie']}/{r['movie']}_")
            assert r["sentences"][0] == firsts.pop(_frame_id(frame, rel.root))
    assert not firsts  # every usable storyboard was found
    with Image.open(io.BytesIO((rel.root / frame).read_bytes())) as im:
        assert im.size == release_layout.FRAME_SIZE  # 640x360, not square


def _frame_id(frame: str, root: pathlib.Path) -> str:
    """`frames/<movie>/<clip>/<k>.jpg` -> `l_<movie>_<clip>_<k>` through data/lsmdc.json."""
    n2i = json.loads((root / "data" / "lsmdc.json").read_text())["n2i"]
    _, movie, clip, name = frame.split("/")
    m, clips = n2i[movie]
    return f"l_{m}_{clips[clip]}_{name.removesuffix('.jpg')}"


def test_release_builds_with_its_awkward_cases_counted(release, tmp_path) -> None:
    """The build alone, with a cheap stand-in embedder (the e2e test below uses CLIP)."""
    data_dir = tmp_path / "tfds"
    summary = build("sc2st", "released", str(data_dir), str(release.root),
                    embedder="tests.benchmarks.sc2st.release_layout:numpy_embedder")
    print(common.format_summary(summary))  # the build summary, for the record
    _check_build(summary, release, data_dir)
    stats = json.loads(next(data_dir.rglob("sc2st_stats.json")).read_text())
    assert stats["movies_not_in_meta"] == 1  # 9001_Not_In_Meta: no genres, counted


def test_lsmdc_rows_of_the_release_clips_build(release, tmp_path) -> None:
    """The LSMDC path on the same frames: the release's LSMDC 2016 CSVs (a row given twice,
    a cp1252 row, an excluded movie) with the real meta.csv -> storyboards with its genres.
    A config of 20 candidates (the named `lsmdc` configs ask 100 per set, more keyframes
    than a test corpus holds in its 5% validation split)."""
    import tensorflow_datasets as tfds

    cfg = sc2st_lib.Sc2StConfig(name="release_lsmdc", encoder="numpy", feature_dim=512,
                                num_candidates=20, fractions=(0.6, 0.2, 0.2))
    builder = sc2st_lib.Sc2St(config=cfg, data_dir=str(tmp_path / "tfds"),
                              embedder=release_layout.numpy_embedder)
    (release.root / "meta.csv").symlink_to(release.root / "data" / "meta.csv")  # lsmdc: top
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(release.root)))
    summary = common.read_summary(builder)
    print(common.format_summary(summary))
    assert summary["skipped"] == release_layout.LSMDC_SKIPPED
    assert summary["named"]["kept_duplicate_clip_merged"][0].endswith(
        "(LSMDC16_annos_training.csv:6 merged into LSMDC16_annos_training.csv:5)")
    assert summary["named"]["excluded_movie"] == [
        "LSMDC16_annos_training.csv:10 (1010_TITANIC)"]
    stats = json.loads((pathlib.Path(builder.data_dir) / "sc2st_stats.json").read_text())
    assert stats["movies_not_in_meta"] == 1 and stats["storyboards"] == sum(
        summary["examples"].values()) >= 30
    movies = set()
    for split in summary["examples"]:
        for r in sc2st_lib.data_source(cfg, split, tmp_path / "tfds", build=False):
            movies.add(r["movie"])
            assert r["genres"] == release.genres[r["movie"]]
            assert all(c.startswith(r["movie"] + "_") for c in r["clip_ids"])
            assert all(f.startswith(f"frames/{r['movie']}/") and f.endswith(".jpg")
                       for f in r["frame_ids"])
    assert movies == set(release.genres)  # 1010_TITANIC excluded, every other movie used


@pytest.mark.e2e
def test_release_builds_trains_and_evaluates_every_test_storyboard(
        release, encoders, tmp_path, monkeypatch) -> None:
    from vnr import train

    monkeypatch.setenv("VNR_ENCODERS_DIR", str(encoders))
    data_dir = tmp_path / "tfds"
    summary = build("sc2st", "released", str(data_dir), str(release.root), embedder=EMBEDDER)
    print(common.format_summary(summary))
    _check_build(summary, release, data_dir)

    config = get_config("smoke,sa,released")
    config.data.update(data_dir=str(data_dir), manual_dir=str(release.root))
    config.total_steps = config.eval_every = config.ckpt_every = 2
    config.evals.test.max_examples = 0  # every test storyboard
    config.progress = False
    results = train.run(config, str(tmp_path / "run"))  # reuses the CLI's build (same source)
    m = results["test"]
    assert METRICS <= set(m) and m["storyboards"] == summary["examples"]["test"]
    assert all(np.isfinite(v) for v in m.values())
    assert 0 <= m["r1"] <= m["r5"] <= m["r10"] <= 100 and 1 <= m["mean_rank"] <= 100

    # the same data_dir built with another keyframe embedder: the trainer stops in one line
    other = tmp_path / "tfds_other"
    build("sc2st", "released", str(other), str(release.root),
          embedder="tests.benchmarks.sc2st.release_layout:other_embedder")
    config.data.data_dir = str(other)
    with pytest.raises(train.ConfigError, match=r"was built with other model functions "
                       r"\(embedder: '.*:other_embedder' then, '.*:clip_embedder' now\)"):
        train.run(config, str(tmp_path / "run_other"))
    assert not (tmp_path / "run_other" / "config.json").exists()
