"""M-SYMON §5.1's model (`configs/msymon/main.py:cclm`): clips from the release's videos
through a frame store, CCLM's Swin and XLM-R text towers loaded from a CCLM `.th` by the
trainer's `pretrained` hook, Eq. 2, every test video evaluated.

The checkpoint is the port's golden fixture (tests/golden/swin/model_state_epoch_0.th:
upstream's classes, tiny and random, saved as CCLM saves; its Swin is 64-d and its text
tower 16-d, so these runs use `model.cclm_head="linear"`; the paper's "none" needs equal
widths, as CCLM-base's 1024 and 1024). The release is the generated corpus in the release
layout with `videos/<id>.mp4` whose frames spell their index."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest
from flax import nnx

from configs.msymon.main import get_config
from tfds_builders.msymon import synthetic
from vnr import train
from vnr.benchmarks.msymon import alignment as task
from vnr.benchmarks.msymon import data, frames
from vnr.data import synthetic_video as sv
from vnr.models.encoders import cclm, swin, torch_checkpoint

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "golden" / "swin"
CKPT = GOLDEN / "model_state_epoch_0.th"
META = json.loads((GOLDEN / "meta.json").read_text())
SIZES = {"train": 2, "val": 1, "test": 2, "weak": 1}
FPS = 4.0  # frames a second of the generated videos


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """(release with videos/, data_dir, tokenizer directory)."""
    d = tmp_path_factory.mktemp("msymon_frames")
    root = synthetic.write_corpus(d / "release", seed=4, dim=8, languages=("en",),
                                  sizes=SIZES)
    frames.write_videos(root, fps=FPS)
    words = sorted({w.strip(".") for f in (root / "annotations" / "en").glob("*.json")
                    for v in json.loads(f.read_text()).values() for e in v
                    for w in e["text"].split()})
    frames.write_tokenizer(d / "tokenizer", words[:36])
    return root, d / "tfds", d / "tokenizer"


def tiny_config(release, tmp_path, head: str = "linear"):
    """The paper row's config (`individual:en,paper,cclm`) at smoke sizes, on the golden
    checkpoint's widths, annotated splits."""
    root, data_dir, tok = release
    c = get_config("individual:en,annotated,paper,cclm,smoke")
    s, t = META["swin"], META["text"]
    c.model.update(cclm_checkpoint=str(CKPT), cclm_head=head, image_chunk=8)
    c.model.swin.update(image_size=s["img_size"], embed_dim=s["embed_dim"],
                        depths=tuple(s["depths"]), num_heads=tuple(s["num_heads"]),
                        window_size=s["window_size"])
    c.model.cclm_text.update(vocab_size=t["vocab_size"], hidden_size=t["hidden_size"],
                             layers=t["fusion_layer"], heads=t["num_attention_heads"],
                             intermediate_size=t["intermediate_size"],
                             max_positions=t["max_position_embeddings"])
    c.data.update(manual_dir=str(root), data_dir=str(data_dir), tokenizer=str(tok),
                  max_clips=6, max_tokens=12, clip_seconds=3.0)
    c.data.frames.update(image_size=s["img_size"], workers=0)
    c.update(total_steps=2, eval_every=2, ckpt_every=2, log_every=1, batch_size=8,
             eval_batch_size=8)
    return c


def test_missing_checkpoint_is_one_line(release, tmp_path):
    c = tiny_config(release, tmp_path)
    c.model.cclm_checkpoint = str(tmp_path / "cclm_3m_epoch_29.th")
    with pytest.raises(ValueError) as e:
        task.validate(c)
    msg = str(e.value)
    assert "\n" not in msg and "model.cclm_checkpoint=" in msg and "no such file" in msg
    c.model.cclm_checkpoint = ""
    with pytest.raises(ValueError, match="needs model.cclm_checkpoint="):
        task.validate(c)


def test_the_store_holds_each_clips_pool_and_eval_takes_the_thirds(release, tmp_path):
    c = tiny_config(release, tmp_path)
    src = data.source(c.data, "en_test")
    rec = src[0]
    cb, ce = data.cut_clips(rec, c.data.clip_seconds, data.shots(c.data))
    pool = c.data.frames.pool
    assert rec["frames"].shape == (len(cb) * pool, 64, 64, 3)
    times = frames.clip_times(cb, ce, pool)
    want = np.floor(times * FPS + 1e-6).astype(int)  # the frame shown at each time
    got = np.array([sv.read_index(f) for f in rec["frames"]]).reshape(len(cb), pool)
    np.testing.assert_array_equal(got, want)
    enc = data._encode(c.data, 64, 32, False).random_map(rec, np.random.default_rng(0))
    mid = frames.eval_picks(pool, 3)
    np.testing.assert_allclose(times[0, mid], cb[0] + (np.arange(3) + 0.5) * (ce[0] - cb[0]) / 3)
    first = [sv.read_index(f) for f in enc["frames"][0]]
    assert first == want[0, mid].tolist()
    tr = data._encode(c.data, 64, 32, True)
    picks = {tuple(sv.read_index(f) for f in tr.random_map(rec, np.random.default_rng(k))
                   ["frames"][0]) for k in range(6)}
    assert len(picks) > 1  # other frames each draw


def _params(state: nnx.State, under: str) -> dict[str, np.ndarray]:
    return {".".join(map(str, p[2:])): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(state)
            if p[:2] == (0, under) and isinstance(v, nnx.Param)}


@pytest.mark.e2e  # two training steps and an evaluation: ~35 s on the shared CPU
def test_train_loads_the_towers_and_evaluates_every_test_video(release, tmp_path, capfd):
    c = tiny_config(release, tmp_path)
    assert task.pretrained(c) == {"swin": (str(CKPT), "cclm_vision"),
                                  "text": (str(CKPT), "cclm_text")}
    state = train.setup(c, load_pretrained=True).state
    tensors = torch_checkpoint.read_torch_checkpoint(CKPT)
    s = META["swin"]
    swin_cfg = swin.SwinConfig(image_size=s["img_size"], embed_dim=s["embed_dim"],
                               depths=tuple(s["depths"]), num_heads=tuple(s["num_heads"]),
                               window_size=s["window_size"])
    want = cclm.match_swin(tensors, swin_cfg, str(CKPT))
    got = _params(state, "swin")
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    text = _params(state, "text")
    np.testing.assert_array_equal(
        text["embeddings.word_embeddings.embedding"],
        tensors["text_encoder.bert.embeddings.word_embeddings.weight"])
    capfd.readouterr()
    res = train.run(c, str(tmp_path / "run"))
    out = "".join(capfd.readouterr())
    assert "pretrained: swin <- " in out and "pretrained: text <- " in out
    test = res["en_test"]
    assert test["videos"] == SIZES["test"]
    n_clips = sum(len(data.cut_clips(r, c.data.clip_seconds, data.shots(c.data))[0])
                  for r in data.source(c.data, "en_test"))
    assert test["pool_clips"] == n_clips and 0 <= test["f1"] <= 1


def _tiny_model(head: str, chunk: int = 0, text_width: int = 64, remat: bool = False):
    from vnr.benchmarks.msymon.model import FrameAligner

    s = META["swin"]
    sw = swin.SwinConfig(image_size=s["img_size"], embed_dim=s["embed_dim"],
                         depths=tuple(s["depths"]), num_heads=tuple(s["num_heads"]),
                         window_size=s["window_size"])
    tc = cclm.TextConfig(vocab_size=40, hidden_size=text_width, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=20)
    return FrameAligner(sw, tc, head=head, embed=16, chunk=chunk, remat=remat,
                        rngs=nnx.Rngs(0))


def test_a_clip_is_the_mean_of_its_frames_features_and_a_sentence_its_cls():
    """head="none" (the paper's v_i, t_i): the unit mean of the frames' Swin features and
    the unit [CLS] state; evaluation in chunks of clips (jitted, a model whose Swin blocks
    recompute activations for training) gives the same vectors."""
    from vnr.benchmarks.msymon.model import frame_features

    model = _tiny_model("none")
    rng = np.random.default_rng(0)
    clips = rng.integers(0, 256, (2, 5, 3, 64, 64, 3), np.uint8)
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], bool)
    tokens = np.array([[[0, 5, 9, 2, 1], [0, 7, 2, 1, 1]]], np.int32)

    @nnx.jit
    def forward(m, x, k, tok):  # one program for every model call below
        return (m.encode_clips(x, k, train=False), frame_features(m.swin, x, False),
                m.encode_sentences(tok, tok != 1, train=False),
                m.text(tok[0], (tok[0] != 1).astype(np.int32)).last_hidden_state)

    v, per_frame, t, cls = map(np.asarray, forward(model, clips, mask, tokens))
    want = per_frame.mean(2)
    want /= np.linalg.norm(want, axis=-1, keepdims=True)
    np.testing.assert_allclose(v[mask], want[mask], atol=1e-5)
    assert not v[~mask].any()
    chunked = _tiny_model("none", chunk=2, remat=True)
    nnx.update(chunked, nnx.state(model))
    encode = nnx.jit(lambda m, x, k: m.encode_clips(x, k, train=False))
    np.testing.assert_allclose(np.asarray(encode(chunked, clips, mask)), v, atol=1e-5)
    np.testing.assert_allclose(t[0], cls[:, 0] / np.linalg.norm(cls[:, 0], axis=-1,
                                                                 keepdims=True), atol=1e-5)


def test_unequal_widths_need_the_linear_head():
    with pytest.raises(ValueError, match="must be equal .or use model.cclm_head='linear'"):
        _tiny_model("none", text_width=16)
    m = _tiny_model("linear", text_width=16)
    assert m.clip_proj.kernel.shape == (64, 16) and m.text_proj.kernel.shape == (16, 16)


def test_videos_config_counts_missing_unreadable_and_short_videos(tmp_path):
    from tfds_builders import msymon

    root = synthetic.write_corpus(tmp_path / "release", seed=1, dim=8, languages=("en",),
                                  sizes={"train": 4, "val": 1, "test": 1, "weak": 0})
    frames.write_videos(root, fps=2.0, width=32, height=32)
    vids = sorted(p.stem for p in (root / "videos").glob("*.mp4"))
    (root / "videos" / f"{vids[0]}.mp4").unlink()
    (root / "videos" / f"{vids[1]}.mp4").write_bytes(b"not a video")
    sv.write(root / "videos" / f"{vids[2]}.mp4", np.arange(4) / 2.0, width=32, height=32)
    builder = msymon.prepare("videos", tmp_path / "tfds", root)
    summary = json.loads((pathlib.Path(builder.data_dir) / "build_summary.json").read_text())
    skipped = summary["skipped"]
    assert (skipped["missing_video"], skipped["unreadable_video"],
            skipped["video_too_short"]) == (1, 1, 1)
    kept = [r for s in msymon.split_names("videos", tmp_path / "tfds", root)
            for r in msymon.data_source("videos", s, tmp_path / "tfds", root)]
    assert {r["video_id"] for r in kept} == set(vids[3:])
    for r in kept:
        assert r["video_file"] == f"{r['video_id']}.mp4"
        assert r["duration"] == pytest.approx(len(np.load(root / "features" /
                                                          f"{r['video_id']}.npy")), abs=0.5)


def test_the_defaults_are_cclm_base():
    """`cclm`'s declared sizes are the released model's (the port's key-set test checks
    SWIN_B_224 against upstream's Swin-B keys; the text defaults are XLM-R large's widths
    and CCLM's 6 text layers), and the paper's head compares the two 1024-d features."""
    c = get_config("individual:en,paper,cclm")
    sw, tc = frames.tower_configs(c)
    assert sw == swin.SWIN_B_224 and tc == cclm.TextConfig()
    assert (c.model.cclm_head, c.data.max_tokens, c.data.frames.per_clip) == ("none", 40, 3)
    model = nnx.eval_shape(lambda: frames.make_model(c, nnx.Rngs(0)))
    n = sum(int(np.prod(v.shape)) for v in jax.tree.leaves(nnx.state(model.swin, nnx.Param)))
    assert n == 86_743_224 and model.clip_proj is None
    assert model.text.embeddings.word_embeddings.embedding.shape == (250002, 1024)


def test_paper_rows_cut_shots_from_the_cuts_files(release, tmp_path):
    """Appendix A: clips are the shots between the hard cuts of cuts/<id>.txt (what
    `vnr.extract --model transnetv2` writes); `grid` keeps the 3-s clips as our option."""
    c = tiny_config(release, tmp_path)
    assert c.data.clips == "shots" and get_config("individual:en,cclm,grid").data.clips == "grid"
    root = pathlib.Path(c.data.manual_dir)
    rec = data.source(c.data, "en_test")[0]
    cuts = np.loadtxt(root / "cuts" / f"{rec['video_id']}.txt", ndmin=1)
    cb, ce = data.cut_clips(rec, c.data.clip_seconds, data.shots(c.data))
    np.testing.assert_allclose(cb, np.concatenate([[0.0], cuts]), atol=1e-3)
    np.testing.assert_allclose(ce, np.concatenate([cuts, [rec["duration"]]]), atol=1e-3)
    assert len(cb) != len(data.cut_clips(rec, 3.0)[0])  # not the grid
    bare = {k: v for k, v in rec.items() if k not in ("shot_begin", "shot_end")}
    with pytest.raises(ValueError, match="has no shots: its cuts/<id>.txt") as e:
        data.cut_clips(bare, 3.0, True)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="data.clips='scenes'"):
        data.shots({"clips": "scenes"})


def test_cuts_outside_the_video_and_missing_cuts_files_are_counted(tmp_path):
    from tfds_builders.msymon import msymon as builder

    root = tmp_path / "r"
    (root / "cuts").mkdir(parents=True)
    (root / "cuts" / "a.txt").write_text("0\n1.5\n3.0\n9.5\n")
    counts = __import__("collections").Counter()
    v = builder._shots(root, {"video_id": "a", "duration": 4.0}, counts)
    np.testing.assert_allclose(v["shot_begin"], [0.0, 1.5, 3.0])
    np.testing.assert_allclose(v["shot_end"], [1.5, 3.0, 4.0])
    assert counts["cuts:outside_video"] == 2  # 0 and 9.5
    w = builder._shots(root, {"video_id": "b", "duration": 4.0}, counts)
    assert counts["kept_without_cuts"] == 1 and len(w["shot_begin"]) == 0


def test_clips_shorter_than_three_frames_are_counted_in_one_line(release):
    """A 2-frame shot cannot give 3 distinct frames: counted and named (kept, #41)."""
    root = release[0]
    video = sorted((root / "videos").glob("*.mp4"))[0]
    cut = {"a": (np.array([0.0, 0.5]), np.array([0.5, 3.0])),  # 2 frames, then 10 at 4 fps
           "b": (np.array([0.0]), np.array([2.0]))}
    prep = frames._Prepare(str(root / "videos"), lambda rec, s: cut[rec["video_id"]], 3.0, 9,
                           frames.resize(tiny_config(release, None).data), "shown")
    recs = [{"video_id": k, "video_file": video.name} for k in cut]
    assert frames.short_clips(recs, prep, 3) == (
        "1 of 3 clips are shorter than 3 frames, so their 3 frames repeat (kept); the first: "
        "a clip 0 [0.000, 0.500) s at 4 fps")
    assert frames.short_clips(recs[1:], prep, 3) == ""


def test_paper_rows_augment_training_frames_only(monkeypatch):
    """§6.1's random augmentation (`paper` + `cclm`: CCLM's training transform) reaches every
    training frame and no evaluation frame; without `paper` it is off."""
    from vnr.benchmarks.msymon.model import FrameAligner

    assert get_config("individual:en,paper,cclm").data.frames.augment == "cclm"
    assert get_config("individual:en,cclm").data.frames.augment == "none"
    seen = []  # the frames the Swin side receives (the towers are not run here)
    monkeypatch.setattr(FrameAligner, "encode_clips",
                        lambda self, x, mask, train: seen.append(np.asarray(x)))
    monkeypatch.setattr(FrameAligner, "encode_sentences", lambda *a, **k: None)
    model = _tiny_model("linear")
    model.augment = "cclm"
    frames_in = np.random.default_rng(0).integers(0, 256, (2, 4, 3, 64, 64, 3), np.uint8)
    batch = {"frames": frames_in, "clip_mask": np.ones((2, 4), bool),
             "tokens": np.zeros((2, 2, 5), np.int32), "token_mask": np.ones((2, 2, 5), bool)}
    model(batch, train=False, rngs=None)
    model(batch, train=True, rngs=nnx.Rngs(dropout=0))
    model.augment = "none"
    model(batch, train=True, rngs=nnx.Rngs(dropout=0))
    evaluated, augmented, plain = seen
    np.testing.assert_array_equal(evaluated, frames_in)
    np.testing.assert_array_equal(plain, frames_in)
    assert augmented.shape == frames_in.shape and augmented.dtype == np.uint8
    changed = (augmented != frames_in).reshape(24, -1).any(axis=1)
    assert changed.mean() > 0.8  # cropped, resized, flipped: rarely the whole frame as it was


def test_paper_epochs_become_steps_of_the_built_train_split(release, tmp_path):
    """§6.1's 20 epochs, an epoch seeing the training split's clips once in expectation:
    total_steps = ceil(20 x draws / batch), draws = videos x mean clips / mean min(clips,
    max_clips) (one random window a draw); the trainer's validator runs at least once an
    epoch, so a small annotated split still selects."""
    c = tiny_config(release, tmp_path)
    c.update(epochs=20, eval_every=500, ckpt_every=500, total_steps=3000)  # the config's
    assert c.select.metric == "val/f1"
    s = train.setup(c, abstract=True)
    recs = data.source(c.data, c.data.train_split)
    clips = np.array([len(data.cut_clips(recs[i], c.data.clip_seconds, True)[0])
                      for i in range(len(recs))])
    assert len(clips) == SIZES["train"] and clips.max() > c.data.max_clips  # windows < video
    draws = len(clips) * clips.mean() / np.minimum(clips, c.data.max_clips).mean()
    assert c.total_steps == int(np.ceil(20 * draws / c.batch_size))
    epoch = int(np.ceil(draws / c.batch_size))
    assert c.eval_every == c.evals.val.every == epoch and c.ckpt_every == 500
    assert {e.name: e.every for e in s.evaluators}["val"] == epoch
    assert get_config("individual:en,paper,cclm").epochs == 20
    c.data.frames.augment = "flip"
    with pytest.raises(ValueError, match="data.frames.augment='flip'") as e:
        task.validate(c)
    assert "\n" not in str(e.value)
