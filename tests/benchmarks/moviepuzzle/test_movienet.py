"""MovieNet curation (builder config `movienet`) built end to end on a generated raw-MovieNet
fixture with one defect per movie (counts, pairing, clips, splits), and the §2.1 black-border
crop. The pure rules are tested in `test_movienet_rules.py`."""

from __future__ import annotations

import collections
import io
import json
import pathlib

import numpy as np
import pytest
from PIL import Image

from tests import ROOT
from tfds_builders import common
from tfds_builders import moviepuzzle as mp
from tfds_builders.moviepuzzle import movienet as mn
from tfds_builders.moviepuzzle import movienet_build as mb

KF = (10, 50, 90)  # keyframe offsets inside a 100-frame shot
FPS = 24.0


# ----------------------------------------------------------------------------- fixture


def _jpeg(colour: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="JPEG")
    return buf.getvalue()


def _ts(t: float) -> str:
    ms = int(round(t * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def _srt(cues: list[tuple[float, float, str]]) -> str:
    return "".join(f"{i}\n{_ts(a)} --> {_ts(b)}\n{t}\n\n" for i, (a, b, t) in enumerate(cues, 1))


def frame_cues(n_shots: int, fps: float = FPS, skip: frozenset = frozenset()) -> list:
    """One English cue around every keyframe (+-0.3 s), except (shot, img) in `skip`."""
    return [((i * 100 + o) / fps - 0.3, (i * 100 + o) / fps + 0.3,
             f"I think we should go to the house {i} {k}.")
            for i in range(n_shots) for k, o in enumerate(KF) if (i, k) not in skip]


def write_movie(root: pathlib.Path, imdb: str, n_shots: int, scenes: list | None,
                cues: list | None, *, encoding: str = "utf-8", meta: dict | None = None,
                story: list | None = None) -> None:
    """One movie in MovieNet's layout: shot i spans frames [100 i, 100 i + 99] with keyframes
    at +10, +50, +90; `scenes` are [first, last] shot ranges; `cues` (start, end, text)."""
    for sub in ("annotation", "shot", "subtitle", "meta"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    ann = {"imdb_id": imdb}
    if scenes is not None:
        ann["scene"] = [{"id": f"{imdb}_{k:04d}", "shot": list(s),
                         "frame": [s[0] * 100, s[1] * 100 + 99]} for k, s in enumerate(scenes)]
    if story is not None:
        ann["story"] = story
    (root / "annotation" / f"{imdb}.json").write_text(json.dumps(ann))
    (root / "shot" / f"{imdb}.txt").write_text("".join(
        f"{i * 100} {i * 100 + 99} {' '.join(str(i * 100 + o) for o in KF)}\n"
        for i in range(n_shots)))
    if cues is not None:
        (root / "subtitle" / f"{imdb}.srt").write_bytes(_srt(cues).encode(encoding))
    if meta is not None:
        (root / "meta" / f"{imdb}.json").write_text(json.dumps(meta))
    frames = root / imdb
    frames.mkdir()
    seed = int(imdb[2:])
    for i in range(n_shots):
        for k in range(3):
            colour = ((seed * 40) % 256, (i * 9) % 256, k * 80)
            (frames / f"shot_{i:04d}_img_{k}.jpg").write_bytes(_jpeg(colour))


def make_fixture(root: pathlib.Path) -> dict:
    """Raw MovieNet with one defect per movie; returns the expected clips per movie."""
    three = [[0, 9], [10, 19], [20, 29]]
    # 1: clean; shot 5's keyframes share one utterance (-> 2 frames removed), shot 12 img 1
    # has only a sound cue (-> unpaired); meta fps 25
    cues = frame_cues(30, 25.0, frozenset({(5, 0), (5, 1), (5, 2), (12, 1)}))
    cues += [(510 / 25.0 - 0.1, 590 / 25.0 + 0.1, "We all talk at once here."),
             (1250 / 25.0 - 0.3, 1250 / 25.0 + 0.3, "[Door Slams]")]
    # the only movie that passes the movie-level rules too: 500+ dialogues (the extra ones
    # after its last keyframe), a synopsis and a cast list
    cues += [(200.0 + 2 * k, 201.0 + 2 * k, f"Then we talk about the plan {k}.")
             for k in range(500)]
    meta = {"imdb_id": "tt0000001", "fps": 25, "cast": [{"id": "nm0000001"}]}
    write_movie(root, "tt0000001", 30, three, sorted(cues), meta=meta,
                story=[{"shot": [0, 29], "description": "They talk."}])
    # 2: cp1252 .srt with accents and curly quotes
    cues = [(a, b, t.replace("house", "caf\u00e9 \u201chouse\u201d")) for a, b, t in
            frame_cues(20)]
    write_movie(root, "tt0000002", 20, [[0, 9], [10, 19]], cues, encoding="cp1252")
    # 3: UTF-16 with BOM
    write_movie(root, "tt0000003", 14, [[0, 13]], frame_cues(14), encoding="utf-16")
    # 4: cues out of order in the file, one pair overlapping over keyframe (3, 1)
    cues = frame_cues(14)
    a, b, t = cues[10]
    cues[10] = (a, b + 0.5, t)  # overlaps cue 11 (shot 3 img 2) from its start on
    cues[11] = (cues[11][0] - 1.5, cues[11][1], cues[11][2])  # now also holds keyframe (3, 1)
    write_movie(root, "tt0000004", 14, [[0, 6], [7, 13]], cues[::-1])
    # 5: every cue overlaps the next: a broken .srt -> movie skipped
    cues = [(a, b + 2.0, t) for a, b, t in frame_cues(14)]
    write_movie(root, "tt0000005", 14, [[0, 13]], cues)
    # 6: keyframe shot 10 img 1 missing on disk -> runs of 31 and 28 frames
    write_movie(root, "tt0000006", 20, [[0, 19]], frame_cues(20))
    (root / "tt0000006" / "shot_0010_img_1.jpg").unlink()
    # 7: shots 10 and 11 outside every scene range
    write_movie(root, "tt0000007", 20, [[0, 9], [12, 19]], frame_cues(20))
    # 8: French subtitles
    fr = [(a, b, "Je ne pense pas qu'on doive y aller maintenant.") for a, b, _ in
          frame_cues(14)]
    write_movie(root, "tt0000008", 14, [[0, 13]], fr)
    # 9: no subtitle file; 10: no scene annotation; 11: scenes beyond the shot file
    write_movie(root, "tt0000009", 14, [[0, 13]], None)
    write_movie(root, "tt0000010", 14, None, frame_cues(14))
    write_movie(root, "tt0000011", 14, [[0, 20]], frame_cues(14))
    # 12: a keyframe that is not a JPEG -> its clip is skipped at generation
    write_movie(root, "tt0000012", 14, [[0, 13]], frame_cues(14))
    (root / "tt0000012" / "shot_0002_img_0.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    # 13: only every other shot has dialogue -> no window with 80% paired
    sparse = frozenset((i, k) for i in range(0, 14, 2) for k in range(3))
    write_movie(root, "tt0000013", 14, [[0, 13]], frame_cues(14, skip=sparse))
    return {"tt0000001": 4, "tt0000002": 3, "tt0000003": 2, "tt0000004": 2, "tt0000006": 3,
            "tt0000007": 3, "tt0000012": 1}


EXPECTED_SKIPS = {
    "movie_srt_overlapping": 1,
    "movie_not_english": 1,
    "movie_no_subtitle": 1,
    "movie_no_scenes": 1,
    "movie_scenes_beyond_shots": 1,
    "movie_no_clips": 1,
    "clip_bad_frame": 1,
    "kept_srt_unordered_cues_sorted": 1,
    "cue_non_verbal": 1,
    "kept_cue_overlapping": 1,
    "frame_unpaired_overlapping_cues": 1,
    "frame_same_utterance": 2,
    "frame_missing_jpeg": 1,
    "frame_shot_outside_scenes": 6,
    # 1: 88 - 80; 3, 4, 12: 42 - 40; 6: 8 (second run); 7: 4 (second run); 13: 42 - 0
    "frame_not_in_clip": 8 + 2 + 2 + 2 + 8 + 4 + 42,
}


RELAXED = {"min_dialogues": 0, "require_synopsis": False, "require_cast": False}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """The defect fixture, built with the movie-level rules (500 dialogues, synopsis, cast)
    off: its small movies test the frame/cue rules; `test_movie_level_rules` tests those."""
    base = tmp_path_factory.mktemp("movienet")
    expected = make_fixture(base / "raw")
    with pytest.MonkeyPatch.context() as mpatch:
        mpatch.setattr(mb, "movie_rule_failure", lambda movie, rules: None)
        builder = mp.prepare("movienet", base / "data", manual_dir=base / "raw")
    return base, builder, expected


def test_movie_level_rules(tmp_path: pathlib.Path) -> None:
    """§2.2 / App. A.1: movies need >= 500 dialogues, a synopsis and an actor list; each
    failure is one counted skip naming the rule."""
    root = tmp_path / "raw"
    many = frame_cues(5) + [(100.0 + 2 * k, 101.0 + 2 * k, f"I think we should go home {k}.")
                            for k in range(485)]  # 500 verbal cues, the extra ones after
    story = [{"shot": [0, 4], "description": "They go to the house."}]
    cast = {"cast": [{"id": "nm0000001", "character": "Hero"}]}
    write_movie(root, "tt0000021", 5, [[0, 4]], many, meta=cast, story=story)  # kept
    write_movie(root, "tt0000022", 5, [[0, 4]], many[:499], meta=cast, story=story)
    write_movie(root, "tt0000023", 5, [[0, 4]], many, meta=cast)  # no synopsis
    write_movie(root, "tt0000024", 5, [[0, 4]], many, meta={"synopsis": "A day."})  # no cast
    skips: collections.Counter = collections.Counter()
    splits = mb.scan(root, mb.Rules(), skips)
    assert {c["movie_id"] for s in splits.values() for c in s} == {"tt0000021"}
    assert {k: v for k, v in skips.items() if k.startswith("movie_")} == {
        "movie_few_dialogues": 1, "movie_no_synopsis": 1, "movie_no_cast": 1}
    relaxed = collections.Counter()
    kept = mb.scan(root, mb.Rules(**RELAXED), relaxed)
    assert len({c["movie_id"] for s in kept.values() for c in s}) == 4


def _records(base: pathlib.Path, builder) -> dict[str, list[dict]]:
    return {s: [mp.data_source("movienet", s, base / "data")[i]
                for i in range(int(builder.info.splits[s].num_examples))]
            for s in builder.info.splits}


def test_fixture_counts_every_rule(built) -> None:
    base, builder, expected = built
    summary = json.loads((pathlib.Path(builder.data_dir) / common.SUMMARY_FILE).read_text())
    skipped = {k: v for k, v in summary["skipped"].items() if v}
    assert skipped == EXPECTED_SKIPS
    # information, not skips: which subtitle files needed another encoding
    assert summary["noted"] == {"srt_decoded_as_cp1252": 1, "srt_decoded_as_utf-16": 1}
    assert summary["named"]["noted_srt_decoded_as_utf-16"] == [
        str(base / "raw" / "subtitle" / "tt0000003.srt")]
    assert sum(summary["examples"].values()) == sum(expected.values())
    text = common.format_summary(common.read_summary(builder))
    assert "movie_not_english: 1" in text and "frame_same_utterance: 2" in text
    skipped_part, rest = text.split("kept with a fix or warning:")
    assert "srt_decoded" not in skipped_part and "unordered" not in skipped_part
    assert "  cue_overlapping" not in skipped_part
    kept, noted = rest.split("noted (information, not skips):")
    assert "srt_unordered_cues_sorted: 1" in kept and "srt_decoded_as_cp1252: 1" in noted


def test_clips_pairing_and_features(built) -> None:
    base, builder, expected = built
    records = [r for rs in _records(base, builder).values() for r in rs]
    per_movie = collections.Counter(r["movie_id"] for r in records)
    assert dict(per_movie) == expected
    for r in records:  # same features as the other configs
        n = len(r["frames"])
        assert 10 <= n <= 20 and len(r["subtitles"]) == n
        assert sum(bool(s) for s in r["subtitles"]) >= 0.8 * n
        np.testing.assert_array_equal(r["position"], np.arange(n))
        assert np.all(np.diff(r["img_id"]) > 0) and r["shot_id"][0] == 0
        assert all(s.isascii() for s in r["subtitles"])
    m1 = sorted((r for r in records if r["movie_id"] == "tt0000001"), key=lambda r: r["clip_id"])
    assert [len(r["frames"]) for r in m1] == [20, 20, 20, 20]
    first = m1[0]["subtitles"]  # shot 5's three keyframes -> its middle one only
    assert first[15] == "We all talk at once here." and first.count(first[15]) == 1
    assert first[14] == "I think we should go to the house 4 2." and m1[0]["img_id"][15] == 16
    assert first[16] == "I think we should go to the house 6 0."
    assert "" in m1[1]["subtitles"]  # the frame under "[Door Slams]" stays, unpaired
    raw = base / "raw" / "tt0000001"
    assert m1[0]["frames"][0] == (raw / "shot_0000_img_0.jpg").read_bytes()
    m2 = [r for r in records if r["movie_id"] == "tt0000002"]
    assert any("cafe \"house\"" in s for r in m2 for s in r["subtitles"])
    m7 = sorted((r for r in records if r["movie_id"] == "tt0000007"), key=lambda r: r["clip_id"])
    assert [len(r["frames"]) for r in m7] == [20, 10, 20]  # no clip spans shots 10-11
    assert list(m7[2]["scene_id"][:1]) == [0]


def test_splits_are_movie_disjoint_and_in_proportion(built) -> None:
    base, builder, expected = built
    records = _records(base, builder)
    movies = {s: {r["movie_id"] for r in rs} for s, rs in records.items()}
    out = movies.get("test_out_domain", set())
    assert out and not out & (movies["train"] | movies.get("val", set()) |
                              movies.get("test_in_domain", set()))
    labels = mn.split_clips({m: n + (m == "tt0000012") for m, n in expected.items()}, seed=0)
    want = collections.Counter(s for v in labels.values() for s in v)
    got = {s: len(rs) for s, rs in records.items()}
    want[labels["tt0000012"][0]] -= 1  # tt0000012's first clip holds the bad JPEG
    assert got == {s: n for s, n in want.items() if n}


def test_missing_or_incomplete_manual_dir_is_one_line(tmp_path: pathlib.Path) -> None:
    with pytest.raises(common.ManualDirError, match="needs --manual_dir"):
        mp.MoviePuzzle.check_inputs("movienet", None)
    (tmp_path / "annotation").mkdir()
    with pytest.raises(common.ManualDirError, match="no shot/ folder") as e:
        mp.MoviePuzzle.check_inputs("movienet", tmp_path)
    assert "\n" not in str(e.value)


def test_no_usable_movie_is_one_clear_error(tmp_path: pathlib.Path) -> None:
    write_movie(tmp_path / "raw", "tt0000008", 14, [[0, 13]],
                [(a, b, "Je ne pense pas qu'on doive y aller.") for a, b, _ in frame_cues(14)])
    with pytest.raises(common.ManualDirError, match="movie_not_english=1"):
        mp.prepare("movienet", tmp_path / "data", manual_dir=tmp_path / "raw")


def test_moviepuzzle_pipeline_reads_movienet_unchanged(built) -> None:
    import ml_collections

    from vnr.benchmarks.moviepuzzle import data as pipeline

    base, builder, expected = built
    cfg = ml_collections.ConfigDict(dict(
        config="movienet", data_dir=str(base / "data"), manual_dir="", train_split="train",
        max_frames=20, image_size=16, max_tokens=8, vocab_size=512, num_workers=0,
        augment=False))
    batch = next(iter(pipeline.train_dataset(cfg, 2, seed=0)))
    assert batch["frames"].shape == (2, 20, 16, 16, 3) and batch["tokens"].shape == (2, 20, 8)
    assert batch["mask"].sum() >= 20


def test_cli_prints_the_curation_summary(built, tmp_path: pathlib.Path) -> None:
    import subprocess
    import sys

    base, _, _ = built
    out = subprocess.run(
        [sys.executable, "-m", "tfds_builders", "build", "moviepuzzle", "--config", "movienet",
         "--manual_dir", str(base / "raw"), "--data_dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    # the paper's movie-level rules keep movie 1 only (the fixture build turns them off)
    assert "examples: 4" in out.stdout and "movie_few_dialogues: 7" in out.stdout
    assert "movie_no_synopsis" not in out.stdout  # dialogues are checked first
    assert "skipped " in out.stderr and "movie_not_english" in out.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "tfds_builders", "build", "moviepuzzle", "--config", "movienet",
         "--data_dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "needs --manual_dir" in bad.stderr


# ----------------------------------------------------------------------------- §2.1 borders


def _letterboxed(w: int, h: int, bars: tuple[int, int, int, int], seed: int,
                 dark: bool = False, caption: bool = False) -> np.ndarray:
    """A frame whose picture is surrounded by black bars (left, top, right, bottom)."""
    rng = np.random.default_rng(seed)
    left, top, right, bottom = bars
    img = np.zeros((h, w, 3), np.uint8)
    ph, pw = h - top - bottom, w - left - right
    y, x = np.mgrid[0:ph, 0:pw] / max(ph, pw)
    phase = rng.uniform(0, 6, 3)
    pic = np.stack([np.sin(5 * x + 3 * y + p) for p in phase], -1)  # a smooth picture
    lo, hi = (0, 30) if dark else (70, 250)
    pic = lo + (hi - lo) * (pic + 1) / 2 + rng.normal(0, 3, pic.shape)
    img[top:h - bottom, left:w - right] = np.clip(pic, 0, 255).astype(np.uint8)
    if dark:  # a night scene: its edges as black as the bars
        img[top:top + 5] = img[h - bottom - 5:h - bottom] = 3
    if caption:  # a subtitle burnt into the lower bar: letter strokes over half its width
        img[h - bottom + 2:h - 2, w // 4:3 * w // 4:3] = 230
    return img


def _encode(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def test_frame_borders_on_a_generated_letterboxed_frame() -> None:
    from tfds_builders.moviepuzzle import borders

    bars = (0, 30, 0, 30)  # 2.35:1 film in a 16:9 240p frame, scaled down
    raw = _letterboxed(213, 120, bars, 0)
    assert borders.frame_borders(raw) == bars
    frame = np.asarray(Image.open(io.BytesIO(_encode(raw))))
    got = borders.frame_borders(frame)  # JPEG ringing may light the bar's last line or two
    assert all(b - 2 <= g <= b for g, b in zip(got, bars, strict=True)), got
    pillar = _letterboxed(160, 90, (20, 0, 20, 0), 1)
    assert borders.frame_borders(pillar) == (20, 0, 20, 0)
    assert borders.frame_borders(_letterboxed(64, 48, (0, 0, 0, 0), 2)) == (0, 0, 0, 0)


def test_movie_box_is_robust_to_dark_scenes_and_captions() -> None:
    from tfds_builders.moviepuzzle import borders

    bars = (0, 12, 0, 12)
    found = [borders.frame_borders(_letterboxed(128, 96, bars, s, dark=s % 5 == 0,
                                                caption=s % 7 == 0)) for s in range(40)]
    assert max(f[1] for f in found) > 12  # dark scenes look like wider bars
    assert borders.movie_box(found, 128, 96) == (0, 12, 128, 84)
    solid = _letterboxed(128, 96, bars, 0)
    solid[90:94, 20:110] = 230  # a solid logo across most of the bar: not black there
    assert borders.frame_borders(solid)[3] == 2
    assert borders.movie_box([(0, 2, 0, 3)] * 9, 128, 96) is None  # < MIN_BORDER: not a bar
    assert borders.movie_box([(0, 20, 0, 3)] * 9, 128, 96) is None  # one-sided: dark edge
    assert borders.movie_box([(0, 20, 0, 12)] * 9, 128, 96) is None  # too unequal for bars
    assert borders.movie_box([(0, 20, 0, 16)] * 9, 128, 96) == (0, 20, 128, 80)
    assert borders.movie_box([(0, 20, 0, 20)] * 7, 128, 96) is None  # too few frames
    assert borders.movie_box([(0, 20, 0, 20)] * 9, 128, 96) == (0, 20, 128, 76)
    assert borders.movie_box([(0, 20, 0, 20), (40, 60, 40, 40)] * 9, 128, 96) == (
        0, 20, 128, 76)
    assert borders.movie_box([(0, 30, 0, 20)] * 9, 128, 96) is None  # half the frame: no bar


def test_movienet_build_crops_black_borders(tmp_path: pathlib.Path) -> None:
    """§2.1: a letterboxed movie's frames are cropped to the picture (measured on the movie),
    a movie without bars keeps its JPEG bytes; both are counted as kept, not skipped."""
    from tfds_builders.moviepuzzle import borders

    root = tmp_path / "raw"
    write_movie(root, "tt0000031", 14, [[0, 13]], frame_cues(14))  # letterboxed
    write_movie(root, "tt0000032", 14, [[0, 13]], frame_cues(14))  # full frame
    bars = (0, 6, 0, 6)
    for n, path in enumerate(sorted((root / "tt0000031").glob("*.jpg"))):
        path.write_bytes(_encode(_letterboxed(64, 48, bars, n, dark=n % 6 == 0)))
    for n, path in enumerate(sorted((root / "tt0000032").glob("*.jpg"))):
        path.write_bytes(_encode(_letterboxed(64, 48, (0, 0, 0, 0), 100 + n)))
    with pytest.MonkeyPatch.context() as mpatch:
        mpatch.setattr(mb, "movie_rule_failure", lambda movie, rules: None)
        builder = mp.prepare("movienet", tmp_path / "data", manual_dir=root)
    records = [r for rs in _records(tmp_path, builder).values() for r in rs]
    boxed = [r for r in records if r["movie_id"] == "tt0000031"]
    whole = [r for r in records if r["movie_id"] == "tt0000032"]
    assert boxed and whole
    shapes = set()
    for r in boxed:
        for data, ordinal in zip(r["frames"], r["img_id"]):
            img = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)
            shapes.add(img.shape)
            path = root / "tt0000031" / f"shot_{ordinal // 3:04d}_img_{ordinal % 3}.jpg"
            raw = np.asarray(Image.open(path).convert("RGB")).astype(int)
            # the whole picture (rows 6..41), at most 2 ringing bar lines kept on each side
            err = {t: np.abs(img - raw[t:t + len(img)]).mean() for t in range(4, 7)
                   if t + len(img) <= 48 and t + len(img) >= 42}
            assert err and min(err.values()) < 4  # the picture, re-encoded at quality 95
    assert len(shapes) == 1 and 36 <= next(iter(shapes))[0] <= 40  # one box for the movie
    assert next(iter(shapes))[1] == 64
    for r in whole:
        for data, ordinal in zip(r["frames"], r["img_id"]):
            path = root / "tt0000032" / f"shot_{ordinal // 3:04d}_img_{ordinal % 3}.jpg"
            assert data == path.read_bytes()
    summary = json.loads((pathlib.Path(builder.data_dir) / common.SUMMARY_FILE).read_text())
    kept = {k: v for k, v in summary["skipped"].items() if k.startswith(common.KEPT_PREFIX)}
    assert kept == {"kept_movie_border_cropped": 1,
                    "kept_frame_border_cropped": sum(len(r["frames"]) for r in boxed)}
    assert borders.QUALITY == 95
