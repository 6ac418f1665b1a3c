"""From videos to a SYMON result: generated videos for every video of a release-shaped
corpus -> `vnr.extract` (CLIP tower, random weights in the real layout) writes
features/<id>.npy -> the `features` build reads them -> a few training steps -> every test
example evaluated."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests import ROOT
from tfds_builders import common
from tfds_builders.symon import synthetic
from vnr import config as config_lib
from vnr import extract, train
from vnr.data import synthetic_video as sv
from vnr.models.encoders import testing


@pytest.mark.e2e
def test_videos_to_features_to_training_and_evaluation(tmp_path):
    release = tmp_path / "symon"
    truth = synthetic.write_corpus(release, "tiny", seed=2)
    shutil.rmtree(release / "features")  # made from the videos below instead
    videos = tmp_path / "videos"
    videos.mkdir()
    for i, (vid, t) in enumerate(truth.items()):
        sv.write(videos / f"{vid}.mp4", np.arange(int(t["duration"] * 2)) / 2, width=48,
                 height=32, seed=i)
    ckpt = tmp_path / "clip"
    testing.write_tiny_checkpoint("clip-p16", ckpt, "pt-safetensors")
    got = extract.run("clip", str(ckpt), str(videos), str(release), say=lambda s: 0,
                      ids=str(release / "url.txt"))
    assert got["extracted"] == len(truth) and got["missing_video"] == 0
    for vid, t in truth.items():
        feats = np.load(release / "features" / f"{vid}.npy")
        assert feats.shape == (int(np.ceil(t["duration"])), 24) and feats.dtype == np.float32

    c = config_lib.load(f"{ROOT / 'configs' / 'symon' / 'retrieval'}.py:smoke,no_memory")
    c.data.update(config="features", manual_dir=str(release), data_dir=str(tmp_path / "tfds"))
    c.update(total_steps=4, log_every=2, eval_every=1000, ckpt_every=1000, progress=False)
    c.evals.val.max_examples, c.evals.test.max_examples = 0, 0
    results = train.run(c, str(tmp_path / "run"))
    built = next((tmp_path / "tfds").rglob(common.SUMMARY_FILE))
    summary = json.loads(built.read_text())
    assert sum(summary["examples"].values()) == len(truth), summary
    assert "video:missing_features" not in summary.get("skipped", {})
    assert results["test"]["items"] > 0 and np.isfinite(results["test"]["v2t_r@1"])
