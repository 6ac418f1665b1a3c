"""CLIP vision (ViT) and text towers in Flax NNX, alone or as the dual-encoder ``CLIPModel``.

The module tree mirrors Hugging Face's (``vision_model.embeddings.patch_embedding``,
``text_model.encoder.layers.<i>.self_attn.q_proj``, ``visual_projection``, ``logit_scale``), so
each NNX parameter path spells its checkpoint tensor's name.

* Vision tower: images are **channels-last** ``(batch, height, width, 3)`` float arrays,
  already normalised as CLIP's processor does (HF's Flax/PT models take channels-first).
  ``height == width == image_size``; patches (16 or 32) are cut by a reshape and embedded with
  one matmul (same numbers as the original stride-``patch`` convolution). A CLS token and
  learned positions are added, then ``pre_layrnorm``, pre-LN layers with ``quick_gelu`` MLPs.
  ``pooler_output = post_layernorm(h[:, 0])``.
* Text tower: causal pre-LN transformer over token ids with an optional padding mask;
  ``pooler_output`` is the final-LN'd hidden state at the EOS token (the highest id when
  ``eos_token_id == 2``, as the original checkpoints expect, else the first ``eos_token_id``).
* Projections (no bias) map pooled outputs to the joint space; ``CLIPModel`` normalises both
  and scales cosine logits by ``exp(logit_scale)``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx, struct

from vnr.models import attention
from vnr.models.encoders import layers
from vnr.models.encoders.layers import EncoderOutput, Node, dense, embed, layer_norm, param

Config = Any  # transformers CLIPConfig / CLIPVisionConfig / CLIPTextConfig


class CLIPEncoderLayer(layers.TransformerLayer):
    """Pre-LN transformer layer with CLIP's tensor names."""

    def __init__(self, cfg: Config, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        super().__init__(cfg)
        h, m = cfg.hidden_size, cfg.intermediate_size
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.layer_norm1 = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.self_attn = Node(
            q_proj=dense(h, h, ("embed", "heads"), **kw),
            k_proj=dense(h, h, ("embed", "heads"), **kw),
            v_proj=dense(h, h, ("embed", "heads"), **kw),
            out_proj=dense(h, h, ("heads", "embed"), **kw),
            dropout=layers.dropout(cfg.attention_dropout, rngs),
        )
        self.layer_norm2 = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.mlp = Node(
            fc1=dense(h, m, ("embed", "mlp"), **kw), fc2=dense(m, h, ("mlp", "embed"), **kw)
        )

    def __call__(
        self, x: jax.Array, mask: attention.Mask | None, deterministic: bool | None
    ) -> jax.Array:
        sa = self.self_attn
        a = self.attend(
            self.layer_norm1(x), (sa.q_proj, sa.k_proj, sa.v_proj), mask, sa.dropout, deterministic
        )
        x = x + sa.out_proj(a)
        y = self.layer_norm2(x)
        return x + self.mlp.fc2(self.act(self.mlp.fc1(y)))


def _encoder(cfg: Config, **kw: Any) -> Node:
    return Node(
        layers=nnx.List([CLIPEncoderLayer(cfg, **kw) for _ in range(cfg.num_hidden_layers)])
    )


class PatchEmbedding(nnx.Module):
    """Non-overlapping patch embedding; ``kernel`` is ``(patch, patch, channels, width)``."""

    def __init__(
        self,
        patch: int,
        channels: int,
        width: int,
        *,
        std: float,
        dtype: Any,
        param_dtype: Any,
        rngs: nnx.Rngs,
    ):
        init = nnx.initializers.normal(std)(rngs.params(), (patch, patch, channels, width))
        self.kernel = param(init.astype(param_dtype), ("patch", "patch", "patch", "embed"))
        self.patch, self.dtype = patch, dtype

    def __call__(self, pixels: jax.Array) -> jax.Array:
        b, hgt, wid, c = pixels.shape
        p = self.patch
        x = pixels.astype(self.dtype).reshape(b, hgt // p, p, wid // p, p, c)
        x = x.transpose(0, 1, 3, 2, 4, 5).reshape(b, (hgt // p) * (wid // p), p * p * c)
        kernel = self.kernel[...].astype(self.dtype).reshape(p * p * c, -1)
        return x @ kernel


class CLIPVisionTransformer(nnx.Module):
    """CLIP's ViT (HF ``vision_model``)."""

    def __init__(self, cfg: Config, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        h, p = cfg.hidden_size, cfg.patch_size
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.image_size, self.patch_size = cfg.image_size, p
        num_positions = (cfg.image_size // p) ** 2 + 1
        cls = nnx.initializers.normal(cfg.initializer_range)(rngs.params(), (h,))
        self.embeddings = Node(
            class_embedding=param(cls.astype(param_dtype), ("embed",)),
            patch_embedding=PatchEmbedding(p, cfg.num_channels, h, std=cfg.initializer_range, **kw),
            position_embedding=embed(num_positions, h, ("pos", "embed"), **kw),
        )
        self.pre_layrnorm = layer_norm(h, cfg.layer_norm_eps, **kw)
        self.encoder = _encoder(cfg, **kw)
        self.post_layernorm = layer_norm(h, cfg.layer_norm_eps, **kw)

    def __call__(
        self, pixel_values: jax.Array, *, deterministic: bool | None = None
    ) -> EncoderOutput:
        if pixel_values.shape[1:3] != (self.image_size, self.image_size):
            raise ValueError(
                f"expected channels-last images of {self.image_size}x{self.image_size}, got "
                f"shape {pixel_values.shape}"
            )
        e = self.embeddings
        patches = e.patch_embedding(pixel_values)
        cls = jnp.broadcast_to(
            e.class_embedding[...].astype(patches.dtype), (patches.shape[0], 1, patches.shape[-1])
        )
        x = jnp.concatenate([cls, patches], axis=1)
        x = x + e.position_embedding.embedding[...].astype(x.dtype)[None]
        x = self.pre_layrnorm(x)
        x = layers.apply_stack(self.encoder.layers, x, None, deterministic)
        pooled = self.post_layernorm(x[:, 0])
        return EncoderOutput(x, pooled, pooled)


class CLIPTextTransformer(nnx.Module):
    """CLIP's causal text transformer (HF ``text_model``)."""

    def __init__(self, cfg: Config, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        h = cfg.hidden_size
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.eos_token_id = cfg.eos_token_id
        self.embeddings = Node(
            token_embedding=embed(cfg.vocab_size, h, ("vocab", "embed"), **kw),
            position_embedding=embed(cfg.max_position_embeddings, h, ("pos", "embed"), **kw),
        )
        self.encoder = _encoder(cfg, **kw)
        self.final_layer_norm = layer_norm(h, cfg.layer_norm_eps, **kw)

    def __call__(
        self,
        input_ids: jax.Array,
        attention_mask: jax.Array | None = None,
        position_ids: jax.Array | None = None,
        *,
        deterministic: bool | None = None,
    ) -> EncoderOutput:
        n = input_ids.shape[-1]
        if position_ids is None:
            position_ids = jnp.broadcast_to(jnp.arange(n), input_ids.shape)
        e = self.embeddings
        x = e.token_embedding(input_ids) + e.position_embedding(position_ids)
        mask = attention.Mask(attention_mask, causal=True)
        x = layers.apply_stack(self.encoder.layers, x, mask, deterministic)
        x = self.final_layer_norm(x)
        if self.eos_token_id == 2:  # legacy configs: EOS is the highest id in the vocabulary
            eos = input_ids.argmax(axis=-1)
        else:
            eos = (input_ids == self.eos_token_id).argmax(axis=-1)
        pooled = x[jnp.arange(x.shape[0]), eos]
        return EncoderOutput(x, pooled, pooled)


def _projection(din: int, dout: int, **kw: Any) -> nnx.Linear:
    return dense(din, dout, ("embed", None), use_bias=False, **kw)


class _Tower(nnx.Module):
    """One CLIP tower, optionally with its projection (then ``pooled`` is the projected
    embedding); ``names`` = (tower attribute, projection attribute) as in the checkpoints.

    Args:
      cfg: ``CLIPVisionConfig`` / ``CLIPTextConfig``.
      with_projection: build the projection to ``cfg.projection_dim``.
      dtype: compute dtype; param_dtype: parameter dtype; rngs: ``params`` / ``dropout``.
    """

    names: tuple[str, str]
    transformer: type[nnx.Module]

    def __init__(
        self,
        cfg: Config,
        *,
        with_projection: bool = False,
        dtype: Any = jnp.float32,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        tower, projection = self.names
        setattr(self, tower, self.transformer(cfg, **kw))
        setattr(
            self,
            projection,
            _projection(cfg.hidden_size, cfg.projection_dim, std=cfg.initializer_range, **kw)
            if with_projection
            else None,
        )


def _projected(out: EncoderOutput, projection: nnx.Linear | None) -> EncoderOutput:
    return out if projection is None else out.replace(pooled=projection(out.pooler_output))


class CLIPVisionModel(_Tower):
    """The vision tower (``vision_model``), optionally with ``visual_projection``."""

    names = ("vision_model", "visual_projection")
    transformer = CLIPVisionTransformer

    def __call__(
        self, pixel_values: jax.Array, *, deterministic: bool | None = None
    ) -> EncoderOutput:
        """Encodes channels-last images ``(batch, size, size, 3)``."""
        out = self.vision_model(pixel_values, deterministic=deterministic)
        return _projected(out, self.visual_projection)


class CLIPTextModel(_Tower):
    """The text tower (``text_model``), optionally with ``text_projection``."""

    names = ("text_model", "text_projection")
    transformer = CLIPTextTransformer

    def __call__(
        self,
        input_ids: jax.Array,
        attention_mask: jax.Array | None = None,
        position_ids: jax.Array | None = None,
        *,
        deterministic: bool | None = None,
    ) -> EncoderOutput:
        """Encodes token ids ``(batch, length)`` with an optional padding mask."""
        out = self.text_model(input_ids, attention_mask, position_ids, deterministic=deterministic)
        return _projected(out, self.text_projection)


@struct.dataclass
class CLIPOutput:
    """``CLIPModel`` output: unit-norm embeddings and scaled cosine logits."""

    logits_per_image: jax.Array
    logits_per_text: jax.Array
    image_embeds: jax.Array
    text_embeds: jax.Array


def _normalise(x: jax.Array) -> jax.Array:
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


class CLIPModel(nnx.Module):
    """Both towers, both projections and ``logit_scale`` (HF ``CLIPModel``).

    Args:
      cfg: ``CLIPConfig`` (with ``vision_config``, ``text_config``, ``projection_dim``).
      dtype: compute dtype; param_dtype: parameter dtype; rngs: ``params`` / ``dropout``.
    """

    def __init__(
        self,
        cfg: Config,
        *,
        dtype: Any = jnp.float32,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        vc, tc, p = cfg.vision_config, cfg.text_config, cfg.projection_dim
        self.text_model = CLIPTextTransformer(tc, **kw)
        self.vision_model = CLIPVisionTransformer(vc, **kw)
        self.visual_projection = _projection(vc.hidden_size, p, std=vc.initializer_range, **kw)
        self.text_projection = _projection(tc.hidden_size, p, std=tc.initializer_range, **kw)
        self.logit_scale = param(jnp.asarray(cfg.logit_scale_init_value, param_dtype), ())

    # The towers' forward passes: same attribute names, so the same code. ``pooled`` is the
    # (unnormalised) projected embedding.
    encode_image = CLIPVisionModel.__call__
    encode_text = CLIPTextModel.__call__

    def __call__(
        self,
        input_ids: jax.Array,
        pixel_values: jax.Array,
        attention_mask: jax.Array | None = None,
        *,
        deterministic: bool | None = None,
    ) -> CLIPOutput:
        """Image-text similarity logits for every (image, text) pair."""
        img = _normalise(self.encode_image(pixel_values, deterministic=deterministic).pooled)
        txt = _normalise(
            self.encode_text(input_ids, attention_mask, deterministic=deterministic).pooled
        )
        logits_per_text = txt @ img.T * jnp.exp(self.logit_scale[...]).astype(txt.dtype)
        return CLIPOutput(logits_per_text.T, logits_per_text, img, txt)
