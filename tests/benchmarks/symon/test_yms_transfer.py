"""SYMON -> YMS zero-shot transfer (§7.3): YMS movies removed from SYMON training (counted),
the retrieval run's model loaded through the `pretrained` hook, argmax with a val-tuned
threshold."""

import json

import numpy as np
import pytest

from tests import ROOT
from vnr import config as config_lib
from vnr import train
from vnr.benchmarks.symon import data, exclusion


def _config(name, arg):
    c = config_lib.load(f"{ROOT / 'configs' / 'symon' / name}.py:{arg or ''}")
    c.progress = False
    return c


def test_yms_movie_list_keys(tmp_path):
    key = exclusion.title_key
    assert key("The Dark Knight") == key("dark knight") == "darkknight"
    lst = tmp_path / "movie_list.txt"
    lst.write_text("0000\tAnt-Man in 4 minutes - (Marvel Phase Two Recap)\n"
                   "0003\tBlade Runner in 4 minutes (Movie Recap)\n")
    assert exclusion.excluded_movie_keys(str(lst)) == {"antman", "bladerunner"}


def test_new_segmentation_is_two_scene_clips():
    from vnr.benchmarks.symon import yms_transfer as yt

    rng = np.random.default_rng(0)
    shots = [rng.normal(size=16) for _ in range(5)]
    feats = np.concatenate([np.tile(s, (n, 1)) for s, n in zip(shots, (3, 4, 2, 5, 3))])
    feats += 0.05 * rng.normal(size=feats.shape)
    cb, ce = yt.scene_clips(feats, 1.0)  # cuts 3, 7, 9, 14: clips [0,7) [7,14) [14,17)
    np.testing.assert_allclose(cb, [0, 7, 14])
    np.testing.assert_allclose(ce, [7, 14, 17])
    assert _config("yms_transfer", "smoke,new").data.segmentation == "scenes"


def test_alignment_metrics_by_hand():
    from vnr.benchmarks.symon import yms_transfer as yt

    gt = np.array([0, 0, 1, -1])
    dur = np.array([1.0, 2.0, 1.0, 4.0])
    pred = np.array([0, 1, 1, -1])
    assert yt.clip_accuracy(pred, gt, dur) == pytest.approx((1 + 1 + 4) / 8)
    # sentence 0: inter 1, union 3; sentence 1: inter 1, union 3.
    assert yt.sentence_iou(pred, gt, dur) == pytest.approx(1 / 3)
    vids = [{"sim": np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [0.5, 0.2]]), "gt": gt,
             "dur": dur, "sents": 2}]
    res = yt.align(vids, threshold=0.9)  # clip 3 (0.5) falls below: "no sentence"
    assert res["clip_accuracy"] == pytest.approx(75.0)
    assert yt.tune_threshold(vids) >= 0.5  # the tuned threshold drops clip 3 too


def test_every_evaluated_split_is_checked(tmp_path):
    """The evaluators' splits too (`new_val` / `new_test` are drawn from the built ones);
    the zero-shot task never reads data.train_split."""
    from tfds_builders.msymon.yms import synthetic as yms_synthetic
    from vnr.benchmarks.symon import yms_transfer as yt

    root = yms_synthetic.write_corpus(tmp_path / "yms", seed=1, dim=32)
    c = _config("yms_transfer", "smoke")
    c.data.update(manual_dir=str(root), data_dir=str(tmp_path / "tfds"), train_split="unread")
    c.evals.extra = dict(split="new_val", every=1)
    yt.check_splits(c)
    c.evals.extra.split = "nope"
    with pytest.raises(ValueError, match=r"^evals.extra.split='nope' is not a split of "
                                         r"yms/sentences \(it has .*new_test, new_val\)$"):
        yt.check_splits(c)


@pytest.mark.e2e
def test_zero_shot_from_a_symon_retrieval_run_without_the_yms_movies(tmp_path):
    from tfds_builders.msymon.yms import synthetic as yms_synthetic

    movies = tmp_path / "movie_list.txt"
    movies.write_text("0000\tMovie 0 in 4 minutes - (Movie Recap)\n0001\tNo Such Film\n")
    (tmp_path / "url_list.txt").write_text("0000\thttps://youtu.be/AAAAAAAAAAA\n")
    src = _config("retrieval", "smoke,exclude_yms")
    src.data.update(data_dir=str(tmp_path / "tfds"), exclude_movies=str(movies))
    items = data.ItemSource(src.data, "train", "retrieval")
    assert items.excluded and all("_000x" in v for v in items.excluded)  # movie 0's videos
    assert all(items.videos[i]["movie_id"] != "movie 0" for i in range(len(items.videos)))
    src.update(total_steps=2, log_every=1, eval_every=100, ckpt_every=100)
    src.data.test_splits = ("val",)
    train.run(src, str(tmp_path / "symon"))

    root = yms_synthetic.write_corpus(tmp_path / "yms", seed=1, dim=32)
    c = _config("yms_transfer", "smoke")
    c.data.update(manual_dir=str(root), data_dir=str(tmp_path / "tfds"))
    c.transfer.source_run = str(tmp_path / "symon")
    res = train.run(c, str(tmp_path / "yms_run"))["test"]
    assert res["videos"] == 2 and np.isfinite(res["threshold"])
    assert 0 <= res["clip_accuracy"] <= 100 and 0 <= res["sentence_iou"] <= 100
    assert json.loads((tmp_path / "yms_run" / "results.json").read_text())["test"] == res
    for png in ("symon/reports/val_retrieval.png", "yms_run/reports/test_alignment.png"):
        assert (tmp_path / png).stat().st_size > 5000, png
    new = _config("yms_transfer", "smoke,new")  # 70/30 by video id, two-scene clips
    new.data.update(manual_dir=str(root), data_dir=str(tmp_path / "tfds"))
    new.transfer.source_run = str(tmp_path / "symon")
    res_new = train.run(new, str(tmp_path / "yms_new"))["new_test"]
    assert res_new["videos"] == 7  # of the 8 generated videos, CRC32 puts 1 in new_val
    c.transfer.source_run = ""
    with pytest.raises(train.ConfigError, match="source_run is required"):
        train.setup(c)


def test_a_source_run_trained_on_yms_test_videos_is_refused(tmp_path):
    """The check `check_splits` makes (before anything compiles): a SYMON run whose training
    split holds a YMS test video is refused in one line; with `exclude_yms` it passes."""
    from tfds_builders import symon
    from tfds_builders.msymon.yms import synthetic as yms_synthetic
    from vnr.benchmarks.symon import yms_transfer

    release = tmp_path / "symon_release"
    symon.write_generated_release(release, "tiny", seed=2)
    shared = symon.inventory(release)["train"][0].video.split(":")[1]
    root = yms_synthetic.write_corpus(tmp_path / "yms", seed=1, dim=32)
    test = (root / "test_split.txt").read_text().split()
    urls = [f"{i}    https://youtu.be/{shared if i == test[0] else f'Y{i:0>10}'}"
            for i in sorted({*test, *(root / "training_split.txt").read_text().split(),
                             *(root / "val_split.txt").read_text().split()})]
    (root / "url_list.txt").write_text("\n".join(urls) + "\n")
    (root / "movie_list.txt").write_text("".join(f"{i}    Film {i}\n" for i, _ in
                                                 (u.split(None, 1) for u in urls)))
    src = _config("retrieval", "smoke")
    src.data.update(config="features", manual_dir=str(release))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(src.to_json())
    c = _config("yms_transfer", "smoke")
    c.data.update(manual_dir=str(root), data_dir=str(tmp_path / "tfds"))
    c.transfer.source_run = str(tmp_path / "run")
    with pytest.raises(train.ConfigError, match=r"^refused: .* shares 1 video\(s\)") as e:
        train.setup(c, check_splits=True)
    assert "\n" not in str(e.value) and f"youtube:{shared}" in str(e.value)
    src.data.exclude_movies = str(root / "movie_list.txt")
    (tmp_path / "run" / "config.json").write_text(src.to_json())
    yms_transfer.check_source(c)  # the YMS videos left the source's training split
