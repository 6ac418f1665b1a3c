"""DenseNet (Huang et al. 2017) in Flax NNX, inference only, loading torchvision state dicts.

Sc2St ranks similar candidate keyframes by the cosine of DenseNet-121's 1024-d pooled
features (paper §4.1.3). This is torchvision's `densenet121` architecture, channels-last:

    conv0 7x7/2 -> norm0 -> ReLU -> max-pool 3x3/2 (pad 1)
    dense blocks (6, 12, 24, 16 layers): each layer BN-ReLU-conv1x1 (bn_size * growth)
      -BN-ReLU-conv3x3 (growth), its output concatenated after its input;
    transitions between blocks: BN-ReLU-conv1x1 (channels / 2)-avg-pool 2x2/2;
    norm5 -> ReLU -> global average -> `pooled` [B, 1024] -> classifier (1000 ImageNet logits)

Module names follow torchvision's state dict (`features.denseblock1.denselayer1.norm1`,
...), so `load_densenet` maps a checkpoint saved from `torchvision.models.densenet121()
.state_dict()` (as `model.safetensors`; PyTorch layout, transposed here) through the shared
`loading` machinery: every parameter must get one tensor of its shape, every tensor must
be used (except `num_batches_tracked`; torchvision's legacy `norm.1` names are renamed as its
own loader does). Batch norm is the inference form with the stored running statistics
(`FrozenBatchNorm`, eps 1e-5): the model is a frozen feature extractor, never trained here.
No weights ship with vnr and none can be downloaded from this machine: put the converted
file in `$VNR_ENCODERS_DIR/densenet121/`.

DenseNet-161 (`DENSENET161`: growth 48, blocks (6, 12, 36, 24), 96 initial features, 2208-d
`pooled`) is Sc2St's scene expert for the MoEE baselines (paper §4.3.2), with CSAIL's
Places365 weights (`densenet161_places365.pth.tar`, 365 scene classes). That file is a
`torch.save`d training checkpoint read here without torch (`load_places365`): a dict whose
`state_dict` was taken from a `DataParallel` wrapper (every key starts with `module.`) of the
torchvision of its day (legacy `norm.1` / `conv.1` layer names, no `num_batches_tracked`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.encoders import loading, torchvision_ckpt
from vnr.models.encoders.loading import CheckpointError


@dataclasses.dataclass(frozen=True)
class DenseNetConfig:
    growth_rate: int = 32
    block_config: tuple[int, ...] = (6, 12, 24, 16)
    num_init_features: int = 64
    bn_size: int = 4
    num_classes: int = 1000  # 0: no classifier (features only)
    eps: float = 1e-5

    @property
    def num_features(self) -> int:
        """Width of `pooled` (1024 for DenseNet-121)."""
        c = self.num_init_features
        for i, n in enumerate(self.block_config):
            c += n * self.growth_rate
            if i < len(self.block_config) - 1:
                c //= 2
        return c


DENSENET121 = DenseNetConfig()
DENSENET161 = DenseNetConfig(growth_rate=48, block_config=(6, 12, 36, 24), num_init_features=96)
DENSENET161_PLACES365 = dataclasses.replace(DENSENET161, num_classes=365)
PLACES365_FILE = "densenet161_places365.pth.tar"


class DenseNetOutput(NamedTuple):
    feature_map: jax.Array  # [B, H', W', C] after norm5 and ReLU
    pooled: jax.Array  # [B, C] global average
    logits: jax.Array | None  # [B, num_classes]


class FrozenBatchNorm(nnx.Module):
    """(x - running_mean) / sqrt(running_var + eps) * scale + bias, statistics stored."""

    def __init__(self, n: int, eps: float):
        self.eps = eps
        self.scale = nnx.Param(jnp.ones((n,)))
        self.bias = nnx.Param(jnp.zeros((n,)))
        self.running_mean = nnx.Param(jnp.zeros((n,)))
        self.running_var = nnx.Param(jnp.ones((n,)))

    def __call__(self, x: jax.Array) -> jax.Array:
        inv = jax.lax.rsqrt(self.running_var[...] + self.eps) * self.scale[...]
        return (x - self.running_mean[...]) * inv + self.bias[...]


def _conv(cin: int, cout: int, k: int, stride: int, pad: int, rngs: nnx.Rngs) -> nnx.Conv:
    return nnx.Conv(cin, cout, (k, k), strides=(stride, stride), padding=((pad, pad),) * 2,
                    use_bias=False, rngs=rngs)


class DenseLayer(nnx.Module):
    def __init__(self, cin: int, cfg: DenseNetConfig, rngs: nnx.Rngs):
        mid = cfg.bn_size * cfg.growth_rate
        self.norm1 = FrozenBatchNorm(cin, cfg.eps)
        self.conv1 = _conv(cin, mid, 1, 1, 0, rngs)
        self.norm2 = FrozenBatchNorm(mid, cfg.eps)
        self.conv2 = _conv(mid, cfg.growth_rate, 3, 1, 1, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = self.conv1(jax.nn.relu(self.norm1(x)))
        y = self.conv2(jax.nn.relu(self.norm2(y)))
        return jnp.concatenate([x, y], axis=-1)


class Transition(nnx.Module):
    def __init__(self, cin: int, cout: int, cfg: DenseNetConfig, rngs: nnx.Rngs):
        self.norm = FrozenBatchNorm(cin, cfg.eps)
        self.conv = _conv(cin, cout, 1, 1, 0, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.conv(jax.nn.relu(self.norm(x)))
        return nnx.avg_pool(x, (2, 2), strides=(2, 2))


class Features(nnx.Module):
    """torchvision's `features` Sequential, names kept (`denseblockN.denselayerM`)."""

    def __init__(self, cfg: DenseNetConfig, rngs: nnx.Rngs):
        self.n_blocks = len(cfg.block_config)
        c = cfg.num_init_features
        self.conv0 = _conv(3, c, 7, 2, 3, rngs)
        self.norm0 = FrozenBatchNorm(c, cfg.eps)
        for i, n in enumerate(cfg.block_config, start=1):
            block = nnx.Module()
            for j in range(1, n + 1):
                setattr(block, f"denselayer{j}", DenseLayer(c, cfg, rngs))
                c += cfg.growth_rate
            block.n = n
            setattr(self, f"denseblock{i}", block)
            if i < len(cfg.block_config):
                setattr(self, f"transition{i}", Transition(c, c // 2, cfg, rngs))
                c //= 2
        self.norm5 = FrozenBatchNorm(c, cfg.eps)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.norm0(self.conv0(x)))
        x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for i in range(1, self.n_blocks + 1):
            block = getattr(self, f"denseblock{i}")
            for j in range(1, block.n + 1):
                x = getattr(block, f"denselayer{j}")(x)
            if i < self.n_blocks:
                x = getattr(self, f"transition{i}")(x)
        return jax.nn.relu(self.norm5(x))


class DenseNet(nnx.Module):
    """Images [B, H, W, 3] (ImageNet-normalised, channels last) -> `DenseNetOutput`."""

    def __init__(self, cfg: DenseNetConfig, rngs: nnx.Rngs):
        self.config = cfg
        self.features = Features(cfg, rngs)
        if cfg.num_classes:
            self.classifier = nnx.Linear(cfg.num_features, cfg.num_classes, rngs=rngs)

    def __call__(self, images: jax.Array) -> DenseNetOutput:
        fmap = self.features(images)
        pooled = fmap.mean(axis=(1, 2))
        logits = self.classifier(pooled) if self.config.num_classes else None
        return DenseNetOutput(fmap, pooled, logits)


_LEGACY = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|"
                     r"running_mean|running_var))$")


def torchvision_tensors(tensors: dict) -> dict:
    """A torchvision DenseNet state dict as `match_tensors` reads it: legacy `norm.1` names
    renamed (as torchvision's own loader does), `num_batches_tracked` counters dropped."""
    out = {}
    for name, x in tensors.items():
        if name.endswith("num_batches_tracked"):
            continue
        m = _LEGACY.match(name)
        out[m[1] + m[2] if m else name] = x
    return out


def config_of(directory: Path) -> DenseNetConfig:
    """`config.json` fields of a checkpoint directory over DenseNet-121's defaults."""
    return torchvision_ckpt.read_config(
        directory, DENSENET121, "DenseNet",
        lambda kw: {k: (tuple(v) if k == "block_config" else v) for k, v in kw.items()})


def load_densenet(name_or_dir: str | Path, *, key: jax.Array | None = None,
                  mesh: jax.sharding.Mesh | None = None) -> DenseNet:
    """DenseNet with weights from a torchvision-layout `model.safetensors` (a directory,
    or a name under `$VNR_ENCODERS_DIR`); `config.json` optional (default DenseNet-121)."""
    directory = torchvision_ckpt.find_directory(name_or_dir, "DenseNet", "densenet121")
    cfg = config_of(directory)

    def ctor(rngs: nnx.Rngs) -> DenseNet:
        return DenseNet(cfg, rngs)

    return torchvision_ckpt.load(directory, ctor, torchvision_tensors,
                                 ignore=() if cfg.num_classes else ("classifier.",),
                                 key=key, mesh=mesh)


# ----------------------------------------------------------------------------- Places365


def places365_tensors(tensors: dict) -> dict:
    """A Places365 training checkpoint's state dict as `match_tensors` reads it: the
    `module.` prefix of its DataParallel wrapper dropped, then `torchvision_tensors`."""
    return torchvision_tensors({k.removeprefix("module."): v for k, v in tensors.items()})


def find_checkpoint_file(name_or_path: str | Path, filename: str, what: str, source: str
                         ) -> Path:
    """A checkpoint file: the path itself, `filename` inside that directory, or the same under
    `$VNR_ENCODERS_DIR`. `source` says where the published file comes from (in the error)."""
    root = loading.encoders_root()
    for base in (Path(name_or_path).expanduser(), root / str(name_or_path)):
        for p in (base, base / filename):
            if p.is_file():
                return p
    raise FileNotFoundError(
        f"no {what} checkpoint {str(name_or_path)!r} (neither a file nor a directory holding "
        f"{filename}, here or under {root}); runs never download. Get {source} and put "
        f"it at {root / filename} or pass its path")


def check_classes(path: Path, tensors: dict, key: str, want: int) -> None:
    """One-line error naming the file when the classifier `key` is not `want` classes."""
    if want and key in tensors and tensors[key].shape[0] != want:
        raise CheckpointError(f"{path}: classifier {key!r} has {tensors[key].shape[0]} classes "
                              f"but the config says {want}")


def match_file(path: Path, ctor: Callable[[nnx.Rngs], nnx.Module], tensors: dict,
               ignore: tuple[str, ...]) -> dict:
    """`loading.match_tensors` of a file's PyTorch-layout tensors, errors naming the file."""
    try:
        return loading.match_tensors(loading.param_shapes(ctor), tensors, "pt", ignore=ignore)
    except CheckpointError as e:
        raise CheckpointError(f"{path}: {e}") from None


def load_places365(name_or_path: str | Path = PLACES365_FILE, *,
                   cfg: DenseNetConfig = DENSENET161_PLACES365, key: jax.Array | None = None,
                   mesh: jax.sharding.Mesh | None = None) -> DenseNet:
    """DenseNet with the weights of CSAIL's Places365 checkpoint (read without torch; legacy
    or zip `torch.save` format). A checkpoint whose classifier has another class count than
    `cfg.num_classes` is an error; `num_classes=0` drops the classifier (features only)."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    path = find_checkpoint_file(name_or_path, PLACES365_FILE, "DenseNet-161 Places365",
                                f"CSAIL's Places365 release ({PLACES365_FILE})")
    tensors = places365_tensors(read_torch_checkpoint(path))
    check_classes(path, tensors, "classifier.weight", cfg.num_classes)

    def ctor(rngs: nnx.Rngs) -> DenseNet:
        return DenseNet(cfg, rngs)

    arrays = match_file(path, ctor, tensors, () if cfg.num_classes else ("classifier.",))
    return loading.instantiate(ctor, arrays, key=jax.random.key(0) if key is None else key,
                               mesh=mesh)
