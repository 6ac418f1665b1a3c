"""SYMON builder: WebVTT rolling-duplicate removal, sentences, names, cuts, splits, defects."""

import collections
import json
import pathlib

import numpy as np
import pytest

from tfds_builders import common
from tfds_builders import symon as builder
from tfds_builders.symon import narration, synthetic, vtt
from tfds_builders.symon.symon import SymonConfig, detect_cuts

ASR = """WEBVTT
Kind: captions
Language: en

00:00:03.290 --> 00:00:05.470 align:start position:0%
<SP>
[Music]

00:00:05.470 --> 00:00:05.480 align:start position:0%
[Music]
<SP>

00:00:05.480 --> 00:00:08.419 align:start position:0%
[Music]
black<00:00:06.480><c> mirror</c><00:00:06.810><c> Bandersnatch</c><00:00:07.589><c> now</c>

00:00:08.419 --> 00:00:08.429 align:start position:0%
black mirror Bandersnatch now
<SP>

00:00:08.429 --> 00:00:10.280 align:start position:0%
black mirror Bandersnatch now
gives<00:00:08.790><c> you</c><00:00:09.360><c> choices</c>

00:00:10.280 --> 00:00:10.290 align:start position:0%
gives you choices
<SP>

00:00:11.000 --> 00:00:10.000 align:start position:0%
backwards cue

00:00:1x.000 --> 00:00:12.000
broken timing

00:00:12.000 --> 00:00:13.000
late<00:00:19.000><c> tag</c>
""".replace("<SP>", " ")  # YouTube's blank-looking payload lines are one space


def test_vtt_rolling_duplicates_and_word_times():
    skips = common.Counts()
    words = vtt.parse(ASR, skips, "v.en.vtt")
    assert [w.text for w in words] == ["[Music]", "black", "mirror", "Bandersnatch", "now",
                                       "gives", "you", "choices"]
    assert words[1].start == pytest.approx(5.48) and words[2].start == pytest.approx(6.48)
    assert words[1].end == pytest.approx(6.48) and words[4].end == pytest.approx(8.419)
    assert words[5].start == pytest.approx(8.429)
    assert skips == {"noted_cue:rolling_duplicate": 3, "cue:end_before_start": 1,
                     "cue:bad_timing": 1, "cue:bad_word_timing": 1}
    # each malformed cue named by file and line (the repeats are information, not skips)
    assert skips.named["cue:end_before_start"] == [
        "v.en.vtt:29 (cue 7: ends at 10.000 s before its start 11.000 s)"]
    assert skips.named["cue:bad_timing"] == [
        "v.en.vtt:32 (cue 8: timing '00:00:1x.000 --> 00:00:12.000' malformed or out of "
        "range)"]
    assert skips.named["cue:bad_word_timing"][0].startswith("v.en.vtt:36 (cue 9: word times")
    assert ASR.splitlines()[28].startswith("00:00:11.000 -->")  # line 29
    assert ASR.splitlines()[35].startswith("late<")  # line 36
    with pytest.raises(ValueError, match="WEBVTT"):
        vtt.parse("00:00:01.000 --> 00:00:02.000\nhi\n")


def test_vtt_uploaded_captions_spread_and_repeat():
    text = ("WEBVTT\n\n00:00:00.000 --> 00:00:04.000\nToday, a film&nbsp;\ncalled Drive.\n\n"
            "00:00:04.000 --> 00:00:06.000\ncalled Drive.\n\n00:00:06.000 --> 00:00:08.000\n"
            "He drives.\n")
    skips = collections.Counter()
    words = vtt.parse(text, skips)
    assert [w.text for w in words] == ["Today,", "a", "film", "called", "Drive.", "He",
                                       "drives."]
    assert words[0].start == 0 and 0 < words[3].start < 4 and words[5].start == 6
    assert skips == {"noted_cue:rolling_duplicate": 1}


def test_vtt_cues_out_of_order_are_read_in_time_order_and_noted():
    """Cues given in reverse read as the same words (not lost to the rolling-duplicate rule
    and the word end times), noted once per late cue and named by file and line."""
    head, *cues = ASR.split("\n\n")
    timed = [c for c in cues if "-->" in c and "1x" not in c][:6]  # the well-formed ones
    in_order = vtt.parse("\n\n".join([head, *timed]), common.Counts())
    skips = common.Counts()
    words = vtt.parse("\n\n".join([head, *timed[::-1]]), skips, "v.en.vtt")
    assert [(w.text, w.start, w.end) for w in words] == [
        (w.text, w.start, w.end) for w in in_order]
    assert len(words) == 8
    assert skips["noted_cue:out_of_order"] == 5
    assert skips.named["noted_cue:out_of_order"] == ["v.en.vtt"]


def test_sentences_names_titles():
    assert narration.split_sentences("[Music]. the end. Dr. Who came! Then “hi.” ok") == [
        "[Music].", "the end.", "Dr. Who came!", "Then “hi.”", "ok"]
    assert narration.unescape_bytes(r"a \xe2\x80\x9cGattaca\xe2\x80\x9d I\'m") == (
        "a “Gattaca” I'm", 3)
    names = narration.person_names(["Then Vincent meets Irene.", "Spoilers ahead for Irene.",
                                    "the spoilers are heavy, Mr Brown says"])
    assert names == [["Irene", "Vincent"], ["Irene"], ["Brown"]]
    assert narration.announced_title("Today I show you a thriller film called “Gattaca.” Ok"
                                     ) == "gattaca"
    words = vtt.parse("WEBVTT\n\n00:00:01.000 --> 00:00:03.000\nhello there\n\n"
                      "00:00:03.000 --> 00:00:05.000\ngeneral kenobi\n")
    skips = collections.Counter()
    got = narration.timed_sentences(words, "[Music]. Hello there. General Kenobi!", skips)
    assert [(s, a, b) for s, a, b in got] == [("Hello there.", 1.0, 3.0),
                                              ("General Kenobi!", 3.0, 5.0)]
    assert skips["sentence:non_speech"] == 1


def test_detect_cuts_on_shot_changes():
    rng = np.random.default_rng(0)
    shots = [rng.normal(size=16) for _ in range(4)]
    feats = np.concatenate([np.tile(s, (n, 1)) for s, n in zip(shots, (7, 9, 5, 8))])
    feats += 0.05 * rng.normal(size=feats.shape)
    np.testing.assert_allclose(detect_cuts(feats, 1.0, 0.2, 4.0), [7, 16, 21])
    np.testing.assert_allclose(detect_cuts(feats, 2.0, 0.2, 4.0), [3.5, 8, 10.5])


FIXTURE = SymonConfig(name="fixture_dfiles", fps=synthetic.FPS)  # width read from the files


@pytest.fixture(scope="module")
def fixture_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("symon_manual")
    truth = synthetic.write_corpus(root, "tiny", seed=1, defects=True)
    data_dir = tmp_path_factory.mktemp("symon_tfds")
    b = builder.prepare(FIXTURE, data_dir, manual_dir=root)
    return root, truth, data_dir, b


def test_fixture_builds_and_counts_each_defect(fixture_build):
    root, truth, data_dir, b = fixture_build
    summary = json.loads((pathlib.Path(b.data_dir) / common.SUMMARY_FILE).read_text())
    skipped, noted = summary["skipped"], summary["noted"]
    for reason in ("cue:bad_timing", "cue:end_before_start", "video:feature_dim_mismatch",
                   "video:features_too_short", "video:missing_features",
                   "kept_text:escaped_utf8_bytes", "kept_asr_label:missing",
                   "cuts:beyond_video"):
        assert skipped.get(reason) == 1, (reason, skipped)
    # Videos without a cuts file fall back to feature-distance cuts: kept, counted.
    with_file = len(list((root / "cuts").glob("*.txt")))
    assert 0 < skipped["kept_cuts:no_file_feature_fallback"] <= len(truth) - with_file
    # The width comes from the files (32 here; the 33-wide file is the mismatch).
    assert builder.metadata(FIXTURE, data_dir)[0] == synthetic.FEATURE_DIM
    assert noted["cue:rolling_duplicate"] > 50 and "cue:rolling_duplicate" not in skipped
    assert sum(summary["examples"].values()) == len(truth) - 3  # three videos unusable


def test_missing_video_apart_from_missing_features(tmp_path):
    """With a `videos/` folder (yt-dlp's downloads) in the release, a video with neither
    features nor a downloaded file is `video:missing_video`, named by its id; one downloaded
    but not extracted stays `video:missing_features`."""
    root = tmp_path / "manual"
    synthetic.write_corpus(root, "tiny", seed=1, defects=True)
    ids = sorted(p.name.split(".")[0] for p in (root / "timestamped_text").glob("*.vtt"))
    absent = [v for v in ids if not (root / "features" / f"{v}.npy").is_file()]
    assert len(absent) == 1
    (root / "features" / f"{ids[0]}.npy").unlink()  # a second one, whose video is there
    (root / "videos").mkdir()
    for v in ids:
        if v != absent[0]:
            (root / "videos" / f"{v}.mp4").write_bytes(b"")
    (root / "videos" / f"{absent[0]}.mp4.part").write_bytes(b"")  # unfinished: not a video
    b = builder.prepare(FIXTURE, tmp_path / "tfds", manual_dir=root)
    summary = json.loads((pathlib.Path(b.data_dir) / common.SUMMARY_FILE).read_text())
    assert summary["skipped"]["video:missing_video"] == 1
    assert summary["skipped"]["video:missing_features"] == 1
    assert any(absent[0] in n for n in summary["named"]["video:missing_video"]), summary


def test_fixture_records_splits_trims_cuts(fixture_build):
    root, truth, data_dir, b = fixture_build
    movies_of = collections.defaultdict(set)
    n_checked = 0
    for split in b.info.splits:
        src = builder.data_source(FIXTURE, split, data_dir, build=False)
        for i in range(len(src)):
            rec = src[i]
            t = truth[rec["video_id"]]
            movies_of[rec["movie_id"]].add(split)
            assert rec["movie_id"] == t["movie"]
            lo, hi = rec["trim"]
            assert lo == pytest.approx(0.05 * t["duration"]) and hi == pytest.approx(
                0.95 * t["duration"])
            assert np.all(rec["starts"] >= lo) and np.all(rec["ends"] <= hi)
            assert rec["features"].shape == (t["duration"], synthetic.FEATURE_DIM)
            # Every kept sentence is a true sentence with its true start (word timing).
            true = {s.rstrip("."): a for s, a, _ in t["sentences"]}
            for s, a in zip(rec["sentences"], rec["starts"]):
                key = s.rstrip(".")
                key = key[:1].lower() + key[1:] if key[:1].lower() + key[1:] in true else key
                assert true[key] == pytest.approx(a, abs=0.02)
            kept_true = [(a, b_) for _, a, b_ in t["sentences"] if a >= lo and b_ <= hi]
            # Word-timed ends can differ from the true ends near the trims by a word.
            assert len(kept_true) - 1 <= len(rec["sentences"]) <= len(kept_true)
            true_cuts = {c for c in t["cuts"] if lo < c < hi}
            got = set(np.round(rec["cuts"]).astype(int).tolist())
            if (root / "cuts" / f"{rec['video_id']}.txt").exists():
                assert got == true_cuts
            else:  # detected from features: most cuts found, few false ones
                assert len(got & true_cuts) >= 0.8 * len(true_cuts)
                assert len(got - true_cuts) <= max(1, 0.2 * len(got))
            assert any(rec["names"])
            n_checked += 1
    assert n_checked == len(truth) - 3
    assert all(len(s) == 1 for s in movies_of.values())  # no movie in two splits
    assert {"train", "val", "test"} <= set(b.info.splits)


def test_text_only_builds_without_features(tmp_path):
    synthetic.write_corpus(tmp_path / "m", "tiny", seed=2)
    import shutil

    shutil.rmtree(tmp_path / "m" / "features")
    src = builder.data_source("text_only", "train", tmp_path / "d", manual_dir=tmp_path / "m")
    rec = src[0]
    assert "features" not in rec and rec["sentences"] and rec["is_asr"] in (0, 1)


def test_missing_manual_dir_is_one_line(tmp_path):
    with pytest.raises(common.ManualDirError, match="needs --manual_dir"):
        builder.Symon.check_inputs("text_only", None)
    with pytest.raises(common.ManualDirError, match="no timestamped_text"):
        builder.Symon.check_inputs("features", tmp_path)


def test_real_symon_files_build(shared_data, tmp_path):
    b = builder.prepare("text_only", tmp_path, manual_dir=shared_data / "symon")
    summary = json.loads((pathlib.Path(b.data_dir) / common.SUMMARY_FILE).read_text())
    total = sum(summary["examples"].values())
    skipped = summary["skipped"]
    # 40 videos: all build but one whose narration lies in the trimmed 5% ends.
    assert total + skipped.get("video:no_sentences_after_trim", 0) == 40
    assert summary["noted"]["cue:rolling_duplicate"] > 5000  # auto-caption repeats removed
    assert skipped["kept_text:escaped_utf8_bytes"] >= 4  # literal \xe2\x80\x9c escapes decoded
    franchises = collections.defaultdict(set)
    n_sent = 0
    for split in b.info.splits:
        src = builder.data_source("text_only", split, tmp_path, build=False)
        for i in range(len(src)):
            rec = src[i]
            franchises[rec["franchise"]].add(split)
            n_sent += len(rec["sentences"])
            assert np.all(np.diff(rec["starts"]) >= -1e-3), rec["video_id"]  # narration order
            assert np.all(rec["ends"] >= rec["starts"])
            assert not any("\\x" in s for s in rec["sentences"])
    assert all(len(s) == 1 for s in franchises.values())
    assert n_sent > 3000


@pytest.mark.faults
def test_a_fifo_in_the_release_is_refused_before_the_build(tmp_path):
    """A FIFO where a release file is expected would block the build forever (nothing ever
    writes to it): the build stops first, naming it; the same for any builder (`common`)."""
    import os

    root = tmp_path / "m"
    synthetic.write_corpus(root, "tiny", seed=2)
    vtt_file = sorted((root / "timestamped_text").glob("*.vtt"))[0]
    vtt_file.unlink()
    os.mkfifo(vtt_file)
    with pytest.raises(ValueError, match=rf"^{vtt_file} is a FIFO, not a regular file: a "
                                         "build would block"):
        builder.prepare("text_only", tmp_path / "d", manual_dir=root)
    assert not (tmp_path / "d" / "symon").exists() or not any(
        (tmp_path / "d" / "symon").rglob("dataset_info.json"))


@pytest.mark.faults
def test_movie_keys_refuses_a_fifo(tmp_path, capsys):
    import os

    from vnr.benchmarks.symon import tools

    os.mkfifo(tmp_path / "list.txt")
    with pytest.raises(SystemExit) as e:
        tools.main(["movie_keys", "--movie_list", str(tmp_path / "list.txt")])
    assert e.value.code == 2
    assert "is not a regular file" in capsys.readouterr().err
