"""M-SyMoN: parsing rules, builder on generated and real files, alignment task, baselines."""

import collections
import json
import pathlib

import jax
import numpy as np
import pytest

from configs.msymon.main import get_config
from tests.helpers import override
from tfds_builders import common
from tfds_builders import msymon as builder
from tfds_builders.msymon import parse, synthetic
from vnr import sharding, train
from vnr.benchmarks.msymon import alignment as task
from vnr.benchmarks.msymon import data, inference, tools

DIM = 32


def test_matched_spellings_and_bad_spans_are_counted():
    counts = collections.Counter()
    assert parse.normalise_matched(" Yes", counts) is True
    assert parse.normalise_matched("no ", counts) is False
    assert parse.normalise_matched("No", counts) is False
    assert parse.normalise_matched("yes", counts) is True
    assert parse.normalise_matched("maybe", counts) is None
    assert counts["kept_fixed_matched_spelling"] == 3
    entries = [
        {"text": "a", "matched": "yes", "begin_time": 0.0, "end_time": 4.0},
        {"text": "b", "matched": "no", "begin_time": 0, "end_time": 0},
        {"text": "c", "matched": "yes", "begin_time": 9.0, "end_time": 5.0},  # end < begin
        {"text": "d", "matched": "yes", "begin_time": 1.0, "end_time": 3.0},  # backwards
        {"text": "e", "matched": "perhaps", "begin_time": 1.0, "end_time": 3.0},
    ]
    v = parse.parse_video("v", entries, pathlib.Path("x.json"), counts)
    assert v["sentences"] == ["a", "b", "c", "d"]
    assert v["matched"].tolist() == [True, False, False, True]
    assert counts["kept_as_unmatched_end_before_begin"] == 1
    assert counts["kept_times_backwards"] == 1
    assert counts["unknown_matched_value"] == 1
    # Clips: 2 s; midpoints 1, 3, 5 -> "a" then "d" wins the overlap [1, 3), then nothing.
    cb, ce = parse.fixed_clips(5.0, 2.0)
    assert ce.tolist() == [2.0, 4.0, 5.0]
    labels = parse.gt_clip_labels(v["begin"], v["end"], v["matched"], cb, ce)
    assert labels.tolist() == [3, 0, -1]


def test_transcript_baseline_and_window_definitions():
    out = {"clip_begin": np.array([[0.0, 2, 4, 6]]), "clip_end": np.array([[2.0, 4, 6, 8]]),
           "narr_begin": np.array([[0.5, 4.5]]), "narr_end": np.array([[4.5, 6.5]]),
           "clip_mask": np.array([[True, True, True, False]]),
           "sent_mask": np.array([[True, True]])}
    assert task.transcript_alignment(out).tolist() == [[0, 0, 1, -1]]
    assert inference.window_mask(out, 0.0)[0, :, 1].tolist() == [False, False, True, True]
    # Narration estimate without subtitles: proportional to characters over the duration.
    nb, ne, known = data.narration_times(["ab", "abcdef", "xy"], np.full(3, np.nan),
                                         np.full(3, np.nan), 10.0)
    assert np.allclose(nb, [0, 2, 8]) and np.allclose(ne, [2, 8, 10]) and not known.any()


def _corpus(root: pathlib.Path) -> pathlib.Path:
    """Two languages in the upstream layout, plus one of each defect kind."""
    synthetic.write_corpus(root, seed=1, dim=DIM, languages=("en", "ch"),
                           sizes={"train": 16, "val": 2, "test": 4, "weak": 1})
    ann = root / "annotations" / "en" / "train.json"
    d = json.loads(ann.read_text())
    vids = sorted(d)
    d[vids[0]][0]["matched"] = " Yes"
    later = [e for e in d[vids[1]] if e["matched"] == "yes"][-1]
    later["end_time"] = later["begin_time"] - 1  # end < begin
    ann.write_text(json.dumps(d))
    np.save(root / "features" / f"{vids[2]}.npy", np.zeros((50, DIM + 1), np.float32))
    np.save(root / "features" / f"{vids[3]}.npy", np.zeros((2, DIM), np.float32))
    (root / "annotations" / "de").mkdir()
    (root / "annotations" / "de" / "train.json").write_text(json.dumps({"x": []}))
    (root / "annotations" / "ch" / "val.json").write_text("{not json")
    return root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[pathlib.Path, str, dict]:
    """The generated corpus built once: (manual_dir, data_dir, build summary)."""
    root = _corpus(tmp_path_factory.mktemp("msymon_raw"))
    data_dir = str(tmp_path_factory.mktemp("msymon_tfds"))
    b = builder.prepare(builder.builder_config(True, DIM, 1.0), data_dir, root)
    return root, data_dir, common.read_summary(b)


def test_builder_counts_every_defect_of_the_generated_corpus(corpus):
    _, _, summary = corpus
    skipped = summary["skipped"]
    assert skipped["kept_fixed_matched_spelling"] == 1
    assert skipped["kept_as_unmatched_end_before_begin"] == 1
    assert skipped["features_wrong_dim"] == 1
    assert skipped["features_too_short"] == 1
    assert skipped["unknown_language"] == 1
    assert skipped["bad_json"] == 1
    ex = summary["examples"]
    assert ex["en_train"] == 14 and ex["en_weak"] == 1 and ex["en_test"] == 4
    # ch/val.json does not parse: 2 of its 16 train videos (10%) are carved as ch_val.
    assert ex["ch_train"] == 14 and ex["ch_val"] == 2
    assert skipped["kept_val_carved_from_train"] == 2


def test_real_msymon_builds_and_counts_its_defects(shared_data, tmp_path):
    b = builder.prepare("text_only", tmp_path, shared_data / "msymon")
    s = common.read_summary(b)
    assert sum(s["examples"].values()) == 131 and s["examples"]["ru_val"] == 17
    assert s["skipped"]["kept_fixed_matched_spelling"] == 135  # " yes", " no", "no "
    assert s["skipped"]["kept_as_unmatched_end_before_begin"] == 5
    assert s["skipped"]["kept_times_backwards"] == 24
    rec = builder.data_source("text_only", "en_train", tmp_path)[0]
    assert rec["matched"].dtype == bool and len(rec["sentences"]) == len(rec["begin"])
    # The transcript baseline runs on the real annotations (no video, no subtitles).
    cfg = get_config("smoke").data
    cfg.update(config="text_only", data_dir=str(tmp_path), features=False, clip_seconds=3.0)
    res = tools.baseline(cfg, ["val"])
    # Every language has a val split (ru's own, the others carved from train by movie).
    assert set(res) == {f"{x}_val" for x in parse.LANGUAGES}
    assert 0 < res["ru_val"]["clip_accuracy"] < 1
    assert res["ru_val"]["narration_from_subtitles"] == 0.0


def _config(corpus, lang: str = "en", **kw):
    root, data_dir, _ = corpus
    c = get_config(f"smoke,annotated,individual:{lang}")
    c.data.update(config="features", dim=DIM, data_dir=data_dir, manual_dir=str(root))
    c.data.val_split = f"{lang}_val" if lang == "en" else f"{lang}_test"
    return override(c, kw)


# One model/batch shape for every run in this file, so compiled steps are shared (the
# persistent compile cache keys on the HLO).
SIZES = {"model.clip_layers": 0, "model.width": 64, "model.embed": 64, "batch_size": 16}
RUN = {**SIZES, "total_steps": 150, "warmup_steps": 10, "lr": 3e-3, "eval_every": 150,
       "ckpt_every": 150, "log_every": 50, "evals.test.max_examples": 0}


@pytest.mark.e2e
def test_loss_is_the_same_on_1_and_8_devices(corpus):
    c = _config(corpus, **RUN)
    batch = next(iter(task.train_data(c, c.batch_size, 0, 1)))
    assert (batch["labels"] >= 0).any() and (batch["labels"] == -1).any()
    losses = []
    for shape, devices in (((1, 1), jax.devices()[:1]), ((8, 1), jax.devices())):
        c.mesh.shape = shape
        s = train.setup(c, devices=devices)
        _, metrics = s.step_fn(s.state, sharding.global_batch(batch, s.mesh),
                               np.int32(1))
        losses.append(float(metrics["loss"]))
    assert np.isfinite(losses[0]) and losses[0] > 0
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


@pytest.fixture(scope="module")
def en_run(corpus, tmp_path_factory) -> tuple[str, dict]:
    """A short English run end to end (train, val, test with the transcript baseline)."""
    c = _config(corpus, **RUN)
    workdir = str(tmp_path_factory.mktemp("en_run"))
    return workdir, train.run(c, workdir)


@pytest.mark.e2e
def test_alignment_beats_the_transcript_baseline(en_run):
    results = en_run[1]["en_test"]
    assert results["f1"] > results["transcript_f1"] + 0.05, results
    assert results["clip_accuracy"] > results["transcript_clip_accuracy"], results
    assert (pathlib.Path(en_run[0]) / "reports/en_test_alignment.png").stat().st_size > 5000


@pytest.mark.e2e
def test_crosslingual_matrix_from_two_language_runs(corpus, en_run, tmp_path):
    ch = str(tmp_path / "ch")
    train.run(_config(corpus, "ch", **SIZES, **{"data.test_splits": (), "total_steps": 2}), ch)
    cfg = _config(corpus, **SIZES)
    cells, table = tools.crosslingual(cfg, {"en": en_run[0], "ch": ch}, "test")
    assert set(cells) == {(r, c) for r in ("en", "ch") for c in ("en", "ch")}
    lines = table.splitlines()
    assert len(lines) == 2 + 7 and lines[2].startswith("| en | ") and "-" in lines[4]
    assert all(0 <= v <= 1 for v in cells.values())
    # The English model on English test videos is the run's own test result.
    assert cells["en", "en"] == pytest.approx(en_run[1]["en_test"]["f1"], abs=1e-6)


@pytest.mark.e2e
def test_window_constraint_and_wrong_sized_init(corpus, en_run):
    c = _config(corpus, **RUN, **{"eval.window": 4.0, "data.test_splits": ("en_test",)})
    c.init_from = en_run[0]
    res = tools.evaluate_run(c)["en_test"]
    # The window only removes far-off matches: still better than timestamps alone.
    assert res["f1"] > res["transcript_f1"], res
    bad = _config(corpus, **{**RUN, "model.width": 48})
    bad.init_from = en_run[0]
    with pytest.raises(train.ConfigError, match="init_from"):
        train.setup(bad)


def test_bad_config_and_missing_init_are_one_line_errors(corpus):
    with pytest.raises(train.ConfigError, match="init_from"):
        train.setup(_config(corpus, init_from="/nonexistent/run"))
    with pytest.raises(train.ConfigError, match="eval.drop"):
        train.setup(_config(corpus, **{"eval.drop": "median"}))
    two = _config(corpus)
    two.require_init_from = True
    with pytest.raises(train.ConfigError, match="two_stage"):
        train.setup(two)
    with pytest.raises(ValueError, match="individual"):
        get_config("individual:de")


@pytest.mark.e2e
def test_yms_zero_shot_from_the_msymon_run_and_supervised_batches(en_run, tmp_path):
    from configs.msymon.yms import get_config as yms_config
    from tfds_builders.msymon.yms import synthetic as yms_synthetic

    root = yms_synthetic.write_corpus(tmp_path / "yms", seed=1, dim=DIM)
    c = yms_config("smoke,zeroshot")
    c.data.update(manual_dir=str(root), data_dir=str(tmp_path / "tfds"), dim=DIM)
    c.model.update(clip_layers=0, width=64, embed=64)
    c.init_from = en_run[0]
    res = tools.evaluate_run(c)["test"]
    assert 0 <= res["threshold"] <= 1 and res["videos"] == 2
    # Zero-shot argmax (threshold tuned on val) beats the timestamp-free transcript guess
    # (YMS has no subtitle times: the estimate is a diagnostic, never `transcript_*`).
    assert "transcript_f1" not in res
    assert res["f1"] > res["estimated_transcript_f1"], res
    sup = yms_config("smoke,supervised")
    sup.data.update(manual_dir=str(root), data_dir=str(tmp_path / "tfds"), dim=DIM)
    train.setup(sup)  # the supervised config validates
    batch = next(iter(task.train_data(sup, sup.batch_size, 0, 1)))
    assert batch["features"].shape[-1] == DIM and (batch["labels"] >= 0).any()
    # YMS clips follow clip_segmentation.txt (1-4 s), not the fixed clip_seconds grid.
    lengths = (batch["clip_end"] - batch["clip_begin"])[batch["clip_mask"]]
    assert len(np.unique(np.round(lengths, 3))) > 2


def test_init_from_restores_every_parameter_including_list_indices(tmp_path):
    """init_from reaches the model through the trainer's `pretrained` hook as a run source
    (never inside make_model): every parameter, nnx.List indices included."""
    import orbax.checkpoint as ocp
    from flax import nnx

    from vnr import pretrained

    c = get_config("smoke")
    c.data.data_dir = str(tmp_path / "tfds")
    c.model.update(clip_layers=1, sentence_layers=1, text_layers=1)
    model = task.make_model(c, nnx.Rngs(3))
    params = nnx.state(model, nnx.Param).to_pure_dict()  # nnx.List blocks: int keys
    with ocp.StandardCheckpointer() as ckpt:  # the trainer's layout: (model, optimizer)
        ckpt.save(tmp_path / "run" / "checkpoints" / "7" / "state",
                  {"0": params, "1": {"step": np.zeros((), np.int32)}})
    c.init_from = str(tmp_path / "run")
    assert task.pretrained(c) == {"": (c.init_from, pretrained.RUN, "selected")}
    fresh = nnx.state(task.make_model(c, nnx.Rngs(3)), nnx.Param)  # make_model reads nothing
    state = train.setup(c).state
    got = {p[1:]: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(state)
           if p[0] == 0 and isinstance(v, nnx.Param)}
    want = {p: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(nnx.state(model,
                                                                                  nnx.Param))}
    assert set(want) == set(got) and any(0 in k for k in want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=str(k))
    assert len(jax.tree.leaves(fresh)) == len(want)


@pytest.mark.e2e
def test_retrieval_pool_is_every_clip_of_the_test_split(corpus, en_run):
    """Appendix D (Tables 10-13): each sentence ranks every clip of the 4 test videos."""
    res = en_run[1]["en_test"]
    c = _config(corpus, **RUN)
    clips = sum(int(b["clip_mask"].sum()) for b in data.eval_dataset(c.data, "en_test", 8))
    assert res["pool_videos"] == 4 and res["pool_clips"] == clips
    assert res["queries"] > 0
    # A larger pool never ranks a sentence's clip higher than its own video alone does.
    assert res["mean_rank"] >= res["video_pool_mean_rank"]
    assert res["r1"] <= res["video_pool_r1"]


def test_a_training_split_without_supervision_is_refused(monkeypatch):
    """Every sentence unmatched: one line naming the split, not a run at loss 0 (#44)."""
    import ml_collections

    def rec(matched: bool) -> dict:
        return {"video_id": "v", "duration": 9.0, "begin": np.array([1.0, 5.0]),
                "end": np.array([4.0, 8.0]), "matched": np.array([False, matched])}

    cfg = ml_collections.ConfigDict({"builder": "msymon", "config": "smoke", "clips": "grid",
                                     "train_split": "train", "clip_seconds": 3.0})
    monkeypatch.setattr(data, "source", lambda cfg, split: [rec(False)] * 3)
    with pytest.raises(ValueError, match=r"training split 'train' of msymon/smoke: none of "
                       r"its 3 records has a clip inside a sentence annotated as matched"):
        data.train_dataset(cfg, 2, 0)
    assert data._supervised(cfg, rec(True)) and not data._supervised(cfg, rec(False))


def test_a_manual_dir_the_generated_corpus_would_ignore_is_refused():
    """`smoke` trains on the generated corpus: a manual_dir given with it is one line, not
    silently unread (#44)."""
    c = get_config("individual:en,smoke")
    assert c.data.config == "synthetic"
    c.data.manual_dir = "/data/msymon_release"
    with pytest.raises(ValueError, match=r"data.manual_dir='/data/msymon_release' would not be "
                       r"read: data.config='synthetic'"):
        task.validate(c)
    c.data.manual_dir = ""
    task.validate(c)  # the generated corpus alone is fine


def test_a_feature_width_the_built_dataset_does_not_have_is_refused():
    """The generated corpus stores 32-d features: data.dim=16 is one line at validation, not
    a broadcast error in an input worker after config.json is written (#44)."""
    c = get_config("individual:en,smoke")
    c.data.dim = 16
    with pytest.raises(ValueError, match=r"data.dim=16: msymon/synthetic stores 32-d features "
                       r"\(set data.dim=32\)"):
        task.validate(c)
