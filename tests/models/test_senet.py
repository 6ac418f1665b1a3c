"""SENet (vnr.models.encoders.senet) against Cadene's PyTorch SENet (pretrained-models.pytorch).

Golden files (tests/golden/make_senet.py, run by hand with torch): upstream's network with
narrow widths and SENet-154's structure on random weights, eval-mode batch norm, saved as a
plain state dict; its pooled features and logits on two inputs; and the full-size SENet-154
state dict's {key: shape}."""

import dataclasses
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import loading, senet, torch_checkpoint

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "senet"
META = json.loads((GOLDEN / "meta.json").read_text())
SMALL = senet.SENetConfig(**{k: tuple(v) if isinstance(v, list) else v
                             for k, v in META["small"].items()})
WEIGHTS = GOLDEN / "senet_small.pth"


@pytest.fixture(scope="module")
def model() -> senet.SENet:
    return senet.from_checkpoint(WEIGHTS, cfg=SMALL)


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.mark.parametrize("name", list(META["inputs"]))
def test_parity_with_cadene(model, golden, name):
    x = golden[f"{name}_images"].astype(np.float32) / np.float32(255)
    mean = np.array(META["mean"], np.float32)[:, None, None]
    std = np.array(META["std"], np.float32)[:, None, None]
    x = ((x - mean) / std).transpose(0, 2, 3, 1)
    out = nnx.jit(lambda m, v: m(v))(model, jnp.asarray(x))
    for field in ("pooled", "logits"):
        ref, got = golden[f"{name}_{field}"], np.asarray(getattr(out, field))
        assert got.shape == ref.shape, field
        diff = float(np.abs(got - ref).max())
        print(f"senet {name} {field}: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
        assert diff <= 1e-5 * max(1.0, float(np.abs(ref).max())), (field, diff)


def test_keys_match_senet154():
    full = json.loads((GOLDEN / "full_keys.json").read_text())
    want = {k: tuple(v) for k, v in senet.cadene_tensors(full).items()}
    shapes = loading.param_shapes(lambda r: senet.SENet(senet.SENET154, r))
    ours = {loading.torch_key(k): loading.torch_shape(k, s) for k, s in shapes.items()}
    assert ours == want
    assert shapes["layer3.35.conv2.kernel"] == (3, 3, 8, 1024)  # 64 groups of 8 channels in
    assert shapes["layer4.0.downsample.0.kernel"] == (3, 3, 1024, 2048)
    assert shapes["layer1.0.downsample.0.kernel"] == (1, 1, 128, 256)
    assert shapes["last_linear.kernel"] == (senet.SENET154.num_features, 1000) == (2048, 1000)
    assert sum(int(np.prod(s)) for k, s in shapes.items()
               if "running" not in k) == META["full_params"] == 115_088_984


def test_max_pool_ceil_mode():
    x = jnp.arange(2 * 6 * 5, dtype=jnp.float32).reshape(1, 6, 5, 2) % 7
    got = np.asarray(senet.max_pool_ceil(x, 3, 2))
    assert got.shape == (1, 3, 2, 2)  # torch: ceil((6-3)/2)+1 = 3, ceil((5-3)/2)+1 = 2
    xn = np.asarray(x)
    want = np.array([[[xn[0, 2 * i:2 * i + 3, 2 * j:2 * j + 3, c].max() for c in range(2)]
                      for j in range(2)] for i in range(3)])
    np.testing.assert_array_equal(got[0], want)


def load_error(monkeypatch, tensors: dict, cfg: senet.SENetConfig = SMALL) -> str:
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", lambda path: tensors)
    with pytest.raises(loading.CheckpointError) as e:
        senet.from_checkpoint(WEIGHTS, cfg=cfg)
    assert str(e.value).startswith(f"{WEIGHTS}: ")
    return str(e.value)


def test_bad_checkpoints(monkeypatch, tmp_path):
    tensors = torch_checkpoint.read_torch_checkpoint(WEIGHTS)
    msg = load_error(monkeypatch, tensors, dataclasses.replace(SMALL, num_classes=1000))
    assert "\n" not in msg and "10 classes" in msg and "1000" in msg
    bad = {k: v for k, v in tensors.items() if k != "layer2.0.se_module.fc1.bias"}
    assert "layer2.0.se_module.fc1.bias" in load_error(monkeypatch, bad)
    bad = {**tensors, "layer1.1.downsample.0.weight": np.zeros((32, 32, 1, 1), np.float32)}
    assert "unused tensor 'layer1.1.downsample.0.weight'" in load_error(monkeypatch, bad)
    monkeypatch.setenv("VNR_ENCODERS_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="senet154-c7b49a05.pth"):
        senet.from_checkpoint("nowhere")


def test_features_only_and_module_prefix(monkeypatch):
    tensors = torch_checkpoint.read_torch_checkpoint(WEIGHTS)
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint",
                        lambda path: {f"module.{k}": v for k, v in tensors.items()})
    model = senet.from_checkpoint(WEIGHTS, cfg=dataclasses.replace(SMALL, num_classes=0))
    assert not hasattr(model, "last_linear")
