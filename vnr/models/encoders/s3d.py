"""S3D-G (Xie et al. 2018) as trained by MIL-NCE on HowTo100M (Miech et al. 2020), in Flax NNX.

SYMON (§7.2) and UniVL describe a video by one 1024-d S3D vector per second: the global
average of `mixed_5c` of the HowTo100M MIL-NCE network (antoine77340/S3D_HowTo100M,
`s3d_howto100m.pth`). This is that network's video tower, channels-last, inference only:

    frames [B, T, H, W, 3] in [0, 1] (T, H, W even)
    space-to-depth (2x2x2 blocks -> 24 channels) -> conv1 2x4x4 (TF-'SAME' padding) 64
    maxpool_2a 1x3x3/1,2,2 -> conv_2b 1x1x1 64 -> conv_2c 3x3x3 separable 192 -> gating
    maxpool_3a 1x3x3/1,2,2 -> mixed_3b, mixed_3c -> maxpool_4a 3x3x3/2
    mixed_4b..4f -> maxpool_5a 2x2x2/2 -> mixed_5b, mixed_5c
    -> mean over (T, H, W) = `mixed_5c` [B, 1024] -> fc = `video_embedding` [B, 512]

Each conv is upstream's STConv3D: conv (no bias) -> batch norm -> ReLU; a "separable" 3x3x3
is a 1x3x3 then a 3x1x1 conv, each with its own batch norm and ReLU. An inception block has
four branches (1x1x1; 1x1x1 then separable 3x3x3, twice; 3x3x3/1 max-pool then 1x1x1), each
passed through self-gating (x * sigmoid(fc(mean over T, H, W))) and concatenated.

Upstream's max-pools (`MaxPool3dTFPadding`) zero-pad every axis by max(k - s, 0) (the lower
half on the low side) whatever the input length, then pool in ceil mode (a last window that
overhangs the end sees only the real elements): this differs from TensorFlow's SAME for some
lengths (7 with k3/s2: upstream pads (0, 1) and overhangs; TF would pad (1, 1)); `max_pool_tf`
reproduces upstream. Upstream's `gating` constructor flag is overwritten by the stem's gating
module, so every S3D applies gating everywhere; this port has no flag.

Batch norm is the inference form with the stored running statistics (eps 1e-5): a frozen
feature extractor, never trained here (training-mode batch statistics are not implemented).
The text tower (`text_module.*`: word table, fc1, ReLU, max over words, fc2) is a separate
module, `S3DText` (`WordTokenizer`, `text_from_checkpoint`); the video loader ignores it.
Module and parameter names give upstream's state-dict keys (`mixed_4b.conv_b1_b.conv2.weight`,
`...bn2.running_var`, `gating.fc.bias`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models.encoders import loading
from vnr.models.encoders.layers import FrozenBatchNorm as BatchNorm
from vnr.models.encoders.loading import CheckpointError
from vnr.models.layers import annotate


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How a video becomes the [T, 1024] per-second features UniVL used.

    Every field comes from ArrowLuo/VideoFeatureExtractor (`extract.py --type=s3dg`, the
    extractor UniVL's README points to): `fps` and `clip_frames` are its
    FRAMERATE_DICT['s3dg'] = 16, used both as the ffmpeg `fps` filter rate and as the clip
    length in `preprocessing.py` (frames cut into consecutive, non-overlapping 16-frame clips:
    one clip = one second, one feature row); `size` is SIZE_DICT (ffmpeg `scale` so the
    shorter side is 224, the longer `int(long * 224 / short)`, default bicubic); `crop` is
    CENTERCROP_DICT (crop 224x224 at `int((w - 224) / 2), int((h - 224) / 2)`); `value_range`:
    rgb24 bytes divided by 255, no mean/std (upstream's README: inputs in [0, 1]); the last
    partial second is completed with black (all-zero) frames (`_zero_pad`); each row is
    `mixed_5c` (the videocnn S3D with `last_fc=False`), L2-normalised (`--l2_normalize`
    default 1) and saved as float16 (`--half_precision` default 1).

    VideoCLIP (fairseq examples/MMPT `scripts/video_feature_extractor`, `--type=s3d`) differs:
    30 fps, 30-frame clips (still one per second), and it keeps the 512-d `video_embedding`
    (the joint text-video space), not `mixed_5c`; same 224 scale-and-centre-crop, [0, 1]
    values, black padding, L2 normalisation and float16.
    """

    fps: int = 16
    clip_frames: int = 16
    size: int = 224
    crop: int = 224
    value_range: tuple[float, float] = (0.0, 1.0)
    output: str = "mixed_5c"
    l2_normalize: bool = True
    store_dtype: str = "float16"


UNIVL = Sampling()
# SYMON's Appendices D-E: UniVL's extraction, but "a frame size of 112 x 112"
SYMON = Sampling(size=112, crop=112)
VIDEOCLIP = Sampling(fps=30, clip_frames=30, output="video_embedding")

# One inception block: (1x1x1, 3x3x3-branch reduce, its 3x3x3, second reduce, its 3x3x3, pool).
Mixed = tuple[int, int, int, int, int, int]
MIXED_NAMES = ("3b", "3c", "4b", "4c", "4d", "4e", "4f", "5b", "5c")


@dataclasses.dataclass(frozen=True)
class S3DConfig:
    """Widths of S3D-G's video tower; the defaults are upstream's (HowTo100M checkpoint)."""

    conv1: int = 64
    conv_2b: int = 64
    conv_2c: int = 192
    mixed: tuple[Mixed, ...] = (
        (64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64),
        (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
        (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128),
        (256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128))
    num_classes: int = 512  # width of `video_embedding`; 0: no fc (mixed_5c only)
    eps: float = 1e-5  # torch BatchNorm3d's default

    @property
    def num_features(self) -> int:
        """Width of `mixed_5c` (1024)."""
        m = self.mixed[-1]
        return m[0] + m[2] + m[4] + m[5]


S3D_HOWTO100M = S3DConfig()
TEXT_PREFIX = "text_module."  # the text tower's keys (`S3DText`)


class S3DOutput(NamedTuple):
    mixed_5c: jax.Array  # [B, 1024] global average of the last block
    video_embedding: jax.Array | None  # [B, num_classes] the joint text-video space


def _conv(cin: int, cout: int, kernel: Sequence[int], pad: Sequence[tuple[int, int]],
          rngs: nnx.Rngs, stride: Sequence[int] = (1, 1, 1)) -> nnx.Conv:
    return nnx.Conv(cin, cout, tuple(kernel), strides=tuple(stride), padding=tuple(pad),
                    use_bias=False, rngs=rngs,
                    kernel_init=annotate(nnx.initializers.lecun_normal(),
                                         (None, None, None, None, "conv")))


def _linear(din: int, dout: int, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(din, dout, rngs=rngs,
                      kernel_init=annotate(nnx.initializers.lecun_normal(), (None, "conv")),
                      bias_init=annotate(nnx.initializers.zeros_init(), ("conv",)))


class STConv3D(nnx.Module):
    """conv -> BN -> ReLU (`conv1`, `bn1`); `separable`: a 1xkxk then a kx1x1 conv, the
    second with `conv2`, `bn2` (symmetric zero padding `pad` on every axis)."""

    def __init__(self, cin: int, cout: int, kernel: Sequence[int], eps: float, rngs: nnx.Rngs,
                 pad: Sequence[tuple[int, int]] = ((0, 0),) * 3, separable: bool = False):
        self.separable = separable
        if separable:
            kt, kh, kw = kernel
            self.conv1 = _conv(cin, cout, (1, kh, kw), ((0, 0), pad[1], pad[2]), rngs)
            self.conv2 = _conv(cout, cout, (kt, 1, 1), (pad[0], (0, 0), (0, 0)), rngs)
            self.bn2 = BatchNorm(cout, eps)
        else:
            self.conv1 = _conv(cin, cout, kernel, pad, rngs)
        self.bn1 = BatchNorm(cout, eps)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.bn1(self.conv1(x)))
        if self.separable:
            x = jax.nn.relu(self.bn2(self.conv2(x)))
        return x


class SelfGating(nnx.Module):
    """x * sigmoid(fc(mean of x over time and space)), per channel."""

    def __init__(self, n: int, rngs: nnx.Rngs):
        self.fc = _linear(n, n, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        weights = jax.nn.sigmoid(self.fc(x.mean(axis=(1, 2, 3))))
        return x * weights[:, None, None, None, :]


def max_pool_tf(x: jax.Array, kernel: Sequence[int], stride: Sequence[int]) -> jax.Array:
    """Upstream's `MaxPool3dTFPadding` on [B, T, H, W, C]: zero padding max(k - s, 0) per
    axis (floor half before), then a ceil-mode pool (overhanging windows clipped)."""
    zero_pad, clip_pad = [], []
    for n, k, s in zip(x.shape[1:4], kernel, stride):
        along = max(k - s, 0)
        lo, hi = along // 2, along - along // 2
        padded = n + lo + hi
        out = -(-(padded - k) // s) + 1  # ceil mode
        if (out - 1) * s >= padded:  # a window must start inside the input
            out -= 1
        zero_pad.append((lo, hi))
        clip_pad.append((0, max((out - 1) * s + k - padded, 0)))
    x = jnp.pad(x, ((0, 0), *zero_pad, (0, 0)))
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, *kernel, 1), (1, *stride, 1),
                                 ((0, 0), *clip_pad, (0, 0)))


def _max_pool_same(x: jax.Array) -> jax.Array:  # 3x3x3, stride 1, pad 1 (torch: -inf)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 3, 1), (1,) * 5,
                                 ((0, 0), (1, 1), (1, 1), (1, 1), (0, 0)))


class InceptionBlock(nnx.Module):
    """Four gated branches concatenated on channels (upstream's `InceptionBlock`)."""

    def __init__(self, cin: int, widths: Mixed, eps: float, rngs: nnx.Rngs):
        b0, b1a, b1b, b2a, b2b, b3 = widths
        one, same = (1, 1, 1), ((1, 1),) * 3
        self.conv_b0 = STConv3D(cin, b0, one, eps, rngs)
        self.conv_b1_a = STConv3D(cin, b1a, one, eps, rngs)
        self.conv_b1_b = STConv3D(b1a, b1b, (3, 3, 3), eps, rngs, same, separable=True)
        self.conv_b2_a = STConv3D(cin, b2a, one, eps, rngs)
        self.conv_b2_b = STConv3D(b2a, b2b, (3, 3, 3), eps, rngs, same, separable=True)
        self.conv_b3_b = STConv3D(cin, b3, one, eps, rngs)
        self.gating_b0 = SelfGating(b0, rngs)
        self.gating_b1 = SelfGating(b1b, rngs)
        self.gating_b2 = SelfGating(b2b, rngs)
        self.gating_b3 = SelfGating(b3, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b0 = self.gating_b0(self.conv_b0(x))
        b1 = self.gating_b1(self.conv_b1_b(self.conv_b1_a(x)))
        b2 = self.gating_b2(self.conv_b2_b(self.conv_b2_a(x)))
        b3 = self.gating_b3(self.conv_b3_b(_max_pool_same(x)))
        return jnp.concatenate([b0, b1, b2, b3], axis=-1)


def space_to_depth(x: jax.Array) -> jax.Array:
    """[B, T, H, W, C] -> [B, T/2, H/2, W/2, 8C], channels ordered (dt, dh, dw, c) as
    upstream's `_space_to_depth` orders them."""
    b, t, h, w, c = x.shape
    x = x.reshape(b, t // 2, 2, h // 2, 2, w // 2, 2, c)
    return x.transpose(0, 1, 3, 5, 2, 4, 6, 7).reshape(b, t // 2, h // 2, w // 2, 8 * c)


class S3D(nnx.Module):
    """Frames [B, T, H, W, 3] in [0, 1] (T, H, W even) -> `S3DOutput`."""

    def __init__(self, cfg: S3DConfig, rngs: nnx.Rngs):
        self.config = cfg
        e = cfg.eps
        # Upstream pads (1, 2, 2) on both sides and drops the first output on each axis to
        # mimic TF's SAME: the same as padding (0, 1), (1, 2), (1, 2).
        self.conv1 = STConv3D(24, cfg.conv1, (2, 4, 4), e, rngs, ((0, 1), (1, 2), (1, 2)))
        self.conv_2b = STConv3D(cfg.conv1, cfg.conv_2b, (1, 1, 1), e, rngs)
        self.conv_2c = STConv3D(cfg.conv_2b, cfg.conv_2c, (3, 3, 3), e, rngs, ((1, 1),) * 3,
                                separable=True)
        self.gating = SelfGating(cfg.conv_2c, rngs)
        c = cfg.conv_2c
        for name, widths in zip(MIXED_NAMES, cfg.mixed, strict=True):
            setattr(self, f"mixed_{name}", InceptionBlock(c, widths, e, rngs))
            c = widths[0] + widths[2] + widths[4] + widths[5]
        if cfg.num_classes:
            self.fc = _linear(c, cfg.num_classes, rngs)

    def __call__(self, frames: jax.Array) -> S3DOutput:
        if any(n % 2 for n in frames.shape[1:4]) or frames.shape[-1] != 3:
            raise ValueError("S3D needs frames [B, T, H, W, 3] with T, H and W even (the "
                             f"space-to-depth stem), got {tuple(frames.shape)}")
        x = self.conv1(space_to_depth(frames))
        x = max_pool_tf(x, (1, 3, 3), (1, 2, 2))
        x = self.gating(self.conv_2c(self.conv_2b(x)))
        x = max_pool_tf(x, (1, 3, 3), (1, 2, 2))
        for name in MIXED_NAMES:
            if name == "4b":
                x = max_pool_tf(x, (3, 3, 3), (2, 2, 2))
            elif name == "5b":
                x = max_pool_tf(x, (2, 2, 2), (2, 2, 2))
            x = getattr(self, f"mixed_{name}")(x)
        pooled = x.mean(axis=(1, 2, 3))
        return S3DOutput(pooled, self.fc(pooled) if self.config.num_classes else None)


# ----------------------------------------------------------------------------- loading


def upstream_shapes(cfg: S3DConfig = S3D_HOWTO100M) -> dict[str, tuple[int, ...]]:
    """Upstream key -> torch shape of every parameter and running statistic this port reads
    (built abstractly: nothing is allocated)."""
    shapes = loading.param_shapes(lambda rngs: S3D(cfg, rngs))
    return {loading.torch_key(k): loading.torch_shape(k, s) for k, s in shapes.items()}


def ignored(key: str) -> bool:
    """Checkpoint keys the video tower leaves unused: BN step counters and the text tower."""
    return key.endswith(".num_batches_tracked") or key.startswith(TEXT_PREFIX)


def _match(tensors: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], where: str,
           prefix: str, skip: Callable[[str], bool], what: str = "S3D"
           ) -> dict[str, np.ndarray]:
    """NNX parameter name -> array (Flax layout) for `shapes` (NNX names) from an upstream
    state dict, keys under `prefix`, those `skip` accepts left alone; the first problem
    (missing, unexpected or misshapen key) is one `CheckpointError` line naming `where`
    and the key, with the count of the others."""
    wanted = {loading.torch_key(k, prefix): k for k in shapes}
    used = {k for k in tensors if not skip(k)}
    if tensors and not used & set(wanted):
        raise CheckpointError(f"{where}: not an {what} checkpoint: none of its {len(tensors)} "
                              f"tensors is an {what} key (first: {next(iter(tensors))!r})")
    problems = [f"missing key {k!r} (shape {loading.torch_shape(n, shapes[n])})"
                for k, n in wanted.items() if k not in tensors]
    problems += [f"unexpected key {k!r} (shape {tuple(tensors[k].shape)})"
                 for k in sorted(used - set(wanted))]
    out = {}
    for key, name in wanted.items():
        if key not in tensors:
            continue
        want = loading.torch_shape(name, shapes[name])
        if tuple(tensors[key].shape) != want:
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, S3D expects "
                            f"{want}")
            continue
        out[name] = loading.to_nnx_layout(name, np.asarray(tensors[key], np.float32))
    loading.refuse(where, problems)
    return out


def match(tensors: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]],
          where: str) -> dict[str, np.ndarray]:
    """The video tower's parameters (`shapes`: NNX names and shapes of an `S3D` as built)
    from an upstream state dict (see `_match`)."""
    return _match(tensors, shapes, where, "", ignored)


def match_state_dict(tensors: dict[str, np.ndarray], cfg: S3DConfig,
                     where: str) -> dict[str, np.ndarray]:
    """`match` for the `S3D` that `cfg` builds."""
    return match(tensors, loading.param_shapes(lambda rngs: S3D(cfg, rngs)), where)


def from_checkpoint(path: str | Path, *, cfg: S3DConfig = S3D_HOWTO100M,
                    key: jax.Array | None = None,
                    mesh: jax.sharding.Mesh | None = None) -> S3D:
    """S3D with the weights of upstream's `torch.save`d state dict (`s3d_howto100m.pth`, zip
    or legacy format), read without torch. Every parameter and running statistic must be in
    the file with its shape; only `num_batches_tracked` and `text_module.*` may be left."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    arrays = match_state_dict(read_torch_checkpoint(path), cfg, str(path))
    return loading.instantiate(lambda rngs: S3D(cfg, rngs), arrays,
                               key=jax.random.key(0) if key is None else key, mesh=mesh)


# ----------------------------------------------------------------------------- text tower


@dataclasses.dataclass(frozen=True)
class TextConfig:
    """Upstream's `Sentence_Embedding` widths (read from the checkpoint when loading)."""

    num_embeddings: int = 66250  # 1 + the words of s3d_dict.npy (row 0: padding)
    word_dim: int = 300
    hidden: int = 2048
    num_classes: int = 512
    max_words: int = 16


class S3DText(nnx.Module):
    """Token ids [B, max_words] -> `text_embedding` [B, num_classes]: word embedding, fc1 and
    ReLU, max over the word slots (padding slots included, as upstream), fc2."""

    def __init__(self, cfg: TextConfig, rngs: nnx.Rngs):
        self.config = cfg
        self.word_embd = nnx.Embed(cfg.num_embeddings, cfg.word_dim, rngs=rngs,
                                   embedding_init=annotate(nnx.initializers.normal(1.0),
                                                           ("vocab", None)))
        self.fc1 = _linear(cfg.word_dim, cfg.hidden, rngs)
        self.fc2 = _linear(cfg.hidden, cfg.num_classes, rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        return self.fc2(jax.nn.relu(self.fc1(self.word_embd(ids))).max(axis=1))


class WordTokenizer:
    """Upstream's word lookup: lower-cased, split into runs of word characters and
    apostrophes, each known word -> 1 + its index in the word list (`s3d_dict.npy`),
    unknown words dropped, the first `max_words` kept, zero-padded."""

    def __init__(self, words: Sequence[str], max_words: int = 16):
        self.ids = {str(w): i + 1 for i, w in enumerate(words)}
        self.max_words = max_words

    @classmethod
    def from_file(cls, path: str | Path, max_words: int = 16) -> WordTokenizer:
        return cls(np.load(path).tolist(), max_words)

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(sentences), self.max_words), np.int32)
        for row, sentence in enumerate(sentences):
            known = [self.ids[w] for w in re.findall(r"[\w']+", str(sentence).lower())
                     if w in self.ids][:self.max_words]
            out[row, :len(known)] = known
        return out


def text_from_checkpoint(path: str | Path, *, key: jax.Array | None = None,
                         mesh: jax.sharding.Mesh | None = None) -> S3DText:
    """The text tower from upstream's state dict (its `text_module.*` keys; the video keys
    are `from_checkpoint`'s); widths from the file's tensors."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    tensors = read_torch_checkpoint(path)
    shape = {k: tuple(tensors[f"{TEXT_PREFIX}{k}.weight"].shape)
             for k in ("word_embd", "fc1", "fc2") if f"{TEXT_PREFIX}{k}.weight" in tensors}
    cfg = TextConfig()
    if len(shape) == 3 and len(shape["word_embd"]) == 2 and all(
            len(shape[k]) == 2 for k in ("fc1", "fc2")):
        cfg = TextConfig(*shape["word_embd"], shape["fc1"][0], shape["fc2"][0])
    shapes = loading.param_shapes(lambda rngs: S3DText(cfg, rngs))
    arrays = _match(tensors, shapes, str(path), TEXT_PREFIX,
                    lambda k: not k.startswith(TEXT_PREFIX), "S3D text tower")
    return loading.instantiate(lambda rngs: S3DText(cfg, rngs), arrays,
                               key=jax.random.key(0) if key is None else key, mesh=mesh)


# ----------------------------------------------------------------------------- features


@nnx.jit
def _embed(model: S3D, clips: jax.Array) -> S3DOutput:
    return model(clips)


def clips_of(frames: np.ndarray, sampling: Sampling = UNIVL) -> np.ndarray:
    """[N, H, W, 3] frames (uint8, or floats already in [0, 1]) -> [ceil(N / clip), clip,
    H, W, 3] float32 in [0, 1], the last clip completed with black frames."""
    x = np.asarray(frames)
    x = x.astype(np.float32) / np.float32(255) if x.dtype == np.uint8 else x.astype(np.float32)
    n = sampling.clip_frames
    pad = -len(x) % n
    if pad:
        x = np.concatenate([x, np.zeros((pad, *x.shape[1:]), np.float32)])
    return x.reshape(-1, n, *x.shape[1:])


def features_per_second(model: S3D, frames: np.ndarray, sampling: Sampling = UNIVL,
                        batch_size: int = 8) -> np.ndarray:
    """One feature row per second of video, as UniVL's features were made (see `Sampling`).

    Args:
      model: S3D with the HowTo100M weights (`from_checkpoint`).
      frames: [N, H, W, 3] decoded at `sampling.fps`, scaled so the shorter side is
        `sampling.size` and centre-cropped to `sampling.crop` squared (224x224), RGB, uint8
        (divided by 255 here) or floats in [0, 1].
      sampling: `UNIVL` (default), `SYMON` (112 px) or `VIDEOCLIP`.
      batch_size: clips per forward; the last batch is padded so one shape compiles.

    Returns:
      [ceil(N / clip_frames), D] float32 (D = 1024 for `mixed_5c`), L2-normalised when
      `sampling.l2_normalize`; the caller casts to `sampling.store_dtype` when writing.
    """
    clips = clips_of(frames, sampling)
    rows = []
    for i in range(0, len(clips), batch_size):
        batch = clips[i:i + batch_size]
        n = len(batch)
        if n < batch_size:
            batch = np.concatenate([batch, np.zeros((batch_size - n, *batch.shape[1:]),
                                                    np.float32)])
        out = _embed(model, jnp.asarray(batch))
        rows.append(np.asarray(getattr(out, sampling.output))[:n])
    dim = model.config.num_features if sampling.output == "mixed_5c" else model.config.num_classes
    feats = np.concatenate(rows) if rows else np.zeros((0, dim), np.float32)
    if sampling.l2_normalize:  # torch F.normalize: x / max(|x|, 1e-12)
        feats = feats / np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-12)
    return feats.astype(np.float32)
