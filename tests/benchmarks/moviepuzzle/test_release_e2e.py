"""MoviePuzzle on its public per-clip release, end to end (`clips` config): a manual_dir in
the release's layout in which its awkward cases occur (a clip whose subtitle.json is not
valid JSON, a listed clip without a directory, non-square 240p frames, empty subtitle
strings) -> build -> train the HCMC paper row a few steps (CLIP towers reading CLIP's
preprocessing from the frame store) -> evaluate every test clip -> metrics.

Real clips of `../shared/data/moviepuzzle_public` when present (skipped with the reason
otherwise); the generated fixture of the same layout (`release_layout.py`) always."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import pytest
from PIL import Image

from configs.moviepuzzle import hcmc
from tests.benchmarks.moviepuzzle import release_layout
from tfds_builders import moviepuzzle as mp
from vnr import train
from vnr.data import frame_store, images

METRICS = {"lsd", "lmd", "sd", "ssd", "os2", "os3", "pair_acc", "shot_iou", "clips"}
SIDE = 32  # the scratch CLIP tower's image side (scratch:clip-tiny)


def _clips(source: str, shared: pathlib.Path | None, tmp: pathlib.Path) -> list[pathlib.Path]:
    if source == "generated":
        return release_layout.generated_clips(tmp / "gen", n=8)
    return release_layout.real_clips(shared / "moviepuzzle_public", n=8)


def _every_clip(config) -> None:
    """Evaluate every clip of every split."""
    for ev in config.evals.values():
        ev.max_examples = 0


@pytest.fixture(params=["real", "generated"])
def release(request, tmp_path) -> tuple[pathlib.Path, dict]:
    shared = None
    if request.param == "real":
        shared = request.getfixturevalue("shared_data")
        if not (shared / "moviepuzzle_public" / "clip_id.json").is_file():
            pytest.skip(f"no public MoviePuzzle clips under {shared / 'moviepuzzle_public'}")
    clips = _clips(request.param, shared, tmp_path)
    manual = tmp_path / "manual"
    return manual, release_layout.write_release(manual, clips, n_out=3)


@pytest.mark.e2e
def test_release_builds_trains_and_evaluates_every_test_clip(release, tmp_path):
    manual, readable = release
    config = hcmc.get_config("smoke,frame_shot,paper,clips,clip")  # scratch CLIP towers
    config.data.update(manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                       train_split="in_domain", val_split="in_domain",
                       test_splits=("out_domain",), image_size=SIDE, image_resize="clip",
                       frame_store=True)
    _every_clip(config)
    config.total_steps = config.eval_every = config.ckpt_every = 3

    # build: the defects are counted by reason, the rest is kept
    builder = mp.prepare("clips", config.data.data_dir, manual_dir=manual)
    summary = json.loads((pathlib.Path(builder.data_dir) / "build_summary.json").read_text())
    assert summary["skipped"] == {"bad_json": 1, "missing_clip_dir": 1}
    assert summary["examples"] == {k: len(v) for k, v in readable.items()}
    src = mp.data_source("clips", "in_domain", config.data.data_dir)
    recs = [src[i] for i in range(len(src))]
    assert any("" in r["subtitles"] for r in recs)  # frames without dialogue
    first = manual / "in_domain" / recs[0]["clip_id"]
    jpeg = (first / f"{recs[0]['clip_id']}_0.jpg").read_bytes()
    w, h = Image.open(io.BytesIO(jpeg)).size
    assert w > h  # 240p, wider than high

    # train and evaluate (every clip of every split the run reads)
    results = train.run(config, str(tmp_path / "run"))
    m = results["out_domain"]
    assert METRICS <= set(m) and m["clips"] == len(readable["out_domain"])
    assert all(np.isfinite(v) for v in m.values()) and 0 <= m["os2"] <= 100

    # the towers read CLIP's preprocessing of the real frames, stored once
    stores = list((pathlib.Path(config.data.data_dir) / "frame_store").glob("*/*/*/*/meta.json"))
    assert len(stores) == 1
    reader = frame_store.Reader(stores[0].parent, "in_domain")
    np.testing.assert_array_equal(reader.rows(0, recs[0]["clip_id"])[0],
                                  images.decode(jpeg, SIDE, "clip"))
