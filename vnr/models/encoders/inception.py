"""Inception-v3 (Szegedy et al. 2016) in Flax NNX, inference only, loading torchvision state dicts.

Sc2St's image encoder starts from a pretrained Inception-v3 (paper Appendix A.1: its global
pooled feature vector and last feature map). This is torchvision's `inception_v3`
architecture, channels-last, without the auxiliary classifier (`AuxLogits`: a training-time
head; its tensors in a checkpoint are ignored):

    transform_input (torchvision's pretrained default: ImageNet-normalised input re-scaled
      to the (x - 0.5) / 0.5 normalisation the ported weights expect)
    Conv2d_1a_3x3 /2, Conv2d_2a_3x3, Conv2d_2b_3x3 (pad 1), max-pool 3x3/2,
    Conv2d_3b_1x1, Conv2d_4a_3x3, max-pool 3x3/2,
    Mixed_5b/5c/5d (InceptionA, pool branch 32/64/64), Mixed_6a (InceptionB, /2),
    Mixed_6b..6e (InceptionC, 7x7 widths 128/160/160/192), Mixed_7a (InceptionD, /2),
    Mixed_7b/7c (InceptionE) -> `feature_map` [B, 8, 8, 2048] at 299x299
    -> global average -> `pooled` [B, 2048] -> fc (1000 ImageNet logits; dropout is a no-op
    at inference)

Every convolution is torchvision's BasicConv2d: conv (no bias) -> batch norm (eps 0.001,
running statistics: `densenet.FrozenBatchNorm`) -> ReLU; module names are torchvision's
(`Mixed_6b.branch7x7dbl_3.conv`, `...bn`), so `load_inception` maps a checkpoint saved from
`torchvision.models.inception_v3().state_dict()` (as `model.safetensors`) through the shared
`loading` machinery. Input must be at least 75x75 (torchvision's `min_size`).
No weights ship with vnr and none can be downloaded from this machine: put the converted
file in `$VNR_ENCODERS_DIR/inception_v3/`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models.encoders import torchvision_ckpt
from vnr.models.encoders.densenet import FrozenBatchNorm

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
MIN_SIZE = 75


@dataclasses.dataclass(frozen=True)
class InceptionConfig:
    num_classes: int = 1000  # 0: no fc (features only)
    transform_input: bool = True  # torchvision's default with pretrained weights
    eps: float = 1e-3  # torchvision's BasicConv2d

    @property
    def num_features(self) -> int:
        """Width of `pooled` (2048)."""
        return 2048


INCEPTION_V3 = InceptionConfig()


class InceptionOutput(NamedTuple):
    feature_map: jax.Array  # [B, H', W', 2048] after Mixed_7c
    pooled: jax.Array  # [B, 2048] global average
    logits: jax.Array | None  # [B, num_classes]


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v


class BasicConv2d(nnx.Module):
    """conv (no bias) -> frozen batch norm -> ReLU, torchvision's names `conv` and `bn`."""

    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int], eps: float,
                 rngs: nnx.Rngs, stride: int = 1, pad: int | tuple[int, int] = 0):
        (kh, kw), (ph, pw) = _pair(kernel), _pair(pad)
        self.conv = nnx.Conv(cin, cout, (kh, kw), strides=(stride, stride),
                             padding=((ph, ph), (pw, pw)), use_bias=False, rngs=rngs)
        self.bn = FrozenBatchNorm(cout, eps)

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.relu(self.bn(self.conv(x)))


def _max_pool(x: jax.Array) -> jax.Array:  # 3x3, stride 2, no padding
    return nnx.max_pool(x, (3, 3), strides=(2, 2))


def _avg_pool(x: jax.Array) -> jax.Array:  # 3x3, stride 1, pad 1, zeros counted (torch's)
    return nnx.avg_pool(x, (3, 3), strides=(1, 1), padding=((1, 1), (1, 1)),
                        count_include_pad=True)


def _cat(*xs: jax.Array) -> jax.Array:
    return jnp.concatenate(xs, axis=-1)


class InceptionA(nnx.Module):
    def __init__(self, cin: int, pool_features: int, eps: float, rngs: nnx.Rngs):
        self.branch1x1 = BasicConv2d(cin, 64, 1, eps, rngs)
        self.branch5x5_1 = BasicConv2d(cin, 48, 1, eps, rngs)
        self.branch5x5_2 = BasicConv2d(48, 64, 5, eps, rngs, pad=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, 1, eps, rngs)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, eps, rngs, pad=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, eps, rngs, pad=1)
        self.branch_pool = BasicConv2d(cin, pool_features, 1, eps, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return _cat(self.branch1x1(x), b5, b3, self.branch_pool(_avg_pool(x)))


class InceptionB(nnx.Module):
    def __init__(self, cin: int, eps: float, rngs: nnx.Rngs):
        self.branch3x3 = BasicConv2d(cin, 384, 3, eps, rngs, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, 1, eps, rngs)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, eps, rngs, pad=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, eps, rngs, stride=2)

    def __call__(self, x: jax.Array) -> jax.Array:
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return _cat(self.branch3x3(x), b3, _max_pool(x))


class InceptionC(nnx.Module):
    def __init__(self, cin: int, c7: int, eps: float, rngs: nnx.Rngs):
        row, col = ((1, 7), (0, 3)), ((7, 1), (3, 0))  # (kernel, pad): 1x7 and 7x1
        self.branch1x1 = BasicConv2d(cin, 192, 1, eps, rngs)
        self.branch7x7_1 = BasicConv2d(cin, c7, 1, eps, rngs)
        self.branch7x7_2 = BasicConv2d(c7, c7, row[0], eps, rngs, pad=row[1])
        self.branch7x7_3 = BasicConv2d(c7, 192, col[0], eps, rngs, pad=col[1])
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, 1, eps, rngs)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, col[0], eps, rngs, pad=col[1])
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, row[0], eps, rngs, pad=row[1])
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, col[0], eps, rngs, pad=col[1])
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, row[0], eps, rngs, pad=row[1])
        self.branch_pool = BasicConv2d(cin, 192, 1, eps, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d = x
        for i in range(1, 6):
            d = getattr(self, f"branch7x7dbl_{i}")(d)
        return _cat(self.branch1x1(x), b7, d, self.branch_pool(_avg_pool(x)))


class InceptionD(nnx.Module):
    def __init__(self, cin: int, eps: float, rngs: nnx.Rngs):
        self.branch3x3_1 = BasicConv2d(cin, 192, 1, eps, rngs)
        self.branch3x3_2 = BasicConv2d(192, 320, 3, eps, rngs, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, 192, 1, eps, rngs)
        self.branch7x7x3_2 = BasicConv2d(192, 192, (1, 7), eps, rngs, pad=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, (7, 1), eps, rngs, pad=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, 3, eps, rngs, stride=2)

    def __call__(self, x: jax.Array) -> jax.Array:
        b7 = x
        for i in range(1, 5):
            b7 = getattr(self, f"branch7x7x3_{i}")(b7)
        return _cat(self.branch3x3_2(self.branch3x3_1(x)), b7, _max_pool(x))


class InceptionE(nnx.Module):
    def __init__(self, cin: int, eps: float, rngs: nnx.Rngs):
        self.branch1x1 = BasicConv2d(cin, 320, 1, eps, rngs)
        self.branch3x3_1 = BasicConv2d(cin, 384, 1, eps, rngs)
        self.branch3x3_2a = BasicConv2d(384, 384, (1, 3), eps, rngs, pad=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, (3, 1), eps, rngs, pad=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, 448, 1, eps, rngs)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, eps, rngs, pad=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, (1, 3), eps, rngs, pad=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, (3, 1), eps, rngs, pad=(1, 0))
        self.branch_pool = BasicConv2d(cin, 192, 1, eps, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        a = self.branch3x3_1(x)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        return _cat(self.branch1x1(x), self.branch3x3_2a(a), self.branch3x3_2b(a),
                    self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d),
                    self.branch_pool(_avg_pool(x)))


class InceptionV3(nnx.Module):
    """Images [B, H, W, 3] (ImageNet-normalised, channels last, H, W >= 75) ->
    `InceptionOutput`."""

    def __init__(self, cfg: InceptionConfig, rngs: nnx.Rngs):
        self.config = cfg
        e = cfg.eps
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, 3, e, rngs, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3, e, rngs)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, e, rngs, pad=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1, e, rngs)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3, e, rngs)
        self.Mixed_5b = InceptionA(192, 32, e, rngs)
        self.Mixed_5c = InceptionA(256, 64, e, rngs)
        self.Mixed_5d = InceptionA(288, 64, e, rngs)
        self.Mixed_6a = InceptionB(288, e, rngs)
        self.Mixed_6b = InceptionC(768, 128, e, rngs)
        self.Mixed_6c = InceptionC(768, 160, e, rngs)
        self.Mixed_6d = InceptionC(768, 160, e, rngs)
        self.Mixed_6e = InceptionC(768, 192, e, rngs)
        self.Mixed_7a = InceptionD(768, e, rngs)
        self.Mixed_7b = InceptionE(1280, e, rngs)
        self.Mixed_7c = InceptionE(2048, e, rngs)
        if cfg.num_classes:
            self.fc = nnx.Linear(2048, cfg.num_classes, rngs=rngs)

    def __call__(self, images: jax.Array) -> InceptionOutput:
        if min(images.shape[1:3]) < MIN_SIZE:
            raise ValueError(f"Inception-v3 needs images of at least {MIN_SIZE}x{MIN_SIZE}, "
                             f"got {images.shape[1]}x{images.shape[2]}")
        x = images
        if self.config.transform_input:  # ImageNet mean/std -> (x - 0.5) / 0.5
            std, mean = np.asarray(IMAGENET_STD), np.asarray(IMAGENET_MEAN)
            x = x * (std / 0.5) + (mean - 0.5) / 0.5
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(_max_pool(x)))
        x = _max_pool(x)
        for name in ("5b", "5c", "5d", "6a", "6b", "6c", "6d", "6e", "7a", "7b", "7c"):
            x = getattr(self, f"Mixed_{name}")(x)
        pooled = x.mean(axis=(1, 2))
        logits = self.fc(pooled) if self.config.num_classes else None
        return InceptionOutput(x, pooled, logits)


def torchvision_tensors(tensors: dict) -> dict:
    """A torchvision Inception-v3 state dict as `match_tensors` reads it: `num_batches_tracked`
    counters and the auxiliary classifier (`AuxLogits.*`, unused at inference) dropped."""
    return {k: v for k, v in tensors.items()
            if not k.endswith("num_batches_tracked") and not k.startswith("AuxLogits.")}


def config_of(directory: Path) -> InceptionConfig:
    """`config.json` fields of a checkpoint directory over Inception-v3's defaults."""
    return torchvision_ckpt.read_config(directory, INCEPTION_V3, "Inception-v3")


def load_inception(name_or_dir: str | Path, *, key: jax.Array | None = None,
                   mesh: jax.sharding.Mesh | None = None,
                   num_classes: int | None = None) -> InceptionV3:
    """Inception-v3 with weights from a torchvision-layout `model.safetensors` (a directory,
    or a name under `$VNR_ENCODERS_DIR`); `config.json` optional. `num_classes=0` drops the
    fc (its tensors then ignored): the feature extractor only."""
    directory = torchvision_ckpt.find_directory(name_or_dir, "Inception-v3", "inception_v3")
    cfg = config_of(directory)
    if num_classes is not None:
        cfg = dataclasses.replace(cfg, num_classes=num_classes)

    def ctor(rngs: nnx.Rngs) -> InceptionV3:
        return InceptionV3(cfg, rngs)

    return torchvision_ckpt.load(directory, ctor, torchvision_tensors,
                                 ignore=() if cfg.num_classes else ("fc.",), key=key, mesh=mesh)
