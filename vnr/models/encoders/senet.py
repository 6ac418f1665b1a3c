"""SENet-154 (Hu et al. 2018) in Flax NNX, inference only, loading Cadene's PyTorch weights.

Sc2St's MoEE baselines (paper §4.3.2) describe each keyframe by an object expert: SENet-154
pretrained on ImageNet. The public weights are Cadene's `pretrained-models.pytorch` release
(`senet154-c7b49a05.pth`: a plain state dict, 1000 classes, inputs RGB in [0, 1] normalised
by ImageNet's mean / std, 224 x 224). The architecture is that package's `SENet`, channels
last here:

    layer0: three 3x3 convolutions (3 -> 64 stride 2, 64 -> 64, 64 -> 128), each BN-ReLU,
            then a 3x3/2 max-pool rounding its output size up (torch's ceil mode, no padding)
    layer1..4 (3, 8, 36, 3 blocks; planes 64, 128, 256, 512; stride 1, 2, 2, 2 in the
      first block): bottleneck conv1x1 (2 * planes) - BN - ReLU - grouped conv3x3 (64
      groups, 4 * planes, the stage's stride) - BN - ReLU - conv1x1 (4 * planes) - BN, then
      squeeze-and-excitation (global mean, 1x1 conv to C / 16 with bias, ReLU, 1x1 conv back
      with bias, sigmoid, times the branch) plus the shortcut, ReLU. The first block of each
      stage has a projection shortcut `downsample` (conv + BN): 1x1 in layer1, 3x3 padding 1
      with the stride in layers 2-4.
    global mean -> `pooled` [B, 2048] -> (drop-out, identity at inference) -> last_linear

Upstream pools with a fixed 7x7 average (a 224 x 224 input's last map); the global mean used
here is the same number there and defined for any input size. Module names are the state
dict's (`layer0.conv1`, `layer3.17.se_module.fc2`, `layer2.0.downsample.0`, ...), so
`from_checkpoint` reads the file without torch (zip or legacy `torch.save` format): every
parameter must get one tensor of its shape and every tensor must be used (except
`num_batches_tracked`). Batch norm is the inference form with the stored running statistics
(`FrozenBatchNorm`, eps 1e-5). No weights ship with vnr: put the file under
`$VNR_ENCODERS_DIR` or pass its path.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.encoders import loading
from vnr.models.encoders.densenet import (
    FrozenBatchNorm,
    check_classes,
    find_checkpoint_file,
    match_file,
)

CADENE_FILE = "senet154-c7b49a05.pth"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # inputs RGB in [0, 1]


@dataclasses.dataclass(frozen=True)
class SENetConfig:
    layers: tuple[int, ...] = (3, 8, 36, 3)  # blocks per stage
    planes: tuple[int, ...] = (64, 128, 256, 512)  # a stage's output is 4 * planes
    groups: int = 64
    reduction: int = 16
    stem_width: int = 64  # layer0's first two convolutions
    inplanes: int = 128  # layer0's output
    downsample_kernel_size: int = 3  # layers 2-4 (layer1's projection is always 1x1)
    downsample_padding: int = 1
    num_classes: int = 1000  # 0: no classifier (features only)
    eps: float = 1e-5

    @property
    def num_features(self) -> int:
        """Width of `pooled` (2048 for SENet-154)."""
        return 4 * self.planes[-1]


SENET154 = SENetConfig()


class SENetOutput(NamedTuple):
    feature_map: jax.Array  # [B, H', W', C] after layer4
    pooled: jax.Array  # [B, C] global average
    logits: jax.Array | None  # [B, num_classes]


def _conv(cin: int, cout: int, k: int, stride: int, pad: int, rngs: nnx.Rngs, *,
          groups: int = 1, bias: bool = False) -> nnx.Conv:
    return nnx.Conv(cin, cout, (k, k), strides=(stride, stride), padding=((pad, pad),) * 2,
                    feature_group_count=groups, use_bias=bias, rngs=rngs)


class SEModule(nnx.Module):
    """Channel gates from the global mean: x * sigmoid(fc2(relu(fc1(mean(x)))))."""

    def __init__(self, channels: int, reduction: int, rngs: nnx.Rngs):
        self.fc1 = _conv(channels, channels // reduction, 1, 1, 0, rngs, bias=True)
        self.fc2 = _conv(channels // reduction, channels, 1, 1, 0, rngs, bias=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        s = x.mean(axis=(1, 2), keepdims=True)
        return x * jax.nn.sigmoid(self.fc2(jax.nn.relu(self.fc1(s))))


class SEBottleneck(nnx.Module):
    """SENet-154's block (module docstring); `downsample` is [conv, BN] or absent."""

    def __init__(self, cin: int, planes: int, stride: int, cfg: SENetConfig,
                 downsample: tuple[int, int] | None, rngs: nnx.Rngs):
        self.conv1 = _conv(cin, 2 * planes, 1, 1, 0, rngs)
        self.bn1 = FrozenBatchNorm(2 * planes, cfg.eps)
        self.conv2 = _conv(2 * planes, 4 * planes, 3, stride, 1, rngs, groups=cfg.groups)
        self.bn2 = FrozenBatchNorm(4 * planes, cfg.eps)
        self.conv3 = _conv(4 * planes, 4 * planes, 1, 1, 0, rngs)
        self.bn3 = FrozenBatchNorm(4 * planes, cfg.eps)
        self.se_module = SEModule(4 * planes, cfg.reduction, rngs)
        if downsample is not None:
            k, pad = downsample
            self.downsample = nnx.List([_conv(cin, 4 * planes, k, stride, pad, rngs),
                                        FrozenBatchNorm(4 * planes, cfg.eps)])
        else:
            self.downsample = None

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.nn.relu(self.bn1(self.conv1(x)))
        y = jax.nn.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        shortcut = x
        if self.downsample is not None:
            conv, bn = self.downsample
            shortcut = bn(conv(x))
        return jax.nn.relu(self.se_module(y) + shortcut)


class Layer0(nnx.Module):
    """The three-convolution stem and the ceil-mode max-pool."""

    def __init__(self, cfg: SENetConfig, rngs: nnx.Rngs):
        w = cfg.stem_width
        self.conv1 = _conv(3, w, 3, 2, 1, rngs)
        self.bn1 = FrozenBatchNorm(w, cfg.eps)
        self.conv2 = _conv(w, w, 3, 1, 1, rngs)
        self.bn2 = FrozenBatchNorm(w, cfg.eps)
        self.conv3 = _conv(w, cfg.inplanes, 3, 1, 1, rngs)
        self.bn3 = FrozenBatchNorm(cfg.inplanes, cfg.eps)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.bn1(self.conv1(x)))
        x = jax.nn.relu(self.bn2(self.conv2(x)))
        x = jax.nn.relu(self.bn3(self.conv3(x)))
        return max_pool_ceil(x, 3, 2)


def max_pool_ceil(x: jax.Array, k: int, stride: int) -> jax.Array:
    """torch's MaxPool2d(k, stride, ceil_mode=True) without padding, on [B, H, W, C]: the
    output size is ceil((n - k) / stride) + 1, a last window overhanging the edge."""
    pads = []
    for n in x.shape[1:3]:
        out = -(-(n - k) // stride) + 1
        pads.append((0, (out - 1) * stride + k - n))
    return nnx.max_pool(x, (k, k), strides=(stride, stride), padding=tuple(pads))


class SENet(nnx.Module):
    """Images [B, H, W, 3] (ImageNet-normalised RGB, channels last) -> `SENetOutput`."""

    def __init__(self, cfg: SENetConfig, rngs: nnx.Rngs):
        if len(cfg.layers) != len(cfg.planes):
            raise ValueError(f"SENet: {len(cfg.layers)} stages of blocks but "
                             f"{len(cfg.planes)} plane widths")
        self.config = cfg
        self.layer0 = Layer0(cfg, rngs)
        cin = cfg.inplanes
        for i, (n, planes) in enumerate(zip(cfg.layers, cfg.planes, strict=True)):
            stride = 1 if i == 0 else 2
            ds = (1, 0) if i == 0 else (cfg.downsample_kernel_size, cfg.downsample_padding)
            need = stride != 1 or cin != 4 * planes
            blocks = [SEBottleneck(cin, planes, stride, cfg, ds if need else None, rngs)]
            blocks += [SEBottleneck(4 * planes, planes, 1, cfg, None, rngs) for _ in range(n - 1)]
            setattr(self, f"layer{i + 1}", nnx.List(blocks))
            cin = 4 * planes
        if cfg.num_classes:
            self.last_linear = nnx.Linear(cfg.num_features, cfg.num_classes, rngs=rngs)

    def __call__(self, images: jax.Array) -> SENetOutput:
        x = self.layer0(images)
        for i in range(1, len(self.config.layers) + 1):
            for block in getattr(self, f"layer{i}"):
                x = block(x)
        pooled = x.mean(axis=(1, 2))
        logits = self.last_linear(pooled) if self.config.num_classes else None
        return SENetOutput(x, pooled, logits)


def cadene_tensors(tensors: dict) -> dict:
    """A Cadene state dict as `match_tensors` reads it: a `module.` prefix (a DataParallel
    save) dropped, `num_batches_tracked` counters dropped."""
    return {k.removeprefix("module."): v for k, v in tensors.items()
            if not k.endswith("num_batches_tracked")}


def from_checkpoint(name_or_path: str | Path = CADENE_FILE, *, cfg: SENetConfig = SENET154,
                    key: jax.Array | None = None,
                    mesh: jax.sharding.Mesh | None = None) -> SENet:
    """SENet with the weights of Cadene's `torch.save`d state dict (a file, a directory
    holding `senet154-c7b49a05.pth`, or either under `$VNR_ENCODERS_DIR`), read without
    torch. A `last_linear` of another class count than `cfg.num_classes` is an error;
    `num_classes=0` drops it (features only)."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    path = find_checkpoint_file(name_or_path, CADENE_FILE, "SENet-154",
                                f"Cadene's pretrained-models.pytorch release ({CADENE_FILE})")
    tensors = cadene_tensors(read_torch_checkpoint(path))
    check_classes(path, tensors, "last_linear.weight", cfg.num_classes)

    def ctor(rngs: nnx.Rngs) -> SENet:
        return SENet(cfg, rngs)

    arrays = match_file(path, ctor, tensors, () if cfg.num_classes else ("last_linear.",))
    return loading.instantiate(ctor, arrays, key=jax.random.key(0) if key is None else key,
                               mesh=mesh)


def normalise(images_01: jax.Array) -> jax.Array:
    """RGB images in [0, 1], [..., 3], normalised as the release expects."""
    return (images_01 - jnp.asarray(MEAN)) / jnp.asarray(STD)
