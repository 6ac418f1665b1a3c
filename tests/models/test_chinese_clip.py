"""Chinese-CLIP (vnr.models.encoders.chinese_clip) against Hugging Face's `ChineseCLIPModel`.

Golden files (tests/golden/make_chinese_clip.py, run by hand with torch and transformers): a
tiny random `ChineseCLIPModel` saved with `save_pretrained` as `pytorch_model.bin` (as the
hub ships OFA-Sys/chinese-clip-vit-huge-patch14), its outputs on random images and padded
token ids, and the full-size huge state dict's {key: shape}."""

import copy
import json
import re
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import save_file

from vnr.models.encoders import bert, clip, loading, torch_checkpoint
from vnr.models.encoders import chinese_clip as cc
from vnr.models.encoders.loading import CheckpointError
from vnr.sharding import var_names

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "chinese_clip"
TINY = GOLDEN / "tiny"
META = json.loads((GOLDEN / "meta.json").read_text())
FAKE = "/ckpt/pytorch_model.bin"


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def images(golden) -> np.ndarray:
    return golden["pixel_values"].transpose(0, 2, 3, 1)  # [B, 3, H, W] -> channels-last


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return torch_checkpoint.read_torch_checkpoint(TINY / "pytorch_model.bin")


@pytest.fixture(scope="module")
def model() -> cc.ChineseCLIPModel:
    return cc.from_pretrained(TINY)


@pytest.fixture(scope="module")
def shapes(model) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in _params(model).items()}


def _params(module: nnx.Module) -> dict[str, np.ndarray]:
    return {".".join(map(str, p)): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(nnx.state(module, nnx.Param))}


def close(got: jax.Array, ref: np.ndarray, name: str, atol: float = 1e-5) -> float:
    """Max |got - ref|, asserted <= atol times max(1, max |ref|) (float32)."""
    got = np.asarray(got, np.float32)
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    diff, scale = float(np.abs(got - ref).max()), float(np.abs(ref).max())
    print(f"{name}: max |diff| {diff:.3g} (max |ref| {scale:.3g})")
    assert diff <= atol * max(1.0, scale), name
    return diff


def test_golden_parity_pytorch_bin(model, golden, images):
    @nnx.jit  # one compile instead of op-by-op dispatch
    def run(m, ids, pixels, mask):
        return m(ids, pixels, mask), m.encode_text(ids, mask), m.encode_image(pixels)

    out, text, image = run(model, golden["input_ids"], images, golden["attention_mask"])
    close(out.text_embeds, golden["text_embeds"], "text_embeds")
    close(out.image_embeds, golden["image_embeds"], "image_embeds")
    close(out.logits_per_image, golden["logits_per_image"], "logits_per_image")
    np.testing.assert_array_equal(np.asarray(out.logits_per_text),
                                  np.asarray(out.logits_per_image).T)
    close(text.pooled, golden["text_features"], "get_text_features")
    close(image.pooled, golden["image_features"], "get_image_features")
    close(text.last_hidden_state, golden["text_hidden"], "text last_hidden_state")
    close(image.last_hidden_state, golden["vision_hidden"], "vision last_hidden_state")
    close(image.pooler_output, golden["vision_pooled"], "vision pooler_output")
    assert text.pooler_output is None  # upstream builds the text tower without a pooler


def _as_safetensors(tmp_path: Path, tensors: dict[str, np.ndarray]) -> Path:
    """A copy of the fixture directory holding `tensors` as model.safetensors."""
    d = tmp_path / "ckpt"
    d.mkdir()
    for name in ("config.json", "preprocessor_config.json"):
        shutil.copy(TINY / name, d / name)
    save_file({k: np.array(v, order="C") for k, v in tensors.items()},
              str(d / "model.safetensors"), metadata={"format": "pt"})
    return d


def test_safetensors_checkpoint(tmp_path, tensors, model):
    """model.safetensors (what the hub's safetensors branch holds) gives the same parameters;
    the buffers older files keep are skipped."""
    buffers = {"text_model.embeddings.position_ids": np.arange(64)[None],
               "vision_model.embeddings.position_ids": np.arange(17)[None],
               "text_model.embeddings.token_type_ids": np.zeros((1, 64), np.int64)}
    _same(_params(cc.from_pretrained(_as_safetensors(tmp_path, {**tensors, **buffers}))),
          _params(model))


def test_towers_alone(model):
    """Each tower with its projection; its forward pass is the full model's encode_*."""
    vision = cc.from_pretrained(TINY, tower="vision")
    assert isinstance(vision, cc.ChineseCLIPVisionModel)
    _same(_params(vision), {k: v for k, v in _params(model).items()
                            if k.startswith(("vision_model.", "visual_projection."))})
    assert cc.ChineseCLIPModel.encode_image is cc.ChineseCLIPVisionModel.__call__
    text = cc.from_pretrained(TINY, tower="text")
    _same(_params(text), {k: v for k, v in _params(model).items()
                          if k.startswith(("text_model.", "text_projection."))})
    assert cc.ChineseCLIPModel.encode_text is cc.ChineseCLIPTextModel.__call__
    with pytest.raises(ValueError, match="tower must be one of"):
        cc.from_pretrained(TINY, tower="audio")


def _subtree(model: nnx.Module, prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v for k, v in _params(model).items() if k.startswith(prefix)}


def _same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for k, w in want.items():
        np.testing.assert_array_equal(np.asarray(got[k]), w, err_msg=k)


def test_match_subtrees(model, tensors):
    """The whole model, one tower with or without its projection, a bare tower."""
    cfg = cc.read_config(TINY)
    full = _params(model)
    _same(cc.match(tensors, {k: v.shape for k, v in full.items()}, FAKE), full)

    def shapes_of(ctor) -> dict[str, tuple[int, ...]]:
        return loading.param_shapes(ctor)

    for ctor, prefixes in [
        (lambda r: cc.ChineseCLIPVisionModel(cfg, rngs=r), ("vision_model.", "visual_proj")),
        (lambda r: cc.ChineseCLIPTextModel(cfg, rngs=r), ("text_model.", "text_proj")),
        (lambda r: cc.ChineseCLIPVisionModel(cfg, with_projection=False, rngs=r),
         ("vision_model.",)),
    ]:
        want = {k: v for k, v in full.items() if k.startswith(prefixes)}
        _same(cc.match(tensors, shapes_of(ctor), FAKE), want)
    bare_vision = shapes_of(lambda r: clip.CLIPVisionTransformer(
        cfg.vision_config, dtype=jnp.float32, param_dtype=jnp.float32, rngs=r))
    _same(cc.match(tensors, bare_vision, FAKE), _subtree(model, "vision_model."))
    bare_text = shapes_of(lambda r: bert.BertModel(cfg.text_config, add_pooling_layer=False,
                                                   rngs=r))
    _same(cc.match(tensors, bare_text, FAKE), _subtree(model, "text_model."))


def _full_keys() -> dict[str, tuple[int, ...]]:
    return {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}


def _torch_layout(cfg, depth: dict[str, int] | None = None) -> dict[str, tuple[int, ...]]:
    """Our ChineseCLIPModel's parameters (built abstractly) as state-dict key -> shape; with
    `depth`, built with one text and one vision layer, whose keys are then repeated for
    each of the `depth[tower]` layers the config names."""
    if depth is not None:
        cfg = copy.deepcopy(cfg)
        cfg.text_config.num_hidden_layers = cfg.vision_config.num_hidden_layers = 1
    ours = loading.param_shapes(lambda r: cc.ChineseCLIPModel(cfg, rngs=r))
    out = {}
    for name, shape in ours.items():
        key = loading.torch_key(name) if "." in name else name
        stack = re.match(r"(text|vision)_model\.encoder\.layers?\.0\.", key)
        for i in range(depth[stack[1]] if depth and stack else 1):
            out[key.replace(".0.", f".{i}.", 1) if stack else key] = loading.torch_shape(
                name, shape)
    return out


def test_keys_match_the_full_checkpoint():
    """Our model at the published huge widths has exactly the file's keys and shapes (ViT-H/14
    632M + RoBERTa-wwm-ext-large 326M parameters); one layer per tower is built and its keys
    repeated to the published depths (the full-depth build is the e2e test below)."""
    from transformers import ChineseCLIPConfig

    full, cfg = _full_keys(), ChineseCLIPConfig(**META["full"])
    depth = {"text": cfg.text_config.num_hidden_layers,
             "vision": cfg.vision_config.num_hidden_layers}
    assert depth == {"text": 24, "vision": 32}
    ours = _torch_layout(cfg, depth)
    assert ours == full
    assert ours["vision_model.embeddings.patch_embedding.weight"] == (1280, 3, 14, 14)
    assert ours["text_projection.weight"] == (1024, 1024) and ours["logit_scale"] == ()
    assert sum(int(np.prod(s)) for s in ours.values()) == 957_598_209


@pytest.mark.e2e
def test_keys_match_the_full_checkpoint_full_depth():
    """The same at full depth (56 layers built abstractly, ~10 s)."""
    from transformers import ChineseCLIPConfig

    assert _torch_layout(ChineseCLIPConfig(**META["full"])) == _full_keys()


def test_logical_axis_names():
    cfg = cc.read_config(TINY)
    names = {k: tuple(var_names(v)) for k, v in
             loading.abstract_params(lambda r: cc.ChineseCLIPModel(cfg, rngs=r)).items()}
    assert names["visual_projection.kernel"] == ("embed", None)
    assert names["text_model.embeddings.word_embeddings.embedding"] == ("vocab", "embed")
    assert names["vision_model.encoder.layers.0.mlp.fc1.kernel"] == ("embed", "mlp")
    assert names["logit_scale"] == ()


def one_line(fn, *args, **kw) -> str:
    with pytest.raises(CheckpointError) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_missing_key(tensors, shapes):
    key = "vision_model.encoder.layers.1.self_attn.k_proj.bias"
    msg = one_line(cc.match, {k: v for k, v in tensors.items() if k != key}, shapes, FAKE)
    assert msg.startswith(f"{FAKE}: missing tensor {key!r}") and "more problems" not in msg
    msg = one_line(cc.match, {k: v for k, v in tensors.items() if k != "logit_scale"},
                   shapes, FAKE)
    assert msg.startswith(f"{FAKE}: missing tensor 'logit_scale'")


def test_wrong_shape(tensors, shapes):
    key = "text_model.encoder.layer.0.intermediate.dense.weight"
    msg = one_line(cc.match, {**tensors, key: np.zeros((32, 32), np.float32)}, shapes, FAKE)
    assert msg.startswith(f"{FAKE}: tensor {key!r} has shape (32, 32)") and "(64, 32)" in msg
    msg = one_line(cc.match, {**tensors, "logit_scale": np.zeros((1,), np.float32)}, shapes,
                   FAKE)
    assert "tensor 'logit_scale' has shape (1,)" in msg


def test_unexpected_key(tmp_path, tensors):
    key = "text_model.pooler.dense.weight"
    bad = _as_safetensors(tmp_path, {**tensors, key: np.zeros((32, 32), np.float32)})
    msg = one_line(cc.from_pretrained, bad)
    assert msg.startswith(f"{bad / 'model.safetensors'}: unused tensor {key!r}")


def test_not_a_chinese_clip_subtree(tensors):
    msg = one_line(cc.match, tensors, {"conv1.kernel": (3, 3, 3, 4)}, FAKE)
    assert "neither a Chinese-CLIP model nor one of its towers" in msg and "conv1" in msg


def test_missing_files(tmp_path):
    (tmp_path / "config.json").write_text((TINY / "config.json").read_text())
    msg = one_line(cc.from_pretrained, tmp_path)
    assert "no model.safetensors or pytorch_model.bin" in msg and str(tmp_path) in msg
    (tmp_path / "config.json").unlink()
    assert f"{tmp_path / 'config.json'}: no config.json" in one_line(cc.from_pretrained, tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "clip"}))
    assert "model_type 'clip', expected 'chinese_clip'" in one_line(cc.read_config, tmp_path)


def test_preprocessing(tmp_path):
    assert cc.preprocessing() == cc.Preprocessing(224, cc.CLIP_MEAN, cc.CLIP_STD, False)
    assert cc.preprocessing(tmp_path) == cc.Preprocessing()  # no preprocessor_config.json
    prep = cc.preprocessing(TINY)
    assert (prep.size, prep.center_crop, prep.mean) == (16, False, cc.CLIP_MEAN)
    frames = np.full((1, 16, 16, 3), 255, np.uint8)
    want = (1 - np.asarray(cc.CLIP_MEAN)) / np.asarray(cc.CLIP_STD)
    np.testing.assert_allclose(prep.normalise(frames)[0, 0, 0], want, rtol=1e-6)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": 224}))
    assert cc.preprocessing(tmp_path).size == 224
