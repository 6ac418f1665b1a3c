"""CCLM's Swin image tower and text encoder (vnr.models.encoders.swin / cclm) against upstream
PyTorch (zengyan-97/CCLM).

Golden files (tests/golden/make_swin.py, run by hand with torch): upstream's SwinTransformer
built as CCLM builds it but small (64x64 images, width 8, depths (2, 3, 2, 2), window 4:
shifted windows with masks, a one-window stage and a shrunk window), xbert's text encoder
(4 layers, 2 of them fusion layers), random weights, saved as CCLM saves a checkpoint
(`model_state_epoch_0.th`: {"model": state dict with CCLM's prefixes and buffers, "config"}),
their outputs, and the full-size Swin-B's {key: shape}."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import cclm, swin, torch_checkpoint
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "swin"
CKPT = GOLDEN / "model_state_epoch_0.th"
META = json.loads((GOLDEN / "meta.json").read_text())
S = META["swin"]
TINY = swin.SwinConfig(image_size=S["img_size"], embed_dim=S["embed_dim"],
                       depths=tuple(S["depths"]), num_heads=tuple(S["num_heads"]),
                       window_size=S["window_size"])
RTOL = 1e-4  # of the output's largest magnitude, float32


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return torch_checkpoint.read_torch_checkpoint(CKPT)


@pytest.fixture(scope="module")
def model() -> swin.SwinTransformer:
    return cclm.swin_from_checkpoint(CKPT, cfg=TINY)


@nnx.jit
def _encode(m: swin.SwinTransformer, images: jax.Array):
    return m(images)


def images_of(golden: dict) -> np.ndarray:
    return golden["images"].transpose(0, 2, 3, 1)  # upstream's [B, 3, H, W] -> channels-last


def test_parity_with_upstream(model, golden):
    out = _encode(model, images_of(golden))
    ref = golden["image_embeds"]
    got = np.asarray(out.last_hidden_state)
    assert got.shape == ref.shape == (2, 1 + 4, TINY.num_features)
    diff = float(np.abs(got - ref).max())
    print(f"image_embeds: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
    assert diff <= RTOL * float(np.abs(ref).max())
    np.testing.assert_array_equal(np.asarray(out.pooled), got[:, 0])
    np.testing.assert_allclose(got[:, 0], got[:, 1:].mean(axis=1), atol=1e-5)


def test_bfloat16_compute_float32_params(golden):
    bf16 = cclm.swin_from_checkpoint(CKPT, cfg=TINY, dtype=jnp.bfloat16, remat=True)
    params = jax.tree.leaves(nnx.state(bf16, nnx.Param))
    assert {p.dtype for p in params} == {jnp.dtype(jnp.float32)}
    got = np.asarray(_encode(bf16, images_of(golden)).last_hidden_state, np.float32)
    ref = golden["image_embeds"]
    assert np.abs(got - ref).max() <= 0.05 * np.abs(ref).max()  # measured 0.017


def test_keys_match_the_full_upstream_state_dict():
    full = {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}
    assert cclm.swin_shapes() == full
    params = {k: v for k, v in full.items() if not k.endswith(("_index", "attn_mask"))}
    assert sum(int(np.prod(s)) for s in params.values()) == 86_743_224
    assert full["vision_encoder.layers.2.blocks.17.attn.relative_position_bias_table"] == (169, 16)
    assert "vision_encoder.layers.3.blocks.1.attn_mask" not in full  # 7x7: one window


def test_derived_buffers_match_upstream(tensors):
    for key, want in swin.buffer_shapes(TINY, cclm.VISION_PREFIX).items():
        got = tensors[key]
        block = key.split(".")
        stage, index = int(block[2]), int(block[4])
        w = TINY.window(stage)
        if key.endswith("relative_position_index"):
            np.testing.assert_array_equal(got, swin.relative_position_index(w))
        else:
            np.testing.assert_array_equal(got, swin.shift_mask(
                TINY.resolution(stage), w, TINY.shift(stage, index)))
        assert got.shape == want


def load_error(monkeypatch, tensors: dict, loader=None) -> str:
    """The loader's error when the file holds `tensors`."""
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", lambda path: tensors)
    with pytest.raises(CheckpointError) as e:
        (loader or (lambda p: cclm.swin_from_checkpoint(p, cfg=TINY)))("/ckpt/cclm.th")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("/ckpt/cclm.th: ")
    return msg


def test_missing_key(monkeypatch, tensors):
    key = "vision_encoder.layers.1.blocks.2.attn.qkv.bias"
    bad = {k: v for k, v in tensors.items() if k != key}
    assert f"missing key {key!r} (shape (48,))" in load_error(monkeypatch, bad)


def test_wrong_shape(monkeypatch, tensors):
    key = "vision_encoder.layers.0.downsample.reduction.weight"
    bad = {**tensors, key: np.zeros((16, 16), np.float32)}
    assert f"key {key!r} has shape (16, 16), the Swin image tower expects (16, 32)" in (
        load_error(monkeypatch, bad))


def test_other_window_size_is_refused(monkeypatch, tensors):
    key = "vision_encoder.layers.0.blocks.0.attn.relative_position_bias_table"
    bad = {**tensors, key: np.zeros((169, 1), np.float32)}
    assert f"key {key!r} has shape (169, 1)" in load_error(monkeypatch, bad)


def test_wrong_buffer_shape(monkeypatch, tensors):
    key = "vision_encoder.layers.0.blocks.1.attn_mask"
    bad = {**tensors, key: np.zeros((4, 16, 16), np.float32)}
    assert f"key {key!r} has shape (4, 16, 16), the Swin image tower expects (16, 16, 16)" in (
        load_error(monkeypatch, bad))


def test_unexpected_key(monkeypatch, tensors):
    bad = {**tensors, "vision_encoder.head.weight": np.zeros((10, 64), np.float32)}
    msg = load_error(monkeypatch, bad)
    assert "unexpected key 'vision_encoder.head.weight' (shape (10, 64))" in msg


def test_buffers_are_optional(tensors):
    bare = {k: v for k, v in tensors.items() if not k.endswith(("_index", "attn_mask"))}
    arrays = cclm.match_swin(bare, TINY, "x")
    assert arrays["patch_embed.proj.kernel"].shape == (4, 4, 3, 8)


def test_not_a_cclm_checkpoint(monkeypatch):
    s3d = {"conv1.conv1.weight": np.zeros((64, 24, 2, 4, 4), np.float32)}
    msg = load_error(monkeypatch, s3d)
    assert "not a CCLM checkpoint" in msg and "'vision_encoder.'" in msg


def test_wrong_image_size_is_refused(model):
    with pytest.raises(ValueError, match="64x64x3"):
        model(np.zeros((1, 32, 32, 3), np.float32))


def test_config_checks():
    with pytest.raises(ValueError, match="not divisible by window"):
        swin.SwinConfig(image_size=96, window_size=7).check()


def test_shift_mask_regions():
    m = swin.shift_mask(8, 4, 2)  # 2x2 windows; the last row/column band wraps around
    assert m.shape == (4, 16, 16) and not m[0].any() and set(np.unique(m)) == {0.0, -100.0}


# ----------------------------------------------------------------------------- text tower


def test_text_tower_parity(golden):
    if "text_hidden" not in golden:
        pytest.skip("the fixture was made without transformers")
    t = META["text"]
    text = cclm.text_from_checkpoint(CKPT, heads=t["num_attention_heads"])
    assert len(text.encoder.layer) == t["fusion_layer"]
    out = text(jnp.asarray(golden["text_ids"]), jnp.asarray(golden["text_mask"]))
    ref = golden["text_hidden"]
    got = np.asarray(out.last_hidden_state)
    diff = float(np.abs(got - ref).max())
    print(f"text_hidden: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
    assert diff <= RTOL * float(np.abs(ref).max())
    np.testing.assert_array_equal(np.asarray(out.pooled), got[:, 0])


def test_text_config_from_the_checkpoint(tensors):
    cfg = cclm.text_config(tensors, heads=2)
    t = META["text"]
    assert (cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size) == (
        t["vocab_size"], t["hidden_size"], t["intermediate_size"])
    assert cfg.num_hidden_layers == t["fusion_layer"] and cfg.max_position_embeddings == 20


def test_text_tower_missing_key(monkeypatch, tensors):
    key = "text_encoder.bert.encoder.layer.1.output.dense.bias"
    bad = {k: v for k, v in tensors.items() if k != key}
    msg = load_error(monkeypatch, bad, lambda p: cclm.text_from_checkpoint(p, heads=2))
    assert f"missing key {key!r} (shape (16,))" in msg
