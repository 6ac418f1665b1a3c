"""Inception-v3 (vnr.models.encoders.inception) against a NumPy transcription of torchvision's
forward, from a torchvision-layout state dict the test writes (random weights, the full
architecture, 75x75 input: torchvision's minimum size keeps the NumPy convolutions fast)."""

import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import save_file

from bench.reference.conv_np import np_conv
from vnr.models.encoders import inception, loading

# --------------------------------------------------- the architecture, as a per-layer table
# A conv is (name, cin, cout, (kh, kw), stride, (ph, pw)); every one is torchvision's
# BasicConv2d (conv without bias, BatchNorm eps 0.001, ReLU).


def _a(cin, pool):
    return {"branches": [
        [("branch1x1", cin, 64, (1, 1), 1, (0, 0))],
        [("branch5x5_1", cin, 48, (1, 1), 1, (0, 0)), ("branch5x5_2", 48, 64, (5, 5), 1, (2, 2))],
        [("branch3x3dbl_1", cin, 64, (1, 1), 1, (0, 0)),
         ("branch3x3dbl_2", 64, 96, (3, 3), 1, (1, 1)),
         ("branch3x3dbl_3", 96, 96, (3, 3), 1, (1, 1))],
        ["avg", ("branch_pool", cin, pool, (1, 1), 1, (0, 0))]]}


def _b(cin):
    return {"branches": [
        [("branch3x3", cin, 384, (3, 3), 2, (0, 0))],
        [("branch3x3dbl_1", cin, 64, (1, 1), 1, (0, 0)),
         ("branch3x3dbl_2", 64, 96, (3, 3), 1, (1, 1)),
         ("branch3x3dbl_3", 96, 96, (3, 3), 2, (0, 0))],
        ["max"]]}


def _c(cin, c7):
    r, c = ((1, 7), (0, 3)), ((7, 1), (3, 0))
    return {"branches": [
        [("branch1x1", cin, 192, (1, 1), 1, (0, 0))],
        [("branch7x7_1", cin, c7, (1, 1), 1, (0, 0)), ("branch7x7_2", c7, c7, r[0], 1, r[1]),
         ("branch7x7_3", c7, 192, c[0], 1, c[1])],
        [("branch7x7dbl_1", cin, c7, (1, 1), 1, (0, 0)),
         ("branch7x7dbl_2", c7, c7, c[0], 1, c[1]), ("branch7x7dbl_3", c7, c7, r[0], 1, r[1]),
         ("branch7x7dbl_4", c7, c7, c[0], 1, c[1]), ("branch7x7dbl_5", c7, 192, r[0], 1, r[1])],
        ["avg", ("branch_pool", cin, 192, (1, 1), 1, (0, 0))]]}


def _d(cin):
    return {"branches": [
        [("branch3x3_1", cin, 192, (1, 1), 1, (0, 0)),
         ("branch3x3_2", 192, 320, (3, 3), 2, (0, 0))],
        [("branch7x7x3_1", cin, 192, (1, 1), 1, (0, 0)),
         ("branch7x7x3_2", 192, 192, (1, 7), 1, (0, 3)),
         ("branch7x7x3_3", 192, 192, (7, 1), 1, (3, 0)),
         ("branch7x7x3_4", 192, 192, (3, 3), 2, (0, 0))],
        ["max"]]}


def _e(cin):  # the 3x3 branches fork: (1x3, 3x1) both applied to the same input
    return {"branches": [
        [("branch1x1", cin, 320, (1, 1), 1, (0, 0))],
        [("branch3x3_1", cin, 384, (1, 1), 1, (0, 0)),
         ("fork", ("branch3x3_2a", 384, 384, (1, 3), 1, (0, 1)),
          ("branch3x3_2b", 384, 384, (3, 1), 1, (1, 0)))],
        [("branch3x3dbl_1", cin, 448, (1, 1), 1, (0, 0)),
         ("branch3x3dbl_2", 448, 384, (3, 3), 1, (1, 1)),
         ("fork", ("branch3x3dbl_3a", 384, 384, (1, 3), 1, (0, 1)),
          ("branch3x3dbl_3b", 384, 384, (3, 1), 1, (1, 0)))],
        ["avg", ("branch_pool", cin, 192, (1, 1), 1, (0, 0))]]}


STEM = [("Conv2d_1a_3x3", 3, 32, (3, 3), 2, (0, 0)), ("Conv2d_2a_3x3", 32, 32, (3, 3), 1, (0, 0)),
        ("Conv2d_2b_3x3", 32, 64, (3, 3), 1, (1, 1)), "max",
        ("Conv2d_3b_1x1", 64, 80, (1, 1), 1, (0, 0)), ("Conv2d_4a_3x3", 80, 192, (3, 3), 1, (0, 0)),
        "max"]
MIXED = {"Mixed_5b": _a(192, 32), "Mixed_5c": _a(256, 64), "Mixed_5d": _a(288, 64),
         "Mixed_6a": _b(288), "Mixed_6b": _c(768, 128), "Mixed_6c": _c(768, 160),
         "Mixed_6d": _c(768, 160), "Mixed_6e": _c(768, 192), "Mixed_7a": _d(768),
         "Mixed_7b": _e(1280), "Mixed_7c": _e(2048)}
# torchvision's AuxLogits (in its checkpoints, unused at inference): conv0, conv1, fc.
AUX = [("AuxLogits.conv0", 768, 128, (1, 1), 1, (0, 0)),
       ("AuxLogits.conv1", 128, 768, (5, 5), 1, (0, 0))]


def all_convs():
    out = [c for c in STEM if c != "max"]
    for block, spec in MIXED.items():
        for branch in spec["branches"]:
            for op in branch:
                ops = op[1:] if op[0] == "fork" else [op]
                out += [(f"{block}.{o[0]}",) + o[1:] for o in ops if isinstance(o, tuple)]
    return out


def state_dict(num_classes, seed=0):
    """A torchvision Inception-v3 state dict (NCHW / (out, in) layouts), random weights,
    AuxLogits and num_batches_tracked included as torchvision saves them."""
    rng = np.random.default_rng(seed)
    sd = {}
    for name, cin, cout, (kh, kw), _, _ in all_convs() + AUX:
        fan = cin * kh * kw
        sd[f"{name}.conv.weight"] = (rng.standard_normal((cout, cin, kh, kw), np.float32)
                                     * np.float32(np.sqrt(2.0 / fan)))
        sd[f"{name}.bn.weight"] = rng.uniform(0.5, 1.5, cout).astype(np.float32)
        sd[f"{name}.bn.bias"] = rng.normal(scale=0.1, size=cout).astype(np.float32)
        sd[f"{name}.bn.running_mean"] = rng.normal(scale=0.1, size=cout).astype(np.float32)
        sd[f"{name}.bn.running_var"] = rng.uniform(0.5, 2.0, cout).astype(np.float32)
        sd[f"{name}.bn.num_batches_tracked"] = np.array(3, np.int64)
    sd["AuxLogits.fc.weight"] = np.zeros((1000, 768), np.float32)
    sd["AuxLogits.fc.bias"] = np.zeros(1000, np.float32)
    sd["fc.weight"] = (rng.standard_normal((num_classes, 2048), np.float32) / 45).astype(np.float32)
    sd["fc.bias"] = rng.normal(size=num_classes).astype(np.float32)
    return sd


# ------------------------------------------------------------- NumPy reference (NCHW)
def np_basic(x, sd, name, stride, pad):
    y = np_conv(x, sd[f"{name}.conv.weight"], stride, pad)
    g, b = sd[f"{name}.bn.weight"], sd[f"{name}.bn.bias"]
    m, v = sd[f"{name}.bn.running_mean"], sd[f"{name}.bn.running_var"]
    y = ((y - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-3) * g[:, None, None]
         + b[:, None, None])
    return np.maximum(y, 0)


def np_maxpool(x):  # 3x3, stride 2, no padding
    h, w = (x.shape[2] - 3) // 2 + 1, (x.shape[3] - 3) // 2 + 1
    return np.max([x[:, :, a:a + 2 * h:2, b:b + 2 * w:2] for a in range(3) for b in range(3)], 0)


def np_avgpool(x):  # 3x3, stride 1, zero padding 1, divided by 9 everywhere
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, w = x.shape[2], x.shape[3]
    return sum(p[:, :, a:a + h, b:b + w] for a in range(3) for b in range(3)) / 9


def np_forward(sd, x, transform_input=True):
    if transform_input:  # torchvision's _transform_input, channel by channel
        mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        x = np.stack([x[:, c] * (std[c] / 0.5) + (mean[c] - 0.5) / 0.5 for c in range(3)], 1)
    for op in STEM:
        x = np_maxpool(x) if op == "max" else np_basic(x, sd, op[0], op[4], op[5])
    for block, spec in MIXED.items():
        outs = []
        for branch in spec["branches"]:
            y = x
            for op in branch:
                if op == "avg":
                    y = np_avgpool(y)
                elif op == "max":
                    y = np_maxpool(y)
                elif op[0] == "fork":
                    y = np.concatenate([np_basic(y, sd, f"{block}.{o[0]}", o[4], o[5])
                                        for o in op[1:]], 1)
                else:
                    y = np_basic(y, sd, f"{block}.{op[0]}", op[4], op[5])
            outs.append(y)
        x = np.concatenate(outs, 1)
    pooled = x.mean((2, 3))
    return pooled, pooled @ sd["fc.weight"].T + sd["fc.bias"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A torchvision-layout checkpoint directory (7 classes) and its state dict."""
    d = tmp_path_factory.mktemp("inception_v3")
    sd = state_dict(num_classes=7)
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps({"model_type": "inception_v3", "num_classes": 7}))
    return d, {k: v.astype(np.float64) for k, v in sd.items() if v.dtype == np.float32}


def test_inception_v3_matches_numpy_torchvision_forward(checkpoint):
    directory, ref = checkpoint
    model = inception.load_inception(directory)
    x = np.random.default_rng(1).normal(size=(2, 3, 75, 75)).astype(np.float32)
    graphdef, state = nnx.split(model)
    out = jax.jit(lambda st, px: nnx.merge(graphdef, st)(px))(
        state, jnp.asarray(x.transpose(0, 2, 3, 1)))
    want_pooled, want_logits = np_forward(ref, x.astype(np.float64))
    assert out.feature_map.shape == (2, 1, 1, 2048) and out.pooled.shape == (2, 2048)
    scale = np.abs(want_pooled).max()
    assert scale > 1e-2  # activations survive the depth (the comparison is not of zeros)
    np.testing.assert_allclose(out.pooled, want_pooled, rtol=1e-3, atol=1e-4 * scale)
    np.testing.assert_allclose(out.logits, want_logits, rtol=1e-3,
                               atol=1e-4 * np.abs(want_logits).max())


def _jpeg(w, h, seed):
    from PIL import Image

    arr = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def test_inception_embedder_is_torchvision_transform_then_pooled_features(checkpoint,
                                                                           tmp_path):
    from PIL import Image

    from vnr.benchmarks.sc2st import embedders

    directory, ref = checkpoint
    # image_size 75 keeps it fast; the embedder itself uses 299 (resize 342)
    scorer = embedders.InceptionScorer(str(directory), batch=2, image_size=75)
    assert scorer.dim == 2048 and not hasattr(scorer._state, "fc")  # fc tensors ignored
    jpegs = [_jpeg(120, 90, 0), _jpeg(80, 100, 1), _jpeg(75, 75, 2)]
    # torchvision: Resize(round(75 * 342 / 299) = 86): 120x90 -> 114x86 (long side
    # truncated), CenterCrop(75): left int(round(19.5)) = 20, top int(round(5.5)) = 6
    img = Image.open(io.BytesIO(jpegs[0])).convert("RGB").resize((114, 86), Image.BILINEAR)
    want = (np.asarray(img.crop((20, 6, 95, 81)), np.float32) / 255.0
            - embedders.IMAGENET_MEAN) / embedders.IMAGENET_STD
    np.testing.assert_allclose(scorer.pixels(jpegs[0]), want, atol=1e-6)
    got = scorer.encode_images(jpegs)  # two batches, the second padded
    px = np.stack([scorer.pixels(j) for j in jpegs]).transpose(0, 3, 1, 2)
    pooled, _ = np_forward(ref, px.astype(np.float64))
    np.testing.assert_allclose(got, pooled / np.linalg.norm(pooled, axis=1, keepdims=True),
                               rtol=1e-3, atol=1e-5)
    with pytest.raises(TypeError, match="images only"):
        scorer.encode_texts(["a sentence"])
    monkey = pytest.MonkeyPatch()
    monkey.setenv("VNR_ENCODERS_DIR", str(tmp_path))
    try:
        with pytest.raises(FileNotFoundError, match="inception_v3.*model.safetensors"):
            embedders.inception_embedder("", 0)
    finally:
        monkey.undo()


def test_inception_v3_parameters_and_bad_input(tmp_path):
    shapes = loading.param_shapes(lambda r: inception.InceptionV3(inception.INCEPTION_V3, r))
    learned = {k: s for k, s in shapes.items() if not k.endswith(("running_mean", "running_var"))}
    n = sum(int(np.prod(s)) for s in learned.values())
    # the table above, derived independently of the module: every conv + its BN, and fc
    table = sum(ci * co * kh * kw + 2 * co for _, ci, co, (kh, kw), _, _ in all_convs())
    assert n == table + 2048 * 1000 + 1000 == 23_834_568
    # torchvision's published count for inception_v3 (IMAGENET1K_V1, "num_params"
    # 27161264) includes AuxLogits: conv0, conv1 (+ BN) and its fc 768 -> 1000
    aux = sum(ci * co * kh * kw + 2 * co for _, ci, co, (kh, kw), _, _ in AUX) + 768 * 1000 + 1000
    assert n + aux == 27_161_264
    assert shapes["Mixed_7c.branch3x3dbl_3b.conv.kernel"] == (3, 1, 384, 384)
    assert shapes["Mixed_6b.branch7x7_2.conv.kernel"] == (1, 7, 128, 128)
    sd = state_dict(num_classes=3)
    sd.pop("Mixed_6e.branch_pool.bn.running_var")
    sd["Mixed_9z.conv.weight"] = np.zeros(3, np.float32)
    save_file(sd, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps({"num_classes": 3}))
    with pytest.raises(loading.CheckpointError, match="branch_pool.bn.running_var|Mixed_9z"):
        inception.load_inception(tmp_path)
    with pytest.raises(FileNotFoundError, match="torchvision.models.inception_v3"):
        inception.load_inception(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text(json.dumps({"aux_logits": True}))
    with pytest.raises(ValueError, match="aux_logits"):
        inception.config_of(tmp_path)
    small = nnx.eval_shape(lambda: inception.InceptionV3(inception.INCEPTION_V3, nnx.Rngs(0)))
    with pytest.raises(ValueError, match="at least 75x75"):  # checked before any compute
        small(jnp.zeros((1, 64, 80, 3)))
