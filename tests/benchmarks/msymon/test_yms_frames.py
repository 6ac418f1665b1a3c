"""YMS through M-SyMoN §5.1's model (`configs/msymon/yms.py:cclm`, Table 5): the builder's
`*_videos` configs name each video's file, and the frame store holds each YMS clip's frames
(clips from clip_segmentation.txt, not shots)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from configs.msymon.yms import get_config
from tfds_builders.msymon import yms
from tfds_builders.msymon.yms import synthetic
from vnr.benchmarks.msymon import data, frames
from vnr.data import synthetic_video as sv

GOLDEN = pathlib.Path(__file__).parents[2] / "golden" / "swin"
FPS = 4.0


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """(YMS release with videos/, its data_dir); one train video's file is missing."""
    d = tmp_path_factory.mktemp("yms_frames")
    root = synthetic.write_corpus(d / "yms", seed=3, dim=8,
                                  sizes={"train": 3, "val": 1, "test": 2})
    frames.write_videos(root, fps=FPS, width=48, height=32, shot_seconds=0)
    (root / "videos" / "0000.mp4").unlink()
    return root, d / "tfds"


def _config(release, arg: str):
    root, data_dir = release
    meta = json.loads((GOLDEN / "meta.json").read_text())
    c = get_config(arg)
    c.data.update(manual_dir=str(root), data_dir=str(data_dir), tokenizer=str(root / "tok"))
    c.data.frames.update(image_size=meta["swin"]["img_size"], workers=0)
    return c


def test_videos_config_names_each_file_and_counts_the_missing_one(release):
    root, data_dir = release
    builder = yms.prepare("sentences_videos", data_dir, root)
    summary = json.loads((pathlib.Path(builder.data_dir) / "build_summary.json").read_text())
    assert summary["skipped"]["missing_video"] == 1
    recs = list(yms.data_source("sentences_videos", "train", data_dir, root))
    assert [r["video_id"] for r in recs] == ["0001", "0002"]
    for r in recs:
        assert r["video_file"] == f"{r['video_id']}.mp4"
        assert len(r["clip_begin"]) and "features" not in r


def test_the_store_holds_each_yms_clips_frames(release):
    """Each clip of clip_segmentation.txt keeps the frames at the centres of its `pool` equal
    parts (the frames spell their index); evaluation takes the centres of its thirds."""
    c = _config(release, "zeroshot,dtw,cclm")
    assert (c.data.builder, c.data.config, c.model.encoder) == ("yms", "sentences_videos",
                                                                 "cclm")
    frames.check_config(c.data)
    rec = data.source(c.data, "test")[0]
    cb, ce = data.cut_clips(rec, c.data.clip_seconds, data.shots(c.data))
    np.testing.assert_array_equal(cb, rec["clip_begin"])  # YMS's own clips
    pool = c.data.frames.pool
    got = np.array([sv.read_index(f) for f in rec["frames"]]).reshape(len(cb), pool)
    want = np.floor(frames.clip_times(cb, ce, pool) * FPS + 1e-6).astype(int)
    np.testing.assert_array_equal(got, want)


def test_table5_configs(release):
    """The supervised YMS run (CCLM-individual (YMS)) trains §5.1's model with §6.1's
    settings; the zero-shot transfer of an M-SyMoN run trains nothing and aligns with
    Drop-DTW; a features config cannot read frames."""
    sup = get_config("supervised,cclm,paper")
    assert (sup.epochs, sup.data.frames.augment, sup.data.frames.per_clip) == (20, "cclm", 3)
    zero = get_config("zeroshot,dtw,cclm")
    assert (zero.total_steps, zero.epochs, zero.eval.method) == (0, 0, "drop_dtw")
    c = _config(release, "zeroshot,dtw,cclm")
    c.data.config = "sentences"
    with pytest.raises(ValueError, match="data.builder='yms' and data.config="
                                         "'sentences_videos'") as e:
        frames.check_config(c.data)
    assert "\n" not in str(e.value)
