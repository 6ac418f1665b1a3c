"""Our NNX encoders vs transformers' Flax models on the same tiny random checkpoints (float32)."""

import os
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flax import nnx  # noqa: E402
from flax.traverse_util import flatten_dict  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

pytest.importorskip("transformers")

from transformers.modeling_flax_pytorch_utils import (  # noqa: E402
    convert_pytorch_state_dict_to_flax,
)

from vnr.models import encoders  # noqa: E402
from vnr.models.encoders import testing  # noqa: E402

TOL = 1e-5
CASES = [
    ("bert", "pt-safetensors"),
    ("albert", "msgpack"),
    ("xlm-roberta", "flax-safetensors"),
    ("clip-p16", "msgpack"),
    ("clip-p32", "pt-safetensors"),
    ("clip-vision", "pt-safetensors"),
]


def text_batch(pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Two sequences of length 8, the first padded after 6 tokens (ids avoid pad_id)."""
    ids = np.array([[5, 6, 7, 8, 9, 3, 0, 0], [10, 11, 12, 13, 14, 15, 16, 3]], np.int32)
    mask = (np.arange(8)[None] < np.array([[6], [8]])).astype(np.int32)
    return np.where(mask > 0, ids, pad_id).astype(np.int32), mask


def images(size: int) -> np.ndarray:
    return np.random.default_rng(1).normal(size=(2, size, size, 3)).astype(np.float32)


def assert_close(name: str, ref, ours, tol: float = TOL) -> float:
    ref, ours = np.asarray(ref, np.float32), np.asarray(ours, np.float32)
    assert ref.shape == ours.shape, (name, ref.shape, ours.shape)
    diff = float(np.abs(ref - ours).max())
    print(f"{name}: max abs diff {diff:.2e}")
    assert diff <= tol, f"{name}: max abs diff {diff} > {tol}"
    return diff


@pytest.mark.parametrize(("arch", "layout"), CASES)
def test_parity_with_transformers_flax(arch, layout, tmp_path):
    ref, params = testing.write_tiny_checkpoint(arch, tmp_path, layout)
    if layout == "pt-safetensors":  # transformers' own converter reads our PyTorch layout back
        zeros = jax.tree.map(np.zeros_like, params)  # a key it cannot convert stays zero
        template = types.SimpleNamespace(base_model_prefix=ref.base_model_prefix, params=zeros)
        pt = load_file(str(tmp_path / "model.safetensors"))
        want, got = (
            flatten_dict(params),
            flatten_dict(convert_pytorch_state_dict_to_flax(pt, template)),
        )
        assert set(want) == set(got)
        for k in want:
            np.testing.assert_array_equal(want[k], got[k], err_msg=str(k))
    model, tokenizer, cfg = encoders.load_pretrained(tmp_path)
    assert tokenizer is None
    if arch in ("bert", "albert", "xlm-roberta"):
        ids, mask = text_batch(cfg.pad_token_id)
        r = jax.jit(lambda p: ref(ids, attention_mask=mask, params=p))(params)
        o = nnx.jit(lambda m: m(jnp.asarray(ids), jnp.asarray(mask)))(model)
        assert_close(f"{arch} last_hidden_state", r.last_hidden_state, o.last_hidden_state)
        assert_close(f"{arch} pooler_output", r.pooler_output, o.pooler_output)
        assert_close(f"{arch} pooled", r.pooler_output, o.pooled)
    elif arch == "clip-vision":
        img = images(cfg.image_size)
        r = jax.jit(lambda p: ref(img.transpose(0, 3, 1, 2), params=p))(params)
        o = nnx.jit(lambda m: m(jnp.asarray(img)))(model)
        assert isinstance(model, encoders.CLIPVisionModel) and model.visual_projection is None
        assert_close("clip-vision last_hidden_state", r.last_hidden_state, o.last_hidden_state)
        assert_close("clip-vision pooler_output", r.pooler_output, o.pooler_output)
    else:
        ids, mask = text_batch(cfg.text_config.pad_token_id)
        img = images(cfg.vision_config.image_size)
        r = jax.jit(lambda p: ref(ids, img.transpose(0, 3, 1, 2), attention_mask=mask, params=p))(
            params
        )

        def run(m):
            x, i, t = jnp.asarray(ids), jnp.asarray(img), jnp.asarray(mask)
            return m(x, i, t), m.encode_image(i), m.encode_text(x, t)

        out, vis, txt = nnx.jit(run)(model)
        rv, rt = r.vision_model_output, r.text_model_output
        assert_close(
            f"{arch} vision last_hidden_state", rv.last_hidden_state, vis.last_hidden_state
        )
        assert_close(f"{arch} vision pooler_output", rv.pooler_output, vis.pooler_output)
        assert_close(f"{arch} text last_hidden_state", rt.last_hidden_state, txt.last_hidden_state)
        assert_close(f"{arch} text pooler_output", rt.pooler_output, txt.pooler_output)
        assert_close(f"{arch} image_embeds", r.image_embeds, out.image_embeds)
        assert_close(f"{arch} text_embeds", r.text_embeds, out.text_embeds)
        assert_close(f"{arch} logits_per_image", r.logits_per_image, out.logits_per_image)
        assert_close(f"{arch} logits_per_text", r.logits_per_text, out.logits_per_text)


def test_clip_single_tower_from_dual_checkpoint(tmp_path):
    ref, params = testing.write_tiny_checkpoint("clip-p16", tmp_path, "msgpack")
    vision, _, cfg = encoders.load_pretrained(tmp_path, tower="vision")
    text, _, _ = encoders.load_pretrained(tmp_path, tower="text")
    assert isinstance(vision, encoders.CLIPVisionModel)
    assert isinstance(text, encoders.CLIPTextModel)
    img = images(cfg.vision_config.image_size)
    ids, mask = text_batch(cfg.text_config.pad_token_id)
    feats = jax.jit(lambda p: ref.get_image_features(img.transpose(0, 3, 1, 2), params=p))(params)
    tfeats = jax.jit(lambda p: ref.get_text_features(ids, mask, params=p))(params)
    assert_close("image features", feats, nnx.jit(lambda m: m(jnp.asarray(img)).pooled)(vision))
    got = nnx.jit(lambda m: m(jnp.asarray(ids), jnp.asarray(mask)).pooled)(text)
    assert_close("text features", tfeats, got)


def test_bfloat16_compute_float32_params(tmp_path):
    testing.write_tiny_checkpoint("bert", tmp_path, "msgpack")
    f32, _, cfg = encoders.load_pretrained(tmp_path)
    bf16, _, _ = encoders.load_pretrained(tmp_path, dtype=jnp.bfloat16)
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(nnx.state(bf16, nnx.Param)))
    ids, mask = (jnp.asarray(a) for a in text_batch(cfg.pad_token_id))
    a = nnx.jit(lambda m: m(ids, mask).last_hidden_state)(f32)
    b = nnx.jit(lambda m: m(ids, mask).last_hidden_state)(bf16)
    assert b.dtype == jnp.bfloat16
    assert float(jnp.abs(a - b.astype(jnp.float32)).max()) < 0.1


def test_dropout_only_in_train_mode(tmp_path):
    testing.write_tiny_checkpoint("bert", tmp_path, "msgpack")
    model, _, cfg = encoders.load_pretrained(tmp_path, rngs=nnx.Rngs(3))
    ids, mask = (jnp.asarray(a) for a in text_batch(cfg.pad_token_id))
    fwd = nnx.jit(lambda m: m(ids, mask).last_hidden_state)
    a, b = fwd(model), fwd(model)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    model.train()
    c, d = fwd(model), fwd(model)
    assert not np.allclose(np.asarray(c), np.asarray(d))
    model.eval()
    np.testing.assert_array_equal(np.asarray(fwd(model)), np.asarray(a))


def test_scratch_encoder():
    model, tokenizer, cfg = encoders.create("scratch:xlm-roberta-tiny", rngs=nnx.Rngs(0))
    assert tokenizer is None and cfg.hidden_size == 32
    out = nnx.jit(lambda m: m(jnp.array([[5, 6, 7, 2]])))(model)
    assert out.last_hidden_state.shape == (1, 4, 32) and out.pooled.shape == (1, 32)
