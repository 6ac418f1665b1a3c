"""SYMON retrieval with UniVL's own towers (§7.1): the `univl` preset's towers, loader,
tokens, errors and step counts (its rows end to end: tests/reproduce/test_smoke_symon.py).

The checkpoint is the golden one of tests/models/test_univl.py (upstream's UniVL at width
16, random weights, saved by `torch.save` as `univl.pretrained.bin` is); the release is the
generated SYMON corpus in the release layout with its features cut to the checkpoint's
12-d input (the real ones are S3D's 1024-d rows)."""

import json
import math
import pathlib

import jax
import numpy as np
import pytest
from flax import nnx

from tests import ROOT
from tfds_builders.symon import synthetic
from vnr import config as config_lib
from vnr import train
from vnr.benchmarks.symon import retrieval
from vnr.benchmarks.symon.model import UniVLRetrievalModel
from vnr.models.encoders import torch_checkpoint, univl

GOLDEN = ROOT / "tests" / "golden" / "univl"
CKPT = GOLDEN / "univl.pretrained.bin"
HEADS = json.loads((GOLDEN / "meta.json").read_text())["heads"]


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("symon_univl")
    synthetic.write_corpus(root, "tiny", seed=3)
    for f in (root / "features").glob("*.npy"):
        np.save(f, np.load(f)[:, :12].astype(np.float16))  # UniVL's extractor stores float16
    return root


def _config(release: pathlib.Path, data_dir: pathlib.Path, arg: str = "univl,smoke,no_memory"):
    c = config_lib.load(f"{ROOT / 'configs' / 'symon' / 'retrieval.py'}:{arg}")
    c.data.update(config="features", manual_dir=str(release), data_dir=str(data_dir),
                  tokenizer=str(GOLDEN), max_tokens=12)
    c.model.update(univl_checkpoint=str(CKPT), univl_heads=HEADS)
    c.progress = False
    return c


def _params(model: UniVLRetrievalModel) -> dict[str, tuple]:
    """NNX name -> (path, variable) of the towers' parameters."""
    return {".".join(map(str, p)): (p, v)
            for p, v in nnx.to_flat_state(nnx.state(model.univl, nnx.Param))}


def _shapes(model: UniVLRetrievalModel) -> dict[str, tuple[int, ...]]:
    return {n: tuple(v.get_value().shape) for n, (_, v) in _params(model).items()}


def test_towers_score_as_upstream_mean_similarity():
    """Clip inputs with an empty memory give upstream's stage-one similarity exactly."""
    with np.load(GOLDEN / "io.npz") as f:
        g = dict(f)
    cfg = univl.infer_config(torch_checkpoint.read_torch_shapes(CKPT), str(CKPT),
                             num_attention_heads=HEADS)
    model = nnx.jit(lambda: UniVLRetrievalModel(cfg, rngs=nnx.Rngs(0)))()  # one program
    arrays = univl.match(torch_checkpoint.read_torch_checkpoint(CKPT), _shapes(model), "x")
    nnx.update(model.univl, nnx.from_flat_state(
        [(p, v.replace(jax.numpy.asarray(arrays[n]))) for n, (p, v) in _params(model).items()]))
    ids, mask = g["input_ids"], g["attention_mask"].astype(bool)
    video, vmask = g["video"], g["video_mask"].astype(bool)

    @nnx.jit
    def similarity(m, ids, mask, video, vmask):
        t = m.encode_text(ids, jax.numpy.zeros_like(ids), jax.numpy.zeros_like(mask),
                          train=False, rngs=None, token_mask=mask)
        v = m.encode_video(video, vmask, jax.numpy.zeros_like(video),
                           jax.numpy.zeros_like(vmask), train=False, rngs=None)
        return t @ v.T

    got = similarity(model, ids, mask, video, vmask)
    np.testing.assert_allclose(np.asarray(got), g["sim_mean"], atol=2e-6)


def test_loader_leaves_exactly_cross_decoder_and_heads():
    tensors = torch_checkpoint.read_torch_checkpoint(CKPT)
    cfg = univl.infer_config(tensors, "x", num_attention_heads=HEADS)
    shapes = _shapes(nnx.eval_shape(lambda: UniVLRetrievalModel(cfg, rngs=nnx.Rngs(0))))
    arrays = univl.match(tensors, shapes, "x")
    assert set(arrays) == set(shapes)
    left = {k for k in tensors if k not in {univl.loading.torch_key(n) for n in shapes}}
    spare = ("cross.", "similarity_dense.", "decoder.", "cls.", "cls_visual.")
    assert left and all(k.startswith(spare) for k in left), sorted(left)[:5]
    stray = {**tensors, "visual.extra.weight": np.zeros((2,), np.float32)}
    with pytest.raises(univl.CheckpointError, match="unexpected key 'visual.extra.weight'"):
        univl.match(stray, shapes, "x")


# test_univl_preset_trains_and_evaluates_every_test_clip: tests/reproduce/test_smoke_symon.py


def test_univl_errors_are_one_line(release, tmp_path):
    c = _config(release, tmp_path / "tfds")
    c.model.univl_checkpoint = str(tmp_path / "missing.bin")
    with pytest.raises(train.ConfigError, match="missing.bin: no such checkpoint file"):
        train.setup(c)
    c = _config(release, tmp_path / "tfds")
    c.data.tokenizer = "hash"
    with pytest.raises(train.ConfigError, match="data.tokenizer=DIR"):
        train.setup(c)
    c = _config(release, tmp_path / "tfds", "univl,smoke,memory")
    c.data.max_tokens = 16
    with pytest.raises(train.ConfigError, match=r"max_tokens=16 \(x2 with the memory\) "
                       "exceeds the 24 positions"):
        train.setup(c)
    assert retrieval.ENCODERS == ("scratch", "univl", "videoclip")


# test_yms_alignment_with_univl_itself_and_a_univl_symon_run: tests/reproduce/test_smoke_symon.py
# test_univl_ordering_trains_and_evaluates: tests/reproduce/test_smoke_symon.py


def test_center_tokens_keep_cls_and_sep_around_the_middle_pieces():
    from vnr.benchmarks.symon import data

    text = "the man cuts onions into small pieces then heat oil in a pan"
    ids = data.center_tokens(text, 0, 8, str(GOLDEN))
    full = data.tokens_of(text, 0, 64, str(GOLDEN))
    n = int((full > 0).sum())
    assert ids[0] == full[0] and ids[7] == full[n - 1]  # [CLS] ... [SEP]
    lo = 1 + (n - 2 - 6) // 2
    assert ids[1:7].tolist() == full[lo:lo + 6].tolist()


def test_univl_presets_count_the_papers_epochs_on_the_built_split(release, tmp_path):
    """Appendix E (20 epochs, 1 warm-up) and D (30, 6) become steps of this release."""
    from vnr.benchmarks.symon import data, order

    c = _config(release, tmp_path / "tfds", "univl,no_memory")
    assert (c.epochs, c.warmup_epochs, c.batch_size, c.optimizer) == (20, 1, 1024, "sgd")
    c.batch_size, c.evals.val.every = 16, 1
    retrieval.validate(c)
    n = len(data.ItemSource(c.data, "train", "retrieval"))
    assert (c.total_steps, c.warmup_steps) == (math.ceil(20 * n / 16), math.ceil(n / 16))
    assert n > 16
    o = config_lib.load(f"{ROOT / 'configs' / 'symon' / 'order.py'}:univl,video_only,a_to_b")
    assert (o.epochs, o.warmup_epochs, o.batch_size, o.lr) == (30, 6, 256, 1e-5)
    o.data.update(config="features", manual_dir=str(release), data_dir=str(tmp_path / "tfds"),
                  tokenizer=str(GOLDEN), max_tokens=16)
    o.model.update(univl_checkpoint=str(CKPT), univl_heads=HEADS)
    o.batch_size = 8
    o.evals.val.every = 1
    order.validate(o)
    n = len(data.ItemSource(o.data, "setA", "order"))
    assert (o.total_steps, o.warmup_steps) == (math.ceil(30 * n / 8), math.ceil(6 * n / 8))
