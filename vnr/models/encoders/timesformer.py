"""TimeSformer video tower (Hugging Face ``TimesformerModel``, e.g.
``facebook/timesformer-base-finetuned-k400``), NNX, divided space-time attention.

Architecture (ViT-B for the base checkpoint: 8 frames of 224x224, patch 16), channels-last::

    clip [B, T, H, W, 3] (normalised) -> each frame: embeddings.patch_embeddings.projection
      (patch x patch conv, stride = kernel) -> [B*T, S, C], S = (H/16)(W/16) patches
    frame-wise: [cls_token; patches] + position_embeddings [1, 1 + S, C]
    patches regrouped patch-major: [B, S, T, C] + time_embeddings [1, T, C] -> [B, S*T, C]
      (token 1 + s*T + t is patch s of frame t), cls_token in front: [B, 1 + S*T, C]
    encoder.layer.i (divided attention; pre-LN, residuals):
      temporal: each patch's T tokens attend to each other:
        p + temporal_dense(temporal_attention(temporal_layernorm(p)))       (no cls)
      spatial: each frame's S tokens plus a copy of the cls token attend to each other:
        attention(layernorm_before(.)); the T cls outputs are averaged
      MLP: x + output.dense(act(intermediate.dense(layernorm_after(x))))
      attention: fused ``qkv`` (bias when qkv_bias), softmax(q k^T / sqrt(d)), output.dense
    -> layernorm

Output (``EncoderOutput``): ``last_hidden_state`` [B, 1 + S*T, C]; ``pooler_output`` =
``pooled`` = the final cls token (what the classifier reads).

Keys: NNX paths are ``TimesformerModel``'s state-dict keys with ``kernel``/``scale`` for
``weight`` (``encoder.layer.0.temporal_attention.attention.qkv.weight``,
``embeddings.time_embeddings`` [1, T, C], ``embeddings.patch_embeddings.projection.weight``
[C, 3, 16, 16] stored as [16, 16, 3, C]). The classification checkpoints put
``timesformer.`` in front; their ``classifier.*`` is skipped.

Preprocessing: ``VideoMAEImageProcessor`` (the processor the hub checkpoints name): short
side resized to 224, centre crop 224x224, scaled to [0, 1], normalised with the mean / std of
the checkpoint's ``preprocessor_config.json`` (``vnr.models.encoders.videomae.normalise``
with those values; not checked offline here: the original TimeSformer code uses 0.45 / 0.225
per channel, transformers' conversion script checked the k400 logits with 0.5 / 0.5).

Choices where upstream is loose: the clip must have exactly ``num_frames`` frames of
``image_size`` (upstream interpolates the position / time tables for other sizes in the
embeddings, but its layers reshape with the config's ``num_frames`` and ``image_size``, so
other sizes break or mix tokens there); only ``attention_type="divided_space_time"`` (the
published checkpoints') is ported. Stochastic depth (drop_path_rate, linear over the layers)
drops per row of the tensor it is applied to, as upstream: per (clip, patch) in the temporal
branch, per (clip, frame) in the spatial one, per clip in the MLP; in eval mode it is off.
The cls token entering layer 0 is each clip's own (upstream takes the first B rows of the
B*T frame batch: the same values in eval mode).

Loading (``from_pretrained``): ``config.json`` plus ``model.safetensors`` or
``pytorch_model.bin``, read without torch; every problem is one ``CheckpointError`` line
naming the file and the key; a checkpoint whose time embeddings (frame count), position
table (patch grid) or patch kernel disagree with ``config.json`` names the value.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from vnr.models import attention
from vnr.models.encoders import layers, loading
from vnr.models.encoders.layers import EncoderOutput, Node, dense, layer_norm, param
from vnr.models.encoders.videomae import (
    check_clip,
    disagree,
    find,
    load,
    patch_conv,
    read_config,
    read_tensors,
)
from vnr.sharding import Rules

ATTENTION_TYPES = ("divided_space_time",)


@dataclasses.dataclass(frozen=True)
class TimesformerConfig:
    """``config.json`` fields the encoder uses; defaults are
    facebook/timesformer-base-finetuned-k400's."""

    image_size: int = 224
    patch_size: int = 16
    num_channels: int = 3
    num_frames: int = 8
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-6
    qkv_bias: bool = True
    attention_type: str = "divided_space_time"
    drop_path_rate: float = 0.0

    @property
    def num_patches(self) -> int:
        """Patches per frame (196 for the base)."""
        return (self.image_size // self.patch_size) ** 2

    def check(self) -> None:
        """ValueError (one line) for a config this port cannot run."""
        if self.attention_type not in ATTENTION_TYPES:
            raise ValueError(f"attention_type {self.attention_type!r} is not supported "
                             f"(ported: {ATTENTION_TYPES})")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch_size "
                             f"{self.patch_size}")
        layers.check_divisible(self.hidden_size, self.num_attention_heads)


TIMESFORMER_BASE_K400 = TimesformerConfig()


def _attention(cfg: TimesformerConfig, kw: dict[str, Any], rngs: nnx.Rngs) -> Node:
    h = cfg.hidden_size
    return Node(
        {"attention": Node(qkv=dense(h, 3 * h, ("embed", "heads"), use_bias=cfg.qkv_bias, **kw),
                           attn_drop=layers.dropout(cfg.attention_probs_dropout_prob, rngs))},
        output=Node(dense=dense(h, h, ("heads", "embed"), **kw),
                    dropout=layers.dropout(cfg.hidden_dropout_prob, rngs)))


class TimesformerLayer(layers.TransformerLayer):
    """One divided space-time layer (temporal, then spatial attention, then MLP)."""

    def __init__(self, cfg: TimesformerConfig, drop_path: float, *, dtype: Any,
                 param_dtype: Any, rngs: nnx.Rngs):
        super().__init__(cfg)
        h, m = cfg.hidden_size, cfg.intermediate_size
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.frames = cfg.num_frames
        self.drop_path = nnx.Dropout(drop_path, broadcast_dims=(1, 2), deterministic=True,
                                     rngs=rngs)
        self.attention = _attention(cfg, kw, rngs)
        self.intermediate = Node(dense=dense(h, m, ("embed", "mlp"), **kw),
                                 dropout=layers.dropout(cfg.hidden_dropout_prob, rngs))
        self.output = Node(dense=dense(m, h, ("mlp", "embed"), **kw),
                           dropout=layers.dropout(cfg.hidden_dropout_prob, rngs))
        self.layernorm_before = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.layernorm_after = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.temporal_layernorm = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.temporal_attention = _attention(cfg, kw, rngs)
        self.temporal_dense = dense(h, h, (None, "embed"), **kw)

    def _attend(self, node: Node, x: jax.Array, deterministic: bool | None) -> jax.Array:
        """Self-attention of ``x`` [rows, n, C] through ``node`` (fused qkv, output dense)."""
        sa = node.attention
        qkv = sa.qkv(x).reshape(*x.shape[:2], 3, self.num_heads, -1)
        a = layers.dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], None,
                                         sa.attn_drop, deterministic, self.attention_impl)
        return node.output.dropout(node.output.dense(a), deterministic=deterministic)

    def __call__(self, x: jax.Array, mask: attention.Mask | None,
                 deterministic: bool | None) -> jax.Array:
        """x [B, 1 + S*T, C] (cls, then patch-major tokens) -> same shape; ``mask`` unused."""
        b, n, c = x.shape
        t = self.frames
        s = (n - 1) // t
        cls, tokens = x[:, :1], x[:, 1:]
        y = self._attend(self.temporal_attention,
                         self.temporal_layernorm(tokens.reshape(b * s, t, c)), deterministic)
        y = self.drop_path(y, deterministic=deterministic)
        tokens = tokens + self.temporal_dense(y.reshape(b, s * t, c))
        frames = tokens.reshape(b, s, t, c).transpose(0, 2, 1, 3).reshape(b * t, s, c)
        z = jnp.concatenate([jnp.broadcast_to(cls, (b, t, c)).reshape(b * t, 1, c), frames], 1)
        z = self._attend(self.attention, self.layernorm_before(z), deterministic)
        z = self.drop_path(z, deterministic=deterministic)
        cls = cls + z[:, 0].reshape(b, t, c).mean(axis=1, keepdims=True)
        z = z[:, 1:].reshape(b, t, s, c).transpose(0, 2, 1, 3).reshape(b, s * t, c)
        x = jnp.concatenate([cls, tokens + z], axis=1)
        inter = self.intermediate
        y = inter.dropout(self.act(inter.dense(self.layernorm_after(x))),
                          deterministic=deterministic)
        y = self.output.dropout(self.output.dense(y), deterministic=deterministic)
        return x + self.drop_path(y, deterministic=deterministic)


class TimesformerModel(nnx.Module):
    """TimeSformer encoder: clips [B, T, H, W, 3] -> ``EncoderOutput`` (see the module doc).

    Args:
      cfg: sizes (``TIMESFORMER_BASE_K400`` is facebook/timesformer-base-finetuned-k400).
      dtype: compute dtype (e.g. ``jnp.bfloat16``); param_dtype: parameter dtype.
      rngs: ``params`` and ``dropout`` streams.
    """

    def __init__(self, cfg: TimesformerConfig = TIMESFORMER_BASE_K400, *,
                 dtype: Any = jnp.float32, param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        cfg.check()
        self.config, self.dtype = cfg, dtype
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h, p = cfg.hidden_size, cfg.patch_size
        init = nnx.initializers.truncated_normal(cfg.initializer_range)
        self.embeddings = Node(
            patch_embeddings=Node(projection=patch_conv(cfg, (p, p), **kw)),
            cls_token=param(init(rngs.params(), (1, 1, h), param_dtype), (None, None, "embed")),
            position_embeddings=param(init(rngs.params(), (1, cfg.num_patches + 1, h),
                                           param_dtype), (None, "pos", "embed")),
            time_embeddings=param(jnp.zeros((1, cfg.num_frames, h), param_dtype),
                                  (None, "pos", "embed")),
            dropout=layers.dropout(cfg.hidden_dropout_prob, rngs))
        rates = np.linspace(0.0, cfg.drop_path_rate, cfg.num_hidden_layers).tolist()
        self.encoder = Node(layer=nnx.List([TimesformerLayer(cfg, r, **kw) for r in rates]))
        self.layernorm = layer_norm(h, cfg.layer_norm_eps, **kw)

    def __call__(self, pixel_values: jax.Array, *, deterministic: bool | None = None
                 ) -> EncoderOutput:
        """Encodes normalised channels-last clips [B, num_frames, size, size, 3]."""
        check_clip(pixel_values.shape, self.config, "TimeSformer")
        e = self.embeddings
        b, t = pixel_values.shape[:2]
        x = e.patch_embeddings.projection(
            pixel_values.reshape(b * t, *pixel_values.shape[2:]).astype(self.dtype))
        c = x.shape[-1]
        x = x.reshape(b * t, -1, c)
        cls = jnp.broadcast_to(e.cls_token[...].astype(x.dtype), (b * t, 1, c))
        x = jnp.concatenate([cls, x], axis=1) + e.position_embeddings[...].astype(x.dtype)
        x = e.dropout(x, deterministic=deterministic).reshape(b, t, -1, c)
        cls, x = x[:, 0, :1], x[:, :, 1:].transpose(0, 2, 1, 3)  # [B, S, T, C]
        x = x + e.time_embeddings[...].astype(x.dtype)[:, None]
        x = e.dropout(x, deterministic=deterministic).reshape(b, -1, c)
        x = layers.apply_stack(self.encoder.layer, jnp.concatenate([cls, x], axis=1), None,
                               deterministic)
        x = self.layernorm(x)
        return EncoderOutput(x, x[:, 0], x[:, 0])


# ----------------------------------------------------------------------------- loading

PREFIXES = ("", "timesformer.")
HEADS = ("classifier.",)


def check_geometry(tensors: dict[str, np.ndarray], cfg: TimesformerConfig, where: Path) -> None:
    """One-line CheckpointError when the time embeddings (frame count), the position table
    (patch grid) or the patch kernel contradict ``config.json``."""
    hit = find(tensors, "embeddings.time_embeddings", PREFIXES)
    if hit is not None and hit[1].ndim == 3 and hit[1].shape[1] != cfg.num_frames:
        raise disagree(where, hit[0], hit[1].shape, f"{hit[1].shape[1]} frames", "num_frames",
                       cfg.num_frames)
    hit = find(tensors, "embeddings.patch_embeddings.projection.weight", PREFIXES)
    if hit is not None and hit[1].ndim == 4 and hit[1].shape[2:] != (cfg.patch_size,) * 2:
        k = hit[1].shape[2:]
        raise disagree(where, hit[0], hit[1].shape, f"{k[0]}x{k[1]} patches", "patch_size",
                       cfg.patch_size)
    hit = find(tensors, "embeddings.position_embeddings", PREFIXES)
    if hit is not None and hit[1].ndim == 3 and hit[1].shape[1] != cfg.num_patches + 1:
        raise disagree(where, hit[0], hit[1].shape, f"{hit[1].shape[1] - 1} patches per frame",
                       "image_size/patch_size", f"{cfg.image_size}/{cfg.patch_size} "
                       f"({cfg.num_patches} patches)")


def from_pretrained(name_or_dir: str | Path, *, dtype: Any = jnp.float32,
                    param_dtype: Any = jnp.float32, key: jax.Array | None = None,
                    mesh: Mesh | None = None, rules: Rules | None = None) -> TimesformerModel:
    """TimeSformer with a Hugging Face checkpoint's weights (a directory, or a name/hub id
    ``loading.resolve`` finds locally); the classification head is skipped."""
    directory = loading.resolve(name_or_dir)
    cfg = read_config(directory, TimesformerConfig, "timesformer")
    tensors, where = read_tensors(directory)
    check_geometry(tensors, cfg, where)

    def ctor(rngs: nnx.Rngs) -> TimesformerModel:
        return TimesformerModel(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

    return load(ctor, tensors, where, PREFIXES, HEADS, key, mesh, rules)
