"""SYMON's zero-shot VideoCLIP rows (Tables 8 and 9): the `videoclip` presets' wrapper,
tokens and errors (the rows end to end: tests/reproduce/test_smoke_symon.py).

The checkpoint is the golden one of tests/models/test_videoclip.py (upstream's
MMFusionSeparate at width 32, random weights, saved as fairseq saves `checkpoint_best.pt`;
2 heads, max_video_len 8, max_len 24); the releases are the generated SYMON and YMS corpora
with 512-d features (`smoke_inputs.videoclip_inputs`, as the smoke rows read them)."""

import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tests import ROOT
from vnr import config as config_lib
from vnr.benchmarks.symon import data, retrieval, smoke_inputs, videoclip_model
from vnr.models.encoders import videoclip

GOLDEN = ROOT / "tests" / "golden" / "videoclip"
CKPT = GOLDEN / "checkpoint_best.pt"
META = json.loads((GOLDEN / "meta.json").read_text())
SIZES = dict(videoclip_heads=META["heads"], videoclip_max_video_len=META["max_video_len"],
             videoclip_max_len=META["max_len"])
TEXT_LEN = META["max_len"] - META["max_video_len"] - 1  # upstream's text-tower slots (15)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> pathlib.Path:
    return smoke_inputs.videoclip_inputs(tmp_path_factory.mktemp("symon_videoclip"))


def _config(name: str, arg: str, manual_dir: pathlib.Path, data_dir: pathlib.Path):
    c = config_lib.load(f"{ROOT / 'configs' / 'symon' / name}.py:{arg}")
    c.data.update(manual_dir=str(manual_dir), data_dir=str(data_dir), tokenizer=str(GOLDEN),
                  max_tokens=16)
    c.model.update(videoclip_checkpoint=str(CKPT), **SIZES)
    c.progress = False
    return c


def _retrieval(inputs: pathlib.Path, data_dir: pathlib.Path, arg: str = "videoclip,smoke"):
    c = _config("retrieval", arg, inputs / "release", data_dir)
    c.data.config = "features"
    return c


def _loaded(cfg: videoclip.VideoCLIPConfig) -> videoclip_model.VideoCLIPRetrievalModel:
    """The wrapper with the golden weights, put in as the `pretrained` hook's port reads them."""
    model = videoclip_model.VideoCLIPRetrievalModel(cfg, rngs=nnx.Rngs(0))
    params = {".".join(map(str, p)): (p, v)
              for p, v in nnx.to_flat_state(nnx.state(model.videoclip, nnx.Param))}
    arrays = videoclip.match(videoclip.read_checkpoint(CKPT),
                             {n: tuple(v.get_value().shape) for n, (_, v) in params.items()},
                             "golden")
    assert set(arrays) == set(params)
    nnx.update(model.videoclip, nnx.from_flat_state(
        [(p, v.replace(jnp.asarray(arrays[n]))) for n, (p, v) in params.items()]))
    model.eval()
    return model


def test_wrapper_scores_are_videoclips_own(tmp_path):
    """The dual encoder's text x video dot products = upstream's retrieval scores (golden,
    from MMFusionSeparate) and = the port's own `VideoCLIP.__call__`, also on clips shorter
    than max_video_len (SYMON's 4 rows) with padded seconds."""
    with np.load(GOLDEN / "io.npz") as f:
        g = dict(f)
    c = _config("retrieval", "videoclip,smoke", tmp_path, tmp_path)
    model = _loaded(videoclip_model.videoclip_config(c))
    ids, mask = videoclip.split_caps(g["caps"], g["cmasks"])
    empty = np.zeros_like(ids)

    @nnx.jit
    def score(m, video, vmask):
        t = m.encode_text(ids, empty, empty.astype(bool), train=False, rngs=None,
                          token_mask=mask.astype(bool))
        v = m.encode_video(video, vmask.astype(bool), jnp.zeros_like(video),
                           jnp.zeros_like(vmask, bool), train=False, rngs=None)
        return t @ v.T, m.videoclip(ids, mask, video, vmask)

    ours, own = score(model, g["vfeats"], g["vmasks"])
    np.testing.assert_allclose(np.asarray(ours), g["scores"], atol=1e-5)
    short, smask = g["vfeats"][:, :4], g["vmasks"][:, :4].copy()
    smask[0, 2:] = 0  # a clip of two seconds, zero-padded to four
    ours, own = score(model, short * smask[..., None], smask)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(own), atol=1e-5)


def test_tokens_are_upstreams_text_layout():
    """`data.tokens_of` with the preset's tokenizer at upstream's length = the Aligner's
    captions after `split_caps` (golden) = `VideoCLIPTokenizer`."""
    with np.load(GOLDEN / "io.npz") as f:
        ids, _ = videoclip.split_caps(f["caps"], f["cmasks"])
    tok = videoclip.VideoCLIPTokenizer(GOLDEN / "vocab.txt", META["max_len"],
                                       META["max_video_len"])
    long = " ".join(META["sentences"] * 3)  # more pieces than upstream keeps: cut on the right
    for i, s in enumerate([*META["sentences"], long]):
        got = data.tokens_of(s, 0, TEXT_LEN, str(GOLDEN))
        np.testing.assert_array_equal(got, tok([s])[0][0], err_msg=s)
        if i < len(META["sentences"]):
            np.testing.assert_array_equal(got, ids[i], err_msg=s)


def test_videoclip_errors_are_one_line(inputs, tmp_path):
    c = _retrieval(inputs, tmp_path)
    assert (c.model.encoder, c.data.memory, c.total_steps) == ("videoclip", False, 0)
    for name in ("retrieval", "yms_transfer"):  # the 512-d builds apart from UniVL's
        d = config_lib.load(f"{ROOT / 'configs/symon' / name}.py:videoclip").data
        assert d.data_dir == "data/tfds_videoclip" and d.max_tokens == 64
    with pytest.raises(ValueError, match="videoclip has no memory inputs"):
        config_lib.load(f"{ROOT / 'configs/symon/retrieval.py'}:videoclip,memory")
    with pytest.raises(ValueError, match="pick one pretrained encoder"):
        config_lib.load(f"{ROOT / 'configs/symon/yms_transfer.py'}:videoclip,univl")
    c.model.videoclip_checkpoint = str(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="missing.pt: no such checkpoint file"):
        videoclip_model.videoclip_config(c)
    c = _retrieval(inputs, tmp_path)
    c.data.tokenizer = "hash"
    with pytest.raises(ValueError, match="data.tokenizer=DIR"):
        videoclip_model.videoclip_config(c)
    c = _retrieval(inputs, tmp_path)
    c.data.memory = True
    with pytest.raises(ValueError, match="no memory inputs"):
        videoclip_model.videoclip_config(c)
    c = _retrieval(inputs, tmp_path)
    c.data.max_frames = 9
    with pytest.raises(ValueError, match="max_frames=9 exceeds VideoCLIP's max_video_len 8"):
        videoclip_model.videoclip_config(c)
    c = _retrieval(inputs, tmp_path)
    c.data.max_tokens = 41
    with pytest.raises(ValueError, match="max_tokens=41 exceeds the 40 positions"):
        videoclip_model.videoclip_config(c)
    with pytest.raises(ValueError, match="the features are 1024-d, .* reads 512-d"):
        videoclip_model.make(_retrieval(inputs, tmp_path), 1024, nnx.Rngs(0))
    assert retrieval.pretrained(_retrieval(inputs, tmp_path)) == {
        "videoclip": (str(CKPT), "videoclip")}


# test_videoclip_rows_zero_shot_on_generated_releases: tests/reproduce/test_smoke_symon.py
