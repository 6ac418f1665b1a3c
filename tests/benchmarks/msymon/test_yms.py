"""YMS builder: real annotation files and a generated fixture in the release layout."""

import json

import numpy as np

from tfds_builders import common
from tfds_builders.msymon import yms
from tfds_builders.msymon.yms import synthetic
from tfds_builders.msymon.yms.yms import read_split, seconds


def test_real_yms_builds_what_exists_and_counts_the_rest(shared_data, tmp_path):
    for text in ("sentences", "phrases"):
        b = yms.prepare(f"{text}_text_only", tmp_path, shared_data / "yms")
        s = common.read_summary(b)
        assert s["examples"] == {"train": 66}  # only training videos are annotated
        assert s["skipped"]["missing_annotations"] == 12 + 15  # val + test ids (one commented)
        assert s["skipped"]["kept_split_comment_lines"] == 1
        assert s["skipped"]["kept_unmatched_clip_spans"] > 30
        assert s["skipped"]["kept_unmatched_marker_spacing"] > 0
    src = yms.data_source("sentences_text_only", "train", tmp_path)
    rec = next(src[i] for i in range(len(src)) if src[i]["video_id"] == "0000")
    assert rec["clip_begin"][0] == 0 and abs(rec["clip_end"][0] - 7.632) < 1e-4
    assert rec["sentences"][0].startswith("In 1989, Scientist Hank Pym")
    assert rec["matched"].all()  # 0000's only UNMATCHED line is footage, not a sentence
    assert abs(rec["begin"][0] - 7.64) < 1e-4 and abs(rec["end"][0] - 17.82) < 1e-4
    rec3 = next(src[i] for i in range(len(src)) if src[i]["video_id"] == "0003")
    gone = [t for t, m in zip(rec3["sentences"], rec3["matched"], strict=True) if not m]
    assert gone[0].startswith("As Tyrell Corporation")  # "UNMATCHED:  As Tyrell ..."
    assert read_split(shared_data / "yms" / "val_split.txt")[-1] == "0092"


def test_generated_yms_with_features_and_defects(tmp_path):
    root = synthetic.write_corpus(tmp_path / "raw", seed=1, dim=32)
    with open(root / "annotations_sentences.txt", "a") as f:
        f.write("0001_00.00.xx-00.00.01.000\tbroken line\n")
    np.save(root / "features" / "0002.npy", np.zeros((3, 32), np.float32))  # too short
    b = yms.prepare("sentences", tmp_path / "tfds", root, dim=32)
    s = common.read_summary(b)
    assert s["skipped"]["malformed_annotation_line"] == 1
    assert s["skipped"]["features_too_short"] == 1
    assert s["examples"] == {"train": 3, "val": 2, "test": 2}
    rec = yms.data_source("sentences", "test", tmp_path / "tfds", dim=32)[0]
    assert rec["features"].shape[1] == 32 and len(rec["clip_begin"]) > 3
    assert np.all(np.diff(rec["clip_begin"]) > 0) and rec["clip_end"][-1] <= rec["duration"]
    assert json.loads(json.dumps(s))["config"] == "sentences_d32_fps1"
    assert seconds("01", "02", "03", "5") == 3723.5


def test_zero_shot_from_a_run_that_trained_on_a_yms_test_video_is_refused(tmp_path):
    """A YMS run from another run's model (`init_from`) checks the source run's training
    split against YMS `test` in `check_splits` (`vnr.contamination.check_transfer`), before
    anything compiles: one line, the counts."""
    import pytest

    from configs.msymon.main import get_config as msymon_config
    from configs.msymon.yms import get_config as yms_config
    from tfds_builders import msymon
    from vnr.benchmarks.msymon import alignment

    release = msymon.write_synthetic(tmp_path / "msymon", seed=1, languages=("en",))
    shared = msymon.inventory(release)["en_train"][0].video.split(":")[1]
    root = synthetic.write_corpus(tmp_path / "yms", seed=1, dim=32)
    first = read_split(root / "test_split.txt")[0]
    urls = root / "url_list.txt"
    urls.write_text("".join(f"{first}    https://youtu.be/{shared}\n" if line.startswith(first)
                            else f"{line}\n" for line in urls.read_text().splitlines()))
    src = msymon_config("smoke")
    src.data.update(config="features", manual_dir=str(release), train_split="en_train")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(src.to_json())
    c = yms_config("smoke,zeroshot")
    c.data.update(manual_dir=str(root), data_dir=str(tmp_path / "tfds"))
    c.init_from = str(tmp_path / "run")
    with pytest.raises(ValueError, match=r"^refused: .*msymon en_train.* shares 1 video\(s\)"):
        alignment.check_splits(c)  # the hook vnr.train and vnr.evaluate call before compiling
