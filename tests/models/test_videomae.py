"""VideoMAE (vnr.models.encoders.videomae) against Hugging Face's PyTorch VideoMAE.

Golden files (tests/golden/make_video_vits.py, run by hand with torch and transformers): two
tiny random checkpoints saved with `save_pretrained` -- `VideoMAEForPreTraining` (final
layernorm, decoder to skip) as `model.safetensors` and `VideoMAEForVideoClassification`
(mean pooling + fc_norm) as `pytorch_model.bin` -- the encoder outputs on random clips, and
the full-size MCG-NJU/videomae-base state dict's {key: shape}."""

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import videomae as vm
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "videomae"
PRE, CLS = GOLDEN / "pretraining", GOLDEN / "classification"
META = json.loads((GOLDEN / "meta.json").read_text())
RTOL = 1e-5  # of the output's largest magnitude, float32
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
    return vm.read_tensors(PRE)[0]


def close(got: jax.Array, ref: np.ndarray, name: str, rtol: float = RTOL) -> None:
    got = np.asarray(got, np.float32)
    assert got.shape == ref.shape
    diff, scale = float(np.abs(got - ref).max()), float(np.abs(ref).max())
    print(f"{name}: max |diff| {diff:.3g} (max |ref| {scale:.3g}, rel {diff / scale:.3g})")
    assert diff <= rtol * scale


def test_pretraining_checkpoint_safetensors(golden, clips):
    model = vm.from_pretrained(PRE)
    assert model.layernorm is not None and model.fc_norm is None
    out = model(clips)
    close(out.last_hidden_state, golden["pretraining_hidden"], "pretraining hidden")
    assert out.pooler_output is None
    np.testing.assert_allclose(np.asarray(out.pooled),
                               golden["pretraining_hidden"].mean(axis=1), atol=1e-5)


def test_classification_checkpoint_torch_bin(golden, clips):
    assert not (CLS / "model.safetensors").exists() and (CLS / "pytorch_model.bin").is_file()
    model = vm.from_pretrained(CLS)
    assert model.layernorm is None and model.fc_norm is not None
    out = model(clips)
    close(out.last_hidden_state, golden["classification_hidden"], "classification hidden")
    close(out.pooled, golden["classification_pooled"], "fc_norm(mean)")
    assert out.pooler_output is out.pooled


def test_bfloat16_compute_float32_params(golden, clips):
    model = vm.from_pretrained(PRE, dtype=jnp.bfloat16)
    params = jax.tree.leaves(nnx.state(model, nnx.Param))
    assert {p.dtype for p in params} == {jnp.dtype(jnp.float32)}
    out = model(clips).last_hidden_state
    assert out.dtype == jnp.bfloat16
    close(out, golden["pretraining_hidden"], "bf16 hidden", rtol=0.05)


def test_keys_match_the_full_checkpoint():
    full = {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}
    cfg = vm.VideoMAEConfig(**{f: META["full"][f] for f in vm.VideoMAEConfig.__dataclass_fields__
                               if f in META["full"]})
    assert cfg == vm.VIDEOMAE_BASE
    ours = vm.upstream_shapes(lambda rngs: vm.VideoMAEModel(cfg, rngs=rngs), "videomae.")
    heads = {k: v for k, v in full.items() if k.startswith(vm.HEADS)}
    assert ours == {k: v for k, v in full.items() if k not in heads}
    assert ours["videomae.embeddings.patch_embeddings.projection.weight"] == (768, 3, 2, 16, 16)
    assert sum(int(np.prod(s)) for s in ours.values()) == 86_227_200
    assert "mask_token" in heads and "encoder_to_decoder.weight" in heads


def test_sinusoid_table():
    table = vm.sinusoid_table(7, 6)
    assert table.shape == (7, 6) and table.dtype == np.float32
    np.testing.assert_allclose(table[3, 2], np.sin(3 / 10000 ** (2 / 6)), rtol=1e-6)
    np.testing.assert_allclose(table[3, 5], np.cos(3 / 10000 ** (4 / 6)), rtol=1e-6)


def load_error(monkeypatch, tensors: dict, directory: Path = PRE) -> str:
    """The loader's error when the checkpoint file holds `tensors`."""
    monkeypatch.setattr(vm, "read_tensors", lambda d: (tensors, FAKE))
    with pytest.raises(CheckpointError) as e:
        vm.from_pretrained(directory)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{FAKE}: "), msg
    return msg


def test_missing_key(monkeypatch, tensors):
    key = "videomae.encoder.layer.1.attention.attention.q_bias"
    msg = load_error(monkeypatch, {k: v for k, v in tensors.items() if k != key})
    assert f"missing tensor {key!r}" in msg and "more problems" not in msg


def test_wrong_shape(monkeypatch, tensors):
    key = "videomae.encoder.layer.0.intermediate.dense.weight"
    msg = load_error(monkeypatch, {**tensors, key: np.zeros((32, 32), np.float32)})
    assert f"tensor {key!r} has shape (32, 32)" in msg and "(64, 32)" in msg


def test_unexpected_key(monkeypatch, tensors):
    key = "videomae.pooler.dense.weight"
    msg = load_error(monkeypatch, {**tensors, key: np.zeros((4, 4), np.float32)})
    assert f"unused tensor {key!r}" in msg


def test_not_a_videomae_checkpoint(monkeypatch):
    msg = load_error(monkeypatch, {"conv1.weight": np.zeros((4, 3, 3, 3), np.float32)})
    assert "missing tensor" in msg and "more problems" in msg


def with_config(tmp_path: Path, source: Path = PRE, **changes) -> Path:
    """A copy of a fixture checkpoint with `config.json` fields changed."""
    shutil.copytree(source, tmp_path / "ckpt")
    cfg = json.loads((source / "config.json").read_text())
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({**cfg, **changes}))
    return tmp_path / "ckpt"


def one_line_error(directory: Path) -> str:
    with pytest.raises(CheckpointError) as e:
        vm.from_pretrained(directory)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_tubelet_size_disagrees_with_config(tmp_path):
    msg = one_line_error(with_config(tmp_path, tubelet_size=1))
    assert "tubelets of 2 frames" in msg and "tubelet_size=1" in msg
    assert str(tmp_path / "ckpt" / "model.safetensors") in msg


def test_patch_size_disagrees_with_config(tmp_path):
    msg = one_line_error(with_config(tmp_path, CLS, patch_size=4))
    assert "8x8 patches" in msg and "patch_size=4" in msg and "pytorch_model.bin" in msg


def test_clip_frame_count_must_match(clips):
    model = vm.from_pretrained(PRE)
    with pytest.raises(ValueError, match=r"clip has 2 frames but the model's num_frames is 4"):
        model(clips[:, :2])
    with pytest.raises(ValueError, match="32x32x3"):
        model(clips[:, :, :16])


def test_missing_files(tmp_path):
    (tmp_path / "config.json").write_text((PRE / "config.json").read_text())
    assert "no model.safetensors or pytorch_model.bin" in one_line_error(tmp_path)
    (tmp_path / "config.json").unlink()
    assert "no config.json" in one_line_error(tmp_path)


def test_config_checks():
    with pytest.raises(ValueError, match="tubelet_size"):
        vm.VideoMAEConfig(num_frames=15).check()
