"""VideoCLIP (vnr.models.encoders.videoclip) against upstream PyTorch (fairseq examples/MMPT).

Golden files (tests/golden/make_videoclip.py, run by hand with torch): upstream's
`MMFusionSeparate` at width 32 with random float16-rounded weights, saved as fairseq's
trainer saves `checkpoint_best.pt` (training state, NumPy scalars and `mmmodel.` prefix
included), inputs made by upstream's `Aligner`, its eval-mode outputs, and the full-size
model's {key: shape}."""

import dataclasses
import json
import pickle
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.models.encoders import torch_checkpoint, videoclip
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "videoclip"
META = json.loads((GOLDEN / "meta.json").read_text())
CKPT = GOLDEN / "checkpoint_best.pt"
LENGTHS = dict(max_video_len=META["max_video_len"], max_len=META["max_len"])
TINY = dataclasses.replace(
    videoclip.VIDEOCLIP_BASE, vocab_size=META["vocab_size"], hidden_size=META["width"],
    num_attention_heads=META["heads"], intermediate_size=META["intermediate"],
    text_layers=META["layers"]["text"], video_layers=META["layers"]["video"],
    max_position_embeddings=META["positions"], video_dim=META["video_dim"], **LENGTHS)
ATOL = 1e-5  # float32
FIELDS = ["video_tokens", "video_hidden", "pooled_video", "pooled_video_short", "text_hidden",
          "pooled_text", "scores"]


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN / "io.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return videoclip.read_checkpoint(CKPT)


@pytest.fixture(scope="module")
def model() -> videoclip.VideoCLIP:
    return videoclip.from_checkpoint(CKPT, num_attention_heads=META["heads"], **LENGTHS)


@nnx.jit
def forward(model: videoclip.VideoCLIP, ids, mask, video, vmask) -> dict[str, jax.Array]:
    """Every golden output from the golden inputs (one compile)."""
    vid = model.encode_video(video, vmask)
    text = model.encode_text(ids, mask)
    short = META["short"]
    return {"video_tokens": model.video_encoder.videomlp(video),
            "video_hidden": vid.last_hidden_state, "pooled_video": vid.pooled,
            "pooled_video_short": model.video_embed(video[:, :short], vmask[:, :short]),
            "text_hidden": text.last_hidden_state, "pooled_text": text.pooled,
            "scores": model(ids, mask, video, vmask)}


@pytest.fixture(scope="module")
def ours(model, golden) -> dict[str, np.ndarray]:
    ids, mask = videoclip.split_caps(golden["caps"], golden["cmasks"])
    out = forward(model, ids, mask, golden["vfeats"], golden["vmasks"])
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize("field", FIELDS)
def test_parity_with_upstream(ours, golden, field):
    ref, got = golden[field], ours[field]
    assert got.shape == ref.shape and got.dtype == np.float32
    diff = float(np.abs(got - ref).max())
    print(f"{field}: max |diff| {diff:.3g} (max |ref| {np.abs(ref).max():.3g})")
    assert diff <= ATOL, (field, diff)


def test_inferred_config_and_float16_weights(model, tensors):
    assert model.config == TINY
    assert tensors["mmmodel.text_encoder.embeddings.word_embeddings.weight"].dtype == np.float16
    p = model.text_encoder.embeddings.word_embeddings.embedding.get_value()
    assert p.dtype == np.float32


def test_tokenizer_matches_upstream_aligner(golden):
    tok = videoclip.VideoCLIPTokenizer(GOLDEN / "vocab.txt", **LENGTHS)
    ids, mask = tok(META["sentences"])
    want_ids, want_mask = videoclip.split_caps(golden["caps"], golden["cmasks"])
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(mask, want_mask)
    assert mask[2].sum() == TINY.max_words + 2  # the long sentence is cut
    assert (golden["caps"][:, :2] == [TINY.cls_token_id, TINY.sep_token_id]).all()


def _full_keys() -> dict[str, tuple[int, ...]]:
    return {k: tuple(v) for k, v in json.loads((GOLDEN / "full_keys.json").read_text()).items()}


def test_keys_match_the_full_upstream_state_dict():
    full = videoclip.unwrap(_full_keys())
    assert all(k.startswith(videoclip.WRAPPER_PREFIX) for k in _full_keys())
    ours = videoclip.upstream_shapes()
    assert set(videoclip.IGNORED_KEYS) <= set(full)
    assert ours == {k: v for k, v in full.items() if k not in videoclip.IGNORED_KEYS}
    assert ours["video_encoder.videomlp.linear1.weight"] == (768, 512)
    assert sum(k.endswith("attention.self.query.weight") for k in ours) == 6 + 12
    # text BERT-base without pooler 108.9M, video tower 67.4M (of it the MLP 1.0M)
    assert sum(int(np.prod(s)) for s in ours.values()) == 176_242_176


def test_full_size_state_dict_loads_abstractly():
    """The full key set (zero-stride views: no memory) sizes and fits VIDEOCLIP_BASE."""
    views = {k: np.broadcast_to(np.float32(0), s) for k, s in _full_keys().items()}
    assert videoclip.infer_config(views, "full") == videoclip.VIDEOCLIP_BASE
    arrays = videoclip.match_state_dict(views, videoclip.VIDEOCLIP_BASE, "full")
    assert arrays["text_encoder.encoder.layer.11.output.dense.kernel"].shape == (3072, 768)
    assert arrays["video_encoder.videomlp.linear1.kernel"].shape == (512, 768)
    assert arrays["video_encoder.bert.encoder.layer.5.output.LayerNorm.scale"].shape == (768,)


def test_bare_state_dict_without_wrapper_prefix(tensors):
    bare = videoclip.unwrap(tensors)
    a = videoclip.match_state_dict(bare, TINY, "bare")
    b = videoclip.match_state_dict(tensors, TINY, "wrapped")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_one_tower_subtree(tensors):
    shapes = videoclip._param_shapes(TINY)
    text = {k: v for k, v in shapes.items() if k.startswith("text_encoder.")}
    got = videoclip.match(tensors, text, "ckpt.pt")
    assert got.keys() == text.keys() and len(text) == 5 + 16 * TINY.text_layers


def test_bfloat16_compute(golden, ours):
    m = videoclip.from_checkpoint(CKPT, cfg=TINY, dtype=jnp.bfloat16)
    assert m.video_encoder.videomlp.linear1.kernel.get_value().dtype == jnp.float32
    ids, mask = videoclip.split_caps(golden["caps"], golden["cmasks"])
    out = forward(m, ids, mask, golden["vfeats"], golden["vmasks"])
    assert out["video_hidden"].dtype == jnp.bfloat16 and out["scores"].dtype == jnp.float32
    # bfloat16's 8-bit mantissa through random (std 0.3) weights: a few per cent
    err = float(np.abs(np.asarray(out["scores"]) - ours["scores"]).max())
    assert err < 0.1 * float(np.abs(ours["scores"]).max()), err


def _one_line(e: pytest.ExceptionInfo, *parts: str) -> None:
    msg = str(e.value)
    assert "\n" not in msg and all(p in msg for p in parts), msg


def test_bad_checkpoints_are_one_line_errors(tensors):
    key = "mmmodel.video_encoder.videomlp.linear2.weight"
    missing = {k: v for k, v in tensors.items() if k != key}
    with pytest.raises(CheckpointError) as e:
        videoclip.match_state_dict(missing, TINY, "ckpt.pt")
    _one_line(e, "ckpt.pt: missing key 'video_encoder.videomlp.linear2.weight'")
    wrong = {**tensors, key: tensors[key][:, :5]}
    with pytest.raises(CheckpointError) as e:
        videoclip.match_state_dict(wrong, TINY, "ckpt.pt")
    _one_line(e, "ckpt.pt: key 'video_encoder.videomlp.linear2.weight' has shape (32, 5)")
    extra = {**tensors, "mmmodel.video_encoder.cls.bias": np.zeros(3, np.float32)}
    with pytest.raises(CheckpointError) as e:
        videoclip.match_state_dict(extra, TINY, "ckpt.pt")
    _one_line(e, "ckpt.pt: unexpected key 'video_encoder.cls.bias'")
    with pytest.raises(CheckpointError) as e:
        videoclip.match_state_dict(tensors, dataclasses.replace(TINY, video_layers=3), "c.pt")
    _one_line(e, "c.pt: missing key 'video_encoder.bert.encoder.layer.2.", "more problems")
    with pytest.raises(CheckpointError) as e:
        videoclip.infer_config({"bert.embeddings.word_embeddings.weight": (5, 4)}, "x.pt")
    _one_line(e, "x.pt: missing key 'text_encoder.embeddings.word_embeddings.weight'")
    with pytest.raises(CheckpointError) as e:
        videoclip.from_checkpoint(GOLDEN / "absent.pt")
    _one_line(e, "absent.pt: no such checkpoint file")


def test_training_state_is_skipped_only_outside_the_weights(tmp_path):
    # The golden file pickles NumPy scalars in its meters: the strict reader refuses them.
    with pytest.raises(CheckpointError) as e:
        torch_checkpoint.read_torch_checkpoint(CKPT)
    _one_line(e, "refusing to unpickle numpy")
    refused = GOLDEN.parent / "torch_checkpoint" / "refused.pth"  # args: argparse.Namespace
    assert list(torch_checkpoint.read_torch_checkpoint(refused, foreign="skip")) == ["w"]
    with pytest.raises(ValueError, match="foreign must be one of"):
        torch_checkpoint.read_torch_checkpoint(refused, foreign="load")
    # A foreign object inside the weights themselves is still refused (legacy format, no
    # tensors: written with plain pickle).
    bad = tmp_path / "bad.pt"
    with open(bad, "wb") as f:
        for obj in (torch_checkpoint.LEGACY_MAGIC, torch_checkpoint.LEGACY_PROTOCOL,
                    {"little_endian": True}, {"model": {"w": dataclasses.FrozenInstanceError()}},
                    []):
            pickle.dump(obj, f, protocol=2)
    with pytest.raises(CheckpointError) as e:
        videoclip.read_checkpoint(bad)
    _one_line(e, "bad.pt: a dataclasses.FrozenInstanceError object at 'w', inside the tensor")


def test_bad_inputs(model, golden):
    video = np.zeros((1, META["max_video_len"] + 1, META["video_dim"]), np.float32)
    with pytest.raises(ValueError, match="video seconds > max_video_len"):
        model.encode_video(video)
    with pytest.raises(ValueError, match="text tokens > max_position_embeddings 40"):
        model.encode_text(np.zeros((1, 41), np.int32), np.ones((1, 41), np.int32))
    with pytest.raises(ValueError, match="needs 41 positions, the table has 40"):
        videoclip.VideoCLIP(dataclasses.replace(TINY, max_video_len=39), rngs=nnx.Rngs(0))
    with pytest.raises(FileNotFoundError, match="no WordPiece vocabulary"):
        videoclip.VideoCLIPTokenizer(GOLDEN / "absent.txt")
    with pytest.raises(ValueError, match="leaves no text slots"):
        videoclip.VideoCLIPTokenizer(GOLDEN / "vocab.txt", max_len=8, max_video_len=8)
