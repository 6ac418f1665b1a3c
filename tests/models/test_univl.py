"""UniVL (vnr.models.encoders.univl) against upstream PyTorch (microsoft/UniVL).

Golden files (tests/golden/make_univl.py, run by hand with torch): upstream's pre-training
UniVL at width 16 with random weights, its state dict saved by `torch.save` as
`univl.pretrained.bin` is, upstream's tokenizer output on a tiny vocabulary, its eval-mode
outputs (text / visual / cross states and pooler outputs, both similarity matrices), and the
full-size state dict's {key: shape}."""

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import torch_checkpoint, univl
from vnr.models.encoders.loading import CheckpointError
from vnr.models.encoders.univl_decoder import TIED_KEYS

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "univl"
META = json.loads((GOLDEN / "meta.json").read_text())
CKPT = GOLDEN / "univl.pretrained.bin"
TINY = univl.UniVLConfig(
    vocab_size=len((GOLDEN / "vocab.txt").read_text().split()), hidden_size=META["width"],
    num_attention_heads=META["heads"], intermediate_size=META["intermediate"],
    text_layers=META["layers"]["text"], text_positions=META["positions"]["text"],
    video_dim=META["video_dim"], visual_layers=META["layers"]["visual"],
    visual_positions=META["positions"]["visual"], cross_layers=META["layers"]["cross"],
    cross_positions=META["positions"]["cross"], decoder_layers=META["layers"]["decoder"])
DECODER = 3 * 9_451_776 + 1536 + 590_592 + 1536 + 30522  # layers, embedding LN, head
RTOL = 1e-5  # of the output's largest magnitude, float32


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return torch_checkpoint.read_torch_checkpoint(CKPT)


@pytest.fixture(scope="module")
def model() -> univl.UniVL:
    return univl.from_checkpoint(CKPT, num_attention_heads=META["heads"])


@nnx.jit
def forward(model: univl.UniVL, ids, mask, video, vmask, caption) -> dict[str, jax.Array]:
    """Every golden output, end to end from the golden inputs (jitted: one compile is
    faster than eager dispatch here)."""
    text = model.encode_text(ids, mask)
    vid = model.encode_video(video, vmask)
    t, v = text.last_hidden_state, vid.last_hidden_state
    cross = model.cross_encode(t, mask, v, vmask)
    return {"video_normalized": model.normalize_video.visual_norm2d(video),
            "text_hidden": t, "text_pooled": text.pooler_output,
            "visual_hidden": v, "visual_pooled": vid.pooler_output,
            "cross_hidden": cross.last_hidden_state, "cross_pooled": cross.pooler_output,
            "sim_cross": model.cross_similarity(t, mask, v, vmask),
            "sim_mean": model.mean_similarity(t, mask, v, vmask),
            "decoder_logits": model.caption_logits(t, mask, v, vmask, caption, caption > 0)}


def inputs(golden: dict) -> tuple[np.ndarray, ...]:
    return golden["input_ids"], golden["attention_mask"], golden["video"], golden["video_mask"]


@pytest.fixture(scope="module")
def ours(model, golden) -> dict[str, np.ndarray]:
    out = forward(model, *inputs(golden), golden["caption_ids"])
    return {k: np.asarray(v) for k, v in out.items()}


FIELDS = ["video_normalized", "text_hidden", "text_pooled", "visual_hidden", "visual_pooled",
          "cross_hidden", "cross_pooled", "sim_cross", "sim_mean", "decoder_logits"]


@pytest.mark.parametrize("field", FIELDS)
def test_parity_with_upstream(ours, golden, field):
    ref, got = golden[field], ours[field]
    assert got.shape == ref.shape and got.dtype == np.float32
    diff = float(np.abs(got - ref).max())
    print(f"{field}: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
    assert diff <= RTOL * float(np.abs(ref).max()), (field, diff)


def test_inferred_config_is_the_fixture_config(model):
    assert model.config == TINY


@nnx.jit(static_argnames=("mode", "text_chunk"))
def scores(model: univl.UniVL, ids, mask, video, vmask, mode="cross", text_chunk=None):
    return model(ids, mask, video, vmask, mode=mode, text_chunk=text_chunk)


def test_call_scores_in_chunks(model, ours, golden):
    got = scores(model, *inputs(golden), text_chunk=2)
    np.testing.assert_allclose(np.asarray(got), ours["sim_cross"], rtol=1e-6, atol=1e-6)
    pairs = nnx.jit(univl.UniVL.pair_logits)(
        model, golden["text_hidden"], golden["attention_mask"], golden["visual_hidden"],
        golden["video_mask"])
    np.testing.assert_allclose(np.asarray(pairs), np.diag(golden["sim_cross"]), atol=1e-5)


def test_bfloat16_compute(golden, ours):
    m = univl.from_checkpoint(CKPT, cfg=TINY, dtype=jnp.bfloat16)
    assert m.bert.embeddings.word_embeddings.embedding.get_value().dtype == jnp.float32
    out = forward(m, *inputs(golden), golden["caption_ids"])
    assert out["text_hidden"].dtype == jnp.bfloat16 and out["sim_cross"].dtype == jnp.float32
    assert float(np.abs(np.asarray(out["sim_cross"]) - ours["sim_cross"]).max()) < 0.05


def test_tokenizer_matches_upstream(golden):
    tok = univl.UniVLTokenizer(GOLDEN / "vocab.txt", max_words=META["max_words"])
    ids, mask = tok(META["sentences"])
    np.testing.assert_array_equal(ids, golden["input_ids"])
    np.testing.assert_array_equal(mask, golden["attention_mask"])


def _full_keys() -> dict[str, tuple[int, ...]]:
    return {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}


def test_keys_match_the_full_upstream_state_dict():
    full = _full_keys()
    ours = univl.upstream_shapes()
    assert ours == {k: v for k, v in full.items()
                    if not k.startswith(univl.HEAD_PREFIXES) and k not in TIED_KEYS}
    assert {k.split(".")[0] for k in full if k not in ours} == {"cls", "cls_visual", "decoder"}
    assert [k for k in full if k.startswith("decoder.") and k not in ours] == list(TIED_KEYS)
    assert ours["visual.embeddings.word_embeddings.weight"] == (768, 1024)
    assert ours["cross.embeddings.position_embeddings.weight"] == (1024, 768)
    # BERT-base 109.5M, visual 44.3M, cross 15.5M, decoder 28.4M, similarity head, video LN
    assert sum(int(np.prod(s)) for s in ours.values()) == 169_340_673 + DECODER
    no_decoder = univl.upstream_shapes(dataclasses.replace(univl.UNIVL_BASE, decoder_layers=0))
    assert sum(int(np.prod(s)) for s in no_decoder.values()) == 169_340_673


def test_full_size_state_dict_loads_abstractly():
    """The full key set (zero-stride views: no memory) sizes and fits UNIVL_BASE."""
    views = {k: np.broadcast_to(np.float32(0), s) for k, s in _full_keys().items()}
    assert univl.infer_config(views, "full") == univl.UNIVL_BASE
    arrays = univl.match_state_dict(views, univl.UNIVL_BASE, "full")
    assert arrays["bert.encoder.layer.11.output.dense.kernel"].shape == (3072, 768)


def load_error(monkeypatch, tensors: dict, cfg: univl.UniVLConfig | None = TINY) -> str:
    """from_checkpoint's error when the file holds `tensors`."""
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", lambda path: tensors)
    with pytest.raises(CheckpointError) as e:
        univl.from_checkpoint("/ckpt/univl.pretrained.bin", cfg=cfg)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("/ckpt/univl.pretrained.bin: ")
    return msg


def test_missing_key(monkeypatch, tensors):
    gone = "cross.encoder.layer.1.attention.self.key.weight"
    bad = {k: v for k, v in tensors.items() if k != gone}
    assert f"missing key '{gone}' (UniVL expects shape (16, 16))" in load_error(monkeypatch, bad)


def test_wrong_shape(monkeypatch, tensors):
    bad = {**tensors, "similarity_dense.weight": np.zeros((2, 16), np.float32)}
    msg = load_error(monkeypatch, bad)
    assert "key 'similarity_dense.weight' has shape (2, 16), UniVL expects (1, 16)" in msg


def test_unexpected_key(monkeypatch, tensors):
    bad = {**tensors, "visual.encoder.layer.2.output.dense.bias": np.zeros(16, np.float32)}
    msg = load_error(monkeypatch, bad)
    assert "unexpected key 'visual.encoder.layer.2.output.dense.bias'" in msg


def test_full_size_checkpoint_into_tiny_config(monkeypatch, tensors):
    bad = {**tensors, "normalize_video.visual_norm2d.weight": np.ones(1024, np.float32)}
    msg = load_error(monkeypatch, bad)
    assert "'normalize_video.visual_norm2d.weight' has shape (1024,), UniVL expects (12,)" in msg


def test_another_architecture(monkeypatch):
    s3d = {"conv1.conv1.weight": np.zeros((64, 3, 2, 4, 4), np.float32)}
    msg = load_error(monkeypatch, s3d, cfg=None)
    assert "missing key 'bert.embeddings.word_embeddings.weight'" in msg


def test_stage_one_checkpoint_has_no_cross_encoder(monkeypatch, tensors, ours, golden):
    stage_one = {k: v for k, v in tensors.items()
                 if not k.startswith(("cross.", "similarity_dense.", *univl.UNUSED_PREFIXES))}
    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", lambda path: stage_one)
    m = univl.from_checkpoint("/ckpt/stage_one.bin", num_attention_heads=META["heads"])
    assert m.config.cross_layers == 0 and m.cross is None
    np.testing.assert_allclose(np.asarray(scores(m, *inputs(golden), mode="mean")),
                               ours["sim_mean"], atol=1e-6)
    with pytest.raises(ValueError, match="no cross encoder"):
        scores(m, *inputs(golden), mode="cross")


def test_not_a_torch_file(tmp_path):
    p = tmp_path / "univl.pretrained.bin"
    p.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=str(p)):
        univl.from_checkpoint(p)


def test_without_the_decoder(golden, ours):
    m = univl.from_checkpoint(CKPT, num_attention_heads=META["heads"], decoder=False)
    assert m.decoder is None and m.config.decoder_layers == 0
    got = scores(m, *inputs(golden), mode="mean")
    np.testing.assert_allclose(np.asarray(got), ours["sim_mean"], atol=1e-6)


def test_missing_decoder_key(monkeypatch, tensors):
    gone = "decoder.decoder.layer.0.enc_attn.att.value.bias"
    bad = {k: v for k, v in tensors.items() if k != gone}
    assert f"missing key '{gone}'" in load_error(monkeypatch, bad)


def test_tied_decoder_copies_are_optional(monkeypatch, tensors):
    lean = {k: v for k, v in tensors.items() if k not in TIED_KEYS}
    arrays = univl.match_state_dict(lean, TINY, "x")
    assert arrays["decoder.classifier.cls.predictions.bias"].shape == (TINY.vocab_size,)
