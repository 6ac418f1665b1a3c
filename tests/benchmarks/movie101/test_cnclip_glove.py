"""Table 4's CNCLIP (Chinese-CLIP on shot frames, `tng_cnclip`) and Table 5's 2D-TAN on
GloVe-format word vectors (`tng_glove`): segmentation, the bad-file errors, the models and
the row configs (both rows end to end on the generated corpus: their smoke runs,
tests/reproduce/test_smoke_movie101.py)."""

from __future__ import annotations

import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs.movie101 import tng as tng_config
from vnr.benchmarks.movie101 import tng, tng_cnclip, tng_glove
from vnr.benchmarks.movie101.tng_model import TAN2D


def test_segment_longest_match_latin_words_and_candidates() -> None:
    vocab = {"老李", "小猫", "房间", "走进"}
    got = tng_glove.segment("老李走进房间，看着小猫。Tom Walks 2 DOORS!", vocab, 4)
    assert got == ["老李", "走进", "房间", "看", "着", "小猫", "tom", "walks", "2", "doors"]
    assert tng_glove.segment("老李走", set(), 4) == ["老", "李", "走"]  # a character file
    cands = tng_glove.candidates(["老李走进", "Hi there"], 2)
    assert cands == {"老", "李", "走", "进", "老李", "李走", "走进", "hi", "there"}


def _glove_config(tmp: pathlib.Path, vectors: str) -> object:
    c = tng_config.get_config("smoke,tan2d,glove")
    c.data.data_dir = str(tmp / "tfds")
    c.data.word_vectors = vectors
    c.progress = False
    return c


@pytest.mark.parametrize("bad", ["width", "config_dim", "duplicate"])
def test_bad_vector_file_stops_in_one_line_naming_it(tmp_path, bad) -> None:
    from vnr import train

    path = tmp_path / "vectors.txt"
    tng_glove.write_smoke_vectors(path, dim=8 if bad == "config_dim" else 16)
    lines = path.read_text().splitlines()
    if bad == "width":
        lines[3] += " 0.5"
    if bad == "duplicate":
        lines.append(lines[1])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception) as err:
        train.run(_glove_config(tmp_path, str(path)), str(tmp_path / "work"))
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    want = {"width": "17 values", "config_dim": "data.word_dim is 16",
            "duplicate": "again on line"}[bad]
    assert want in message
    assert not (tmp_path / "work" / "checkpoints").exists()  # before training started


def test_glove_config_needs_its_file_and_the_2d_tan_row() -> None:
    c = tng_config.get_config("v1,tan2d,glove")
    assert (c.model.text, c.model.text_layers, c.model.width) == ("glove", 3, 512)
    assert (c.data.word_dim, c.batch_size, c.lr) == (300, 64, 1e-4)
    c.data.manual_dir = "/x"
    with pytest.raises(ValueError, match="needs data.word_vectors"):
        tng.validate(c)
    c = tng_config.get_config("v1,tan2d")  # the old option: one layer on hashed words
    assert c.model.get("text", "hashed") == "hashed" and "word_vectors" not in c.data
    c.data.update(manual_dir="/x", word_vectors="/v.txt")
    with pytest.raises(ValueError, match="2D-TAN row only"):
        tng.validate(c)
    with pytest.raises(ValueError, match="add tan2d"):
        tng_config.get_config("glove")


def test_tan2d_reads_word_vectors_through_three_lstm_layers() -> None:
    model = TAN2D(frame_dim=6, vocab=40, width=8, layers=2, kernel=3, rngs=nnx.Rngs(0),
                  word_dim=5, text_layers=3)
    assert len(model.lstms) == 3 and model.embed is None
    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]], bool)
    words = rng.normal(size=(2, 6, 5)).astype(np.float32) * mask[..., None]
    b = {"clips": jnp.asarray(rng.normal(size=(2, 5, 6)), jnp.float32),
         "words": jnp.asarray(words), "word_mask": jnp.asarray(mask)}
    call = nnx.jit(lambda mdl, x: mdl(x))
    s = np.asarray(call(model, b))
    padded = dict(b, words=b["words"].at[0, 4].set(7.0))  # behind the mask: no effect
    np.testing.assert_allclose(np.asarray(call(model, padded)), s, rtol=1e-5, atol=1e-5)
    changed = dict(b, words=b["words"].at[0, 1].add(1.0))
    valid = np.triu(np.ones((5, 5), bool))
    assert not np.allclose(np.asarray(call(model, changed))[0][valid], s[0][valid])


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory) -> str:
    return tng_cnclip.smoke_checkpoint(tmp_path_factory.mktemp("cnclip") / "ckpt")


def test_chinese_clip_tokenizer_puts_each_character_on_its_own(tiny_clip) -> None:
    from vnr.models.encoders import tokenizers

    ids, mask = tokenizers.encode(tiny_clip, ["老李看着小猫", "walk"], 10)
    tok = tokenizers.load_tokenizer(tiny_clip)
    assert tok.convert_ids_to_tokens(ids[0][:8].tolist()) == [
        "[CLS]", "老", "李", "看", "着", "小", "猫", "[SEP]"]
    assert tok.convert_ids_to_tokens(ids[1][:6].tolist()) == [
        "[CLS]", "w", "##a", "##l", "##k", "[SEP]"]  # WordPiece on Latin words
    assert mask[0].sum() == 8 and mask[1].sum() == 6
    assert ids.max() < 100  # the tiny tower's vocabulary


def test_cnclip_pools_frame_features_and_takes_the_checkpoints_scale(tiny_clip) -> None:
    from vnr.models.encoders import videomae

    model = tng_cnclip.CNCLIPRetrieval(tiny_clip, rngs=nnx.Rngs(0))
    tensors, _ = videomae.read_tensors(pathlib.Path(tiny_clip))
    assert float(model.logit_scale[...]) == pytest.approx(float(tensors["logit_scale"]))
    assert float(model.scale()) <= 100.0 + 1e-3
    rng = np.random.default_rng(0)
    frames = jnp.asarray(rng.integers(0, 256, (2, 3, 16, 16, 3)), jnp.uint8)
    mask = jnp.asarray([[1, 1, 0], [1, 1, 1]], bool)
    shots = nnx.jit(lambda mdl, f, m: mdl.shots(f, m))
    v = np.asarray(shots(model, frames, mask))
    np.testing.assert_allclose(np.linalg.norm(v, axis=-1), 1.0, rtol=1e-5)
    other = frames.at[0, 2].set(0)  # the masked frame does not count
    np.testing.assert_allclose(np.asarray(shots(model, other, mask)), v, atol=1e-6)
    one = frames[:, :2].at[1].set(frames[0, :2])  # frame 0 and 1 of shot 0, twice
    np.testing.assert_allclose(np.asarray(shots(model, one, jnp.ones((2, 2), bool))),
                               v[[0, 0]], atol=1e-5)


def test_cnclip_reads_upstreams_training_checkpoint(tmp_path) -> None:
    """model.cnclip_weights: a Chinese-CLIP training checkpoint (the layout of upstream's
    fine-tuned cnclip-huge-movie101.pt, the `cn_clip` port) into the directory's towers."""
    import shutil

    import jax

    from vnr import pretrained, sharding
    from vnr.models.encoders import cn_clip

    golden = pathlib.Path(__file__).resolve().parents[2] / "golden" / "cn_clip"
    ckpt = tmp_path / "arch"  # the architecture: a Hugging Face directory
    shutil.copytree(golden / "hf", ckpt)
    (ckpt / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "ChineseCLIPImageProcessor", "size": {"height": 16,
         "width": 16}, "do_center_crop": False, "image_mean": [0.48, 0.46, 0.41],
         "image_std": [0.27, 0.26, 0.28]}))
    (ckpt / "vocab.txt").write_text("\n".join(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(95))]) + "\n")
    c = tng_config.get_config("cnclip,smoke")
    c.model.update(cnclip=str(ckpt), cnclip_weights=str(golden / "epoch_latest.pt"))
    assert tng_cnclip.sources(c) == {p: (str(golden / "epoch_latest.pt"), "cn_clip")
                                     for p in ("text", "vision")}
    model = tng_cnclip.make_model(c, nnx.Rngs(0))
    want, _ = cn_clip.read_tensors(golden / "epoch_latest.pt")
    assert float(model.logit_scale[...]) == pytest.approx(float(want["logit_scale"]))
    state = nnx.state(model)
    mesh = sharding.make_mesh((1, 1), devices=jax.devices()[:1])
    loaded = pretrained.load(state, sharding.state_shardings(state, mesh),
                             tng_cnclip.sources(c), root=(), say=lambda m: None)
    nnx.update(model, loaded)
    with np.load(golden / "io.npz") as f:
        ids = f["input_ids"]
        text = model.text_features(ids, ids != 0)
        ref = f["text_features"] / np.linalg.norm(f["text_features"], axis=-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(text), ref, atol=1e-5)
    c.model.cnclip_weights = str(tmp_path / "missing.pt")
    c.data.videos = str(tmp_path)
    with pytest.raises(ValueError, match="cnclip_weights=.*no such file"):
        tng_cnclip.check(c)


def test_cnclip_row_config() -> None:
    c = tng_config.get_config("v1,rtemp,cnclip")
    assert c.stage == "global" and c.model.arch == "cnclip" and c.data.config == "v1_shots"
    assert (c.batch_size, c.lr, c.epochs) == (16, 2e-6, 1)  # Appendix C
    assert (c.data.frames.per_shot, c.data.frames.image_size, c.model.context_length) == (
        10, 224, 52)
    local = tng_config.get_config("v1")  # Table 6's tool compares the two runs' data keys
    assert (c.data.vocab_size, c.data.max_tokens) == (local.data.vocab_size,
                                                      local.data.max_tokens)
    assert (c.b2, c.eps, c.weight_decay, c.grad_clip) == (0.98, 1e-6, 0.001, 0.0)
    c.data.manual_dir = "/nowhere"
    with pytest.raises(ValueError, match="needs model.cnclip"):
        tng.validate(c)
    c.model.cnclip = "/nowhere/ckpt"
    with pytest.raises(ValueError, match="no such directory"):
        tng.validate(c)


def test_cnclip_row_needs_its_videos_directory(tmp_path, tiny_clip) -> None:
    from vnr import train

    c = tng_config.get_config("cnclip,smoke")
    c.data.data_dir = str(tmp_path / "tfds")
    c.model.cnclip = tiny_clip
    c.data.videos = str(tmp_path / "none")
    c.progress = False
    with pytest.raises(Exception, match="no such directory"):
        train.run(c, str(tmp_path / "w0"))


# test_cnclip_row_trains_on_stored_shot_frames: tests/reproduce/test_smoke_movie101.py
# test_glove_row_trains: tests/reproduce/test_smoke_movie101.py
