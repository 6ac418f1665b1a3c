"""S3D-G (vnr.models.encoders.s3d) against upstream PyTorch (antoine77340/S3D_HowTo100M).

Golden files (tests/golden/make_s3d.py, run by hand with torch): upstream's network at 1/8 of
every channel width with random weights and eval-mode batch norm, saved by `torch.save` in
the zip and the legacy format, its outputs on uint8 frames, and the full-size state dict's
{key: shape}."""

import json
from pathlib import Path

import numpy as np
import pytest

from vnr.models.encoders import s3d, torch_checkpoint
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "s3d"
META = json.loads((GOLDEN / "meta.json").read_text())
D = META["divisor"]
TINY = s3d.S3DConfig(conv1=64 // D, conv_2b=64 // D, conv_2c=192 // D,
                     mixed=tuple(tuple(w // D for w in m) for m in s3d.S3D_HOWTO100M.mixed),
                     num_classes=META["num_classes"])
FORMATS = ("zip", "legacy")
RTOL = 1e-4  # of the output's largest magnitude, float32


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


class _Models(dict):
    """format -> the golden S3D, loaded on first use."""

    def __missing__(self, fmt: str) -> s3d.S3D:
        self[fmt] = s3d.from_checkpoint(GOLDEN / f"weights_{fmt}.pth", cfg=TINY)
        return self[fmt]


@pytest.fixture(scope="module")
def models() -> dict[str, s3d.S3D]:
    return _Models()


def frames_of(golden: dict, name: str) -> np.ndarray:
    """The golden uint8 [B, 3, T, H, W] frames as the model's [B, T, H, W, 3] in [0, 1],
    divided exactly as the golden script divided them."""
    u8 = golden[f"{name}_frames"]
    return (u8.astype(np.float32) / np.float32(255)).transpose(0, 2, 3, 4, 1)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(META["inputs"]))
def test_parity_with_upstream(models, golden, fmt, name):
    out = s3d._embed(models[fmt], frames_of(golden, name))
    for field in ("mixed_5c", "video_embedding"):
        ref = golden[f"{name}_{field}"]
        got = np.asarray(getattr(out, field))
        assert got.shape == ref.shape
        diff = float(np.abs(got - ref).max())
        print(f"{fmt} {name} {field}: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
        assert diff <= RTOL * float(np.abs(ref).max()), (field, diff)


def test_both_formats_read_the_same_tensors():
    zip_, legacy = (torch_checkpoint.read_torch_checkpoint(GOLDEN / f"weights_{f}.pth")
                    for f in FORMATS)
    assert zip_.keys() == legacy.keys()
    assert all(np.array_equal(zip_[k], legacy[k]) for k in zip_)


def test_keys_match_the_full_upstream_state_dict():
    full = {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}
    ours = s3d.upstream_shapes()
    assert ours == {k: v for k, v in full.items() if not s3d.ignored(k)}
    left = sorted(k for k in full if s3d.ignored(k))
    assert all(k.endswith(".num_batches_tracked") for k in left if "text_module" not in k)
    assert [k for k in left if k.startswith("text_module.")] == [
        "text_module.fc1.bias", "text_module.fc1.weight", "text_module.fc2.bias",
        "text_module.fc2.weight", "text_module.word_embd.weight"]
    assert sum(int(np.prod(s)) for s in ours.values()) == 9_691_888
    assert ours["mixed_5c.conv_b1_b.conv2.weight"] == (384, 384, 3, 1, 1)


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return torch_checkpoint.read_torch_checkpoint(GOLDEN / "weights_zip.pth")


def load_error(monkeypatch, tensors: dict) -> str:
    """from_checkpoint's error when the file holds `tensors`."""
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", lambda path: tensors)
    with pytest.raises(CheckpointError) as e:
        s3d.from_checkpoint("/ckpt/s3d.pth", cfg=TINY)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("/ckpt/s3d.pth: ")
    return msg


def test_missing_key(monkeypatch, tensors):
    bad = {k: v for k, v in tensors.items() if k != "mixed_4d.conv_b2_b.bn2.running_var"}
    assert "missing key 'mixed_4d.conv_b2_b.bn2.running_var'" in load_error(monkeypatch, bad)


def test_extra_key(monkeypatch, tensors):
    bad = {**tensors, "mixed_4d.conv_b4.conv1.weight": np.zeros((3, 3, 1, 1, 1), np.float32)}
    assert "unexpected key 'mixed_4d.conv_b4.conv1.weight'" in load_error(monkeypatch, bad)


def test_wrong_shape(monkeypatch, tensors):
    bad = {**tensors, "gating.fc.weight": np.zeros((4, 4), np.float32)}
    msg = load_error(monkeypatch, bad)
    assert "key 'gating.fc.weight' has shape (4, 4), S3D expects (24, 24)" in msg


def test_full_size_checkpoint_into_tiny_config(monkeypatch, tensors):
    bad = {**tensors, "conv1.conv1.weight": np.zeros((64, 24, 2, 4, 4), np.float32)}
    assert "'conv1.conv1.weight' has shape (64, 24, 2, 4, 4)" in load_error(monkeypatch, bad)


def test_another_architecture(monkeypatch):
    densenet = {"features.conv0.weight": np.zeros((64, 3, 7, 7), np.float32),
                "features.norm0.weight": np.ones(64, np.float32)}
    msg = load_error(monkeypatch, densenet)
    assert "not an S3D checkpoint" in msg and "'features.conv0.weight'" in msg


def test_text_tower_and_counters_are_optional(monkeypatch, tensors):
    video = {k: v for k, v in tensors.items() if not s3d.ignored(k)}
    assert len(video) < len(tensors)
    arrays = s3d.match_state_dict(video, TINY, "x")
    assert arrays["conv1.conv1.kernel"].shape == (2, 4, 4, 24, 64 // D)


def test_not_a_torch_file(tmp_path):
    p = tmp_path / "s3d.pth"
    p.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=str(p)):
        s3d.from_checkpoint(p, cfg=TINY)


def test_max_pool_matches_upstream_padding():
    """7 with k3/s2 (zero pad (0, 1), 4 windows, the last overhanging); 2 with k3/s2 (one
    window); 5 with k2/s2 (3 windows, the last overhanging)."""
    x = np.arange(1, 8, dtype=np.float32).reshape(1, 7, 1, 1, 1)
    got = np.asarray(s3d.max_pool_tf(x, (3, 1, 1), (2, 1, 1))).ravel()
    assert got.tolist() == [3, 5, 7, 7]
    neg = -x  # the zero padding is a real zero: max(-7, 0)
    assert np.asarray(s3d.max_pool_tf(neg, (3, 1, 1), (2, 1, 1))).ravel().tolist() == [
        -1, -3, -5, 0]
    assert s3d.max_pool_tf(x[:, :2], (3, 1, 1), (2, 1, 1)).shape[1] == 1
    got = np.asarray(s3d.max_pool_tf(x[:, :5], (2, 1, 1), (2, 1, 1))).ravel()
    assert got.tolist() == [2, 4, 5]


def test_odd_sizes_are_refused():
    with pytest.raises(ValueError, match="even"):
        s3d.S3D.__call__(None, np.zeros((1, 3, 32, 32, 3), np.float32))  # type: ignore[arg-type]


def test_features_per_second(models):
    sampling = s3d.Sampling(clip_frames=8)  # short clips keep the test small
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, size=(11, 32, 32, 3), dtype=np.uint8)
    feats = s3d.features_per_second(models["zip"], frames, sampling, batch_size=2)
    assert feats.shape == (2, TINY.num_features) and feats.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(feats, axis=1), 1, rtol=1e-5)
    clips = s3d.clips_of(frames, sampling)
    assert clips.shape == (2, 8, 32, 32, 3) and not clips[1, 3:].any()
    direct = np.asarray(s3d._embed(models["zip"], clips).mixed_5c)
    direct = direct / np.linalg.norm(direct, axis=1, keepdims=True)
    np.testing.assert_allclose(feats, direct, atol=1e-5)


def test_tokenizer_matches_upstream(golden):
    tok = s3d.WordTokenizer(META["words"])
    np.testing.assert_array_equal(tok(META["sentences"]), golden["text_ids"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_text_tower_parity(golden, fmt):
    text = s3d.text_from_checkpoint(GOLDEN / f"weights_{fmt}.pth")
    assert text.config == s3d.TextConfig(51, 12, 24, META["num_classes"])
    got = np.asarray(text(s3d.WordTokenizer(META["words"])(META["sentences"])))
    ref = golden["text_embedding"]
    diff = float(np.abs(got - ref).max())
    print(f"{fmt} text_embedding: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
    assert diff <= RTOL * float(np.abs(ref).max())


def test_text_tower_missing_key(monkeypatch, tensors):
    bad = {k: v for k, v in tensors.items() if k != "text_module.fc2.bias"}
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", lambda path: bad)
    with pytest.raises(CheckpointError, match=r"^/c.pth: missing key 'text_module.fc2.bias'"):
        s3d.text_from_checkpoint("/c.pth")
