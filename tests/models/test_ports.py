"""`vnr.models.encoders.ports`: each upstream-format reader, given the NNX shapes of the
subtree a task builds, returns exactly what that port's own (golden-tested) loader reads,
and the trainer's `pretrained` hook accepts it as a source."""

from pathlib import Path

import numpy as np
import pytest
from flax import nnx

from tests.models import test_s3d, test_swin, test_univl
from vnr import pretrained, sharding
from vnr.models.encoders import (
    cclm,
    loading,
    ports,
    s3d,
    swin,
    timesformer,
    torch_checkpoint,
    univl,
    videomae,
)
from vnr.models.encoders.loading import CheckpointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _shapes(module: nnx.Module) -> dict[str, tuple[int, ...]]:
    return {".".join(map(str, p)): tuple(v.get_value().shape)
            for p, v in nnx.to_flat_state(nnx.state(module, nnx.Param))}


def _same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for k, w in want.items():
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(w), err_msg=k)


def _params(module: nnx.Module) -> dict[str, np.ndarray]:
    return {".".join(map(str, p)): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(nnx.state(module, nnx.Param))}


def test_univl_port_with_and_without_cross_and_decoder():
    tensors = torch_checkpoint.read_torch_checkpoint(test_univl.CKPT)
    full = loading.param_shapes(lambda r: univl.UniVL(test_univl.TINY, rngs=r))
    _same(ports.read("univl", test_univl.CKPT, full),
          univl.match_state_dict(tensors, test_univl.TINY, "x"))
    lean = {k: v for k, v in full.items() if not k.startswith(("cross.", "similarity_dense.",
                                                                "decoder."))}
    got = ports.read("univl", test_univl.CKPT, lean)
    assert set(got) == set(lean)


def test_s3d_port():
    path = GOLDEN / "s3d" / "weights_zip.pth"
    shapes = loading.param_shapes(lambda r: s3d.S3D(test_s3d.TINY, r))
    _same(ports.read("s3d", path, shapes),
          s3d.match_state_dict(torch_checkpoint.read_torch_checkpoint(path), test_s3d.TINY, "x"))


def test_cclm_ports():
    tensors = torch_checkpoint.read_torch_checkpoint(test_swin.CKPT)
    shapes = loading.param_shapes(lambda r: swin.SwinTransformer(test_swin.TINY, rngs=r))
    _same(ports.read("cclm_vision", test_swin.CKPT, shapes),
          cclm.match_swin(tensors, test_swin.TINY, "x"))
    text = cclm.text_from_checkpoint(test_swin.CKPT, heads=2)
    _same(ports.read("cclm_text", test_swin.CKPT, _shapes(text)), _params(text))


@pytest.mark.parametrize("name,sub", [("videomae", "pretraining"),
                                      ("videomae", "classification"), ("timesformer", "")])
def test_hugging_face_ports(name, sub):
    """Pre-training and fine-tuned (fc_norm outside the tower) files, safetensors and .bin."""
    directory = GOLDEN / name / sub
    mod = {"videomae": videomae, "timesformer": timesformer}[name]
    model = mod.from_pretrained(directory)
    _same(ports.read(name, directory, _shapes(model)), _params(model))


def test_port_errors_are_one_line(tmp_path):
    with pytest.raises(CheckpointError, match=r"missing\.bin: no such checkpoint \(a UniVL"):
        ports.read("univl", tmp_path / "missing.bin", {})
    with pytest.raises(ValueError, match="unknown checkpoint port 'bogus'"):
        ports.read("bogus", tmp_path, {})
    shapes = loading.param_shapes(lambda r: univl.UniVL(test_univl.TINY, rngs=r))
    shapes["bert.pooler.dense.kernel"] = (3, 3)
    with pytest.raises(CheckpointError, match="'bert.pooler.dense.weight' has shape"):
        ports.read("univl", test_univl.CKPT, shapes)


def test_pretrained_hook_loads_a_port_source():
    """The trainer's loader puts a port's tensors into a sharded state's subtree."""
    import jax

    class Holder(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.tower = swin.SwinTransformer(test_swin.TINY, rngs=rngs)

    model = Holder(nnx.Rngs(0))
    state = nnx.state(model)
    sh = sharding.state_shardings(state, sharding.make_mesh((1, 1), ("data", "model"),
                                                            jax.devices()[:1]))
    lines: list[str] = []
    new = pretrained.load(state, sh, {"tower": (str(test_swin.CKPT), "cclm_vision")}, root=(),
                          say=lines.append)
    nnx.update(model, new)
    want = cclm.match_swin(torch_checkpoint.read_torch_checkpoint(test_swin.CKPT),
                           test_swin.TINY, "x")
    _same(_params(model.tower), want)
    assert lines and "(cclm_vision)" in lines[0]


def test_one_file_is_read_once_for_two_towers(monkeypatch):
    """CCLM's image and text towers come from one .th: the loader reads it once."""
    reads: list[str] = []
    real = torch_checkpoint.read_torch_checkpoint

    def counted(path):
        reads.append(str(path))
        return real(path)

    monkeypatch.setattr(torch_checkpoint, "read_torch_checkpoint", counted)
    text = cclm.text_from_checkpoint(test_swin.CKPT, heads=2)
    reads.clear()
    files: dict = {}
    shapes = loading.param_shapes(lambda r: swin.SwinTransformer(test_swin.TINY, rngs=r))
    ports.read("cclm_vision", test_swin.CKPT, shapes, files)
    _same(ports.read("cclm_text", test_swin.CKPT, _shapes(text), files), _params(text))
    assert reads == [str(test_swin.CKPT)]


def test_videoclip_singularity_and_chinese_clip_ports():
    """The three training-checkpoint / hub ports return their loaders' own reading, whole
    and for one tower (VideoCLIP's fairseq file carries training state beside the weights)."""
    from tests.models import test_singularity, test_videoclip
    from vnr.models.encoders import chinese_clip, singularity, videoclip

    tensors = videoclip.read_checkpoint(test_videoclip.CKPT)
    full = loading.param_shapes(lambda r: videoclip.VideoCLIP(
        test_videoclip.TINY, dtype=np.float32, param_dtype=np.float32, rngs=r))
    _same(ports.read("videoclip", test_videoclip.CKPT, full),
          videoclip.match(tensors, full, "x"))
    text = {k: v for k, v in full.items() if k.startswith("text_encoder.")}
    assert set(ports.read("videoclip", test_videoclip.CKPT, text)) == set(text)

    t = singularity.read_tensors(test_singularity.PT)
    cfg = singularity.config_from_tensors(t, "x")
    shapes = loading.param_shapes(lambda r: singularity.Singularity(
        cfg, dtype=np.float32, param_dtype=np.float32, rngs=r))
    _same(ports.read("singularity", test_singularity.PT, shapes),
          singularity.match(t, shapes, "x"))

    tiny = GOLDEN / "chinese_clip" / "tiny"
    ccfg = chinese_clip.read_config(tiny)
    vision = loading.param_shapes(lambda r: chinese_clip.ChineseCLIPVisionModel(ccfg, rngs=r))
    got = ports.read("chinese_clip", tiny, vision)
    assert set(got) == set(vision)
    want = chinese_clip.from_pretrained(tiny, tower="vision")
    _same(got, _params(want))
    with pytest.raises(CheckpointError, match="nothing is downloaded"):
        ports.read("chinese_clip", tiny.parent / "absent", vision)


def test_pretrained_hook_loads_scalar_parameters():
    """A 0-d parameter (Singularity's `temp`) keeps its shape through the sharded load."""
    import jax

    from tests.models import test_singularity
    from vnr.models.encoders import singularity

    t = singularity.read_tensors(test_singularity.PT)
    cfg = singularity.config_from_tensors(t, "x")

    class Holder(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.sg = singularity.Singularity(cfg, dtype=np.float32, param_dtype=np.float32,
                                              rngs=rngs)

    model = Holder(nnx.Rngs(0))
    state = nnx.state(model)
    scalars = [p for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))
               if np.ndim(v.get_value()) == 0]
    assert scalars, "the tiny Singularity has no 0-d parameter to test"
    sh = sharding.state_shardings(state, sharding.make_mesh((1, 1), ("data", "model"),
                                                            jax.devices()[:1]))
    new = pretrained.load(state, sh, {"sg": (str(test_singularity.PT), "singularity")},
                          root=(), say=lambda s: None)
    nnx.update(model, new)
    _same(_params(model.sg), singularity.match(t, loading.param_shapes(
        lambda r: singularity.Singularity(cfg, dtype=np.float32, param_dtype=np.float32,
                                          rngs=r)), "x"))
