"""Sc2St builder on a small LSMDC-format corpus written here (tiny JPEGs + feature arrays)."""

import collections
import io
import json
import pathlib

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from tfds_builders import common
from tfds_builders import sc2st as sc2st_lib
from tfds_builders.sc2st.sc2st import Sc2St, Sc2StConfig, build_storyboards, check_manual_dir
from vnr.benchmarks.sc2st import keyframes

CONFIG = Sc2StConfig(name="test", encoder="scratch:tiny", feature_dim=32, num_candidates=10,
                     fractions=(0.5, 0.25, 0.25))


def _ts(sec):
    ms = int(round(sec * 1000))
    return f"{ms // 3_600_000:02d}.{ms // 60_000 % 60:02d}.{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def _jpeg(rng):
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


def write_corpus(root: pathlib.Path) -> None:
    """Movie A (JPEG frames): stories of 10 pairs (one clip says "..., then ..."), one short
    story of 6; movie B (feature arrays): 4 stories of 10 plus a clip with no frames, a clip
    whose array has the wrong width. Bad lines: cp1252 bytes, 3 fields; a duplicate row."""
    rng = np.random.default_rng(0)
    lines, t = [], 10.0

    def clip(movie, sentence, frames, kind):
        nonlocal t
        cid = f"{movie}_{_ts(t)}-{_ts(t + 2)}"
        lines.append(f"{cid}\t{_ts(t)}\t{_ts(t + 2)}\t{_ts(t)}\t{_ts(t + 2)}\t".encode()
                     + sentence.encode("iso-8859-1"))
        if kind == "jpg":
            d = root / "frames" / movie / cid
            d.mkdir(parents=True)
            for k in range(frames):
                (d / f"{k + 1}.jpg").write_bytes(_jpeg(rng))
        elif kind == "npy":
            (root / "features" / movie).mkdir(parents=True, exist_ok=True)
            np.save(root / "features" / movie / f"{cid}.npy",
                    rng.normal(size=(frames, 32)).astype(np.float32))
        elif kind == "bad_npy":
            (root / "features" / movie).mkdir(parents=True, exist_ok=True)
            np.save(root / "features" / movie / f"{cid}.npy", np.zeros((2, 7), np.float32))
        t += 3.0
        return cid

    a, b = "0001_Test_Movie_A", "0002_Test_Movie_B"
    for s in range(5):
        n = 6 if s == 4 else (9 if s == 0 else 10)
        for k in range(n):
            if s == 0 and k == 4:
                clip(a, "SOMEONE opens the door, then SOMEONE walks in.", 3, "jpg")
            elif s == 1 and k == 2:
                clip(a, "SOMEONE drinks a caf\u00e9 au lait.", 2, "jpg")
            else:
                last = clip(a, f"SOMEONE does thing {s}-{k}.", 2, "jpg")
        t += 30
    lines.append(lines[-1])  # the last clip of the short story, again: merged
    for s in range(4):
        for k in range(10):
            clip(b, f"<PERSON> looks at item {s}-{k}.", 3, "npy")
        if s == 3:
            clip(b, "SOMEONE vanishes.", 0, "none")
            clip(b, "SOMEONE is misfiled.", 0, "bad_npy")
        t += 30
    del last
    lines.insert(3, b"0001_Test_Movie_A_00.00.01.000-00.00.02.000\t00.00.01.000\t00.00.02.000\t"
                    b"00.00.01.000\t00.00.02.000\tHe says \x93hi\x94.")
    lines.insert(7, b"0001_Test_Movie_A_00.00.01.000-00.00.02.000\ttoo\tfew")
    half = len(lines) // 2
    (root / "LSMDC16_annos_training.csv").write_bytes(b"\n".join(lines[:half]) + b"\n")
    (root / "LSMDC16_annos_val.csv").write_bytes(b"\n".join(lines[half:]) + b"\n")
    (root / "meta.csv").write_text("Test Movie A\thttps://www.imdb.com/title/tt1/\tDrama,Comedy"
                                   "\tcolor\nTest Movie B  https://www.imdb.com/title/tt2/  "
                                   "Action, War  wb\nbroken line\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("lsmdc")
    write_corpus(root)
    data_dir = tmp_path_factory.mktemp("tfds")
    builder = Sc2St(config=CONFIG, data_dir=str(data_dir), embedder=keyframes.clip_embedder)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(root)))
    return root, builder


def test_build_summary_counts_bad_input(built):
    _, builder = built
    summary = json.loads((pathlib.Path(builder.data_dir) / common.SUMMARY_FILE).read_text())
    assert summary["examples"] == {"train": 4, "val": 2, "test": 2}
    assert summary["skipped"] == {
        "unknown_encoding": 1, "malformed_csv_line": 1, "malformed_meta_line": 1,
        "duplicate_clip_merged": 1, "no_frames": 1, "feature_dim_mismatch": 1,
        "short_storyboard": 1, "short_storyboard_pairs": 7}  # 6 clips, 1 with two sentences
    stats = json.loads((pathlib.Path(builder.data_dir) / "sc2st_stats.json").read_text())
    assert stats["storyboards"] == 8 and stats["subsentences"] == 47 + 40


def test_examples_and_candidates(built):
    root, builder = built
    boards = []
    for split in ("train", "val", "test"):
        src = builder.as_data_source(split)
        recs = sorted((sc2st_lib.to_record(src[i]) for i in range(len(src))),
                      key=lambda r: r["index"])
        assert [r["index"] for r in recs] == list(range(len(recs)))
        pool = np.concatenate([r["features"] for r in recs])
        for r in recs:
            assert len(r["sentences"]) == 10 and r["candidates"].shape == (9, 10)
            gt = r["candidates"][np.arange(9), r["answer"]]
            np.testing.assert_array_equal(gt, r["index"] * 10 + np.arange(1, 10))
            np.testing.assert_allclose(pool[gt], r["features"][1:])
            assert all(len(set(row)) == 10 for row in r["candidates"].tolist())
            assert np.all(np.diff(r["start"]) >= 0)
            boards.append((split, r))
    frames = [(s, f) for s, r in boards for f in r["frame_ids"]]
    assert len({f for _, f in frames}) == len(frames) == 80  # no frame used twice
    by_movie = collections.Counter(r["movie"] for _, r in boards)
    assert by_movie == {"0001_Test_Movie_A": 4, "0002_Test_Movie_B": 4}
    for _, r in boards:
        if r["movie"].endswith("B"):
            assert r["genres"] == ["Action", "War"]
            assert all(s.startswith("Someone looks at item") for s in r["sentences"])
            assert all(f.startswith("features/0002_Test_Movie_B/") for f in r["frame_ids"])
        else:
            assert r["genres"] == ["Drama", "Comedy"]
            assert all((root / f).is_file() for f in r["frame_ids"])
    pairs = [(r["sentences"][i], r["frame_ids"][i]) for _, r in boards for i in range(10)]
    door = [p for p in pairs if "door" in p[0] or "walks in" in p[0]]
    assert [s for s, _ in door] == ["Someone opens the door.", "Someone walks in."]
    k = [int(pathlib.Path(f).stem) for _, f in door]
    assert pathlib.Path(door[0][1]).parent == pathlib.Path(door[1][1]).parent and k[0] < k[1]
    assert any("caf\u00e9" in s for s, _ in pairs)


def test_trainer_pipeline_gathers_candidates(built, tmp_path):
    from vnr.benchmarks.sc2st import data

    _, builder = built
    path = pathlib.Path(builder.data_dir) / "pool_val.npy"
    src = builder.as_data_source("val")
    recs = {int(r["index"]): sc2st_lib.to_record(r) for r in (src[i] for i in range(len(src)))}
    np.save(path, np.concatenate([recs[i]["features"] for i in range(len(recs))]))
    enc = data.Encode(str(path), "scratch:bert-tiny", 1024, 12)
    ex = enc.map(recs[1])
    assert ex["tokens"].shape == (10, 12) and (ex["tokens"][:, 0] == 1023).all()
    assert ex["cands"].shape == (9, 10, 32)
    np.testing.assert_allclose(ex["cands"][np.arange(9), ex["answer"]], recs[1]["features"][1:])


def test_deterministic_and_scorer_checked(built):
    root, _ = built
    scorer = keyframes.ClipScorer("scratch:tiny")
    one = build_storyboards(root, CONFIG, collections.Counter(), collections.Counter(), scorer)
    two = build_storyboards(root, CONFIG, collections.Counter(), collections.Counter(), scorer)
    for split in one:
        for x, y in zip(one[split], two[split], strict=True):
            assert x["frame_ids"] == y["frame_ids"]
            np.testing.assert_array_equal(x["candidates"], y["candidates"])
    wrong = Sc2StConfig(name="w", encoder="scratch:tiny", feature_dim=64)
    with pytest.raises(ValueError, match="feature_dim=64"):
        build_storyboards(root, wrong, collections.Counter(), collections.Counter(), scorer)


def test_manual_dir_errors(tmp_path):
    with pytest.raises(common.ManualDirError, match="needs --manual_dir"):
        check_manual_dir(None)
    with pytest.raises(common.ManualDirError, match="does not exist"):
        check_manual_dir(tmp_path / "nope")
    with pytest.raises(common.ManualDirError, match="LSMDC16_annos_training.csv"):
        check_manual_dir(tmp_path)
    (tmp_path / "LSMDC16_annos_val.csv").write_text("")
    with pytest.raises(common.ManualDirError, match="neither frames/ nor features/"):
        check_manual_dir(tmp_path)


def test_keyframe_embedder_is_passed_in(tmp_path):
    """The builder holds no model code: a build without an embedder is one clear line; the
    CLI passes the builder's default (vnr's CLIP) or the one `--embedder` names."""
    from tfds_builders import __main__ as cli

    with pytest.raises(common.ManualDirError, match="embeds keyframes: pass embedder="):
        sc2st_lib.prepare("synthetic_tiny", tmp_path / "none")
    with pytest.raises(SystemExit, match="--embedder 'no_such_module:f'"):
        cli.build("sc2st", "synthetic_tiny", str(tmp_path / "bad"), embedder="no_such_module:f")
    spec = "vnr.benchmarks.sc2st.keyframes:clip_embedder"
    assert cli.main(["build", "sc2st", "--config", "synthetic_tiny", "--data_dir",
                     str(tmp_path / "cli"), "--embedder", spec]) == 0
    assert sc2st_lib.split_names("synthetic_tiny", tmp_path / "cli", build=False) == \
        ["train", "val", "test"]
