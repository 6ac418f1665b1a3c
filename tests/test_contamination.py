"""`python -m vnr.contamination`: what the releases' splits share, and the refusal a transfer
run makes when its source trained on the target's evaluation videos."""

from __future__ import annotations

import json
import pathlib

import ml_collections
import pytest

from tfds_builders import symon
from vnr import contamination, inventories
from vnr.benchmarks.symon import exclusion


def _yms(root: pathlib.Path, splits: dict[str, list[tuple[str, str]]]) -> pathlib.Path:
    """A YMS release's lists: per split, (YouTube id, YouTube title) of each video."""
    root.mkdir(parents=True)
    urls, titles, n = [], [], 0
    for split, videos in splits.items():
        lines = []
        for vid, title in videos:
            urls.append(f"{n:04d}    https://youtu.be/{vid}")
            titles.append(f"{n:04d}\t{title}")
            lines.append(f"{n:04d}")
            n += 1
        name = {"train": "training_split.txt"}.get(split, f"{split}_split.txt")
        (root / name).write_text("# a comment line\n" + "\n".join(lines) + "\n")
    (root / "url_list.txt").write_text("\n".join(urls) + "\n")
    (root / "movie_list.txt").write_text("\n".join(titles) + "\n")
    return root


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict:
    """A generated SYMON release and a YMS whose test split holds two SYMON training videos
    (one by id, one by its movie's title only) and one SYMON test video."""
    tmp = tmp_path_factory.mktemp("contamination")
    sym = tmp / "symon"
    symon.write_generated_release(sym, "tiny", seed=2)
    inv = symon.inventory(sym)
    train = [h for h in inv["train"] if h.titles]
    by_id, by_title = train[0], next(h for h in train[1:] if h.titles != train[0].titles)
    test = inv["test"][0]
    yms = _yms(tmp / "yms", {
        "train": [("AAAAAAAAAAA", "No Such Film in 4 minutes")],
        "val": [("BBBBBBBBBBB", "Another Film (Movie Recap)")],
        "test": [(by_id.video.split(":")[1], "A Title Nobody Narrates in 4 minutes"),
                 ("CCCCCCCCCCC", f"{by_title.titles[0]} in 4 minutes (Movie Recap)"),
                 (test.video.split(":")[1], "Yet Another Film in 4 minutes")]})
    return {"symon": sym, "yms": yms, "by_id": by_id, "by_title": by_title, "test": test}


def test_the_report_names_the_shared_videos_and_movies(corpora, tmp_path, capsys):
    out = tmp_path / "shared.json"
    assert contamination.main(["--manual_dir", f"symon={corpora['symon']}", "--manual_dir",
                               f"yms={corpora['yms']}", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    pairs = {(p["a"]["benchmark"], p["a"]["split"], p["b"]["benchmark"], p["b"]["split"]): p
             for p in report["shared"]}
    train_test = pairs["symon", "train", "yms", "test"]
    assert train_test["relation"] == "train/eval"
    assert train_test["videos"] == [corpora["by_id"].video]
    assert f"title:{symon.movie_key(corpora['by_title'].titles[0])}" in train_test["movies"]
    assert pairs["symon", "test", "yms", "test"]["videos"] == [corpora["test"].video]
    assert pairs["symon", "test", "yms", "test"]["relation"] == "eval/eval"
    row = next(line for line in printed.splitlines() if line.startswith("symon train"))
    assert row.split()[2:5] == ["yms", "test", "train/eval"]
    assert int(row.split()[5]) == 1 and int(row.split()[6]) >= 1
    assert "yms: train 1, val 1, test 3 videos" in printed


def _config(task: str, manual_dir: pathlib.Path | str, **data) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict({"task": task, "data": {
        "manual_dir": str(manual_dir), "config": "features", **data}})


def _keep(yms: pathlib.Path):
    """The exclusion of `configs/symon/retrieval.py:exclude_yms` as a `check_transfer` hook."""
    return lambda cfg: (exclusion.excluded_held(str(yms / "movie_list.txt"))
                        if cfg.data.get("exclude_movies") else None)


def test_a_transfer_from_a_contaminated_source_is_refused_in_one_line(corpora):
    source = _config("symon.retrieval", corpora["symon"], train_split="train")
    target = _config("symon.yms_transfer", corpora["yms"], builder="yms",
                     test_splits=("test",))
    with pytest.raises(ValueError) as e:
        contamination.check_transfer(source, target, "run/config.json")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("refused:")
    assert "shares 1 video(s)" in msg and corpora["by_id"].video in msg
    assert "and 1 movie(s)" in msg  # the title-only match
    # The source trained without the YMS videos and movies (`exclude_yms`): nothing shared.
    source.data.exclude_movies = str(corpora["yms"] / "movie_list.txt")
    line = contamination.check_transfer(source, target, "run", _keep(corpora["yms"]))
    assert line.startswith("contamination checked") and "share no video" in line
    kept = exclusion.excluded_held(source.data.exclude_movies)(
        symon.inventory(corpora["symon"])["train"])
    assert corpora["by_id"] not in kept and corpora["by_title"] not in kept
    # YMS `new_test` is drawn from every annotated video: all of YMS is checked.
    new = _config("symon.yms_transfer", corpora["yms"], builder="yms",
                  test_splits=("new_test",))
    assert "new_test = every video" in contamination.check_transfer(
        source, new, "run", _keep(corpora["yms"]))


def test_the_runs_a_source_started_from_are_checked_too(corpora, tmp_path):
    clean = _config("symon.retrieval", corpora["symon"], train_split="train",
                    exclude_movies=str(corpora["yms"] / "movie_list.txt"))
    first = _config("symon.retrieval", corpora["symon"], train_split="train")
    (tmp_path / "first").mkdir()
    (tmp_path / "first" / "config.json").write_text(first.to_json())
    clean.init_from = str(tmp_path / "first")  # fine-tuned from a run that saw the tests
    target = _config("symon.yms_transfer", corpora["yms"], builder="yms",
                     test_splits=("test",))
    with pytest.raises(ValueError, match=r"^refused: .*excluded; symon train of"):
        contamination.check_transfer(clean, target, "run", _keep(corpora["yms"]))


def test_what_is_not_a_transfer_or_not_a_release_is_not_checked(corpora, tmp_path):
    target = _config("symon.yms_transfer", corpora["yms"], builder="yms",
                     test_splits=("test",))
    generated = _config("symon.retrieval", "", config="synthetic", train_split="train")
    assert "generated corpus" in contamination.check_transfer(generated, target, "run")
    yms_run = _config("msymon.alignment", corpora["yms"], builder="yms", train_split="train")
    assert "one benchmark" in contamination.check_transfer(yms_run, target, "run")
    # A dataset built earlier (no manual_dir): the release its build recorded
    built = _config("symon.retrieval", "", train_split="train", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="record 0 release directories"):
        contamination.check_transfer(built, target, "run/config.json")
    record = tmp_path / "symon" / "features" / "1.3.0" / "build_source.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"manual_dir": str(corpora["symon"])}))
    with pytest.raises(ValueError, match="^refused:"):
        contamination.check_transfer(built, target, "run/config.json")
    gone = _config("symon.retrieval", tmp_path / "nowhere", train_split="train")
    with pytest.raises(ValueError, match="run/config.json: data.manual_dir=.* not a directory"):
        contamination.check_transfer(gone, target, "run/config.json")


@pytest.mark.parametrize("argv, needle", [
    (["--manual_dir", "symon=/nonexistent/x", "--manual_dir", "yms=/nonexistent/y"],
     "symon=/nonexistent/x: no such directory"),
    (["--manual_dir", "nope=/tmp", "--manual_dir", "yms=/tmp"], "'nope=/tmp'"),
    (["--manual_dir", "symon=/tmp"], "two releases or more"),
    (["--manual_dir", "symon={tmp}", "--manual_dir", "yms={tmp}"], "symon="),
    (["--manual_dir", "symon={tmp}", "--manual_dir", "yms={tmp}", "--json", "{tmp}"],
     "--json {tmp}: a directory"),
    (["--manual_dir", "symon={tmp}", "--manual_dir", "yms={tmp}", "--json", "{tmp}/no/x"],
     "no such folder"),
    (["--manual_dir", "symon:synthetic={tmp}", "--manual_dir", "yms={tmp}"],
     "does not read a release"),
])
def test_bad_arguments_are_one_line(argv, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        contamination.main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and err.startswith("error:") and "\n" not in err
    assert needle.format(tmp=tmp_path) in err


def test_an_empty_release_is_refused_not_dropped(tmp_path, capsys):
    (tmp_path / "symon" / "timestamped_text").mkdir(parents=True)
    _yms(tmp_path / "yms", {"train": [("AAAAAAAAAAA", "Film A")], "val": [], "test": []})
    with pytest.raises(SystemExit):
        contamination.main(["--manual_dir", f"symon={tmp_path / 'symon'}",
                            "--manual_dir", f"yms={tmp_path / 'yms'}"])
    assert "no video in any split of this symon release" in capsys.readouterr().err


def test_imdb_ids_compare_with_their_zeros_dropped():
    assert inventories.imdb_key("https://www.imdb.com/title/tt00000414387/") == "tt0414387"
    assert inventories.imdb_key("tt0414387") == "tt0414387"
    assert inventories.imdb_key("") == ""

def test_the_real_public_releases(shared_data, tmp_path, capsys):
    d = shared_data
    out = tmp_path / "real.json"
    assert contamination.main([
        "--manual_dir", f"symon={d / 'symon'}", "--manual_dir", f"yms={d / 'yms'}",
        "--manual_dir", f"msymon={d / 'msymon'}",
        "--manual_dir", f"moviepuzzle={d / 'moviepuzzle_public'}",
        "--manual_dir", f"movie101={d / 'movie101' / 'v1'}",
        "--manual_dir", f"movie101={d / 'movie101' / 'v2'}", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    sizes = {(s["benchmark"], s["split"]): s["videos"] for s in report["splits"]}
    assert [sizes["symon", s] for s in ("train", "val", "test")] == [32, 4, 4]
    assert [sizes["yms", s] for s in ("train", "val", "test")] == [66, 12, 15]
    assert [sizes["movie101", s] for s in ("train", "val", "test")] == [81, 10, 10]
    assert sizes["moviepuzzle", "in_domain"] == 100
    found = {(p["a"]["benchmark"], p["a"]["split"], p["b"]["benchmark"], p["b"]["split"]):
             (len(p["videos"]), len(p["movies"])) for p in report["shared"]}
    # Movie101 v2 (hashed split) trains on 3 movies of v1's public test split.
    assert found["movie101#2", "train", "movie101", "test"] == (3, 3)
    # YMS's own splits share movies under other titles ("Stephen King's It (1990)" and
    # "Movie Spoiler Alerts - It (1990)"; "Avengers  Age of Ultron" and "... (2015)").
    assert found["yms", "train", "yms", "val"] == (0, 2)  # It (1990), Man of Steel (2013)
    assert found["yms", "train", "yms", "test"] == (0, 1)  # Avengers: Age of Ultron
    assert found["yms", "train", "msymon", "en_train"] == (1, 0)
    # The public SYMON sample holds none of YMS's videos.
    assert not any("symon" in (a, b) and "yms" in (a, b) for a, _, b, _ in found)
    assert "movie101#2 train" in capsys.readouterr().out


def test_inventories_are_kept_until_the_release_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("VNR_CACHE_DIR", str(tmp_path / "cache"))
    root = _yms(tmp_path / "yms", {"train": [("AAAAAAAAAAA", "Film A")], "val": [],
                                   "test": [("BBBBBBBBBBB", "Film B")]})
    first = contamination.inventory("yms", str(root))
    kept = list((tmp_path / "cache" / "inventory").glob("yms-*.json"))
    assert len(kept) == 1 and contamination.inventory("yms", str(root)) == first
    kept[0].write_text(json.dumps({"test": [["youtube:FROMCACHE00", ["X"], ""]]}))
    assert contamination.inventory("yms", str(root))["test"][0].video == "youtube:FROMCACHE00"
    with open(root / "test_split.txt", "a") as f:  # another release: read again
        f.write("0000\n")
    again = contamination.inventory("yms", str(root))
    assert [h.video for h in again["test"]] == ["youtube:BBBBBBBBBBB", "youtube:AAAAAAAAAAA"]
    assert len(list((tmp_path / "cache" / "inventory").glob("yms-*.json"))) == 2
