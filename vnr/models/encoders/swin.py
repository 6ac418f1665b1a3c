"""Swin Transformer image tower of CCLM (zengyan-97/CCLM, `models/swin_transformer.py`), NNX.

CCLM's image encoder is Swin-B (`swin_base_patch4_window7_224_22k` initialisation:
patch 4, window 7, width 128, depths (2, 2, 18, 2), heads (4, 8, 16, 32), 224x224), built by
`models/xvlm.py` `build_vision_encoder` (`configs/config_swinB_224.json`). Channels-last:

    images [B, S, S, 3] (normalised) -> patch_embed: 4x4/4 conv 128 -> LayerNorm
    4 stages (`layers.i`), tokens kept as [B, H, W, C]:
      blocks: x + W-MSA(norm1(x)); x + MLP(norm2(x)) (fc1, exact GELU, fc2, ratio 4)
        even blocks: plain windows; odd blocks: windows shifted by window // 2 (cyclic roll,
        regions that were not neighbours masked by -100 as upstream, not -inf)
        window attention: fused `qkv`, scale head_dim**-0.5, + relative position bias from
        `relative_position_bias_table` [(2w-1)^2, heads], softmax, `proj`
      `downsample` (stages 0-2): 2x2 neighbours concatenated (order (0,0), (1,0), (0,1),
        (1,1)) -> LayerNorm(4C) -> `reduction` (no bias) 2C
    -> `norm` -> the mean over tokens is put in front of the tokens: [B, 1 + H*W, 1024]

That output is CCLM's `image_embeds` (its `SwinTransformer.forward` has no [CLS]: the
average-pooled token plays that role, `image_embeds[:, 0]` feeds `vision_proj` for the
contrastive loss); here it is `EncoderOutput.last_hidden_state`, and the pooled token is
also `pooler_output` and `pooled`. Upstream keeps the final `norm` and drops the
classification `head` (commented out), and has no absolute position embedding (ape False).

A stage whose resolution is at most the window size gets one window covering it and no
shift (upstream's rule; at 224 the last stage is 7x7 = the window). Upstream pads nothing:
every stage's resolution must be divisible by its window (checked at construction).

Keys (`loading.torch_key`): NNX names are upstream's state-dict keys with `kernel`/`scale` for
`weight` (`layers.2.blocks.17.attn.qkv.weight`, `layers.0.downsample.reduction.weight`,
`patch_embed.proj.weight`, `norm.bias`). Upstream's buffers `attn.relative_position_index`
(every block) and `attn_mask` (shifted blocks) are derived from the config, so they are
recomputed here, not stored (`buffer_shapes` lists them for the loader). In CCLM's
checkpoints every key has the prefix `vision_encoder.` (see `vnr.models.encoders.cclm`).

Stochastic depth: CCLM trains with drop_path_rate 0.1 (linear over the blocks); here it is
`nnx.Dropout` broadcast over (H, W, C) (per-sample, scaled by 1/(1-p), torch's DropPath),
off in eval mode (the default). `dtype` is the compute dtype (softmax and the attention
biases stay float32); `remat` recomputes each block's activations in the backward pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models.encoders.layers import EncoderOutput, Node, dense, layer_norm, param
from vnr.models.layers import annotate


@dataclasses.dataclass(frozen=True)
class SwinConfig:
    """Swin widths; the defaults are CCLM's Swin-B at 224 (`config_swinB_224.json`)."""

    image_size: int = 224
    patch_size: int = 4
    embed_dim: int = 128
    depths: tuple[int, ...] = (2, 2, 18, 2)
    num_heads: tuple[int, ...] = (4, 8, 16, 32)
    window_size: int = 7
    mlp_ratio: float = 4.0
    eps: float = 1e-5  # torch LayerNorm's default
    drop_path_rate: float = 0.1  # CCLM's build_vision_encoder
    in_chans: int = 3

    @property
    def num_features(self) -> int:
        """Width of the last stage (1024 for Swin-B)."""
        return self.embed_dim * 2 ** (len(self.depths) - 1)

    def resolution(self, stage: int) -> int:
        """Side of a stage's token grid (56, 28, 14, 7 at 224)."""
        return self.image_size // self.patch_size // 2 ** stage

    def window(self, stage: int) -> int:
        """The stage's window side: the whole grid when it is not larger than the window."""
        return min(self.window_size, self.resolution(stage))

    def shift(self, stage: int, block: int) -> int:
        """Cyclic shift of a block: window // 2 on odd blocks, none when one window."""
        if block % 2 == 0 or self.resolution(stage) <= self.window_size:
            return 0
        return self.window_size // 2

    def check(self) -> None:
        """ValueError for a config upstream cannot run (its reshapes need exact division)."""
        if len(self.depths) != len(self.num_heads):
            raise ValueError(f"depths {self.depths} and num_heads {self.num_heads} differ in "
                             "length")
        if self.image_size % (self.patch_size * 2 ** (len(self.depths) - 1)):
            raise ValueError(f"image_size {self.image_size} is not divisible by patch_size x "
                             f"2^(stages - 1) = {self.patch_size * 2 ** (len(self.depths) - 1)}")
        for i, heads in enumerate(self.num_heads):
            if self.resolution(i) % self.window(i):
                raise ValueError(f"stage {i}: resolution {self.resolution(i)} is not divisible "
                                 f"by window {self.window(i)} (upstream does not pad)")
            if (self.embed_dim * 2 ** i) % heads:
                raise ValueError(f"stage {i}: width {self.embed_dim * 2 ** i} is not divisible "
                                 f"by {heads} heads")


SWIN_B_224 = SwinConfig()


def relative_position_index(window: int) -> np.ndarray:
    """[w*w, w*w] row of `relative_position_bias_table` for each (query, key) pair."""
    coords = np.stack(np.meshgrid(np.arange(window), np.arange(window), indexing="ij"))
    coords = coords.reshape(2, -1)
    rel = coords[:, :, None] - coords[:, None, :] + (window - 1)
    return rel[0] * (2 * window - 1) + rel[1]


def shift_mask(size: int, window: int, shift: int) -> np.ndarray:
    """[windows, w*w, w*w] additive mask of a shifted block: -100 between tokens of a window
    that came from different regions of the unshifted grid (upstream's value), else 0."""
    region = np.zeros((size, size), np.int32)
    bands = (slice(0, size - window), slice(size - window, size - shift),
             slice(size - shift, size))
    for i, rows in enumerate(bands):
        for j, cols in enumerate(bands):
            region[rows, cols] = 3 * i + j
    n = size // window
    ids = region.reshape(n, window, n, window).transpose(0, 2, 1, 3).reshape(n * n, -1)
    return np.where(ids[:, None, :] != ids[:, :, None], -100.0, 0.0).astype(np.float32)


def to_windows(x: jax.Array, window: int) -> jax.Array:
    """[B, H, W, C] -> [B, windows, w*w, C], windows in row-major order of the grid."""
    b, h, w, c = x.shape
    x = x.reshape(b, h // window, window, w // window, window, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // window) * (w // window), window * window, c)


def from_windows(x: jax.Array, size: int, window: int) -> jax.Array:
    """Inverse of `to_windows` for a [B, size, size, C] grid."""
    b, c, n = x.shape[0], x.shape[-1], size // window
    x = x.reshape(b, n, n, window, window, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, size, size, c)


class WindowAttention(nnx.Module):
    """Multi-head self-attention inside each window, with relative position bias."""

    def __init__(self, dim: int, heads: int, window: int, *, dtype: Any, param_dtype: Any,
                 rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.num_heads, self.window, self.dtype = heads, window, dtype
        self.qkv = dense(dim, 3 * dim, ("embed", "heads"), **kw)
        self.proj = dense(dim, dim, ("heads", "embed"), **kw)
        table = 0.02 * jax.random.truncated_normal(
            rngs.params(), -2.0, 2.0, ((2 * window - 1) ** 2, heads))
        self.relative_position_bias_table = param(table.astype(param_dtype), (None, None))

    def __call__(self, x: jax.Array, mask: np.ndarray | None) -> jax.Array:
        """x [B, windows, N, C]; mask [windows, N, N] additive, or None."""
        b, nw, n, c = x.shape
        h = self.num_heads
        qkv = self.qkv(x).reshape(b, nw, n, 3, h, c // h)
        q, k, v = qkv[:, :, :, 0], qkv[:, :, :, 1], qkv[:, :, :, 2]
        q = q * jnp.asarray((c // h) ** -0.5, q.dtype)
        logits = jnp.einsum("bwqhd,bwkhd->bwhqk", q, k, preferred_element_type=jnp.float32)
        table = self.relative_position_bias_table[...].astype(jnp.float32)
        bias = table[relative_position_index(self.window).reshape(-1)].reshape(n, n, h)
        logits = logits + bias.transpose(2, 0, 1)
        if mask is not None:
            logits = logits + jnp.asarray(mask)[None, :, None]
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        out = jnp.einsum("bwhqk,bwkhd->bwqhd", probs, v).reshape(b, nw, n, c)
        return self.proj(out)


class SwinBlock(nnx.Module):
    """(Shifted-)window attention then MLP, both pre-norm residual with drop path."""

    def __init__(self, cfg: SwinConfig, stage: int, block: int, drop_path: float, *,
                 dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        dim, heads = cfg.embed_dim * 2 ** stage, cfg.num_heads[stage]
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.size, self.window = cfg.resolution(stage), cfg.window(stage)
        self.shift = cfg.shift(stage, block)
        self.norm1 = layer_norm(dim, cfg.eps, **kw)
        self.attn = WindowAttention(dim, heads, self.window, **kw)
        self.norm2 = layer_norm(dim, cfg.eps, **kw)
        hidden = int(dim * cfg.mlp_ratio)
        self.mlp = Node(fc1=dense(dim, hidden, ("embed", "mlp"), **kw),
                        fc2=dense(hidden, dim, ("mlp", "embed"), **kw))
        self.drop_path = nnx.Dropout(drop_path, broadcast_dims=(1, 2, 3), deterministic=True,
                                     rngs=rngs)
        self.remat = False

    def __call__(self, x: jax.Array, deterministic: bool | None = None) -> jax.Array:
        """x [B, H, W, C] -> same shape."""
        if self.remat:
            return nnx.remat(lambda m, a, d: m._forward(a, d), static_argnums=(2,))(
                self, x, deterministic)
        return self._forward(x, deterministic)

    def _forward(self, x: jax.Array, deterministic: bool | None) -> jax.Array:
        s, w = self.shift, self.window
        y = self.norm1(x)
        if s:
            y = jnp.roll(y, (-s, -s), axis=(1, 2))
        mask = shift_mask(self.size, w, s) if s else None
        y = from_windows(self.attn(to_windows(y, w), mask), self.size, w)
        if s:
            y = jnp.roll(y, (s, s), axis=(1, 2))
        x = x + self.drop_path(y, deterministic=deterministic)
        y = self.mlp.fc2(jax.nn.gelu(self.mlp.fc1(self.norm2(x)), approximate=False))
        return x + self.drop_path(y, deterministic=deterministic)


class PatchMerging(nnx.Module):
    """2x2 neighbouring tokens concatenated, LayerNorm, linear 4C -> 2C (halves H and W)."""

    def __init__(self, dim: int, eps: float, *, dtype: Any, param_dtype: Any,
                 rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.norm = layer_norm(4 * dim, eps, **kw)
        self.reduction = dense(4 * dim, 2 * dim, ("mlp", "embed"), use_bias=False, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        parts = [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]]
        return self.reduction(self.norm(jnp.concatenate(parts, axis=-1)))


class SwinTransformer(nnx.Module):
    """CCLM's Swin image tower: images [B, S, S, 3] -> `EncoderOutput` ([B, 1 + L, C]
    with the mean token first; `pooled` = that mean token [B, C]).

    Args:
      cfg: widths (`SWIN_B_224` is CCLM's).
      dtype: compute dtype (e.g. `jnp.bfloat16`); param_dtype: parameter dtype.
      remat: recompute each block's activations in the backward pass.
      rngs: `params` and `dropout` (drop path) streams.
    """

    def __init__(self, cfg: SwinConfig = SWIN_B_224, *, dtype: Any = jnp.float32,
                 param_dtype: Any = jnp.float32, remat: bool = False, rngs: nnx.Rngs):
        cfg.check()
        self.config, self.dtype = cfg, dtype
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        p, c = cfg.patch_size, cfg.embed_dim
        self.patch_embed = Node(
            proj=nnx.Conv(cfg.in_chans, c, (p, p), strides=(p, p), padding="VALID",
                          dtype=dtype, param_dtype=param_dtype, rngs=rngs,
                          kernel_init=annotate(nnx.initializers.lecun_normal(),
                                               ("patch", "patch", "patch", "embed")),
                          bias_init=annotate(nnx.initializers.zeros_init(), ("embed",))),
            norm=layer_norm(c, cfg.eps, **kw))
        rates = np.linspace(0.0, cfg.drop_path_rate, sum(cfg.depths)).tolist()
        stages = []
        for i, depth in enumerate(cfg.depths):
            first = sum(cfg.depths[:i])
            blocks = nnx.List([SwinBlock(cfg, i, j, rates[first + j], **kw)
                               for j in range(depth)])
            last = i == len(cfg.depths) - 1
            stages.append(Node(blocks=blocks, downsample=None if last else PatchMerging(
                c * 2 ** i, cfg.eps, **kw)))
        self.layers = nnx.List(stages)
        self.norm = layer_norm(cfg.num_features, cfg.eps, **kw)
        for block in self.blocks():
            block.remat = remat

    def blocks(self) -> list[SwinBlock]:
        """Every block, stage by stage."""
        return [b for stage in self.layers for b in stage.blocks]

    def __call__(self, images: jax.Array, *, deterministic: bool | None = None
                 ) -> EncoderOutput:
        """Encodes channels-last images [B, image_size, image_size, 3] (CCLM normalises with
        CLIP's mean and std: its `dataset/__init__.py`)."""
        s = self.config.image_size
        if images.shape[1:] != (s, s, self.config.in_chans):
            raise ValueError(f"expected channels-last images of {s}x{s}x"
                             f"{self.config.in_chans}, got shape {tuple(images.shape)}")
        x = self.patch_embed.norm(self.patch_embed.proj(images.astype(self.dtype)))
        for stage in self.layers:
            for block in stage.blocks:
                x = block(x, deterministic)
            if stage.downsample is not None:
                x = stage.downsample(x)
        x = self.norm(x.reshape(x.shape[0], -1, x.shape[-1]))
        pooled = x.mean(axis=1)
        return EncoderOutput(jnp.concatenate([pooled[:, None], x], axis=1), pooled, pooled)


# ----------------------------------------------------------------------------- keys


def buffer_shapes(cfg: SwinConfig = SWIN_B_224, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """Upstream's derived buffers (recomputed here): `relative_position_index` of every
    block, `attn_mask` of every shifted one, with their shapes."""
    out = {}
    for i, depth in enumerate(cfg.depths):
        n = cfg.window(i) ** 2
        for j in range(depth):
            block = f"{prefix}layers.{i}.blocks.{j}."
            out[f"{block}attn.relative_position_index"] = (n, n)
            if cfg.shift(i, j):
                out[f"{block}attn_mask"] = ((cfg.resolution(i) // cfg.window(i)) ** 2, n, n)
    return out
