"""Property tests of the M-SyMoN readers (`tfds_builders/msymon/parse.py`, `msymon.py`):
mutated real records (../shared/data/msymon) and generated ones parse to the same values, are
skipped with a reason naming the file, or stop with one line."""

from __future__ import annotations

import collections
import json
import pathlib

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.schemas.mutate import check_mutations, keyed, to_json
from tfds_builders import common
from tfds_builders.msymon import msymon, parse

SENTENCE = {"*": "list", "*[]": "record", "text": "text", "matched": "flag",
            "begin_time": "time", "end_time": "time"}
SUBTITLE = {"[]": "record", "text": "text", "begin_time": "time", "end_time": "time"}


def _real_videos(shared: pathlib.Path) -> dict:
    """Three real videos, 12 sentences of each: around a matched sentence that ends before
    it begins, around a respelled `matched`, and a plain start (the release's own defects)."""
    picked: dict = {}
    for path in sorted((shared / "msymon" / "annotations").glob("*/train.json")):
        for vid, sents in json.loads(path.read_text(encoding="utf-8")).items():
            for kind, hit in (
                    ("reversed", lambda s: s["matched"].strip().lower() == "yes"
                     and s["end_time"] < s["begin_time"]),
                    ("respelled", lambda s: s["matched"] not in ("yes", "no")),
                    ("plain", lambda s: True)):
                at = next((i for i, x in enumerate(sents) if hit(x)), None)
                if at is not None and kind not in picked:
                    picked[kind] = (vid, sents[max(0, at - 6):max(0, at - 6) + 12])
                    break
    assert set(picked) == {"reversed", "respelled", "plain"}, picked.keys()
    videos = dict(picked.values())
    assert len(videos) == 3
    return videos


def _sentences(path: pathlib.Path, counts: collections.Counter) -> dict:
    """`parse.read_annotations` as one record per sentence: (video, text) -> span, flag."""
    return keyed(((vid, t), (b, e, m)) for vid, v in parse.read_annotations(path, counts).items()
                 for t, b, e, m in zip(v["sentences"], v["begin"].tolist(), v["end"].tolist(),
                                       v["matched"].tolist(), strict=True))


def test_mutated_real_annotations(shared_data, tmp_path):
    outcomes = check_mutations(_sentences, tmp_path / "train.json", _real_videos(shared_data),
                               SENTENCE)
    assert outcomes["skipped"] > 0, outcomes


def _generated_video() -> st.SearchStrategy:
    time = st.floats(0, 5000, allow_nan=False)
    sentence = st.fixed_dictionaries({
        "id": st.text(max_size=3), "text": st.text(max_size=20),
        "matched": st.sampled_from(["yes", "no", " Yes", "No ", True, False]),
        "begin_time": time, "end_time": time})
    return st.lists(sentence, min_size=1, max_size=5)


def _flag(sentence: dict) -> bool:
    m = sentence["matched"]
    return m if isinstance(m, bool) else m.strip().lower() == "yes"


@given(st.dictionaries(st.text("abc-_", min_size=1, max_size=6), _generated_video(),
                       min_size=1, max_size=3))
def test_generated_annotations_round_trip(videos):
    """A valid file parses to its own values: texts stripped, `matched` read as yes/no, a
    matched sentence's span kept unless it ends before it begins (then unmatched, counted)."""
    counts = common.Counts()
    got = {vid: parse.parse_video(vid, json.loads(to_json(v)), pathlib.Path("gen.json"), counts)
           for vid, v in videos.items()}
    reversed_ = 0
    for vid, sents in videos.items():
        ok = [_flag(s) and s["end_time"] >= s["begin_time"] for s in sents]
        reversed_ += sum(_flag(s) and not m for s, m in zip(sents, ok, strict=True))
        assert got[vid]["sentences"] == [s["text"].strip() for s in sents]
        assert got[vid]["matched"].tolist() == ok
        for key in ("begin", "end"):
            want = [s[f"{key}_time"] if m else 0.0 for m, s in zip(ok, sents, strict=True)]
            np.testing.assert_array_equal(got[vid][key], np.asarray(want, np.float32))
    assert counts["kept_as_unmatched_end_before_begin"] == reversed_
    assert not [k for k in counts if not k.startswith("kept_")]  # nothing skipped


def test_mutated_generated_subtitles(tmp_path):
    subs = [{"begin_time": 0.5, "end_time": 2.0, "text": "First line."},
            {"begin_time": 2.0, "end_time": 3.5, "text": "Second one."},
            {"begin_time": 4, "end_time": 7, "text": "Third."}]
    def read(path: pathlib.Path, counts: collections.Counter) -> dict:
        got = parse.read_subtitles(path, counts) or {"sentences": [], "begin": [], "end": []}
        return keyed((t, (float(b), float(e))) for t, b, e in zip(
            got["sentences"], got["begin"], got["end"], strict=True))

    outcomes = check_mutations(read, tmp_path / "v.json", subs, SUBTITLE)
    assert outcomes["skipped"] > 0, outcomes


def test_mutated_movies_json(tmp_path):
    (tmp_path / "annotations").mkdir()

    def read(path: pathlib.Path, counts: collections.Counter) -> dict:
        return msymon.read_movies(path.parent, counts)

    movies = {"vid1": "The Matrix", "vid2": "Alien", "vid3": "the  matrix"}
    outcomes = check_mutations(read, tmp_path / msymon.MOVIES_FILE, movies, {"*": "text"})
    assert outcomes["skipped"] > 0, outcomes
