"""Sc2St builder on a small LSMDC-format corpus written here (tiny JPEGs + feature arrays)."""

import collections
import dataclasses
import io
import json
import pathlib

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from tfds_builders import common
from tfds_builders import sc2st as sc2st_lib
from tfds_builders.sc2st import extras
from tfds_builders.sc2st.sc2st import Sc2St, Sc2StConfig, build_storyboards, check_manual_dir
from vnr.benchmarks.sc2st import embedders

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
    builder = Sc2St(config=CONFIG, data_dir=str(data_dir), embedder=embedders.clip_embedder)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(root)))
    return root, builder


def test_build_summary_counts_bad_input(built):
    _, builder = built
    summary = json.loads((pathlib.Path(builder.data_dir) / common.SUMMARY_FILE).read_text())
    assert summary["examples"] == {"train": 4, "val": 2, "test": 2}
    assert summary["skipped"] == {
        "unknown_encoding": 1, "missing_fields": 1, "malformed_meta_line": 1,
        "kept_duplicate_clip_merged": 1, "no_frames": 1, "feature_dim_mismatch": 1}
    by_file = {pathlib.Path(f).name: c for f, c in summary["skipped_by_file"].items()}
    assert by_file["LSMDC16_annos_training.csv"] == {"unknown_encoding": 1, "missing_fields": 1}
    assert by_file["meta.csv"] == {"malformed_meta_line": 1}
    assert sorted(json.dumps(c) for f, c in by_file.items() if f.startswith("0002_Test_Movie_B")
                  ) == ['{"feature_dim_mismatch": 1}', '{"no_frames": 1}']  # clip folder / array
    # 6 clips, one with two sentences, after a duplicate row merged into the last one
    assert summary["formation"] == {
        "stories": 9, "breaks": 7, "storyboards": 8, "dropped_pairs": 7, "overflow_pairs": 0,
        "short_group_pairs": 7, "short_group_tails": 1}
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
            assert all(s.startswith("SOMEONE looks at item") for s in r["sentences"])
            assert all(f.startswith("features/0002_Test_Movie_B/") for f in r["frame_ids"])
        else:
            assert r["genres"] == ["Drama", "Comedy"]
            assert all((root / f).is_file() for f in r["frame_ids"])
    pairs = [(r["sentences"][i], r["frame_ids"][i]) for _, r in boards for i in range(10)]
    door = [p for p in pairs if "door" in p[0] or "walks in" in p[0]]
    assert [s for s, _ in door] == ["SOMEONE opens the door", "then SOMEONE walks in."]
    k = [int(pathlib.Path(f).stem) for _, f in door]
    assert pathlib.Path(door[0][1]).parent == pathlib.Path(door[1][1]).parent and k[0] < k[1]
    assert any("caf\u00e9" in s for s, _ in pairs)


def test_trainer_pipeline_gathers_candidates(built, tmp_path):
    from vnr.benchmarks.sc2st import data

    _, builder = built
    path = sc2st_lib.pool(CONFIG, "val", pathlib.Path(builder.data_dir).parents[2])
    src = builder.as_data_source("val")
    recs = {int(r["index"]): sc2st_lib.to_record(r) for r in (src[i] for i in range(len(src)))}
    isolated = extras.read_isolated(builder.data_dir, "val")["features"]
    np.testing.assert_array_equal(np.load(path), np.concatenate(
        [*(recs[i]["features"] for i in range(len(recs))), isolated]))
    enc = data.Encode(str(path), "scratch:bert-tiny", 1024, 12)
    ex = enc.map(recs[1])
    assert ex["tokens"].shape == (10, 12) and (ex["tokens"][:, 0] == 1023).all()
    assert ex["cands"].shape == (9, 10, 32)
    np.testing.assert_allclose(ex["cands"][np.arange(9), ex["answer"]], recs[1]["features"][1:])


def test_isolated_keyframes_are_candidates(built):
    """§4.1.3: the pairs formation dropped (in no storyboard) join one split's pool each;
    a clip's frames stay in one split; candidates reach them by pool index N * 10 + k."""
    _, builder = built
    summary = json.loads((pathlib.Path(builder.data_dir) / common.SUMMARY_FILE).read_text())
    split_of_clip, seen, reached = {}, set(), 0
    for split in ("train", "val", "test"):
        iso = extras.read_isolated(builder.data_dir, split)
        src = builder.as_data_source(split)
        recs = [sc2st_lib.to_record(src[i]) for i in range(len(src))]
        board_frames = {f for r in recs for f in r["frame_ids"]}
        frames = [str(f) for f in iso["frame_ids"]]
        assert iso["features"].shape == (len(frames), 32) and not board_frames & set(frames)
        assert not seen & set(frames)
        seen |= set(frames)
        for f in [*frames, *board_frames]:
            clip = pathlib.Path(f).parent.name if f.endswith(".jpg") else f.split("#")[0]
            assert split_of_clip.setdefault(clip, split) == split, f
        cands = np.stack([r["candidates"] for r in recs])
        reached += int((cands >= 10 * len(recs)).sum())
        assert cands.max() < 10 * len(recs) + len(frames)
    assert len(seen) == summary["formation"]["dropped_pairs"] == 7
    assert reached > 0


def test_deterministic_and_scorer_checked(built):
    root, _ = built
    scorer = embedders.ClipScorer("scratch:tiny")
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
    """The builder holds and names no model code: a build without an embedder is one clear
    line; the CLI passes the one `--embedder` names."""
    from tfds_builders import __main__ as cli

    with pytest.raises(common.ManualDirError, match="embeds keyframes: pass embedder="):
        sc2st_lib.prepare("synthetic_tiny", tmp_path / "none")
    with pytest.raises(common.ManualDirError, match="embeds keyframes"):
        cli.build("sc2st", "synthetic_tiny", str(tmp_path / "default"))
    with pytest.raises(SystemExit, match="--embedder 'no_such_module:f'"):
        cli.build("sc2st", "synthetic_tiny", str(tmp_path / "bad"), embedder="no_such_module:f")
    spec = "vnr.benchmarks.sc2st.embedders:clip_embedder"
    assert cli.main(["build", "sc2st", "--config", "synthetic_tiny", "--data_dir",
                     str(tmp_path / "cli"), "--embedder", spec]) == 0
    assert sc2st_lib.split_names("synthetic_tiny", tmp_path / "cli", build=False) == \
        ["train", "val", "test"]


class _TextOnlyEmbedder:
    """Keyframe embedder for corpora of feature arrays: texts get fixed random unit vectors
    (frames come from the arrays, so images are never embedded)."""

    dim = 32

    def encode_texts(self, texts):
        return np.stack([embedders.normalise(np.random.default_rng(
            [ord(ch) for ch in t]).normal(size=32)) for t in texts]).astype(np.float32)

    def encode_images(self, jpegs):
        raise AssertionError("a feature-array corpus embeds no image")


# Pairs per clip (each clip one description of n sub-sentences "..., then ..."), in groups
# separated by a 15 s gap and an exact 10 s gap (both breaks); clips of a group 1 s apart.
OVERFLOW_GROUPS = ([3, 4, 2, 3, 5, 5, 4, 4, 3, 2, 2], [6, 6, 1, 9, 1], [10, 10])
# The rule, spelled out per storyboard: (clip, pairs of it taken), clips numbered across
# groups. Overflow past 10 is dropped and the next storyboard starts at the next clip.
OVERFLOW_BOARDS = (
    [(0, 3), (1, 4), (2, 2), (3, 1)],  # clip 3's pairs 2-3 dropped
    [(4, 5), (5, 5)],
    [(6, 4), (7, 4), (8, 2)],  # clip 8's pair 3 dropped; clips 9-10 (4 pairs) never fill one
    [(11, 6), (12, 4)],  # clip 12's pairs 5-6 dropped
    [(13, 1), (14, 9)],  # clip 15 (1 pair) ends its group alone
    [(16, 10)],
    [(17, 10)],
)


def _overflow_movie(root: pathlib.Path) -> None:
    movie, t, clip_no, lines = "0007_Overflow_Movie", 20.0, 0, []
    (root / "features" / movie).mkdir(parents=True)
    for g, counts in enumerate(OVERFLOW_GROUPS):
        if g:
            t += 15.0 if g == 1 else 10.0 - 1.0  # end -> start: 15 s, then exactly 10 s
        for n in counts:
            cid = f"{movie}_{_ts(t)}-{_ts(t + 2)}"
            text = ", then ".join(f"does c{clip_no}p{k}" for k in range(n))
            lines.append(f"{cid}\t{_ts(t)}\t{_ts(t + 2)}\t{_ts(t)}\t{_ts(t + 2)}\t"
                         f"SOMEONE {text}.")
            np.save(root / "features" / movie / f"{cid}.npy",
                    np.random.default_rng(clip_no).normal(size=(n, 32)).astype(np.float32))
            t += 3.0
            clip_no += 1
    (root / "LSMDC16_annos_training.csv").write_text("\n".join(lines) + "\n")


def test_storyboards_restart_at_the_next_clip_pair_by_pair(tmp_path):
    """Must show (§3.1.4): a generated LSMDC-layout movie whose clips overflow storyboards;
    every storyboard of every split is checked pair by pair against the rule."""
    _overflow_movie(tmp_path)
    cfg = Sc2StConfig(name="overflow", encoder="none", feature_dim=32, num_candidates=5,
                      fractions=(0.4, 0.3, 0.3))
    stats = collections.Counter()
    out = build_storyboards(tmp_path, cfg, collections.Counter(), stats, _TextOnlyEmbedder())
    got = sorted(([s.split("does ")[-1].rstrip(".") for s in r["sentences"]]
                  for rs in out.values() for r in rs), key=lambda b: int(b[0][1:].split("p")[0]))
    want = [[f"c{c}p{k}" for c, n in board for k in range(n)] for board in OVERFLOW_BOARDS]
    assert got == want
    for rs in out.values():  # each pair's keyframe is its own frame of its own clip
        for r in rs:
            k = [int(f.rpartition("#")[2]) for f in r["frame_ids"]]
            assert k == [int(s.rstrip(".").rpartition("p")[2]) for s in r["sentences"]]
    assert {k: stats[k] for k in ("stories", "breaks", "storyboards", "overflow_pairs",
                                  "short_group_pairs", "short_group_tails", "dropped_pairs")
            } == {"stories": 3, "breaks": 2, "storyboards": 7, "overflow_pairs": 5,
                  "short_group_pairs": 5, "short_group_tails": 2, "dropped_pairs": 10}


def test_candidate_similarity_embedder_is_pluggable(built):
    """§4.1.3 ranks similar candidates by another image model (DenseNet-121): passed in."""
    import types

    from tfds_builders.sc2st.sc2st import keyframe_image_features

    root, _ = built
    jpgs = sorted((root / "frames" / "0001_Test_Movie_A").rglob("*.jpg"))[:20]
    boards = [[types.SimpleNamespace(frame_id=str(p.relative_to(root))) for p in jpgs[:10]],
              [types.SimpleNamespace(frame_id=str(p.relative_to(root))) for p in jpgs[10:]]]

    class Sizes:  # "features" = JPEG byte length: any function of the image will do
        def encode_images(self, jpegs):
            return np.array([[len(j), 1.0] for j in jpegs], np.float32)

    got = keyframe_image_features(root, boards + [[]], Sizes())  # an empty isolated set too
    assert got.shape == (20, 2)
    assert got[13, 0] == len(jpgs[13].read_bytes())
    dense = embedders.densenet_embedder("scratch:tiny")  # the DenseNet plugs in the same way
    got = keyframe_image_features(root, boards, dense)
    assert got.shape == (20, dense.dim) == (20, 32)
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(got[13], dense.encode_images([jpgs[13].read_bytes()])[0],
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="candidate_embedder needs keyframe images"):
        build_storyboards(root, CONFIG, collections.Counter(), collections.Counter(),
                          embedders.ClipScorer("scratch:tiny"), Sizes())


def test_expert_columns_are_stored_with_the_pluggable_experts(built):
    """§4.3.2 experts: one column per expert the config names, from the functions passed in
    (scene stand-in = CLIP of the JPEG, or the stored feature for array input; character =
    top names, missing here: the corpus names nobody); isolated keyframes get them too."""
    from tfds_builders import __main__ as cli

    root, _ = built
    cfg = Sc2StConfig(name="experts", encoder="scratch:tiny", feature_dim=32,
                      num_candidates=10, fractions=(0.5, 0.25, 0.25),
                      experts=(("scene", 32), ("character", 100)))
    scorer = embedders.ClipScorer("scratch:tiny")
    made = {n: f("scratch:tiny", 0) for n, f in embedders.DEFAULT_EXPERTS.items()
            if n in ("scene", "character")}
    stats, isolated = collections.Counter(), {}
    out = build_storyboards(root, cfg, collections.Counter(), stats, scorer, None, made,
                            isolated)
    recs = [r for split in out.values() for r in split]
    a = next(r for r in recs if r["movie"].endswith("A"))
    want = made["scene"].scorer.encode_images([(root / a["frame_ids"][3]).read_bytes()])[0]
    np.testing.assert_allclose(a["expert_scene"][3], want, rtol=1e-5, atol=1e-6)
    b = next(r for r in recs if r["movie"].endswith("B"))
    np.testing.assert_array_equal(b["expert_scene"], b["features"])
    assert a["expert_character"].shape == (10, 100) and not a["expert_character"].any()
    n_iso = sum(len(v[1]) for v in isolated.values())
    assert stats["expert_character_missing"] == len(recs) * 10 + n_iso
    assert stats["expert_scene_from_stored_feature"] == 40 + sum(
        1 for v in isolated.values() for f in v[1] if "#" in f)
    assert all(v[0]["expert_scene"].shape == (len(v[1]), 32) for v in isolated.values())
    with pytest.raises(ValueError, match="stores experts"):
        build_storyboards(root, cfg, collections.Counter(), collections.Counter(), scorer,
                          None, {"scene": made["scene"]})
    with pytest.raises(SystemExit, match="name=module:function"):
        cli.build("sc2st", "synthetic_experts", "unused", experts=["scene"])


def test_feature_embedder_fills_the_stored_features(built, tmp_path):
    """Appendix A.1's image features: a config naming a `feature_encoder` stores the
    `feature_embedder`'s embeddings of each keyframe JPEG (storyboards and isolated) as
    `features`, while keyframes are still chosen by the image-text embedder."""
    import shutil

    from tfds_builders import __main__ as cli

    root, _ = built
    jpg_root = tmp_path / "jpg_only"  # movie A only (a feature array has no image to embed):
    # 4 storyboards, so 3 candidates per round
    shutil.copytree(root, jpg_root, ignore=shutil.ignore_patterns("features"))

    class Sizes:  # "features" = (JPEG byte length, first byte): any function of the image
        dim = 2

        def encode_images(self, jpegs):
            return np.array([[len(j), j[100]] for j in jpegs], np.float32)

    cfg = Sc2StConfig(name="f", encoder="scratch:tiny", feature_dim=2, num_candidates=3,
                      fractions=(0.5, 0.25, 0.25), feature_encoder="sizes")
    scorer = embedders.ClipScorer("scratch:tiny")
    isolated = {}
    out = build_storyboards(jpg_root, cfg, collections.Counter(), collections.Counter(),
                            scorer, None, None, isolated, Sizes())
    plain = build_storyboards(jpg_root, dataclasses.replace(cfg, feature_encoder="",
                              feature_dim=32), collections.Counter(), collections.Counter(),
                              scorer)
    recs = [r for split in out.values() for r in split]
    assert len(recs) == 4 and all(r["movie"].endswith("A") for r in recs)
    for r, p in zip(recs, [r for split in plain.values() for r in split], strict=True):
        assert r["frame_ids"] == p["frame_ids"]  # same keyframes: chosen by the scorer
        np.testing.assert_array_equal(r["candidates"], p["candidates"])
        want = Sizes().encode_images([(jpg_root / f).read_bytes() for f in r["frame_ids"]])
        np.testing.assert_array_equal(r["features"], want)
    cols, ids, _ = next(v for v in isolated.values() if v[1])
    np.testing.assert_array_equal(
        cols["features"], Sizes().encode_images([(jpg_root / f).read_bytes() for f in ids]))
    with pytest.raises(ValueError, match="feature_embedder needs keyframe images"):
        build_storyboards(root, cfg, collections.Counter(), collections.Counter(), scorer,
                          None, None, None, Sizes())
    with pytest.raises(ValueError, match="encoder 'sizes' embeds in 2 dims"):
        build_storyboards(jpg_root, dataclasses.replace(cfg, feature_dim=32),
                          collections.Counter(), collections.Counter(), scorer, None, None,
                          None, Sizes())
    with pytest.raises(ValueError, match="needs a feature embedder exactly when"):
        build_storyboards(jpg_root, cfg, collections.Counter(), collections.Counter(), scorer)
    # Through TFDS with vnr's dispatcher: a tiny random DenseNet stands in for Inception-v3.
    dense = embedders.image_embedder("scratch:tiny")
    b = Sc2St(config=dataclasses.replace(cfg, name="fe", feature_encoder="scratch:tiny",
                                         feature_dim=dense.dim),
              data_dir=str(tmp_path / "fe"), embedder=embedders.clip_embedder,
              feature_embedder=embedders.image_embedder)
    b.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=str(jpg_root)))
    rec = b.as_data_source("train")[0]
    assert rec["features"].shape == (10, dense.dim)
    np.testing.assert_allclose(rec["features"], dense.encode_images(
        [(jpg_root / f.decode()).read_bytes() for f in rec["frame_ids"]]), rtol=1e-5, atol=1e-6)
    iso = extras.read_isolated(b.data_dir, "train")
    assert iso is not None and iso["features"].shape[1:] == (dense.dim,)
    # Through the builder: the config's feature_encoder and the function go together.
    with pytest.raises(common.ManualDirError, match="stores 'inception_v3' features: pass "
                       "feature_embedder="):
        sc2st_lib.prepare("lsmdc_paper", tmp_path / "a", jpg_root,
                          embedder=embedders.clip_embedder,
                          candidate_embedder=embedders.image_embedder)
    with pytest.raises(common.ManualDirError, match="no feature_encoder"):
        cli.build("sc2st", "synthetic_tiny", str(tmp_path / "b"),
                  embedder="vnr.benchmarks.sc2st.embedders:clip_embedder",
                  feature_embedder="vnr.benchmarks.sc2st.embedders:image_embedder")
