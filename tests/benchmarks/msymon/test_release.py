"""M-SyMoN on the release layout: every language has test.json, val.json is empty for six of
seven; validation is carved from train by movie; the §5.2 regimes run end to end."""

import json
import pathlib

import pytest

from configs.msymon.main import LANGUAGES, get_config
from tests.helpers import override
from tfds_builders import common
from tfds_builders import msymon as builder
from tfds_builders.msymon import synthetic
from tfds_builders.msymon.msymon import carve_validation
from vnr import train

DIM = 16
SIZES = {"train": 4, "val": 2, "test": 2, "weak": 3}


def test_carving_is_by_movie_and_deterministic():
    train_videos = [{"video_id": f"v{k}"} for k in range(20)]
    movies = {"v0": "m", "v1": "m", "v2": "m"}
    rest, val = carve_validation(train_videos, movies)
    again = carve_validation(list(reversed(train_videos)), movies)[1]
    assert {v["video_id"] for v in val} == {v["video_id"] for v in again}
    assert len(val) >= 2 and len(rest) + len(val) == 20
    ids = {v["video_id"] for v in val}
    assert ids >= {"v0", "v1", "v2"} or not ids & {"v0", "v1", "v2"}  # never split a movie
    # One movie only: nothing can be carved without sharing it with train.
    assert carve_validation(train_videos[:3], movies)[1] == []


def test_real_sample_gets_a_validation_set_for_every_language(shared_data, tmp_path):
    b = builder.prepare("text_only", tmp_path, shared_data / "msymon")
    s = common.read_summary(b)
    ex = s["examples"]
    assert ex["ru_val"] == 17  # ru ships a val.json: nothing carved there
    carved = {lang: ex[f"{lang}_val"] for lang in LANGUAGES if lang != "ru"}
    assert all(n >= 1 for n in carved.values()), ex
    assert s["skipped"]["kept_val_carved_from_train"] == sum(carved.values())
    assert sum(ex.values()) == 131  # every annotated video still in exactly one split
    for lang in LANGUAGES:
        train_ids = {r["video_id"] for r in builder.data_source("text_only", f"{lang}_train",
                                                                tmp_path)}
        val_ids = {r["video_id"] for r in builder.data_source("text_only", f"{lang}_val",
                                                              tmp_path)}
        assert train_ids and val_ids and not train_ids & val_ids
    # No subtitles in the sample: the weak-data regimes say what to do, in one line.
    c = get_config("individual:en")
    c.data.update(config="text_only", data_dir=str(tmp_path), manual_dir=str(
        shared_data / "msymon"))
    with pytest.raises(train.ConfigError, match="no weak data for \\['en_weak'\\].*annotated"):
        train.setup(c)


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[pathlib.Path, str, dict]:
    """A generated copy of the full release layout with features and weak subtitles."""
    root = synthetic.write_corpus(tmp_path_factory.mktemp("release"), seed=2, dim=DIM,
                                  sizes=SIZES, release_layout=True)
    movies = json.loads((root / "movies.json").read_text())
    movies["enwe000"] = movies["ente000"]  # a weak video of an annotated movie
    (root / "movies.json").write_text(json.dumps(movies))
    data_dir = str(tmp_path_factory.mktemp("release_tfds"))
    b = builder.prepare(builder.builder_config(True, DIM, 1.0), data_dir, root)
    return root, data_dir, common.read_summary(b)


def test_generated_release_layout_builds(release):
    root, _, s = release
    for lang in LANGUAGES:
        assert (root / "annotations" / lang / "test.json").is_file()
        want_val = "{}" if lang != "ru" else None
        got = (root / "annotations" / lang / "val.json").read_text()
        assert want_val is None or got == want_val
    ex = s["examples"]
    # 4 train videos, two of them one movie: at least one carved (10%, at least one video),
    # a whole movie at a time (so 2 when the shared movie comes first in CRC32 order).
    assert ex["ru_val"] == 2 and ex["ru_train"] == 4
    carved = 0
    for lang in LANGUAGES[:-1]:
        assert ex[f"{lang}_test"] == 2 and ex[f"{lang}_val"] in (1, 2)
        assert ex[f"{lang}_train"] + ex[f"{lang}_val"] == 4
        carved += ex[f"{lang}_val"]
    assert s["skipped"]["kept_val_carved_from_train"] == carved
    assert s["skipped"]["weak_movie_in_annotated"] == 1 and ex["en_weak"] == 2


@pytest.mark.e2e
def test_individual_language_runs_end_to_end_on_the_release_layout(release, tmp_path):
    root, data_dir, _ = release
    c = get_config("smoke,individual:hi")
    c.data.update(config="features", dim=DIM, data_dir=data_dir, manual_dir=str(root))
    c = override(c, {"total_steps": 2, "eval_every": 2, "ckpt_every": 2, "log_every": 1})
    assert c.data.train_split == "hi_weak" and c.data.val_split == "hi_val"
    res = train.run(c, str(tmp_path / "hi"))
    test = res["hi_test"]
    assert test["videos"] == 2 and 0 <= test["f1"] <= 1
    assert test["d_v"] in c.eval.drop_grid and test["d_t"] in c.eval.drop_grid
    assert 0 <= test["transcript_f1"] <= 1  # subtitles give every narration time


def test_regimes_and_the_paper_preset():
    c = get_config()
    assert c.regime == "multilingual" and c.data.train_split == "+".join(
        f"{x}_weak" for x in LANGUAGES)
    assert get_config("annotated,individual:fr").data.train_split == "fr_train"
    tr = get_config("translate")
    assert tr.data.translated and tr.data.data_dir == "data/tfds_translated"
    sup = get_config("translate_supervision")
    assert sup.require_init_from and sup.data.train_split.endswith("ru_train")
    two = get_config("two_stage_supervision:hi")
    assert two.require_init_from and two.data.train_split == "hi_train"
    assert get_config("two_stage:hi").data.train_split == "hi_weak"
    p = get_config("paper")
    assert (p.lr, p.schedule, p.warmup_steps, p.weight_decay) == (4e-5, "cosine", 0, 0.2)
    assert get_config("two_stage:en,paper").lr == 4e-6
    with pytest.raises(ValueError, match="one training regime"):
        get_config("translate,individual:en")
    with pytest.raises(ValueError, match="individual"):
        get_config("individual:de")


def test_missing_video_apart_from_missing_features(tmp_path):
    """With the release's `videos/` folder (yt-dlp's downloads): an annotated video with no
    features and no file there is `missing_video`; one downloaded but not extracted stays
    `missing_features`."""
    root = synthetic.write_corpus(tmp_path / "release", seed=2, dim=DIM, sizes=SIZES,
                                  release_layout=True)
    ids = sorted(p.stem for p in (root / "features").glob("*.npy"))
    never, not_extracted = ids[0], ids[1]
    (root / "videos").mkdir()
    for v in ids[1:]:
        (root / "videos" / f"{v}.webm").write_bytes(b"")
    for v in (never, not_extracted):
        (root / "features" / f"{v}.npy").unlink()
    b = builder.prepare(builder.builder_config(True, DIM, 1.0), str(tmp_path / "tfds"), root)
    s = common.read_summary(b)
    assert s["skipped"]["missing_video"] >= 1 and s["skipped"]["missing_features"] >= 1
    assert any(never in n for n in s["named"]["missing_video"])
    assert not any(never in n for n in s["named"]["missing_features"])
    assert any(not_extracted in n for n in s["named"]["missing_features"])
