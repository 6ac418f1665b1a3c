"""Must show (issue 27): Movie101 v1 on a manual_dir in the release's shape -> build -> train
a few steps -> evaluate every test example -> metrics, for MCN (RMN) and TNG (RNL).

The manual_dir (`release_v1.derive_release`) starts from the real public annotation files
(`shared_data`: ../shared/data/movie101/v1) or, so that the test also runs without
../shared, from `release_v1.generated_annotations` (same files and keys, invented movies).
The public sample has val files only: the test writes train / test files derived from the
real val rows (relabelled to real train / test movies of public_split.json) under the
release's names, `narration_role/train_merge.json` (no train.json) included, and feature
files named, keyed and shaped as the release's. The release's awkward cases are in it: a
train and a test movie of public_split.json without a meta_anno.json entry, a train movie
without feature files, split movies without features, a role without a portrait feature.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from configs.movie101 import mcn as mcn_config
from configs.movie101 import tng as tng_config
from tests.benchmarks.movie101 import release_v1
from tfds_builders import common
from tfds_builders import movie101 as m101
from vnr.benchmarks.movie101 import records

_RELEASES: dict[str, dict] = {}


@pytest.fixture(params=["real", "generated"])
def release(request, tmp_path_factory) -> dict:
    """The derived manual_dir and its built datasets, written once per source."""
    if request.param == "real":  # skips, saying why, without ../shared
        src = request.getfixturevalue("shared_data") / "movie101" / "v1"
    if request.param not in _RELEASES:
        base = tmp_path_factory.mktemp(f"release_{request.param}")
        if request.param == "generated":
            src = release_v1.generated_annotations(base / "public")
        info = release_v1.derive_release(src, base / "Movie101v1")
        _RELEASES[request.param] = dict(
            info, manual=base / "Movie101v1", data=base / "tfds", kind=request.param,
            split=json.loads((src / "public_split.json").read_text()))
    return _RELEASES[request.param]


def _summary(config: str, release: dict) -> dict:
    b = m101.prepare(config, release["data"], release["manual"])
    summary = common.read_summary(b)
    print(common.format_summary(summary))  # the build summary, for the record
    return summary


def test_release_shaped_build_summaries(release) -> None:
    rows, no_cast = release["rows"], release["no_cast"]
    n = _summary("v1_narration", release)
    n_rows = {s: [r for r in json.loads((release["manual"] / "Movie101-N" / f"{s}.json")
                                        .read_text()) if r["movie_id"] == no_cast.get(s)]
              for s in ("train", "test")}
    ex = n["examples"]
    assert (ex["train"], ex["val"], ex["test"]) == (
        rows["Movie101-N/train"], rows["Movie101-N/val"], rows["Movie101-N/test"])
    sk, noted = n["skipped"], n["noted"]
    assert "missing_role_file" not in sk and "missing_split_file" not in sk
    # the split movies without a meta_anno entry: kept, counted per split, named
    for s in ("train", "test"):
        assert sk[f"kept_movie_without_cast_{s}"] == len(n_rows[s]) > 0
        assert n["named"][f"kept_movie_without_cast_{s}"] == [no_cast[s]]
    # train_merge.json: the paragraphs' pointers and the augmentation clips
    assert noted["augmentation_entries"] == release["augmentation"]
    assert ex["train_clips"] == release["augmentation"] - sk.get(
        "augmentation_pointer_not_in_cast", 0) > 0
    assert noted["pointer_targets_train"] > 0  # from train_merge.json (no train.json)
    g = _summary("v1_grounding", release)
    assert g["examples"] == {s: rows[f"Movie101-G/{s}"] for s in ("train", "val", "test")}
    assert sum(g["noted"][k] for k in ("grounding_queries_with_roles",
                                       "grounding_queries_without_roles")) == sum(
        g["examples"].values())
    mv = _summary("v1_movies", release)
    split = release["split"]
    assert mv["examples"] == {s: len(split[s]) for s in ("train", "val", "test")}
    without = {s: sum(m not in json.loads((release["manual"] / "metadata" / "meta_anno.json")
                                          .read_text()) for m in split[s])
               for s in ("train", "val", "test")}
    for s, k in without.items():
        assert mv["skipped"].get(f"kept_movie_without_cast_{s}", 0) == k
    if release["kind"] == "real":
        assert (without["train"], without["test"]) == (8, 1)  # the real public_split
    all_movies = sum(len(v) for v in split.values())
    for kind in ("clip", "s3d", "face"):
        assert mv["skipped"][f"kept_missing_{kind}_file"] == all_movies - len(release["movies"])
    assert mv["skipped"]["kept_portrait_missing_role"] == 1
    assert release["missing_portrait_role"] in mv["named"]["kept_portrait_missing_role"][0]


def _mcn(release, *args: str):
    c = mcn_config.get_config(",".join(("smoke", "v1", *args)))
    c.data.update(data_dir=str(release["data"]), manual_dir=str(release["manual"]),
                  vocab_size=256, max_roles=8)
    c.evals.test.max_examples, c.evals.val.max_examples = 0, 4  # every test narration
    c.progress = False
    return c


@pytest.mark.e2e
def test_mcn_on_the_release_shape(release, tmp_path, caplog) -> None:
    from vnr import train

    c = _mcn(release, "aug")  # Movie101-N train + train_merge's augmentation clips
    caplog.set_level("INFO")
    results = train.run(c, str(tmp_path / "work"))
    m = results["test"]
    assert m["narrations"] == release["rows"]["Movie101-N/test"] and m["left_out"] == 0
    assert all(np.isfinite(m[k]) for k in ("bleu4", "cider_d", "role_f1"))
    # the train movie without feature files: its narrations left out, counted and named
    _, left, named = records.usable(c.data, "train")
    assert set(left) == {"no_video_features"} and left["no_video_features"] > 0
    assert release["no_features"] in named["no_video_features"][0]
    assert "no_video_features" in caplog.text and "without a cast" in caplog.text


@pytest.mark.e2e
def test_tng_on_the_release_shape(release, tmp_path) -> None:
    from vnr import train

    c = tng_config.get_config("smoke,v1")
    c.data.update(data_dir=str(release["data"]), manual_dir=str(release["manual"]),
                  window=40, n_clips=10)
    c.evals.test.max_examples = 0  # every test narration
    c.progress = False
    results = train.run(c, str(tmp_path / "work"))
    m = results["test"]
    assert m["narrations"] == release["rows"]["Movie101-G/test"] and m["left_out"] == 0
    assert all(0 <= m[f"R@{n},IoU@{u}"] <= 100 for n in (1, 5) for u in (0.3, 0.5))


def test_pointer_run_without_a_role_file_stops_in_one_line(release, tmp_path) -> None:
    """Neither narration_role/train.json nor train_merge.json: the run stops before any
    compile, naming both; a role file whose entries match no train narration stops it once
    the data is built."""
    from vnr import train
    from vnr.benchmarks.movie101 import mcn_data as data

    manual = tmp_path / "Movie101v1"
    for rel in ("public_split.json", "metadata/meta_anno.json", "Movie101-N/train.json",
                "Movie101-N/val.json", "Movie101-N/test.json"):
        (manual / rel).parent.mkdir(parents=True, exist_ok=True)
        (manual / rel).write_bytes((release["manual"] / rel).read_bytes())
    (manual / "features").symlink_to(release["manual"] / "features")
    c = _mcn(release)
    c.data.update(manual_dir=str(manual), data_dir=str(tmp_path / "tfds"))
    with pytest.raises(train.ConfigError, match=r"narration_role/train\.json or .*"
                                                r"narration_role/train_merge\.json"):
        train.run(c, str(tmp_path / "work"))
    # v1_narration_raw never has role-pointer targets: said so, not "they come from ..."
    raw = _mcn(release)
    raw.data.update(config="v1_narration_raw", manual_dir=str(manual),
                    data_dir=str(tmp_path / "tfds"))
    with pytest.raises(train.ConfigError, match=r"movie101/v1_narration_raw has no "
                                                r"role-pointer targets .* data.pointer=False"):
        train.run(raw, str(tmp_path / "work"))
    assert not (tmp_path / "work").exists()
    said = data.pointer_source(raw.data)
    assert "v1_narration_raw has none" in said and "narration_role/train" not in said
    assert "train_merge.json (the release's" in data.pointer_source(c.data)
    (manual / "narration_role").mkdir()
    (manual / "narration_role" / "train_merge.json").write_text("{}")
    data.prepare(c.data)
    with pytest.raises(ValueError, match="no train narration .* has a role-pointer target: "
                                         ".*train_merge.json"):
        data.check(c.data)


def test_the_rule_for_narrations_whose_movie_lacks_something() -> None:
    """records.usable's reasons, one per case (the e2e test above meets no_video_features
    on the release's shape)."""

    class Table(dict):  # movie -> (feature seconds, faces, portrait mask, cast size)
        info = property(lambda self: self)

    table = Table({"a": (100, True, np.ones(2, bool), 2), "b": (0, False, np.zeros(0, bool), 0),
                   "c": (50, False, np.zeros(0, bool), 0)})
    cases = {("a", 99.5): None, ("a", 100.0): "span_past_features",
             ("b", 0.0): "no_video_features", ("z", 1.0): "no_movie_record",
             ("c", 3.0): None}  # no cast, faces or portraits: kept (zeros stand in)
    for (mid, start), why in cases.items():
        assert records._reason(table, {"movie_id": mid, "start": start}) == why
