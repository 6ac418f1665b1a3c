"""Checkpoints in an upstream's own file format, for the trainer's `pretrained` hook.

A task names such a source as `(path, port)` (`vnr/pretrained.py`): `path` is the
checkpoint as its authors publish it, `port` one of `PORTS`. The subtree's parameters, as
the task's model built them (NNX names and shapes), are matched against the file by that
port's own rules: which keys it reads, which it may leave (pre-training heads, the parts the
model does not build), and the one-line `CheckpointError` naming the file and the first
offending key. Nothing is downloaded: the path must be on this machine.

| port | file | the subtree is |
|---|---|---|
| `univl` | `univl.pretrained.bin` (microsoft/UniVL) | `univl.UniVL` (cross / decoder optional) |
| `s3d` | `s3d_howto100m.pth` | `s3d.S3D` (the video tower) |
| `cclm_vision` | CCLM's `.th` | `swin.SwinTransformer` (`vision_encoder.`) |
| `cclm_text` | CCLM's `.th` | CCLM's text tower (`cclm.text_from_checkpoint`'s model) |
| `videomae` | a Hugging Face VideoMAE directory | `videomae.VideoMAEModel` |
| `timesformer` | a Hugging Face TimeSformer directory | `timesformer.TimesformerModel` |
| `videoclip` | `checkpoint_best.pt` (fairseq examples/MMPT) | `videoclip.VideoCLIP` or one tower |
| `singularity` | `singularity[_temporal]_{5m,17m}.pth`, `ft_*.pth` | `singularity.Singularity` |
| `chinese_clip` | a Hugging Face Chinese-CLIP directory | `chinese_clip.ChineseCLIPModel`, towers |
| `cn_clip` | Chinese-CLIP's training `.pt` (`cnclip-huge-movie101.pt`) | as `chinese_clip` |

Training checkpoints (fairseq's, Singularity's) pickle bookkeeping next to the weights
(argparse / OmegaConf objects, NumPy scalars): their readers skip such objects as inert
placeholders (`torch_checkpoint.read_torch_checkpoint(..., foreign="skip")`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from vnr.models.encoders.loading import CheckpointError

Shapes = Mapping[str, tuple[int, ...]]
Tensors = Mapping[str, np.ndarray]
Match = Callable[[Tensors, str, Shapes], dict[str, np.ndarray]]


def _univl(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
    from vnr.models.encoders import univl

    return univl.match(tensors, shapes, where)


def _s3d(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
    from vnr.models.encoders import s3d

    return s3d.match(dict(tensors), dict(shapes), where)


def _cclm_vision(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
    from vnr.models.encoders import cclm

    buffers = {k: tuple(v.shape) for k, v in tensors.items() if k.startswith(cclm.VISION_PREFIX)
               and k.endswith(cclm.SWIN_BUFFERS)}
    return cclm.match(tensors, shapes, where, cclm.VISION_PREFIX, buffers=buffers,
                      what="Swin image tower")


def _cclm_text(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
    from vnr.models.encoders import cclm

    layers = {int(n.split(".")[2]) for n in shapes if n.startswith("encoder.layer.")}
    return cclm.match_text_shapes(tensors, shapes, len(layers), where)


def _videoclip(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
    from vnr.models.encoders import videoclip

    return videoclip.match(tensors, shapes, where)


def _singularity(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
    from vnr.models.encoders import singularity

    return singularity.match(tensors, shapes, where)


def _chinese_clip(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
    from vnr.models.encoders import chinese_clip

    return chinese_clip.match(tensors, shapes, where)


def _hugging_face(module: str) -> Match:
    def match(tensors: Tensors, where: str, shapes: Shapes) -> dict[str, np.ndarray]:
        import importlib

        from vnr.models.encoders import videomae

        mod = importlib.import_module(f"vnr.models.encoders.{module}")
        if module == "videomae" and any(n.startswith("fc_norm.") for n in shapes):
            tensors = videomae.head_inside(tensors)  # a fine-tuned (classification) file
        return videomae.match(shapes, tensors, Path(where), mod.PREFIXES, mod.HEADS)

    return match


# how a port's files are read: a plain torch state dict, a Hugging Face directory, or a
# training checkpoint through its module's own reader (unwraps `model`, skips bookkeeping)
TORCH, HUGGING_FACE, VIDEOCLIP, SINGULARITY = "torch", "hugging_face", "videoclip", "singularity"
CN_CLIP = "cn_clip"
PORTS: dict[str, tuple[str, str, Match]] = {
    "univl": ("a UniVL state dict (univl.pretrained.bin)", TORCH, _univl),
    "s3d": ("an S3D state dict (s3d_howto100m.pth)", TORCH, _s3d),
    "cclm_vision": ("a CCLM checkpoint (.th), its Swin image tower", TORCH, _cclm_vision),
    "cclm_text": ("a CCLM checkpoint (.th), its XLM-R text layers", TORCH, _cclm_text),
    "videomae": ("a Hugging Face VideoMAE directory", HUGGING_FACE, _hugging_face("videomae")),
    "timesformer": ("a Hugging Face TimeSformer directory", HUGGING_FACE,
                    _hugging_face("timesformer")),
    "videoclip": ("a VideoCLIP fairseq checkpoint (checkpoint_best.pt)", VIDEOCLIP, _videoclip),
    "singularity": ("a Singularity checkpoint (.pth)", SINGULARITY, _singularity),
    "chinese_clip": ("a Hugging Face Chinese-CLIP directory", HUGGING_FACE, _chinese_clip),
    "cn_clip": ("a Chinese-CLIP training checkpoint (.pt)", CN_CLIP, _chinese_clip),
}


def is_port(part: str | None) -> bool:
    """Whether a `pretrained` source's `part` names one of `PORTS`."""
    return part in PORTS


def _tensors(kind: str, path: Path) -> tuple[Tensors, str]:
    if kind == TORCH:
        from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

        return read_torch_checkpoint(path), str(path)
    if kind == VIDEOCLIP:
        from vnr.models.encoders import videoclip

        return videoclip.read_checkpoint(path), str(path)
    if kind == SINGULARITY:
        from vnr.models.encoders import singularity

        return singularity.read_tensors(path), str(path)
    if kind == CN_CLIP:
        from vnr.models.encoders import cn_clip

        return cn_clip.read_tensors(path)
    from vnr.models.encoders import videomae

    tensors, where = videomae.read_tensors(path)
    return tensors, str(where)


def read(port: str, path: str | Path, shapes: Shapes,
         files: dict[tuple[str, str], tuple[Tensors, str]] | None = None
         ) -> dict[str, np.ndarray]:
    """NNX name -> array (NNX layout) for every entry of `shapes`, from the `port` checkpoint
    at `path`; one-line `CheckpointError` when it is absent or does not fit. `files` keeps
    what was read for a caller loading several towers of one file (CCLM's two), so the
    file is read once."""
    if port not in PORTS:
        raise ValueError(f"unknown checkpoint port {port!r}: one of {sorted(PORTS)}")
    what, kind, match = PORTS[port]
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"{p}: no such checkpoint ({what}; nothing is downloaded)")
    key = (kind, str(p.resolve()))
    if files is None or key not in files:
        got = _tensors(kind, p)
        if files is None:
            return match(*got, shapes)
        files[key] = got
    return match(*files[key], shapes)
