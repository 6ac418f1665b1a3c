"""The build summary shared by every builder (tfds_builders/common.py): skips, inputs kept
with a fix (`kept_*`) and information counters (`noted_*`) are stored and printed apart,
and the JSON's `skipped` mapping stays what existing readers look up."""

from __future__ import annotations

import collections
import json
import pathlib
import types

from tfds_builders import common


def _builder(data_dir: pathlib.Path) -> types.SimpleNamespace:
    split = types.SimpleNamespace(num_examples=3)
    return types.SimpleNamespace(name="d", builder_config=types.SimpleNamespace(name="c"),
                                 version="1.0.0", data_dir=str(data_dir),
                                 info=types.SimpleNamespace(splits={"train": split}))


def test_skips_kept_and_noted_are_stored_and_printed_apart(tmp_path: pathlib.Path) -> None:
    counts: collections.Counter = collections.Counter(missing_split_file=2, kept_swapped=5)
    common.note(counts, "queries_with_roles", 1000)
    common.note(counts, "queries_with_roles", 418)
    builder = _builder(tmp_path)
    written = common.write_summary(builder, counts)
    stored = json.loads((tmp_path / common.SUMMARY_FILE).read_text())
    assert stored["skipped"] == {"kept_swapped": 5, "missing_split_file": 2}
    assert stored["noted"] == {"queries_with_roles": 1418} == written["noted"]
    read = common.read_summary(builder)
    assert read["skipped"] == stored["skipped"] and read["noted"] == stored["noted"]
    lines = common.format_summary(read).splitlines()
    assert lines[1:] == ["examples: 3", "  train: 3", "skipped: 2", "  missing_split_file: 2",
                         "kept with a fix or warning: 5", "  swapped: 5",
                         "noted (information, not skips):", "  queries_with_roles: 1418"]


def test_summary_written_before_noted_existed_still_reads(tmp_path: pathlib.Path) -> None:
    (tmp_path / common.SUMMARY_FILE).write_text(json.dumps(
        {"skipped": {"bad_json": 2, "kept_lines_sorted": 1}}))
    read = common.read_summary(_builder(tmp_path))
    assert read["skipped"] == {"bad_json": 2, "kept_lines_sorted": 1}
    assert read["noted"] == {} == read["named"]
    text = common.format_summary(read)
    assert "skipped: 2" in text and "noted" not in text


def test_counts_name_the_first_inputs_behind_a_count(tmp_path: pathlib.Path) -> None:
    counts = common.Counts()
    for i in range(common.NAMED_MAX + 2):
        common.count(counts, "kept_movie_without_cast_train", f"movie{i}")
    common.record_skip(counts, "missing_split_file", tmp_path / "train.json", "not here")
    plain: collections.Counter = collections.Counter()
    common.count(plain, "kept_x", "ignored")  # a plain Counter only counts
    assert plain == {"kept_x": 1}
    builder = _builder(tmp_path)
    common.write_summary(builder, counts)
    read = common.read_summary(builder)
    assert read["named"]["kept_movie_without_cast_train"] == \
        [f"movie{i}" for i in range(common.NAMED_MAX)]
    assert read["named"]["missing_split_file"] == [f"{tmp_path / 'train.json'} (not here)"]
    text = common.format_summary(read)
    assert "  movie_without_cast_train: 12  (e.g. movie0, movie1, movie2)" in text
