"""Singularity (vnr.models.encoders.singularity, beit) against upstream PyTorch
(jayleicn/singularity with Hugging Face's BeitModel).

Golden files (tests/golden/make_singularity.py, run by hand with torch): upstream's
pre-training model (xbert `BertForMaskedLM`: `text_encoder.bert.*` + MLM head, BEiT index
buffers as transformers 4.15 saved them) and its retrieval model with the temporal variant
(`text_encoder.*`, 2 temporal layers, 2 temporal embeddings), both tiny (BEiT 2 layers,
16px, patch 4; xbert 2 text + 1 fusion layers; width 32), random weights, saved as upstream
saves (`{"model": state_dict, ...}`), their outputs, and the full-size released
pre-training checkpoints' {key: shape}."""

import dataclasses
import json
import pickle
import sys
import types
import zipfile
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import beit, loading, torch_checkpoint
from vnr.models.encoders import singularity as sg
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "singularity"
PT = GOLDEN / "singularity_tiny_pt.pth"
FT = GOLDEN / "singularity_temporal_tiny_ft.pth"
META = json.loads((GOLDEN / "meta.json").read_text())
ATOL = 1e-5  # float32; measured <= 3e-6


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def pt_tensors() -> dict[str, np.ndarray]:
    return torch_checkpoint.read_torch_checkpoint(PT)


@pytest.fixture(scope="module")
def pt_model() -> sg.Singularity:
    return sg.from_checkpoint(PT)


@pytest.fixture(scope="module")
def ft_model() -> sg.Singularity:
    return sg.from_checkpoint(FT)


def frames(x: np.ndarray) -> jax.Array:
    return jnp.asarray(x.transpose(0, 1, 3, 4, 2))  # upstream [B, T, 3, H, W] -> channels-last


@nnx.jit
def _pretrained(m: sg.Singularity, video, ids, mask, ti, vj) -> dict[str, jax.Array]:
    tokens, pooled = m.encode_video(video)
    text = m.encode_text(ids, mask)
    v, t = m.video_embed(video), m.text_embed(ids, mask)
    cls = m.fuse(text[ti], mask[ti], tokens[vj])[:, 0]
    return dict(image_embeds=tokens, pooled=pooled, text_embeds=text,
                frame_feats=m.frame_embeds(pooled), text_feats=t, sim=m.similarity(v, t),
                sim_temp=m.similarity(v, t, None), fused_cls=cls, itm_logits=m.itm_logits(cls))


@nnx.jit
def _temporal(m: sg.Singularity, video3, ids, mask) -> dict[str, jax.Array]:
    text = m.encode_text(ids, mask)
    t = sg.l2_normalize(m.text_proj(text[:, 0]))
    out = {"_text_embeds": text}
    for n in (2, 3):
        tokens, pooled = m.encode_video(video3[:, :n])
        cls = m.fuse(text, mask, tokens)[:, 0]
        out.update({f"{n}_image_embeds": tokens, f"{n}_pooled": pooled, f"{n}_fused_cls": cls,
                    f"{n}_itm_logits": m.itm_logits(cls),
                    f"{n}_sim": m.similarity(m.frame_embeds(pooled).mean(axis=1), t)})
    return out


@nnx.jit
def _encode(m: sg.Singularity, video) -> tuple[jax.Array, jax.Array]:
    return m.encode_video(video)


def check(got: dict[str, jax.Array], golden: dict, prefix: str) -> None:
    for name, value in got.items():
        ref = golden[prefix + name]
        assert value.shape == ref.shape, name
        diff = float(np.abs(np.asarray(value) - ref).max())
        print(f"{prefix}{name}: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
        assert diff <= ATOL, name


def test_pretrained_parity(pt_model, golden):
    ti, vj = np.repeat(np.arange(2), 2), np.tile(np.arange(2), 2)  # every (text, video) pair
    got = _pretrained(pt_model, frames(golden["video"]), golden["text_ids"],
                      golden["text_mask"], ti, vj)
    check(got, golden, "pt_")
    assert got["image_embeds"].shape == (2, META["frames"] * 17, 32)
    cls = nnx.jit(lambda m, v, i, k: m.pair_cls(v, i, k))(
        pt_model, frames(golden["video"]), golden["text_ids"], golden["text_mask"])
    np.testing.assert_allclose(np.asarray(cls), golden["pt_fused_cls"][::3], atol=ATOL)


def test_temporal_parity(ft_model, golden):
    assert ft_model.config.temporal_layers == 2 and ft_model.config.add_temporal_embed
    # 2 frames, and 3 > the 2 temporal embeddings: interpolated
    check(_temporal(ft_model, frames(golden["video3"]), golden["text_ids"],
                    golden["text_mask"]), golden, "ft")


def test_update_pooler_embed(ft_model, golden):
    m = nnx.clone(ft_model)
    m.config = dataclasses.replace(m.config, update_pooler_embed=True)
    check({"pooled_update": _encode(m, frames(golden["video3"]))[1]}, golden, "ft3_")


@nnx.jit
def _single(m: sg.Singularity, video) -> tuple[jax.Array, jax.Array, jax.Array]:
    tokens, pooled = m.encode_video(video)
    want = m.vision_layernorm(m.vision_encoder(video[:, 0]).last_hidden_state)
    return tokens - m.temporal_embeddings[...][0, :1], want, pooled


def test_single_frame_skips_the_temporal_encoder(ft_model, golden):
    got, want, pooled = _single(ft_model, frames(golden["video3"][:, :1]))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6)
    np.testing.assert_allclose(np.asarray(pooled[:, 0]), golden["ft2_pooled"][:, 0], atol=ATOL)


def test_bfloat16_compute_float32_params(golden):
    m = sg.from_checkpoint(PT, dtype=jnp.bfloat16)
    assert {p.dtype for p in jax.tree.leaves(nnx.state(m, nnx.Param))} == {jnp.dtype("float32")}
    got = np.asarray(nnx.jit(lambda m, v: m.video_embed(v))(m, frames(golden["video"])),
                     np.float32)
    ref = golden["pt_frame_feats"].mean(axis=1)
    assert np.abs(got - ref).max() <= 0.05


def test_interpolation_matrix():
    np.testing.assert_allclose(sg.interpolation_matrix(2, 3),
                               [[1, 0], [0.5, 0.5], [0, 1]], atol=1e-7)
    np.testing.assert_allclose(sg.interpolation_matrix(4, 2), [[.5, .5, 0, 0], [0, 0, .5, .5]])


# ----------------------------------------------------------------------------- layouts


def test_config_from_the_checkpoints(pt_tensors):
    cfg = sg.config_from_tensors(pt_tensors, "x")
    b, t = META["beit"], META["text"]
    assert cfg.vision == beit.BeitConfig(**{f.name: b[f.name] for f in dataclasses.fields(
        beit.BeitConfig) if f.name in b})
    assert (cfg.text.num_hidden_layers, cfg.text.fusion_layer, cfg.text.vocab_size) == (
        t["num_hidden_layers"], t["fusion_layer"], t["vocab_size"])
    assert (cfg.embed_dim, cfg.num_frames, cfg.temporal_layers) == (META["embed_dim"], 1, 0)


def _full(name: str) -> dict[str, tuple[int, ...]]:
    full = json.loads((GOLDEN / "full_keys.json").read_text())[name]
    return {k: tuple(v) for k, v in full.items()}


@pytest.fixture(scope="module")
def temporal_shapes() -> dict[str, tuple[int, ...]]:
    return sg.upstream_shapes(sg.SINGULARITY_TEMPORAL)  # one abstract full-size build (~5 s)


@pytest.mark.parametrize("name,cfg", [("singularity_17m.pth", sg.SINGULARITY),
                                      ("singularity_temporal_17m.pth", sg.SINGULARITY_TEMPORAL)])
def test_keys_match_the_released_layout(name, cfg, temporal_shapes):
    full = _full(name)
    head = {k for k in full if k.startswith("text_encoder.cls.")}
    assert {k.split("predictions.")[1] for k in head} == {
        "bias", "transform.dense.weight", "transform.dense.bias", "transform.LayerNorm.weight",
        "transform.LayerNorm.bias", "decoder.weight", "decoder.bias"}
    ours = {k: v for k, v in temporal_shapes.items() if cfg.temporal_layers or not k.startswith(
        "temporal_vision_encoder.")}
    ours["temporal_embeddings"] = (1, cfg.num_frames, 1, 768)
    assert ours == {k: v for k, v in full.items() if k not in head}
    shapes = SimpleNamespace  # config_from_tensors reads shapes only
    got = sg.config_from_tensors({k: shapes(shape=v) for k, v in full.items()}, name)
    assert got == cfg
    params = {k: v for k, v in full.items() if k not in head and not k.endswith(
        ("_index", "position_ids"))}
    n = sum(int(np.prod(s)) for s in params.values())
    assert n == (216_320_963 if cfg.temporal_layers else 202_142_915)
    assert full["vision_encoder.encoder.layer.11.attention.attention.relative_position_bias."
                "relative_position_bias_table"] == (732, 12)


def test_fine_tuned_layout_reads_without_bert(pt_tensors):
    bare = {k.replace("text_encoder.bert.", "text_encoder."): v for k, v in pt_tensors.items()
            if not k.startswith("text_encoder.cls.")}
    shapes = loading.param_shapes(lambda r: sg.Singularity(sg.config_from_tensors(bare, "x"),
                                                           rngs=r))
    got = sg.match(bare, shapes, "x")
    want = sg.match(pt_tensors, shapes, "x")
    assert set(got) == set(want) == set(shapes)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_index_buffers_are_upstreams(pt_tensors):
    index = [v for k, v in pt_tensors.items() if k.endswith(sg.INDEX)]
    assert len(index) == META["beit"]["num_hidden_layers"]
    for got in index:
        np.testing.assert_array_equal(got, beit.relative_position_index(4))


def test_text_only_tower_from_the_file(pt_tensors):
    cfg = sg.config_from_tensors(pt_tensors, "x")
    text = dataclasses.replace(cfg.text, num_hidden_layers=cfg.text.fusion_layer)
    shapes = {f"text_encoder.{k}": v for k, v in loading.param_shapes(
        lambda r: sg.XBert(text, rngs=r)).items()}
    got = sg.match(pt_tensors, shapes, "x")
    assert set(got) == set(shapes)


# ----------------------------------------------------------------------------- bad inputs


def load_error(monkeypatch, tensors: dict, **kw) -> str:
    """from_checkpoint's error when the file holds `tensors`."""
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", lambda path: tensors)
    with pytest.raises(CheckpointError) as e:
        sg.from_checkpoint("/ckpt/singularity.pth", **kw)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("/ckpt/singularity.pth: ")
    return msg


def test_missing_key(monkeypatch, pt_tensors):
    key = "text_encoder.bert.encoder.layer.2.crossattention.self.value.bias"
    bad = {k: v for k, v in pt_tensors.items() if k != key}
    assert f"missing key {key!r} (shape (32,))" in load_error(monkeypatch, bad)


def test_wrong_shape(monkeypatch, pt_tensors):
    key = "vision_encoder.encoder.layer.1.lambda_2"
    bad = {**pt_tensors, key: np.zeros((16,), np.float32)}
    assert f"key {key!r} has shape (16,), the model expects (32,)" in load_error(monkeypatch,
                                                                                 bad)


def test_unexpected_key(monkeypatch, pt_tensors):
    bad = {**pt_tensors, "vision_encoder.layernorm.weight": np.zeros((32,), np.float32)}
    assert "unexpected key 'vision_encoder.layernorm.weight' (shape (32,))" in load_error(
        monkeypatch, bad)


def test_wrong_index_buffer(monkeypatch, pt_tensors):
    key = "vision_encoder.encoder.layer.0.attention.attention." + sg.INDEX
    bad = {**pt_tensors, key: np.zeros((197, 197), np.int64)}
    assert f"key {key!r} has shape (197, 197), the model expects (17, 17)" in load_error(
        monkeypatch, bad)


def test_skipped_parts(pt_tensors):
    extra = {"vision_proj_m.weight": np.zeros((16, 32), np.float32),
             "text_queue": np.zeros((16, 8), np.float32)}
    shapes = loading.param_shapes(lambda r: sg.Singularity(
        sg.config_from_tensors(pt_tensors, "x"), itm_head=False, rngs=r))
    got = sg.match({**pt_tensors, **extra}, shapes, "x", strict=True)
    assert not any(k.startswith("itm_head") for k in got) and set(got) == set(shapes)


def test_temporal_file_needs_the_temporal_model(monkeypatch):
    tensors = torch_checkpoint.read_torch_checkpoint(FT)
    cfg = dataclasses.replace(sg.config_from_tensors(tensors, "x"), temporal_layers=0)
    msg = load_error(monkeypatch, tensors, cfg=cfg)
    assert "unexpected key 'temporal_vision_encoder.layer.0." in msg
    shapes = loading.param_shapes(lambda r: sg.Singularity(cfg, rngs=r))
    assert set(sg.match(tensors, shapes, "x")) == set(shapes)  # a port may leave it


def test_not_a_singularity_checkpoint(monkeypatch):
    s3d = {"conv1.conv1.weight": np.zeros((64, 24, 2, 4, 4), np.float32)}
    assert "not a Singularity checkpoint: no 'vision_encoder." in load_error(monkeypatch, s3d)
    shapes = {"vision_proj.kernel": (32, 16)}
    with pytest.raises(CheckpointError, match="x: not a Singularity checkpoint: none of its 1"):
        sg.match(s3d, shapes, "x")


def test_bad_frames(pt_model):
    with pytest.raises(ValueError, match=r"frames \[B, T, H, W, C\]"):
        pt_model.encode_video(jnp.zeros((1, 16, 16, 3)))
    with pytest.raises(ValueError, match=r"\[B, 16, 16, 3\]"):
        pt_model.encode_video(jnp.zeros((1, 2, 32, 32, 3)))


def test_config_checks():
    with pytest.raises(ValueError, match="encoder_width"):
        sg.SingularityConfig(text=sg.XBertConfig(encoder_width=512)).check()
    with pytest.raises(ValueError, match="not a multiple of patch_size"):
        beit.BeitConfig(image_size=100).check()


def test_pickled_omegaconf_config(monkeypatch, tmp_path, pt_tensors):
    """Upstream saves `{"model": ..., "config": <OmegaConf DictConfig>, ...}`: the reader
    refuses that class by default (the message names it), so the loader asks a reader that
    can skip foreign classes to, and otherwise says how to keep only the weights."""
    mod = types.ModuleType("omegaconf.dictconfig")
    cls = type("DictConfig", (), {"__module__": "omegaconf.dictconfig"})
    mod.DictConfig = cls
    monkeypatch.setitem(sys.modules, "omegaconf", types.ModuleType("omegaconf"))
    monkeypatch.setitem(sys.modules, "omegaconf.dictconfig", mod)
    path = tmp_path / "singularity_17m.pth"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"model": {}, "config": cls()}, protocol=2))
    with pytest.raises(CheckpointError, match="omegaconf.dictconfig.DictConfig"):
        torch_checkpoint.read_torch_checkpoint(path)
    refusal = CheckpointError("/p.pth: refusing to unpickle omegaconf.dictconfig.DictConfig")

    def reader(path, foreign="refuse"):
        if foreign == "refuse":
            raise refusal
        return pt_tensors

    def old_reader(path):
        raise refusal

    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", reader)
    assert sg.read_tensors("/p.pth") is pt_tensors
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", old_reader)
    with pytest.raises(CheckpointError, match=r"DictConfig; keep only the weights: torch.save"):
        sg.read_tensors("/p.pth")
