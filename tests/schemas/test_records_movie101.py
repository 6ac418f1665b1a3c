"""Property tests of the Movie101 readers (`tfds_builders/movie101/`): mutated real records
(../shared/data/movie101) and generated ones parse to the same values, are skipped with a
reason naming the file, or stop with one line naming it."""

from __future__ import annotations

import collections
import json
import pathlib
import shutil

from hypothesis import given
from hypothesis import strategies as st

from tests.schemas.mutate import check_mutations, keyed
from tfds_builders.movie101 import movie101, parsing, roles, rtemp, v1

ROW = {"[]": "record", "movie_id": "id", "start_time": "time", "end_time": "time",
       "content": "text"}
ROLE_ENTRY = {"*": "record", "movie_id": "id", "sentences": "list", "sentences[]": "text",
              "timestamps": "list", "timestamps[]": "list", "timestamps[][]": "time"}
CAST = {"*": "record", "name": "text", "rolename": "text"}
V2_META = {"genre": "text_or_list", "genre[]": "text", "title": "opt_text",
           "role": "not_text_nor_object", "actor": "opt_text", "role_en": "opt_text"}
V2_OPTIONAL = frozenset({"genre", "title", "actor", "role_en"})
SHOT = {"[]": "record", "video_id": "int", "video": "text", "caption": "text_or_list",
        "caption[]": "text"}


def _v1_root(shared: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    """A v1 release of the real split and cast files (Movie101-G and role files written by
    the tests)."""
    src = shared / "movie101" / "v1"
    root = tmp / "v1"
    (root / "metadata").mkdir(parents=True)
    (root / "Movie101-G").mkdir()
    shutil.copy(src / "public_split.json", root)
    shutil.copy(src / "metadata" / "meta_anno.json", root / "metadata")
    return root


def test_mutated_real_grounding_rows(shared_data, tmp_path):
    """Movie101-G rows (the narration config reads the same rows, plus role files)."""
    root = _v1_root(shared_data, tmp_path)
    rows = json.loads((shared_data / "movie101/v1/Movie101-G/val.json").read_text("utf-8"))

    def examples(path: pathlib.Path, counts: collections.Counter) -> dict:
        return {e["id"]: e for s in v1.v1_examples(root, "grounding", counts).values() for e in s}

    outcomes = check_mutations(examples, root / "Movie101-G" / "val.json", rows[:25], ROW)
    assert outcomes["skipped"] > 0, outcomes


def test_mutated_real_role_entries(shared_data, tmp_path):
    real = json.loads((shared_data / "movie101/v1/narration_role/val.json").read_text("utf-8"))

    def entries(path: pathlib.Path, counts: collections.Counter) -> dict:
        return {e[0]: e for e in roles.RoleFile(path, counts).entries}

    outcomes = check_mutations(entries, tmp_path / "val.json", dict(list(real.items())[:20]),
                               ROLE_ENTRY)
    assert outcomes["skipped"] > 0, outcomes


def test_mutated_real_meta_anno(shared_data, tmp_path):
    root = _v1_root(shared_data, tmp_path)
    meta = json.loads((root / "metadata" / "meta_anno.json").read_text("utf-8"))

    def casts(path: pathlib.Path, counts: collections.Counter) -> dict:
        return v1.v1_read(root, counts)[1]

    outcomes = check_mutations(casts, root / "metadata" / "meta_anno.json",
                               dict(list(meta.items())[:12]), CAST)
    assert outcomes["skipped"] > 0, outcomes


def test_mutated_real_public_split_is_one_line(shared_data, tmp_path):
    root = _v1_root(shared_data, tmp_path)
    split = json.loads((root / "public_split.json").read_text("utf-8"))

    def splits(path: pathlib.Path, counts: collections.Counter) -> dict:
        return v1.v1_read(root, counts)[0]

    outcomes = check_mutations(splits, root / "public_split.json", split,
                               {"train[]": "id", "val[]": "id", "test[]": "id",
                                "train": "list", "val": "list", "test": "list"})
    assert outcomes["error"] > 0, outcomes


def test_mutated_real_v2_meta(shared_data, tmp_path):
    metas = sorted((shared_data / "movie101/v2/metadata/meta").glob("*.json"))[:3]
    root = tmp_path / "v2"
    (root / "metadata" / "meta").mkdir(parents=True)
    for p in metas[1:]:
        shutil.copy(p, root / "metadata" / "meta")

    def read(path: pathlib.Path, counts: collections.Counter) -> dict:
        return movie101.v2_movies_meta(root, counts)

    outcomes = check_mutations(read, root / "metadata" / "meta" / metas[0].name,
                               json.loads(metas[0].read_text("utf-8")), V2_META, V2_OPTIONAL)
    assert outcomes["skipped"] > 0, outcomes


def test_mutated_generated_shots(tmp_path):
    shots = [{"video_id": 3, "video": "6965_46_66", "caption": ["老李端来食物。"]},
             {"video_id": 4, "video": "6965_66_86", "caption": "李羊朵看着老李。"},
             {"video_id": 9, "video": "7001_0_20", "caption": ["a", "b"], "extra": 1}]

    def read(path: pathlib.Path, counts: collections.Counter) -> dict:
        return keyed(((m, s, e), (v, t)) for v, m, s, e, t in rtemp.read_split(path, counts))

    outcomes = check_mutations(read, tmp_path / "val.json", shots, SHOT)
    assert outcomes["skipped"] > 0, outcomes


@given(st.one_of(
    st.floats(0, 86_400, allow_nan=False),
    st.integers(0, 86_400),
    st.integers(0, 86_400).map(str),
    st.tuples(st.integers(0, 30), st.integers(0, 99), st.integers(0, 99)).map(
        lambda t: f"{t[0]}:{t[1]}:{t[2]}"),
    st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda t: f"{t[0]}:{t[1]}"),
    st.sampled_from(["", "x", "1:2:3:4", "1.5:0:0", "-2", "nan", "inf", "1e9", True, None]),
    st.floats(allow_nan=True, allow_infinity=True)))
def test_times_are_their_value_or_refused(value):
    """A time is a number, a numeric string or `[H:]M:S` with minutes and seconds below 60,
    from 0 to a day; anything else is a ParseError, never a different number."""
    want = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        want = float(value) if 0 <= value <= 86_400 else None
    elif isinstance(value, str) and value.isdigit():
        want = float(value) if int(value) <= 86_400 else None
    elif isinstance(value, str) and value.count(":") in (1, 2) and all(
            p.isdigit() for p in value.split(":")):
        *lead, s = map(int, value.split(":"))
        h, m = ([0] * (2 - len(lead)) + lead)
        ok = m < 60 and s < 60 and h * 3600 + m * 60 + s <= 86_400
        want = float(h * 3600 + m * 60 + s) if ok else None
    try:
        got = parsing.parse_time(value)
    except parsing.ParseError as e:
        assert want is None, f"{value!r} refused: {e}"
        assert "\n" not in str(e)
        return
    assert got == want, f"{value!r} -> {got}, expected {want}"
