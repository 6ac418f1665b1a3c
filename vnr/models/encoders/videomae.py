"""VideoMAE video tower (Hugging Face ``VideoMAEModel``, e.g. ``MCG-NJU/videomae-base``), NNX.

Architecture (ViT-B for the base checkpoint), channels-last::

    clip [B, T, H, W, 3] (normalised) -> embeddings.patch_embeddings.projection:
      tubelet conv (tubelet_size x patch x patch, stride = kernel) -> [B, T/2 * (H/16) * (W/16), C]
      tokens ordered (time, row, column), no CLS token
    + fixed sinusoid table [N, C] (angle pos / 10000^(2 (j // 2) / C): sin on even j, cos on
      odd j; computed, never stored in checkpoints)
    encoder.layer.i (pre-LN): x + attention(layernorm_before(x)); x + MLP(layernorm_after(x))
      attention: query / key / value without their own bias; q_bias and v_bias are separate
      vectors and the key gets none (qkv_bias false: no bias at all); softmax(q k^T / sqrt(d))
      MLP: intermediate.dense, hidden_act (exact GELU), output.dense
    -> layernorm (only when use_mean_pooling is false, as the pre-training checkpoints)

Output (``EncoderOutput``): ``last_hidden_state`` [B, N, C]; ``pooled`` = the token mean
(float32), through ``fc_norm`` when the checkpoint has one (the fine-tuned classification
checkpoints: use_mean_pooling true), which is then also ``pooler_output`` (else None).
Upstream's ambiguity: ``VideoMAEModel`` itself has no pooling; its classifier takes
``fc_norm(mean)`` with use_mean_pooling and token 0 otherwise (VideoMAE has no CLS token, so
that is the first patch); the mean is the embedding here either way. ``fc_norm`` is
``nn.LayerNorm(hidden)``, so its epsilon is torch's 1e-5, not ``layer_norm_eps``.

Keys: NNX paths are the state-dict keys of ``VideoMAEModel`` with ``kernel``/``scale`` for
``weight`` (``encoder.layer.3.attention.attention.q_bias``,
``embeddings.patch_embeddings.projection.weight`` [C, 3, 2, 16, 16] stored as
[2, 16, 16, 3, C]). Checkpoints of the task models put ``videomae.`` in front; their heads
(``decoder.*``, ``encoder_to_decoder``, ``mask_token`` of the pre-training model,
``classifier.*``) are skipped, ``fc_norm`` is read when use_mean_pooling says so.

Preprocessing (``VideoMAEImageProcessor``): frames resized (short side 224), centre-cropped
to 224x224, scaled to [0, 1], normalised per channel with the mean / std of the checkpoint's
``preprocessor_config.json`` (``normalise``; its defaults are ImageNet's (0.485, 0.456,
0.406) / (0.229, 0.224, 0.225), which the original VideoMAE code trains with; the processor
class's own default is 0.5 / 0.5, so pass the file's values, not checked offline here). The
clip must have exactly ``num_frames`` frames of ``image_size`` (the position table has that
many rows).

Loading (``from_pretrained``): ``config.json`` plus ``model.safetensors`` (sharded too) or
``pytorch_model.bin`` (read without torch). Every problem is one ``CheckpointError`` line
naming the file and the key; a checkpoint whose tubelet or patch size disagrees with
``config.json`` names the value. Nothing is downloaded. The helpers shared with
``vnr.models.encoders.timesformer`` (config reading, tensor reading, key mapping and
matching, clip checks) live here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from vnr.models import attention
from vnr.models.encoders import layers, loading
from vnr.models.encoders.layers import EncoderOutput, Node, dense, layer_norm, param
from vnr.models.encoders.loading import CheckpointError
from vnr.models.layers import annotate
from vnr.sharding import Rules

C = TypeVar("C")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TORCH_LN_EPS = 1e-5  # nn.LayerNorm's default (VideoMAE's fc_norm)


@dataclasses.dataclass(frozen=True)
class VideoMAEConfig:
    """``config.json`` fields the encoder uses; defaults are MCG-NJU/videomae-base's."""

    image_size: int = 224
    patch_size: int = 16
    num_channels: int = 3
    num_frames: int = 16
    tubelet_size: int = 2
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    qkv_bias: bool = True
    use_mean_pooling: bool = False

    @property
    def num_patches(self) -> int:
        """Tokens per clip: (frames / tubelet) x (side / patch)^2 (1568 for the base)."""
        side = self.image_size // self.patch_size
        return self.num_frames // self.tubelet_size * side * side

    def check(self) -> None:
        """ValueError (one line) for sizes upstream's reshapes cannot divide."""
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch_size "
                             f"{self.patch_size}")
        if self.num_frames % self.tubelet_size:
            raise ValueError(f"num_frames {self.num_frames} is not a multiple of tubelet_size "
                             f"{self.tubelet_size}")
        layers.check_divisible(self.hidden_size, self.num_attention_heads)


VIDEOMAE_BASE = VideoMAEConfig()


def normalise(frames: np.ndarray, mean: Sequence[float] = IMAGENET_MEAN,
              std: Sequence[float] = IMAGENET_STD) -> np.ndarray:
    """uint8 RGB frames [..., H, W, 3] (already resized and cropped) -> the float32 input
    the processor gives: ``(x / 255 - mean) / std`` per channel."""
    x = np.asarray(frames, np.float32) / 255.0
    return (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)


@functools.lru_cache(maxsize=8)
def sinusoid_table(n: int, width: int) -> np.ndarray:
    """[n, width] fixed position table (float64 math, float32 result, as upstream)."""
    j = np.arange(width)
    angle = np.arange(n, dtype=np.float64)[:, None] / np.power(10000.0, 2 * (j // 2) / width)
    table = np.where(j % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)
    table.flags.writeable = False
    return table


def check_clip(shape: Sequence[int], cfg: Any, what: str) -> None:
    """ValueError (one line, naming the value) unless ``shape`` is [B, num_frames,
    image_size, image_size, num_channels]."""
    want = (cfg.num_frames, cfg.image_size, cfg.image_size, cfg.num_channels)
    if len(shape) != 5:
        raise ValueError(f"{what}: expected a channels-last clip [B, T, H, W, C], got shape "
                         f"{tuple(shape)}")
    if shape[1] != cfg.num_frames:
        raise ValueError(f"{what}: the clip has {shape[1]} frames but the model's num_frames "
                         f"is {cfg.num_frames} (sample exactly that many frames)")
    if tuple(shape[1:]) != want:
        raise ValueError(f"{what}: expected clips of {cfg.image_size}x{cfg.image_size}x"
                         f"{cfg.num_channels} frames, got shape {tuple(shape)}")


def patch_conv(cfg: Any, kernel: tuple[int, ...], *, dtype: Any, param_dtype: Any,
               rngs: nnx.Rngs) -> nnx.Conv:
    """Non-overlapping patch (or tubelet) embedding conv, stride = kernel, with bias."""
    return nnx.Conv(cfg.num_channels, cfg.hidden_size, kernel, strides=kernel, padding="VALID",
                    dtype=dtype, param_dtype=param_dtype, rngs=rngs,
                    kernel_init=annotate(nnx.initializers.normal(cfg.initializer_range),
                                         ("patch",) * (len(kernel) + 1) + ("embed",)),
                    bias_init=annotate(nnx.initializers.zeros_init(), ("embed",)))


class VideoMAELayer(layers.TransformerLayer):
    """Pre-LN layer with upstream's names: separate q / v biases, no key bias."""

    def __init__(self, cfg: VideoMAEConfig, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        super().__init__(cfg)
        h, m = cfg.hidden_size, cfg.intermediate_size
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

        def bias() -> nnx.Param | None:
            return param(jnp.zeros((h,), param_dtype), ("heads",)) if cfg.qkv_bias else None

        proj = {n: dense(h, h, ("embed", "heads"), use_bias=False, **kw)
                for n in ("query", "key", "value")}
        self.layernorm_before = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.attention = Node(
            {"attention": Node(proj, q_bias=bias(), v_bias=bias(),
                               dropout=layers.dropout(cfg.attention_probs_dropout_prob, rngs))},
            output=Node(dense=dense(h, h, ("heads", "embed"), **kw)))
        self.layernorm_after = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.intermediate = Node(dense=dense(h, m, ("embed", "mlp"), **kw))
        self.output = Node(dense=dense(m, h, ("mlp", "embed"), **kw))
        self.dropout = layers.dropout(cfg.hidden_dropout_prob, rngs)

    def __call__(self, x: jax.Array, mask: attention.Mask | None,
                 deterministic: bool | None) -> jax.Array:
        sa = self.attention.attention
        y = self.layernorm_before(x)
        q, k, v = sa.query(y), sa.key(y), sa.value(y)
        if sa.q_bias is not None:
            q = q + sa.q_bias[...].astype(q.dtype)
            v = v + sa.v_bias[...].astype(v.dtype)
        heads = [layers.split_heads(t, self.num_heads) for t in (q, k, v)]
        a = layers.dot_product_attention(*heads, mask, sa.dropout, deterministic,
                                         self.attention_impl)
        x = x + self.dropout(self.attention.output.dense(a), deterministic=deterministic)
        y = self.output.dense(self.act(self.intermediate.dense(self.layernorm_after(x))))
        return x + self.dropout(y, deterministic=deterministic)


class VideoMAEModel(nnx.Module):
    """VideoMAE encoder: clips [B, T, H, W, 3] -> ``EncoderOutput`` (see the module doc).

    Args:
      cfg: sizes (``VIDEOMAE_BASE`` is MCG-NJU/videomae-base).
      fc_norm: build the classification checkpoints' ``fc_norm`` (needs use_mean_pooling).
      dtype: compute dtype (e.g. ``jnp.bfloat16``); param_dtype: parameter dtype.
      rngs: ``params`` and ``dropout`` streams.
    """

    def __init__(self, cfg: VideoMAEConfig = VIDEOMAE_BASE, *, fc_norm: bool = False,
                 dtype: Any = jnp.float32, param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        cfg.check()
        if fc_norm and not cfg.use_mean_pooling:
            raise ValueError("fc_norm needs use_mean_pooling (upstream builds it only then)")
        self.config, self.dtype = cfg, dtype
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h, p = cfg.hidden_size, cfg.patch_size
        self.embeddings = Node(patch_embeddings=Node(
            projection=patch_conv(cfg, (cfg.tubelet_size, p, p), **kw)))
        self.encoder = Node(layer=nnx.List([VideoMAELayer(cfg, **kw)
                                            for _ in range(cfg.num_hidden_layers)]))
        self.layernorm = None if cfg.use_mean_pooling else layer_norm(h, cfg.layer_norm_eps, **kw)
        self.fc_norm = layer_norm(h, TORCH_LN_EPS, **kw) if fc_norm else None

    def __call__(self, pixel_values: jax.Array, *, deterministic: bool | None = None
                 ) -> EncoderOutput:
        """Encodes normalised channels-last clips [B, num_frames, size, size, 3]."""
        check_clip(pixel_values.shape, self.config, "VideoMAE")
        x = self.embeddings.patch_embeddings.projection(pixel_values.astype(self.dtype))
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        x = x + jnp.asarray(sinusoid_table(x.shape[1], x.shape[2]), x.dtype)
        x = layers.apply_stack(self.encoder.layer, x, None, deterministic)
        if self.layernorm is not None:
            x = self.layernorm(x)
        mean = layers.mean_pool(x, None)
        pooler = None if self.fc_norm is None else self.fc_norm(mean)
        return EncoderOutput(x, pooler, mean if pooler is None else pooler)


# ----------------------------------------------------------------------------- loading
# (shared with vnr.models.encoders.timesformer)


def read_config(directory: Path, cls: type[C], model_type: str) -> C:
    """The dataclass ``cls`` from a Hugging Face ``config.json``: its fields are read, the
    rest (task heads, labels, versions) ignored, absent ones keep the defaults. Errors are
    one line naming the file."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: no config.json in the checkpoint directory")
    raw = json.loads(path.read_text())
    if raw.get("model_type", model_type) != model_type:
        raise CheckpointError(f"{path}: model_type {raw['model_type']!r}, expected "
                              f"{model_type!r}")
    kw = {f.name: raw[f.name] for f in dataclasses.fields(cls) if f.name in raw}
    for name in ("image_size", "patch_size"):
        if isinstance(kw.get(name), list):
            if len(set(kw[name])) != 1:
                raise CheckpointError(f"{path}: {name} {kw[name]} is not square (only square "
                                      "frames and patches are supported)")
            kw[name] = kw[name][0]
    return cls(**kw)


def read_tensors(directory: Path) -> tuple[dict[str, np.ndarray], Path]:
    """Every tensor of ``model.safetensors`` or ``pytorch_model.bin`` (read without torch),
    each possibly sharded (an index JSON), and the file named in errors."""
    d = Path(directory)
    if (d / "model.safetensors").is_file() or (d / "model.safetensors.index.json").is_file():
        where = d / "model.safetensors"
        tensors, layout = loading.read_checkpoint(d)
        if layout != "pt":
            raise CheckpointError(f"{where}: {layout} layout; a PyTorch-layout checkpoint "
                                  "(as the hub's) is expected")
        return dict(tensors), where
    if (d / "pytorch_model.bin").is_file():
        from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

        return read_torch_checkpoint(d / "pytorch_model.bin"), d / "pytorch_model.bin"
    if (d / "pytorch_model.bin.index.json").is_file():
        return read_torch_shards(d / "pytorch_model.bin.index.json")
    found = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    raise CheckpointError(f"{d}: no model.safetensors or pytorch_model.bin (found {found})")


def read_torch_shards(index: Path) -> tuple[dict[str, np.ndarray], Path]:
    """Every tensor of a sharded ``pytorch_model.bin`` (``save_pretrained``'s index JSON and
    its ``pytorch_model-0000k-of-0000n.bin`` files, read without torch); a shard that is
    missing, or a tensor the index names that its shard lacks, is one line naming both."""
    import json

    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{index}: not a checkpoint index (no weight_map: {e})") from e
    tensors: dict[str, np.ndarray] = {}
    for name in sorted(set(weight_map.values())):
        shard = index.parent / name
        if not shard.is_file():
            raise CheckpointError(f"{index}: its shard {name} is missing")
        tensors.update(read_torch_checkpoint(shard))
    if lost := sorted(k for k in weight_map if k not in tensors):
        raise CheckpointError(f"{index}: {lost[0]} is not in its shard {weight_map[lost[0]]} "
                              f"({len(lost)} tensors missing)")
    return tensors, index


def upstream_shapes(ctor: Any, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """State-dict key -> torch shape of every parameter ``ctor(rngs)`` builds (abstractly)."""
    return {loading.torch_key(k, prefix): loading.torch_shape(k, s)
            for k, s in loading.param_shapes(ctor).items()}


def match(shapes: Mapping[str, tuple[int, ...]], tensors: Mapping[str, np.ndarray],
          where: Path, prefixes: Sequence[str], ignore: Sequence[str]) -> dict[str, np.ndarray]:
    """NNX parameter path -> array (NNX layout) for ``shapes`` (NNX paths and shapes), keys
    under the best of ``prefixes``, tensors under ``ignore`` allowed to stay unused (via
    ``loading.match_tensors``). The first problem (missing, misshapen or unused tensor) is
    one ``CheckpointError`` line naming ``where`` and the key, with the count of the rest."""
    wanted = {loading.torch_key(n): n for n in shapes}
    targets = {k: loading.torch_shape(n, shapes[n]) for k, n in wanted.items()}
    try:
        got = loading.match_tensors(targets, tensors, "flax", prefixes=prefixes, ignore=ignore)
    except CheckpointError as e:
        head, *problems = str(e).split("\n  ")
        total = int(m.group(1)) if (m := re.search(r"\((\d+) problems\)", head)) else 1
        loading.refuse(where, problems or [head], total)
    return {n: loading.to_nnx_layout(n, np.asarray(got[k])) for k, n in wanted.items()}


def find(tensors: Mapping[str, np.ndarray], key: str, prefixes: Sequence[str]
         ) -> tuple[str, np.ndarray] | None:
    """``(full key, tensor)`` of ``key`` under the first prefix that has it, or None."""
    return next(((p + key, tensors[p + key]) for p in prefixes if p + key in tensors), None)


def disagree(where: Path, key: str, shape: Sequence[int], what: str, field: str,
             value: Any) -> CheckpointError:
    """The one-line error of a checkpoint tensor that contradicts a config.json value."""
    return CheckpointError(f"{where}: tensor {key!r} of shape {tuple(shape)} is for {what}, "
                           f"but config.json says {field}={value}")


def load(ctor: Any, tensors: Mapping[str, np.ndarray], where: Path, prefixes: Sequence[str],
         ignore: Sequence[str], key: jax.Array | None, mesh: Mesh | None,
         rules: Rules | None) -> Any:
    """Matches ``tensors`` to ``ctor``'s parameters and builds the placed module."""
    arrays = match(loading.param_shapes(ctor), tensors, where, prefixes, ignore)
    return loading.instantiate(ctor, arrays, key=jax.random.key(0) if key is None else key,
                               mesh=mesh, rules=rules)


PREFIXES = ("", "videomae.")
HEADS = ("decoder.", "encoder_to_decoder.", "mask_token", "classifier.")


def head_inside(tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A classification checkpoint keeps `fc_norm.*` outside its `videomae.` tower: moved in,
    so one prefix covers the encoder and its mean-pooling norm."""
    if not any(k.startswith(PREFIXES[1]) for k in tensors):
        return dict(tensors)
    return {(PREFIXES[1] + k if k.startswith("fc_norm.") else k): v for k, v in tensors.items()}


def from_pretrained(name_or_dir: str | Path, *, dtype: Any = jnp.float32,
                    param_dtype: Any = jnp.float32, key: jax.Array | None = None,
                    mesh: Mesh | None = None, rules: Rules | None = None) -> VideoMAEModel:
    """VideoMAE with a Hugging Face checkpoint's weights (a directory, or a name/hub id
    ``loading.resolve`` finds locally); pre-training and classification heads are skipped,
    ``fc_norm`` is kept when the config uses mean pooling."""
    directory = loading.resolve(name_or_dir)
    cfg = read_config(directory, VideoMAEConfig, "videomae")
    tensors, where = read_tensors(directory)
    proj = "embeddings.patch_embeddings.projection.weight"
    if (hit := find(tensors, proj, PREFIXES)) is not None and hit[1].ndim == 5:
        t, p = hit[1].shape[2], hit[1].shape[3:]
        if t != cfg.tubelet_size:
            raise disagree(where, hit[0], hit[1].shape, f"tubelets of {t} frames",
                           "tubelet_size", cfg.tubelet_size)
        if p != (cfg.patch_size, cfg.patch_size):
            raise disagree(where, hit[0], hit[1].shape, f"{p[0]}x{p[1]} patches",
                           "patch_size", cfg.patch_size)
    fc_norm = cfg.use_mean_pooling and "fc_norm.weight" in tensors
    tensors = head_inside(tensors) if fc_norm else tensors

    def ctor(rngs: nnx.Rngs) -> VideoMAEModel:
        return VideoMAEModel(cfg, fc_norm=fc_norm, dtype=dtype, param_dtype=param_dtype,
                             rngs=rngs)

    return load(ctor, tensors, where, PREFIXES, HEADS, key, mesh, rules)
