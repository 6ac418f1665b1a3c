"""SYMON tasks: two-scene clips, memory (Eq. 6), cut pairs, Set A/B, 1 vs 8 devices, and
learning on generated data."""

import collections
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import ROOT  # noqa: E402
from vnr import config as config_lib
from vnr import sharding, train
from vnr import task as task_lib
from vnr.benchmarks.symon import data
from vnr.workdir import split_results


def _config(name: str, arg: str, data_dir: pathlib.Path):
    c = config_lib.load(f"{ROOT / 'configs' / 'symon' / name}.py:{arg or ''}")
    c.data.data_dir = str(data_dir)
    c.progress = False
    return c


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("symon_tfds")


def test_memory_choice_eq6():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, 8))
    frames = [base + 0.1 * rng.normal(size=base.shape),  # j=0: similar frames, no shared name
              rng.normal(size=(4, 8)),  # j=1: unrelated frames, two shared names
              base + 0.5 * rng.normal(size=base.shape),  # j=2: a bit less similar, one name
              base]
    names = ["", "Ann|Bob", "Ann", "Ann|Bob"]
    cos = [float(data._unit_mean(f) @ data._unit_mean(frames[3])) for f in frames[:3]]
    want = int(np.argmax([(1 + e) * c for e, c in zip((0, 2, 1), cos)]))
    assert data.memory_choice(frames, names, 3, window=10) == want == 2
    assert data.memory_choice(frames, names, 3, window=1) == 2
    assert data.memory_choice(frames, ["", "", "", ""], 3, window=10) == 0  # cosine alone
    assert data.memory_choice(frames, names, 0, window=10) == -1


def _rec(cuts, starts, ends, names=None, seconds=60, vid="v1"):
    n = len(starts)
    return {"video_id": vid, "cuts": np.asarray(cuts, np.float32),
            "trim": np.array([3.0, 57.0], np.float32), "features": np.ones((seconds, 4)),
            "sentences": [f"s{i}." for i in range(n)], "starts": np.asarray(starts),
            "ends": np.asarray(ends), "names": names or [""] * n}


def test_clips_are_scene_pairs_with_text_to_sentence_boundaries():
    # Scenes: [3,7) [7,9) | [9,9.5) [9.5,20) | [20,30) [30,30.4) | [30.4, 57) unpaired.
    rec = _rec([7, 9, 9.5, 20, 30, 30.4], [4, 8.5, 21, 40], [8, 12, 25, 50],
               names=["Ann", "Ann|Bob", "", "Bob"])
    skips, ex = collections.Counter(), {}
    clips = data.clips_of(rec, 1.0, skips, ex)
    assert [(c.start, c.end) for c in clips] == [(3, 9), (9, 20), (20, pytest.approx(30.4))]
    assert clips[0].text == "s0. s1." and (clips[0].text_start, clips[0].text_end) == (4, 12)
    assert clips[1].text == "s1." and clips[1].names == "Ann|Bob"
    assert skips == {"clip:unpaired_last_scene": 1}
    assert ex["clip:unpaired_last_scene"].startswith("v1 [30.4")
    # 4 rows from the clip start, fewer (zero-padded, masked) for a shorter clip.
    rows = data.clip_rows(np.arange(60.0)[:, None].repeat(2, 1), clips[0], 1.0, 4)
    np.testing.assert_array_equal(rows[:, 0], [3, 4, 5, 6])
    short = data.Clip(10.0, 12.5, "", 0, 0, "")
    frames, mask = data._pad(data.clip_rows(np.ones((60, 2)), short, 1.0, 4), 4)
    assert mask.tolist() == [True, True, True, False] and not frames[3].any()


def test_clips_bad_input_counted_not_raised():
    skips, ex = collections.Counter(), {}
    # A clip shorter than one feature second, a clip with no narration.
    rec = _rec([3.2, 3.6, 10, 20, 40], [12], [18])
    assert [(c.start, c.end) for c in data.clips_of(rec, 1.0, skips, ex)] == [(
        pytest.approx(3.6), 20)]
    assert skips["clip:shorter_than_one_feature_second"] == 1
    assert skips["clip:no_narration"] == 1 and "v1 [20.0, 57.0)" in ex["clip:no_narration"]
    # No cut in the trimmed span (e.g. a cuts file covering another part): no clip, counted.
    assert data.clips_of(_rec([1, 58], [5], [9], vid="v2"), 1.0, skips, ex) == []
    assert skips["video:no_two_scene_clip"] == 1 and ex["video:no_two_scene_clip"][:2] == "v2"


def test_center_tokens_trims_both_ends():
    from vnr.data import text

    words = " ".join(f"w{i}" for i in range(10))
    full = text.tokenize(words, 1024, 10)
    np.testing.assert_array_equal(data.center_tokens(words, 1024, 4), full[3:7])
    assert (data.center_tokens("a b", 1024, 4)[2:] == 0).all()


def test_order_mean_of_the_two_set_runs(tmp_path):
    from vnr.benchmarks.symon import order_mean

    for name, split, acc in (("ab", "setB", 60.0), ("ba", "setA", 70.0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({split: {"accuracy": acc}}))
    assert order_mean.mean_accuracy(tmp_path / "ab", tmp_path / "ba")["mean"] == 65.0
    with pytest.raises(ValueError, match="no 'setA'"):
        order_mean.mean_accuracy(tmp_path / "ab", tmp_path / "ab")


def test_set_a_b_is_a_franchise_partition():
    keys = [f"movie {i}" for i in range(200)]
    sets = [data.set_of(k) for k in keys]
    assert set(sets) == {"setA", "setB"} and 60 < sets.count("setA") < 140
    assert all(data.set_of(k) == s for k, s in zip(keys, sets))  # deterministic


def test_order_items_rules():
    rec = {"cuts": np.array([5.0, 12.0, 14.0, 30.0, 40.0], np.float32),
           "trim": np.array([2.0, 38.0], np.float32), "features": np.zeros((45, 4)),
           "sentences": ["a b.", "c d.", "e f."], "starts": np.array([3.0, 9.0, 29.0]),
           "ends": np.array([8.0, 11.0, 31.0])}
    # 5: 1 s before the trim start; 12: "c d." overlaps [8, 16) ("a b." ends at 8);
    # 14: its window overlaps 12's; 40 > trim end.
    assert data.order_items(rec, 1.0, 4.0) == [(12.0, "c d."), (30.0, "e f.")]
    rec["sentences"][2], rec["starts"][2], rec["ends"][2] = "late.", 35.0, 36.0
    assert data.order_items(rec, 1.0, 4.0) == [(12.0, "c d.")]  # none overlaps [26, 34)


def _first_losses(config, devices, batches):
    s = train.setup(config, devices=devices)
    state, losses = s.state, []
    for i, host in enumerate(batches):
        state, m = s.step_fn(state, sharding.global_batch(host, s.mesh), jnp.int32(i + 1))
        losses.append(float(m["loss"]))
    return losses


@pytest.mark.e2e
@pytest.mark.parametrize("name,arg", [("retrieval", "smoke"), ("order", "smoke,text_video")])
def test_same_loss_on_one_and_eight_devices(name, arg, data_dir):
    c = _config(name, arg, data_dir)
    task = task_lib.load(c.task)
    it = iter(task.train_data(c, c.batch_size, 0, 1))
    batches = [next(it) for _ in range(3)]
    one = _first_losses(c, jax.devices()[:1], batches)
    c8 = _config(name, arg, data_dir)
    c8.mesh.shape = (8, 1)
    eight = _first_losses(c8, jax.devices(), batches)
    np.testing.assert_allclose(one, eight, rtol=2e-4)
    assert one[0] != one[2]  # the steps really updated the model


def _run(name, arg, data_dir, tmp_path, **over):
    c = _config(name, arg, data_dir)
    c.data.config = "synthetic"  # enough val/test movies for a meaningful chance level
    c.update(total_steps=over.pop("steps"), warmup_steps=10, lr=3e-3, batch_size=32,
             eval_batch_size=64, log_every=20, eval_every=1000, ckpt_every=1000)
    c.evals.val.max_examples, c.evals.test.max_examples = 0, 0
    c.data.test_splits = ("val", "test")
    results = train.run(c, str(tmp_path))
    assert split_results(json.loads((tmp_path / "results.json").read_text())) == results
    return results


@pytest.mark.e2e
def test_retrieval_beats_chance_on_generated_data(data_dir, tmp_path):
    # Two-scene clips, Eq. 5, the §7.2 pool (the query's own video stays in it). The
    # generated corpus has no long-range reference, so the memory model is not the one
    # tested for learning here (see REPRODUCING.md for memory vs no memory).
    res = _run("retrieval", "smoke,no_memory", data_dir, tmp_path, steps=500)
    for split, m in res.items():
        assert m["items"] > 150, split
        assert m["v2t_r@10"] > m["chance_v2t_r@10"] + 8, (split, m)
        assert m["t2v_r@10"] > m["chance_v2t_r@10"] + 8, (split, m)
        assert m["v2t_r@1"] > m["chance_v2t_r@1"] + 1.5, (split, m)


@pytest.mark.e2e
def test_ordering_beats_half_on_generated_data(data_dir, tmp_path):
    res = _run("order", "smoke,video_only", data_dir, tmp_path, steps=60)
    for split, m in res.items():
        assert m["pairs"] >= 40, split
        assert m["accuracy"] > 62, (split, m)
        assert (tmp_path / "reports" / f"{split}_order.png").stat().st_size > 5000, split


def test_config_errors_are_one_line(data_dir):
    c = _config("retrieval", "smoke", data_dir)
    c.data.config = "text_only"
    with pytest.raises(train.ConfigError, match="no video features"):
        train.setup(c)
    with pytest.raises(ValueError, match="unknown config arg"):
        _config("order", "smoke,bogus", data_dir)
