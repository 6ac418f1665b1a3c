"""`python -m vnr.benchmarks.symon.tools contamination`: YMS videos inside SYMON by id, per
split, and what the `exclude_yms` exclusion removes of them (by title, by id)."""

import json

from tfds_builders.symon import synthetic
from vnr.benchmarks.symon import tools


def test_yms_videos_are_found_by_id_and_all_leave_training(tmp_path, capsys):
    root = tmp_path / "symon"
    synthetic.write_corpus(root, "tiny", seed=2)
    ids = sorted(p.name.split(".")[0] for p in (root / "timestamped_text").glob("*.vtt"))
    yms = tmp_path / "yms"
    yms.mkdir()
    (yms / "movie_list.txt").write_text("0000\tNo Such Film in 4 minutes\n")
    (yms / "url_list.txt").write_text("".join(f"{i:04d}\thttps://youtu.be/{v}\n"
                                              for i, v in enumerate(ids[:5] + ["ZZZZZZZZZZZ"])))
    assert tools.main(["contamination", "--yms_dir", str(yms), "--manual_dir", str(root),
                       "--data_dir", str(tmp_path / "tfds")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["yms_videos"] == 6
    assert sum(report["splits"].values()) == 5  # every listed release video, in its split
    assert report["train_removed_by_id"] == report["splits"]["train"]
    assert report["train_yms_left"] == 0


def test_real_yms_lists_against_the_symon_sample(shared_data, tmp_path, capsys):
    assert tools.main(["contamination", "--yms_dir", str(shared_data / "yms"),
                       "--manual_dir", str(shared_data / "symon"),
                       "--data_dir", str(tmp_path / "tfds")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["yms_videos"] == 93  # 94 lines, one id listed twice
    assert report["train_yms_left"] == 0
