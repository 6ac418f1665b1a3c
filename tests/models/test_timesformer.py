"""TimeSformer (vnr.models.encoders.timesformer) against Hugging Face's PyTorch TimeSformer.

Golden files (tests/golden/make_video_vits.py, run by hand with torch and transformers): a
tiny random `TimesformerForVideoClassification` (divided space-time attention, 3 frames of
32x32, patch 8) saved with `save_pretrained` as `model.safetensors`, its encoder output and
logits on random clips, and the full-size facebook/timesformer-base-finetuned-k400 state
dict's {key: shape}."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tests.models.test_videomae import close, with_config
from vnr.models.encoders import timesformer as tf
from vnr.models.encoders import videomae
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "timesformer"
META = json.loads((GOLDEN / "meta.json").read_text())
FAKE = Path("/ckpt/model.safetensors")


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def clips(golden) -> np.ndarray:
    return golden["pixel_values"].transpose(0, 1, 3, 4, 2)  # [B, T, 3, H, W] -> channels-last


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return videomae.read_tensors(GOLDEN)[0]


@pytest.fixture(scope="module")
def model() -> tf.TimesformerModel:
    return tf.from_pretrained(GOLDEN)


@nnx.jit(static_argnames="deterministic")
def forward(model, clips, deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    """(last hidden state, pooled) of `model` on `clips`: one program per model."""
    out = model(clips, deterministic=deterministic)
    return out.last_hidden_state, out.pooled


def test_parity_with_upstream(model, golden, clips, tensors):
    hidden, pooled = forward(model, clips)
    close(hidden, golden["hidden"], "hidden")
    np.testing.assert_array_equal(np.asarray(pooled), np.asarray(hidden[:, 0]))
    # The classifier (skipped by the loader) reads the pooled cls token.
    logits = np.asarray(pooled) @ tensors["classifier.weight"].T + tensors["classifier.bias"]
    close(logits, golden["logits"], "logits")


def test_bfloat16_compute_float32_params(golden, clips):
    bf16 = tf.from_pretrained(GOLDEN, dtype=jnp.bfloat16)
    params = jax.tree.leaves(nnx.state(bf16, nnx.Param))
    assert {p.dtype for p in params} == {jnp.dtype(jnp.float32)}
    out = forward(bf16, clips)[0]
    assert out.dtype == jnp.bfloat16
    close(out, golden["hidden"], "bf16 hidden", rtol=0.05)


def test_keys_match_the_full_checkpoint():
    full = {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}
    fields = tf.TimesformerConfig.__dataclass_fields__
    cfg = tf.TimesformerConfig(**{f: v for f, v in META["full"].items() if f in fields})
    assert cfg == tf.TIMESFORMER_BASE_K400
    ours = videomae.upstream_shapes(lambda rngs: tf.TimesformerModel(cfg, rngs=rngs),
                                    "timesformer.")
    assert ours == {k: v for k, v in full.items() if not k.startswith(tf.HEADS)}
    assert set(full) - set(ours) == {"classifier.weight", "classifier.bias"}
    assert ours["timesformer.embeddings.time_embeddings"] == (1, 8, 768)
    assert ours["timesformer.embeddings.position_embeddings"] == (1, 197, 768)
    assert ours["timesformer.encoder.layer.11.temporal_attention.attention.qkv.weight"] == (
        2304, 768)


def load_error(monkeypatch, tensors: dict, directory: Path = GOLDEN) -> str:
    """The loader's error when the checkpoint file holds `tensors`."""
    monkeypatch.setattr(tf, "read_tensors", lambda d: (tensors, FAKE))
    with pytest.raises(CheckpointError) as e:
        tf.from_pretrained(directory)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{FAKE}: "), msg
    return msg


def test_missing_key(monkeypatch, tensors):
    key = "timesformer.encoder.layer.1.temporal_dense.bias"
    msg = load_error(monkeypatch, {k: v for k, v in tensors.items() if k != key})
    assert f"missing tensor {key!r}" in msg


def test_wrong_shape(monkeypatch, tensors):
    key = "timesformer.encoder.layer.0.attention.attention.qkv.weight"
    msg = load_error(monkeypatch, {**tensors, key: np.zeros((32, 32), np.float32)})
    assert f"tensor {key!r} has shape (32, 32)" in msg and "(96, 32)" in msg


def test_unexpected_key(monkeypatch, tensors):
    key = "timesformer.embeddings.norm.weight"
    msg = load_error(monkeypatch, {**tensors, key: np.zeros((32,), np.float32)})
    assert f"unused tensor {key!r}" in msg


def one_line_error(directory: Path) -> str:
    with pytest.raises(CheckpointError) as e:
        tf.from_pretrained(directory)
    assert "\n" not in str(e.value) and str(directory / "model.safetensors") in str(e.value)
    return str(e.value)


def test_frame_count_disagrees_with_config(tmp_path):
    msg = one_line_error(with_config(tmp_path, GOLDEN, num_frames=8))
    assert "'timesformer.embeddings.time_embeddings' of shape (1, 3, 32)" in msg
    assert "3 frames" in msg and "num_frames=8" in msg


def test_patch_size_disagrees_with_config(tmp_path):
    msg = one_line_error(with_config(tmp_path, GOLDEN, patch_size=4))
    assert "8x8 patches" in msg and "patch_size=4" in msg


def test_image_size_disagrees_with_config(tmp_path):
    msg = one_line_error(with_config(tmp_path, GOLDEN, image_size=64))
    assert "16 patches per frame" in msg and "64/8 (64 patches)" in msg


def test_clip_frame_count_must_match(model, clips):
    with pytest.raises(ValueError, match=r"clip has 2 frames but the model's num_frames is 3"):
        model(clips[:, :2])


def test_only_divided_attention():
    with pytest.raises(ValueError, match="'joint_space_time' is not supported"):
        tf.TimesformerConfig(attention_type="joint_space_time").check()


def test_drop_path_only_in_training(model, clips, golden):
    m = nnx.clone(model)
    for layer in m.encoder.layer:
        layer.drop_path.rate = 0.5
    close(forward(m, clips)[0], golden["hidden"], "eval with drop path")
    b = np.asarray(forward(m, clips, deterministic=False)[0])
    assert not np.allclose(b, golden["hidden"], atol=1e-2)
