"""Movie101-R(temp) (Table 4's GSR(temp)): the release's Movie101-R-temp/{train,val,test}.json
written in their exact format (list of {video_id, video "<movie>_<start>_<end>", caption
[text]}, 20-s shots on a per-movie offset grid, unaligned shots left out so video_id has
gaps) for a few generated v1 movies; the offsets reach the examples, the training pairs and
the evaluation; bad entries are skipped and counted by reason."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from configs.movie101 import tng as tng_config
from tests.benchmarks.movie101.test_release_layout import write_release_v1
from tfds_builders import movie101 as m101
from tfds_builders.movie101 import rtemp, synthetic
from vnr import evaluation
from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import tng, tng_data, tng_global

SIZES = dict(train=2, val=1, test=1, seconds=120, roles=(3, 3), dims=(16, 16, 16))
OFFSETS = (7, 13, 4, 0)  # per movie (public_split order); 0 + 95 is off the test grid
BAD = [{"video": "x", "caption": ["no id"]},  # bad_shot_entry
       {"video_id": 900, "video": "movie-1_0_20", "caption": ["a"]},  # bad_shot_name
       {"video_id": 901, "video": "{m}_40_40", "caption": ["a"]},  # bad_shot_span
       {"video_id": 902, "video": "{m}_{o}_{o20}", "caption": []},  # empty_text
       "not an object"]  # bad_shot_entry


def write_rtemp(root: pathlib.Path) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """Movie101-R-temp/{split}.json from the release's Movie101-N narrations: every shot of
    a movie's grid (offset + 20 k) with an aligned narration (§5.2's footnote rule), its
    caption those narrations joined; returns split -> movie -> the shots written."""
    split = json.loads((root / "public_split.json").read_text())
    movies = [m for s in ("train", "val", "test") for m in split[s]]
    offset = dict(zip(movies, OFFSETS))
    d = root / "Movie101-R-temp"
    d.mkdir()
    written: dict[str, dict[str, list[tuple[int, int]]]] = {}
    vid = 0
    for s in ("train", "val", "test"):
        rows = json.loads((root / "Movie101-N" / f"{s}.json").read_text())
        out, written[s] = [], {}
        for m in split[s]:
            nar = [r for r in rows if r["movie_id"] == m]
            o = offset[m]
            for a in range(o, SIZES["seconds"] - 19, 20):
                q = [r for r in nar if gm.shot_alignment(
                    np.array([[a, a + 20]]), np.array([r["start_time"], r["end_time"]]))[0]]
                if q:
                    out.append({"video_id": vid, "video": f"{m}_{a}_{a + 20}",
                                "caption": ["".join(r["content"] for r in q)]})
                    written[s].setdefault(m, []).append((a, a + 20))
                vid += 1
        if s == "test":  # one of each kind of bad entry, a duplicate of a good one, and a
            # shot off its movie's grid (kept, counted)
            m, o = split[s][0], offset[split[s][0]]
            out += [json.loads(json.dumps(b).replace("{m}", m).replace("{o}", str(o))
                               .replace("{o20}", str(o + 20))) if isinstance(b, dict) else b
                    for b in BAD] + [dict(out[0], video_id=903)]
            out.append({"video_id": 904, "video": f"{m}_{o + 95}_{o + 115}",
                        "caption": ["off the grid"]})
            written[s][m] = sorted(written[s][m] + [(o + 95, o + 115)])
        (d / f"{s}.json").write_text(json.dumps(out, ensure_ascii=False, indent=4))
    return written


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("rtemp")
    v2 = base / "Movie101v2" / "data"
    synthetic.write_corpus(v2, seed=5, sizes=SIZES, portrait_file="features/protrait_face.hdf5")
    v1 = write_release_v1(base / "Movie101v1", v2)
    return {"root": v1, "data": base / "tfds", "written": write_rtemp(v1)}


def _config(release, arg: str = "v1,rtemp,smoke"):
    c = tng_config.get_config(arg)
    c.data.update(data_dir=str(release["data"]), manual_dir=str(release["root"]),
                  vocab_size=64, frame_dim=32, face_dim=16)
    c.progress = False
    return c


def test_shot_names_and_bad_entries_counted(tmp_path: pathlib.Path) -> None:
    assert rtemp.parse_shot_name("7042313900221694500_46_66") == ("7042313900221694500", 46, 66)
    for bad in ("7042_66_46", "a_1_2", "7042_1", 7042):
        with pytest.raises(m101.parsing.ParseError):
            rtemp.parse_shot_name(bad)
    p = tmp_path / "test.json"
    p.write_text(json.dumps({"video": "7_0_20"}))
    with pytest.raises(m101.ManualDirError, match="must be a list"):
        rtemp.read_split(p, __import__("collections").Counter())


def test_offsets_reach_examples_and_evaluation(release) -> None:
    c = _config(release)
    tng.validate(c)
    tng_data.prepare(c.data)
    written = release["written"]
    for split, movies in written.items():
        src = m101.data_source("v1_shots", split, c.data.data_dir, c.data.manual_dir)
        got: dict[str, list] = {}
        for i in range(len(src)):
            r = src[i]
            got.setdefault(r["movie_id"], []).append((int(r["start"]), int(r["end"])))
            assert r["text"] and r["id"].startswith(f"{r['movie_id']}_shot")
        assert {m: sorted(v) for m, v in got.items()} == movies  # the file's shots, as listed
        # the per-movie offset is the first listed shot (7, 13, 4, 0 + 20 k here)
        assert tng_data.shot_offsets(c.data, split) == {m: float(v[0][0])
                                                        for m, v in movies.items()}
    stored = json.loads((pathlib.Path(m101.prepare("v1_shots", c.data.data_dir,
                                                   build=False).data_dir)
                         / "build_summary.json").read_text())
    summary = stored["skipped"]
    assert summary["bad_shot_entry"] == 2 and summary["bad_shot_name"] == 1
    assert summary["bad_shot_span"] == 1 and summary["empty_text"] == 1
    assert summary["duplicate_shot"] == 1 and summary["kept_shot_off_grid"] == 1
    assert stored["noted"]["shots_test"] == sum(len(v) for v in written["test"].values())

    # training pairs: the shot is the frames of the record's own span (its offset kept)
    from vnr.benchmarks.movie101.records import MovieTable

    table = MovieTable(c.data)
    src = m101.data_source("v1_shots", "train", c.data.data_dir, c.data.manual_dir)
    pair = tng_data.ShotPair(table, 20, 8, 64, given=True)
    for i in (0, len(src) - 1):
        rec = src[i]
        b = pair.random_map(rec, np.random.default_rng(0))
        frames = tng_data.movie_frames(table[rec["movie_id"]], rec["movie_id"])
        s = int(rec["start"])
        np.testing.assert_allclose(b["shot"], frames[s:s + 20], rtol=1e-6)
        assert b["shot_mask"].all() and b["shot_index"] == s
    # evaluation: candidates are the file's shots of the caption's movie, not a 0-based cut
    movies = tng_data.split_movies(c.data, "test")
    spans = tng_global.movie_shot_spans(c, movies, [SIZES["seconds"]] * len(movies))
    assert [sorted(map(tuple, s.astype(int).tolist())) for s in spans] == \
        [written["test"][m] for m in movies]
    # the two-stage tool's cut for Movie101-G queries follows the same grid
    grid = gm.cut_shots(120.0, 20.0, 13.0)
    assert grid[0].tolist() == [0.0, 13.0] and grid[1].tolist() == [13.0, 33.0]


@pytest.mark.e2e
def test_rtemp_evaluation_runs_on_the_files(release) -> None:
    from vnr import train

    c = _config(release)
    c.eval_batch_size = 8
    s = train.setup(c)  # the untrained model: this checks what is scored, not how well
    m = evaluation.evaluate(tng, c, "test", lambda b: s.predict_fn(s.state, b), s.mesh)
    written = release["written"]["test"]
    assert m["narrations"] == sum(len(v) for v in written.values())  # one caption per shot
    assert m["movies"] == len(written) and m["no_positive"] == 0
    assert 0 <= m["R@1"] <= m["R@5"] <= m["R@10"] <= 100
    n = np.array([len(v) for v in written.values() for _ in v])
    assert m["random_R@1"] == pytest.approx(100 * np.mean(1 / n))
