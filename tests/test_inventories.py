"""Each builder's `inventory` (what `vnr.contamination` compares): the splits the builder
makes, each video in its id space with the movie identities the release gives."""

from __future__ import annotations

import json

import pytest

from tfds_builders import movie101, moviepuzzle, msymon, sc2st, symon
from tfds_builders.msymon import yms
from tfds_builders.symon import ManualDirError


def _built(reader, config: str, data_dir, root) -> dict[str, list[str]]:
    return {s: sorted(reader.data_source(config, s, data_dir, root)[i]["video_id"]
                      for i in range(len(reader.data_source(config, s, data_dir, root))))
            for s in reader.split_names(config, data_dir, root)}


def test_symon_inventory_is_the_builders_franchise_split(tmp_path):
    root = tmp_path / "symon"
    truth = symon.write_generated_release(root, "tiny", seed=4)
    inv = symon.inventory(root)
    built = _built(symon, "text_only", tmp_path / "d", root)
    assert {s: sorted(h.video for h in v) for s, v in inv.items()} == {
        s: [f"youtube:{v}" for v in vids] for s, vids in built.items()}
    titled = [h for v in inv.values() for h in v if h.titles]
    assert titled and all(h.titles[0] == truth[h.video.split(":")[1]]["movie"] for h in titled)


def test_msymon_inventory_is_the_builders_splits_with_carved_validation(tmp_path):
    root = msymon.write_synthetic(tmp_path / "msymon", seed=1, languages=("en", "ch"))
    (root / "annotations" / "ch" / "val.json").unlink()  # carved from ch_train by the builder
    inv = msymon.inventory(root)
    built = _built(msymon, "text_only", tmp_path / "d", root)
    assert "ch_val" in inv
    assert {s: sorted(h.video for h in v) for s, v in inv.items()} == {
        s: [f"youtube:{v}" for v in vids] for s, vids in built.items()}


def test_yms_inventory_reads_every_listed_video_by_its_youtube_id(tmp_path):
    (tmp_path / "training_split.txt").write_text("0000\n0001 # trailing comment\n")
    (tmp_path / "val_split.txt").write_text("# none annotated\n0002\n")
    (tmp_path / "test_split.txt").write_text("0003\n")
    (tmp_path / "url_list.txt").write_text(
        "0000    https://youtu.be/hU9Gv9IKprE\n0001\thttps://www.youtube.com/watch?v=XU2_7HSI5uU"
        "\n0002    https://example.com/video\n0003    https://youtu.be/FeY88YAYq5M\n")
    (tmp_path / "movie_list.txt").write_text("0000\tAnt-Man in 4 minutes\n0003\tBlade Runner\n")
    inv = yms.inventory(tmp_path)
    assert [h.video for h in inv["train"]] == ["youtube:hU9Gv9IKprE", "youtube:XU2_7HSI5uU"]
    assert inv["val"][0].video == "yms:0002"  # no YouTube id: compared with nothing
    assert inv["test"][0].titles == ("Blade Runner",) and inv["train"][1].titles == ()
    (tmp_path / "url_list.txt").unlink()
    with pytest.raises(ManualDirError, match="lacks url_list.txt"):
        yms.inventory(tmp_path)


def test_moviepuzzle_inventory_is_clip_id_json_with_imdb_ids(tmp_path):
    from tfds_builders.moviepuzzle import synthetic

    summary = synthetic.write_corpus(tmp_path, seed=0, sizes="tiny")
    inv = moviepuzzle.inventory(tmp_path)
    listed = json.loads((tmp_path / "clip_id.json").read_text())
    assert {s: [h.video for h in v] for s, v in inv.items()} == {
        s: [f"moviepuzzle:{c}" for c in ids] for s, ids in listed.items()}
    movies = {h.imdb for v in inv.values() for h in v}
    assert movies == set(summary["train_movies"]) | set(summary["heldout_movies"])
    with pytest.raises(ManualDirError, match="no clip_id.json"):
        moviepuzzle.inventory(tmp_path / "test")


def test_movie101_v2_inventory_splits_every_movie_once_with_its_title(tmp_path):
    movie101.synthetic.write_corpus(tmp_path, seed=0, sizes="tiny")
    inv = movie101.inventory(tmp_path)
    metas = {p.stem: json.loads(p.read_text()) for p in
             (tmp_path / "metadata" / "meta").glob("*.json")}
    held = [h for v in inv.values() for h in v]
    assert sorted(h.video for h in held) == sorted(f"xigua:{m}" for m in metas)
    assert all(h.titles == (metas[h.video[6:]]["title"].removesuffix("无障碍版").strip(),)
               for h in held if metas[h.video[6:]]["title"])


def test_sc2st_inventory_reads_the_released_story_files(tmp_path):
    from tests.benchmarks.sc2st import release_layout

    release_layout.write_release(tmp_path)
    inv = sc2st.inventory(tmp_path)
    assert set(inv) == {"train", "val", "test"} and all(inv.values())
    held = [h for v in inv.values() for h in v]
    assert all(h.video.startswith("lsmdc:") for h in held)
    imdb = {h.video.split("/")[0][6:]: h.imdb for h in held}
    assert "tt0034583" in imdb.get("0003_CASABLANCA", "")
    assert imdb.get("9001_Not_In_Meta", "") == ""
    with pytest.raises(ManualDirError, match="released story files"):
        sc2st.inventory(tmp_path / "frames")
