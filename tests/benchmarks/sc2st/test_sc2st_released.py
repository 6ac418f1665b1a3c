"""Released Sc2St story files: accepted shapes and one-line errors naming file and key."""

import json

import pytest

from tfds_builders.sc2st import released as rel

IDS = [f"l_1_{c}_{c % 3}" for c in range(10)]


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


@pytest.mark.parametrize("obj", [
    [IDS, IDS],  # list of id lists
    {"s0": IDS, "s1": IDS},  # id -> story
    {"stories": [[{"id": i, "text": f"t{n}"} for n, i in enumerate(IDS)]] * 2},
    [{"images": IDS, "sentences": [f"t{n}" for n in range(10)],
      "candidates": [[IDS[n]] + IDS[:3] for n in range(1, 10)]}] * 2,
])
def test_accepted_shapes(tmp_path, obj):
    stories = rel.read_stories(_write(tmp_path, "story10_all_train_no.json", obj))
    assert len(stories) == 2
    assert [it["id"] for it in stories[0]["items"]] == IDS


def test_texts_and_candidates_are_read(tmp_path):
    obj = [{"images": IDS, "sentences": [[f"a{n}", "b"] for n in range(10)],
            "cands": [[IDS[1], IDS[0]]] * 9}]
    (story,) = rel.read_stories(_write(tmp_path, "s.json", obj))
    assert story["items"][3]["text"] == "a3 b"
    assert story["candidates"][0] == [IDS[1], IDS[0]]


@pytest.mark.parametrize("obj, match", [
    ({"foo": 1}, r"story10_all_val\.json\['foo'\]: a story must be a list or an object"),
    ([IDS[:9]], r"\[0\]: a story must have 10 items, got 9"),
    ([IDS[:9] + ["x_1_2"]], r"\[0\]\[9\]: 'x_1_2' is not an id"),
    ([{"frames": IDS, "text": ["t"] * 3}], r"\[0\]\.text: must be a list of 10 texts"),
    ([{"pics": IDS}], r"\[0\]: story has none of the item keys"),
    ([[{"name": "l_1_1_1"}] * 10], r"\[0\]\[0\]: item has none of the id keys"),
    ([{"ids": IDS, "candidates": [["l_1"]]}], r"\[0\]\.candidates\[0\]\[0\]"),
])
def test_schema_errors_name_file_and_key(tmp_path, obj, match):
    with pytest.raises(rel.SchemaError, match=match):
        rel.read_stories(_write(tmp_path, "story10_all_val.json", obj))


def test_short_story_is_counted_per_file(tmp_path):
    """A story JSON with fewer than 10 pairs: skipped, counted and named with its file."""
    from tfds_builders.sc2st.skips import Skips

    skips = Skips()
    path = _write(tmp_path, "story10_all_test_no.json", {"a": IDS, "b": IDS[:7], "c": IDS})
    assert [s["key"] for s in rel.read_stories(path, 10, skips)] == ["a", "c"]
    assert skips == {"wrong_length_story": 1}
    assert skips.by_file == {str(path): {"wrong_length_story": 1}}


def test_id_maps_and_index(tmp_path):
    chars = rel.read_id_map(_write(tmp_path, "i2chars.json", {"l_1_2": ["Harry", "Ron"],
                                                              "l_1_3": "Ron"}), "str")
    assert chars == {"l_1_2": ["Harry", "Ron"], "l_1_3": ["Ron"]}
    assert rel.read_id_map(_write(tmp_path, "parsed_clip.json", {"l_1_2": [0, 4]}), "int")
    with pytest.raises(rel.SchemaError, match=r"parsed_clip\.json\['l_1_2'\]: values must be"):
        rel.read_id_map(_write(tmp_path, "parsed_clip.json", {"l_1_2": ["0"]}), "int")
    with pytest.raises(rel.SchemaError, match=r"parsed_text\.json: key: 'clip' is not an id"):
        rel.read_id_map(_write(tmp_path, "parsed_text.json", {"clip": "x"}), "str")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(rel.SchemaError, match=r"bad\.json: not readable JSON"):
        rel.read_stories(tmp_path / "bad.json")
    index = rel.read_lsmdc_index(_write(tmp_path, "lsmdc.json", {
        "i2n": {"1": ["0001_American_Beauty", {"2": "0001_American_Beauty_00.00.51.926-"
                                                     "00.00.54.129"}]}, "data": {}}))
    p = rel.frame_path("l_1_2_7", index)
    assert p.as_posix() == "frames/0001_American_Beauty/0001_American_Beauty_00.00.51.926-" \
                           "00.00.54.129/7.jpg"
    with pytest.raises(rel.SchemaError, match="no movie 1 / clip 3"):
        rel.frame_path("l_1_3_0", index)
    with pytest.raises(rel.SchemaError, match=r"i2n\['1'\] must be"):
        rel.read_lsmdc_index(_write(tmp_path, "lsmdc.json", {"i2n": {"1": "x"}}))


def test_build_released_storyboards(tmp_path):
    """story10_all_<split>_no.json + lsmdc.json + frames/ -> examples with our candidates."""
    import collections
    import io

    import numpy as np
    from PIL import Image

    from tfds_builders import common
    from tfds_builders.sc2st.released import build_released
    from tfds_builders.sc2st.sc2st import Sc2StConfig
    from vnr.benchmarks.sc2st import embedders

    rng = np.random.default_rng(0)
    movies = {"1": ["0001_Movie_A", {}], "2": ["0002_Movie_B", {}]}
    for movie, clips in movies.values():
        for c in range(40):
            clip = f"{movie}_00.00.{c:02d}.000-00.00.{c:02d}.500"
            clips[str(c)] = clip
            d = tmp_path / "frames" / movie / clip
            d.mkdir(parents=True)
            for f in range(2):
                buf = io.BytesIO()
                Image.fromarray(rng.integers(0, 255, (8, 8, 3), np.uint8)).save(buf, "JPEG")
                (d / f"{f}.jpg").write_bytes(buf.getvalue())
    _write(tmp_path, "lsmdc.json", {"i2n": movies, "data": {}})
    _write(tmp_path, "parsed_text.json", {f"l_2_{c}": [f"<PERSON>Bo</PERSON> waves {c}."]
                                          for c in range(40)})

    def board(m, first, with_text):
        ids = [f"l_{m}_{first + k}_{k % 2}" for k in range(10)]
        if with_text:
            return {"images": ids, "sentences": [f"SOMEONE runs {k}." for k in range(10)]}
        return ids

    (tmp_path / "story10_all").mkdir()
    stories = {"train": [board(1, 0, True), board(1, 10, True), board(2, 0, False),
                         board(2, 10, False)],
               "val": [board(1, 20, True), board(2, 20, False)],
               "test": [board(1, 30, True), board(2, 30, False),
                        [f"l_2_{k}_5" for k in range(10)],  # frame 5 is not on disk
                        [f"l_2_{35 + k}_0" for k in range(10)],  # clips 40.. not indexed
                        ["l_2_3_0"] * 10,  # one frame ten times: repeated_frame
                        board(2, 0, False)]}  # train's third storyboard again: kept, noted
    for split, s in stories.items():
        _write(tmp_path / "story10_all", f"story10_all_{split}_no.json", s)
    cfg = Sc2StConfig(name="t", source="released", encoder="scratch:tiny", feature_dim=32,
                      num_candidates=10)
    skips, stats = common.Counts(), collections.Counter()
    out = build_released(tmp_path, cfg, skips, stats, embedders.ClipScorer("scratch:tiny"))
    assert {k: len(v) for k, v in out.items()} == {"train": 4, "val": 2, "test": 3}
    assert skips == {"no_frames": 1, "unknown_id": 1, "repeated_frame": 1,
                     "noted_duplicate_storyboard": 1}
    (dup,) = skips.named["noted_duplicate_storyboard"]  # names both places
    assert "test_no.json['5'] = " in dup and "train_no.json['2']" in dup, dup
    b = out["train"][2]
    assert b["movie"] == "0002_Movie_B" and b["sentences"][0] == "Bo waves 0."  # names kept
    assert out["train"][0]["sentences"][3] == "SOMEONE runs 3."
    assert b["frame_ids"][1] == "frames/0002_Movie_B/0002_Movie_B_00.00.01.000-00.00.01.500/1.jpg"
    for ex in out["val"]:
        gt = ex["candidates"][np.arange(9), ex["answer"]]
        np.testing.assert_array_equal(gt, ex["index"] * 10 + np.arange(1, 10))
