"""DenseNet (vnr.models.encoders.densenet) against a NumPy transcription of torchvision's
forward, from a torchvision-layout state dict the test writes (random weights; a small
DenseNet so the NumPy loops stay fast)."""

import dataclasses
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import save_file

from bench.reference.conv_np import np_conv
from vnr.models.encoders import densenet, loading

TINY = densenet.DenseNetConfig(growth_rate=4, block_config=(2, 3), num_init_features=8,
                               bn_size=2, num_classes=5)


def state_dict(cfg, seed=0, legacy=False):
    """A torchvision DenseNet state dict (NCHW / (out, in) layouts) with random weights."""
    rng = np.random.default_rng(seed)
    sd = {}

    def conv(name, cout, cin, k):
        sd[f"{name}.weight"] = (rng.normal(size=(cout, cin, k, k)) / np.sqrt(cin * k * k)
                                ).astype(np.float32)

    def norm(name, c):
        sd[f"{name}.weight"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
        sd[f"{name}.bias"] = rng.normal(scale=0.1, size=c).astype(np.float32)
        sd[f"{name}.running_mean"] = rng.normal(scale=0.1, size=c).astype(np.float32)
        sd[f"{name}.running_var"] = rng.uniform(0.5, 2.0, c).astype(np.float32)
        sd[f"{name}.num_batches_tracked"] = np.array(7, np.int64)

    c = cfg.num_init_features
    conv("features.conv0", c, 3, 7)
    norm("features.norm0", c)
    for i, n in enumerate(cfg.block_config, start=1):
        for j in range(1, n + 1):
            pre = f"features.denseblock{i}.denselayer{j}"
            sep = "." if legacy else ""
            norm(f"{pre}.norm{sep}1", c)
            conv(f"{pre}.conv{sep}1", cfg.bn_size * cfg.growth_rate, c, 1)
            norm(f"{pre}.norm{sep}2", cfg.bn_size * cfg.growth_rate)
            conv(f"{pre}.conv{sep}2", cfg.growth_rate, cfg.bn_size * cfg.growth_rate, 3)
            c += cfg.growth_rate
        if i < len(cfg.block_config):
            norm(f"features.transition{i}.norm", c)
            conv(f"features.transition{i}.conv", c // 2, c, 1)
            c //= 2
    norm("features.norm5", c)
    sd["classifier.weight"] = rng.normal(size=(cfg.num_classes, c)).astype(np.float32)
    sd["classifier.bias"] = rng.normal(size=(cfg.num_classes,)).astype(np.float32)
    return sd


# ------------------------------------------------------------- NumPy reference (NCHW)
def np_bn(x, sd, name):
    g, b = sd[f"{name}.weight"], sd[f"{name}.bias"]
    m, v = sd[f"{name}.running_mean"], sd[f"{name}.running_var"]
    return ((x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5) * g[:, None, None]
            + b[:, None, None])


def np_maxpool(x):  # 3x3, stride 2, padding 1 (padding never wins)
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    h, w = (x.shape[2] - 3) // 2 + 1, (x.shape[3] - 3) // 2 + 1
    return np.max([x[:, :, a:a + 2 * h:2, b:b + 2 * w:2] for a in range(3) for b in range(3)], 0)


def np_forward(sd, cfg, x):
    relu = lambda z: np.maximum(z, 0)  # noqa: E731
    x = np_maxpool(relu(np_bn(np_conv(x, sd["features.conv0.weight"], 2, 3), sd,
                              "features.norm0")))
    for i, n in enumerate(cfg.block_config, start=1):
        feats = [x]
        for j in range(1, n + 1):
            pre = f"features.denseblock{i}.denselayer{j}"
            cat = np.concatenate(feats, 1)
            y = np_conv(relu(np_bn(cat, sd, f"{pre}.norm1")), sd[f"{pre}.conv1.weight"], 1, 0)
            y = np_conv(relu(np_bn(y, sd, f"{pre}.norm2")), sd[f"{pre}.conv2.weight"], 1, 1)
            feats.append(y)
        x = np.concatenate(feats, 1)
        if i < len(cfg.block_config):
            t = f"features.transition{i}"
            x = np_conv(relu(np_bn(x, sd, f"{t}.norm")), sd[f"{t}.conv.weight"], 1, 0)
            x = (x[:, :, 0::2, 0::2] + x[:, :, 1::2, 0::2] + x[:, :, 0::2, 1::2]
                 + x[:, :, 1::2, 1::2]) / 4
    pooled = relu(np_bn(x, sd, "features.norm5")).mean((2, 3))
    return pooled, pooled @ sd["classifier.weight"].T + sd["classifier.bias"]


@pytest.mark.parametrize("legacy", [False, True])
def test_densenet_matches_numpy_torchvision_forward(tmp_path, legacy):
    sd = state_dict(TINY, legacy=legacy)
    save_file(sd, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "densenet", "growth_rate": 4, "block_config": [2, 3],
         "num_init_features": 8, "bn_size": 2, "num_classes": 5}))
    model = densenet.load_densenet(tmp_path)
    x = np.random.default_rng(1).normal(size=(2, 3, 32, 32)).astype(np.float32)
    out = model(jnp.asarray(x.transpose(0, 2, 3, 1)))
    ref = densenet.torchvision_tensors(sd)  # legacy names renamed as torchvision does
    want_pooled, want_logits = np_forward(ref, TINY, x.astype(np.float64))
    assert out.pooled.shape == (2, TINY.num_features) == (2, 20)
    np.testing.assert_allclose(out.pooled, want_pooled, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.logits, want_logits, rtol=1e-4, atol=1e-4)


def test_densenet121_shape_and_bad_checkpoints(tmp_path):
    assert densenet.DENSENET121.num_features == 1024  # the paper's 1024-d features
    shapes = loading.param_shapes(lambda r: densenet.DenseNet(densenet.DENSENET121, r))
    assert shapes["features.denseblock4.denselayer16.conv2.kernel"] == (3, 3, 128, 32)
    assert shapes["classifier.kernel"] == (1024, 1000)
    assert sum(int(np.prod(s)) for s in shapes.values()) == 7_978_856 + 2 * sum(
        s[0] for k, s in shapes.items() if k.endswith("running_mean"))  # torchvision's count
    sd = state_dict(TINY)
    sd.pop("features.norm5.running_var")
    sd["features.extra.weight"] = np.zeros(3, np.float32)
    save_file(sd, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps({"growth_rate": 4, "block_config": [2, 3],
                                                      "num_init_features": 8, "bn_size": 2,
                                                      "num_classes": 5}))
    with pytest.raises(loading.CheckpointError, match="norm5.running_var|features.extra"):
        densenet.load_densenet(tmp_path)
    with pytest.raises(FileNotFoundError, match="torchvision"):
        densenet.load_densenet(tmp_path / "nowhere")


# ------------------------------------------------- DenseNet-161, Places365 checkpoint layout
# Golden files (tests/golden/make_densenet161.py, run by hand with torch): torchvision's
# DenseNet at growth 8, blocks (1, 2, 2, 1), 365 classes, random weights, saved as CSAIL's
# Places365 file is (`{'state_dict': {'module.' + legacy name: tensor}, ...}`, legacy format).
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "densenet161"
META = json.loads((GOLDEN / "meta.json").read_text())
SMALL161 = densenet.DenseNetConfig(**{k: tuple(v) if k == "block_config" else v
                                      for k, v in META["small"].items()})
PLACES = GOLDEN / densenet.PLACES365_FILE


@pytest.fixture(scope="module")
def places_model():
    return densenet.load_places365(PLACES, cfg=SMALL161)


@pytest.mark.parametrize("name", list(META["inputs"]))
def test_places365_checkpoint_matches_torchvision(places_model, name):
    with np.load(GOLDEN / "io.npz") as f:
        io = dict(f)
    mean = np.array(META["mean"], np.float32)[:, None, None]
    std = np.array(META["std"], np.float32)[:, None, None]
    x = (io[f"{name}_images"].astype(np.float32) / np.float32(255) - mean) / std
    out = nnx.jit(lambda m, v: m(v))(places_model, jnp.asarray(x.transpose(0, 2, 3, 1)))
    got = {"feature_map": np.asarray(out.feature_map).transpose(0, 3, 1, 2),
           "pooled": np.asarray(out.pooled), "logits": np.asarray(out.logits)}
    for field, value in got.items():
        ref = io[f"{name}_{field}"]
        assert value.shape == ref.shape, field
        diff = float(np.abs(value - ref).max())
        print(f"densenet161 {name} {field}: max |diff| {diff:.3g} (max |ref| "
              f"{np.abs(ref).max():.3g})")
        assert diff <= 1e-5 * max(1.0, float(np.abs(ref).max())), (field, diff)


def test_densenet161_places365_keys_match_the_full_checkpoint():
    full = json.loads((GOLDEN / "full_keys.json").read_text())
    assert len(full) == len({k.removeprefix("module.") for k in full})
    assert all(k.startswith("module.") for k in full) and any(".norm.1." in k for k in full)
    want = {k: tuple(v) for k, v in densenet.places365_tensors(full).items()}
    shapes = loading.param_shapes(lambda r: densenet.DenseNet(densenet.DENSENET161_PLACES365, r))
    ours = {loading.torch_key(k): loading.torch_shape(k, s) for k, s in shapes.items()}
    assert ours == want
    assert densenet.DENSENET161.num_features == 2208
    assert shapes["classifier.kernel"] == (2208, 365)
    assert sum(int(np.prod(s)) for k, s in shapes.items()
               if "running" not in k) == META["full_params"] == 27_278_285


def test_places365_wrong_class_count_is_one_line_naming_the_file():
    cfg = dataclasses.replace(SMALL161, num_classes=1000)
    with pytest.raises(loading.CheckpointError) as e:
        densenet.load_places365(PLACES, cfg=cfg)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(PLACES))
    assert "365 classes" in msg and "1000" in msg


def test_places365_features_only_and_missing_file(tmp_path, monkeypatch):
    model = densenet.load_places365(PLACES, cfg=dataclasses.replace(SMALL161, num_classes=0))
    assert not hasattr(model, "classifier")
    with pytest.raises(loading.CheckpointError, match="densenet161_places365.pth.tar: "):
        densenet.load_places365(PLACES, cfg=dataclasses.replace(SMALL161, growth_rate=4))
    monkeypatch.setenv("VNR_ENCODERS_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="Places365"):
        densenet.load_places365("nowhere")
    (tmp_path / "places").mkdir()
    (tmp_path / "places" / densenet.PLACES365_FILE).write_bytes(PLACES.read_bytes())
    assert densenet.load_places365("places", cfg=SMALL161).config == SMALL161
