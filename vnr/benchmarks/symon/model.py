"""SYMON models: the segment-ordering cross encoder (§6.2) and retrieval dual encoders (§7.1).

Both read precomputed clip features [T, D] (e.g. S3D at 1 fps) through a linear
projection and narration tokens (`vnr.data.text`) through an embedding table; a
sequence is the sum of its input projection, a learned position embedding and a
learned type embedding (segment / text / memory), run through pre-LN transformer
blocks (`vnr.models.layers.Block`), layer-normed and mean-pooled over the mask.

Ordering (Eq. 4): one shared cross encoder maps (segment features, narration
tokens) to f; P(first presented segment is earlier) = sigmoid(wᵀf1 − wᵀf2).
In the video-only configuration the text embeddings are replaced by zeros (the
positions stay, carrying only their position and type embeddings).

Retrieval: a video encoder over [segment frames; memory frames] and a text
encoder over [sentence tokens; memory sentence tokens], each followed by a
linear map to the joint space; similarity is the dot product.

`UniVLRetrievalModel` (§7.1 as the paper runs it): UniVL's own text (BERT) and video
encoders loaded from `univl.pretrained.bin`, without its cross encoder (the paper leaves it
out); each side is UniVL's stage-one embedding (`univl.pool_text` / `pool_video`: masked
means, L2-normalised), so the dot product is UniVL's own retrieval score. With memory the
inputs are [clip rows; memory rows] (8 x 1024) and [clip tokens; memory tokens] (128):
each half keeps its slots, padding between is masked (ours: the paper says only that the
memory is appended).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.encoders import univl
from vnr.models.layers import Block, annotate, dense, layer_norm

_emb_init = nnx.initializers.normal(0.02)


def _param(rngs: nnx.Rngs, shape: tuple, names: tuple) -> nnx.Param:
    return nnx.Param(annotate(_emb_init, names)(rngs.params(), shape))


class SeqEncoder(nnx.Module):
    """Position + type embeddings, transformer blocks, LayerNorm, masked mean pool."""

    def __init__(self, width: int, max_len: int, types: int, layers: int, heads: int,
                 mlp: int, dropout: float, rngs: nnx.Rngs):
        self.pos = _param(rngs, (max_len, width), (None, "embed"))
        self.type = _param(rngs, (types, width), (None, "embed"))
        self.blocks = nnx.List([Block(width, heads, mlp, dropout, rngs) for _ in range(layers)])
        self.ln = layer_norm(width, rngs)

    def __call__(self, parts: list[tuple[jax.Array, jax.Array]], *, train: bool,
                 rngs: nnx.Rngs | None) -> jax.Array:
        """parts: [(x [B, T_i, W], mask [B, T_i])], one per type -> [B, W]."""
        xs, ms = [], []
        for t, (x, m) in enumerate(parts):
            xs.append(x + self.pos.value[:x.shape[1]] + self.type.value[t])
            ms.append(m)
        x, mask = jnp.concatenate(xs, 1), jnp.concatenate(ms, 1)
        for block in self.blocks:
            x = block(x, mask, train=train, rngs=rngs)
        m = mask[..., None].astype(x.dtype)
        return (self.ln(x) * m).sum(1) / jnp.maximum(m.sum(1), 1.0)


class OrderModel(nnx.Module):
    """Shared cross encoder + linear score; logits = s(seg_a) − s(seg_b) (Eq. 4)."""

    def __init__(self, *, feature_dim: int, vocab_size: int, max_len: int, width: int,
                 layers: int, heads: int, mlp: int, dropout: float, use_text: bool,
                 rngs: nnx.Rngs):
        self.use_text = use_text
        self.video_in = dense(feature_dim, width, (None, "embed"), rngs)
        self.embed = nnx.Embed(vocab_size, width, rngs=rngs,
                               embedding_init=annotate(_emb_init, ("vocab", "embed")))
        self.encoder = SeqEncoder(width, max_len, 2, layers, heads, mlp, dropout, rngs)
        self.w = dense(width, 1, ("embed", None), rngs)

    def score(self, seg: jax.Array, tokens: jax.Array, *, train: bool,
              rngs: nnx.Rngs | None) -> jax.Array:
        """seg [B, F, D], tokens [B, L] -> wᵀf [B]."""
        v = self.video_in(seg)
        t = self.embed(tokens)
        if self.use_text:
            tmask = tokens > 0
        else:  # text replaced by zeros
            t, tmask = jnp.zeros_like(t), jnp.ones(tokens.shape, bool)
        vmask = jnp.ones(seg.shape[:2], bool)
        f = self.encoder([(v, vmask), (t, tmask)], train=train, rngs=rngs)
        return self.w(f)[..., 0]

    def __call__(self, seg_a: jax.Array, seg_b: jax.Array, tokens: jax.Array, *, train: bool,
                 rngs: nnx.Rngs | None) -> jax.Array:
        """Logit of P(seg_a is earlier) = wᵀf_a − wᵀf_b; one pass over both segments."""
        b = seg_a.shape[0]
        s = self.score(jnp.concatenate([seg_a, seg_b]), jnp.concatenate([tokens, tokens]),
                       train=train, rngs=rngs)
        return s[:b] - s[b:]


class RetrievalModel(nnx.Module):
    """Video and text encoders with long-term memory inputs; dot-product similarity."""

    def __init__(self, *, feature_dim: int, vocab_size: int, max_len: int, width: int,
                 embed_dim: int, layers: int, heads: int, mlp: int, dropout: float,
                 rngs: nnx.Rngs):
        self.video_in = dense(feature_dim, width, (None, "embed"), rngs)
        self.video = SeqEncoder(width, max_len, 2, layers, heads, mlp, dropout, rngs)
        self.video_out = dense(width, embed_dim, ("embed", None), rngs)
        self.embed = nnx.Embed(vocab_size, width, rngs=rngs,
                               embedding_init=annotate(_emb_init, ("vocab", "embed")))
        self.text = SeqEncoder(width, max_len, 2, layers, heads, mlp, dropout, rngs)
        self.text_out = dense(width, embed_dim, ("embed", None), rngs)

    def encode_video(self, frames, mask, mem_frames, mem_mask, *, train: bool,
                     rngs: nnx.Rngs | None) -> jax.Array:
        parts = [(self.video_in(frames), mask), (self.video_in(mem_frames), mem_mask)]
        return self.video_out(self.video(parts, train=train, rngs=rngs))

    def encode_text(self, tokens, mem_tokens, mem_mask, *, train: bool,
                    rngs: nnx.Rngs | None, token_mask: jax.Array | None = None) -> jax.Array:
        mask = tokens > 0 if token_mask is None else token_mask
        parts = [(self.embed(tokens), mask), (self.embed(mem_tokens), mem_mask)]
        return self.text_out(self.text(parts, train=train, rngs=rngs))


class UniVLRetrievalModel(nnx.Module):
    """UniVL's text and video towers (no cross encoder, no decoder) as SYMON's dual encoder;
    same methods as `RetrievalModel`. Dropout runs from the towers' own streams."""

    def __init__(self, cfg: univl.UniVLConfig, *, dtype: Any = jnp.float32,
                 rngs: nnx.Rngs):
        from vnr.models.encoders.towers import raw_rng_keys

        cfg = dataclasses.replace(cfg, cross_layers=0, decoder_layers=0)
        self.univl = raw_rng_keys(univl.UniVL(cfg, dtype=dtype, rngs=rngs))

    def encode_video(self, frames, mask, mem_frames, mem_mask, *, train: bool,
                     rngs: nnx.Rngs | None) -> jax.Array:
        x, m = jnp.concatenate([frames, mem_frames], 1), jnp.concatenate([mask, mem_mask], 1)
        h = self.univl.encode_video(x, m, deterministic=not train).last_hidden_state
        return univl.pool_video(h, m)

    def encode_text(self, tokens, mem_tokens, mem_mask, *, train: bool,
                    rngs: nnx.Rngs | None, token_mask: jax.Array | None = None) -> jax.Array:
        mask = tokens > 0 if token_mask is None else token_mask
        ids, m = jnp.concatenate([tokens, mem_tokens], 1), jnp.concatenate([mask, mem_mask], 1)
        h = self.univl.encode_text(ids, m.astype(jnp.int32),
                                   deterministic=not train).last_hidden_state
        return univl.pool_text(h, m)


class UniVLOrderModel(nnx.Module):
    """§6.2 with UniVL's text, video and cross encoders (Fig. 10): each segment's video
    states beside the text states through the cross encoder, f = its pooled output,
    logit = wᵀf_a − wᵀf_b (Eq. 4, `w` new); video-only: the text states are zeros."""

    def __init__(self, cfg: univl.UniVLConfig, *, use_text: bool, dtype: Any = jnp.float32,
                 rngs: nnx.Rngs):
        from vnr.models.encoders.towers import raw_rng_keys

        if not cfg.cross_layers:
            raise ValueError("the ordering model needs UniVL's cross encoder: the checkpoint "
                             "has none (cross.*)")
        self.use_text = use_text
        self.univl = raw_rng_keys(univl.UniVL(dataclasses.replace(cfg, decoder_layers=0),
                                              dtype=dtype, rngs=rngs))
        self.w = dense(cfg.hidden_size, 1, ("embed", None), rngs)

    def __call__(self, seg_a: jax.Array, seg_b: jax.Array, tokens: jax.Array, *, train: bool,
                 rngs: nnx.Rngs | None) -> jax.Array:
        b, det = seg_a.shape[0], not train
        mask = tokens > 0
        text = self.univl.encode_text(tokens, mask.astype(jnp.int32),
                                      deterministic=det).last_hidden_state
        if not self.use_text:
            text = jnp.zeros_like(text)
        seg = jnp.concatenate([seg_a, seg_b])
        vmask = jnp.ones(seg.shape[:2], bool)
        video = self.univl.encode_video(seg, vmask, deterministic=det).last_hidden_state
        two = lambda x: jnp.concatenate([x, x])  # noqa: E731
        f = self.univl.cross_encode(two(text), two(mask), video, vmask,
                                    deterministic=det).pooler_output
        s = self.w(f)[..., 0]
        return s[:b] - s[b:]
