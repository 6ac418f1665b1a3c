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
