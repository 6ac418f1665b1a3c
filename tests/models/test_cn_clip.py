"""Chinese-CLIP training checkpoints (`cn_clip` port, `vnr.models.encoders.cn_clip`) against
upstream's own model (OFA-Sys/Chinese-CLIP `cn_clip.clip.model.CLIP`).

Golden files (tests/golden/make_cn_clip.py, run by hand with torch): a tiny random CLIP saved
as upstream's training code saves `epoch_latest.pt` (and Movie101 its
`cnclip-huge-movie101.pt`: `module.` keys, an Adam state beside them), its `encode_image` /
`encode_text` outputs, the transformers config of the same model, and the ViT-H-14 +
RoBERTa-wwm-ext-large model's {key: shape}."""

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import chinese_clip as cc
from vnr.models.encoders import cn_clip, loading, ports
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cn_clip"
PT = GOLDEN / "epoch_latest.pt"


def _model() -> cc.ChineseCLIPModel:
    cfg = cc.read_config(GOLDEN / "hf")

    def ctor(rngs: nnx.Rngs) -> cc.ChineseCLIPModel:
        return cc.ChineseCLIPModel(cfg, rngs=rngs)

    arrays = ports.read("cn_clip", PT, loading.param_shapes(ctor))
    return loading.instantiate(ctor, arrays, key=jax.random.key(0))


def test_training_checkpoint_matches_upstream_encoders():
    with np.load(GOLDEN / "io.npz") as f:
        io = dict(f)
    model = _model()
    ids = io["input_ids"]
    image = model.encode_image(io["pixel_values"].transpose(0, 2, 3, 1)).pooled
    text = model.encode_text(ids, (ids != 0).astype(np.int32)).pooled  # upstream: ids != [PAD]
    for name, got, want in (("encode_image", image, io["image_features"]),
                            ("encode_text", text, io["text_features"])):
        diff = float(np.abs(np.asarray(got) - want).max())
        print(f"{name}: max |diff| {diff:.3g} (max |ref| {np.abs(want).max():.3g})")
        assert diff <= 1e-5 * max(1.0, float(np.abs(want).max())), name
    np.testing.assert_allclose(np.asarray(model.logit_scale.get_value()), io["logit_scale"])


def test_the_huge_checkpoint_layout_maps_onto_chinese_clip_huge():
    """Every key of upstream's ViT-H-14 + RoBERTa-wwm-ext-large model renamed, with its shape,
    onto transformers' ChineseCLIP-huge state dict (built from the published sizes)."""
    upstream = json.loads((GOLDEN / "full_keys.json").read_text())
    hf = json.loads((GOLDEN.parent / "chinese_clip" / "full_keys.json").read_text())
    views = {k: np.broadcast_to(np.zeros((), np.float32), s) for k, s in upstream.items()}
    got = {k: list(v.shape) for k, v in cn_clip.to_hugging_face(views, "huge").items()}
    assert got == {k: s for k, s in hf.items() if not k.endswith("position_ids")}


def test_other_files_and_keys_are_one_line(tmp_path):
    univl = GOLDEN.parent / "univl" / "univl.pretrained.bin"
    with pytest.raises(CheckpointError, match="not a Chinese-CLIP training checkpoint"):
        cn_clip.read_tensors(univl)
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        ports.read("cn_clip", tmp_path / "missing.pt", {})
    with pytest.raises(CheckpointError, match=r"'module.visual.attnpool.c_proj.weight' is not"):
        cn_clip.to_hugging_face({"module.visual.attnpool.c_proj.weight": np.zeros((2, 2))}, "f")
    with pytest.raises(CheckpointError, match="not q, k and v stacked"):
        cn_clip.to_hugging_face(
            {"visual.transformer.resblocks.0.attn.in_proj_weight": np.zeros((4, 2))}, "f")
    big = _model()  # the tiny file into a model one layer deeper: the missing key named
    cfg = cc.read_config(GOLDEN / "hf")
    cfg.vision_config.num_hidden_layers = 3

    def ctor(rngs: nnx.Rngs) -> cc.ChineseCLIPModel:
        return cc.ChineseCLIPModel(cfg, rngs=rngs)

    with pytest.raises(CheckpointError, match="vision_model.encoder.layers.2"):
        ports.read("cn_clip", PT, loading.param_shapes(ctor))
    assert big is not None


def test_only_the_weights_storages_are_read_and_an_old_pooler_is_dropped(tmp_path):
    """The Adam state beside the weights is never read: a copy of the file without the
    optimizer's storages loads the same; a `bert.pooler.*` (files saved before upstream
    dropped the pooler) is left out, as upstream's loaders leave it."""
    import io
    import zipfile

    from vnr.models.encoders import torch_checkpoint as tc

    full = tc.read_torch_checkpoint(PT, foreign="skip")
    with zipfile.ZipFile(PT) as z:
        pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
        tree = tc._Unpickler(io.BytesIO(z.read(pkl)), foreign="skip").load()  # noqa: SLF001
        used = tc._roots(tree["state_dict"])  # noqa: SLF001
        every = tc._roots(tree)  # noqa: SLF001
        assert used < every  # the optimizer's moments are storages of their own
        with zipfile.ZipFile(tmp_path / "weights_only.pt", "w") as out:
            for n in z.namelist():
                if "/data/" in n and n.rsplit("/", 1)[-1] in every - used:
                    continue
                out.writestr(z.getinfo(n), z.read(n))
    got = tc.read_torch_checkpoint(tmp_path / "weights_only.pt", foreign="skip")
    assert got.keys() == full.keys()
    assert all(np.array_equal(got[k], full[k]) for k in full)
    state = {**full, "module.bert.pooler.dense.weight": np.zeros((32, 32), np.float32)}
    assert not any("pooler" in k for k in cn_clip.to_hugging_face(state, "f"))
    with pytest.raises(CheckpointError, match="a directory; a Hugging Face"):
        cn_clip.read_tensors(GOLDEN / "hf")
