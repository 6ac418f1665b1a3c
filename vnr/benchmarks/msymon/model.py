"""Dual encoder for clip/sentence alignment (M-SyMoN §5.1, SYMON §7.3 on YMS).

Clips: the per-clip video feature through a dense layer, optional transformer layers over
the clip sequence of the video (`clip_layers`), and a projection. Sentences: the
scratch text encoder `vnr.models.layers.TextEncoder` (hashed tokens, token + position
embeddings, `text_layers` transformer layers, masked mean pool), or an encoder of
`vnr.models.encoders` by name (`text_encoder="scratch:bert-tiny"`, or a checkpoint built
from its config.json whose weights come through the task's `pretrained` hook; its pooled
output), then optional layers over the video's sentence sequence (`sentence_layers`) and a
projection. Both land in one `embed`-dim space, L2 normalised, so a dot product is the cosine
similarity the paper aligns with. The paper encodes each clip and each sentence on its own:
its rows run with `clip_layers = sentence_layers = 0` (no `Context` block); the context
layers are our option (`configs/msymon/main.py:context`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import Block, TextEncoder, dense, layer_norm


def l2_normalize(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    return x / jnp.sqrt(jnp.sum(x * x, -1, keepdims=True) + eps)


class Context(nnx.Module):
    """Transformer layers over a masked sequence (no-op with 0 layers)."""

    def __init__(self, width: int, layers: int, heads: int, dropout: float, rngs: nnx.Rngs):
        self.blocks = nnx.List([Block(width, heads, 2 * width, dropout, rngs)
                                for _ in range(layers)])

    def __call__(self, x: jax.Array, mask: jax.Array, *, train: bool,
                 rngs: nnx.Rngs | None) -> jax.Array:
        for b in self.blocks:
            x = b(x, mask, train=train, rngs=rngs)
        return x


class Aligner(nnx.Module):
    """Encodes clips `[B, C, D]` and sentences `[B, S, L]` into unit vectors `[B, *, E]`."""

    def __init__(self, *, feature_dim: int, vocab_size: int, max_tokens: int, width: int,
                 embed: int, text_layers: int, clip_layers: int, sentence_layers: int,
                 heads: int, dropout: float, rngs: nnx.Rngs, text_encoder: str = "hash"):
        self.clip_in = dense(feature_dim, width, (None, "embed"), rngs)
        self.clip_ln = layer_norm(width, rngs)
        self.clip_ctx = Context(width, clip_layers, heads, dropout, rngs)
        self.clip_out = dense(width, embed, ("embed", None), rngs)
        self.text_encoder = text_encoder
        if text_encoder == "hash":
            self.text = TextEncoder(vocab_size, max_tokens, width, text_layers, heads, dropout,
                                    rngs)
            text_width = width
        else:
            from vnr.models.encoders import create, towers

            if text_encoder.startswith("scratch:"):
                self.text, _, hf = create(text_encoder, rngs=rngs, vocab_size=vocab_size)
            else:  # structure only: the weights come through the task's pretrained hook
                self.text, hf = towers.build(text_encoder, None, rngs)
            text_width = hf.hidden_size
        self.text_in = dense(text_width, width, (None, "embed"), rngs)
        self.sent_ctx = Context(width, sentence_layers, heads, dropout, rngs)
        self.text_out = dense(width, embed, ("embed", None), rngs)
        self.drop = nnx.Dropout(dropout)

    def encode_clips(self, feats: jax.Array, mask: jax.Array, *, train: bool,
                     rngs: nnx.Rngs | None) -> jax.Array:
        h = self.clip_ln(self.clip_in(feats))
        h = self.drop(h, deterministic=not train, rngs=rngs)
        h = self.clip_ctx(h, mask, train=train, rngs=rngs)
        return l2_normalize(self.clip_out(h))

    def encode_sentences(self, tokens: jax.Array, mask: jax.Array, *, train: bool,
                         rngs: nnx.Rngs | None, token_mask: jax.Array | None = None
                         ) -> jax.Array:
        if self.text_encoder == "hash":
            h = self.text(tokens, train=train, rngs=rngs)
        else:
            b, s, length = tokens.shape
            flat = tokens.reshape(b * s, length)
            real = flat > 0 if token_mask is None else token_mask.reshape(b * s, length)
            out = self.text(flat, real.astype(jnp.int32), deterministic=not train)
            h = out.pooled.reshape(b, s, -1)
        h = self.text_in(h)
        h = self.sent_ctx(h, mask, train=train, rngs=rngs)
        return l2_normalize(self.text_out(h))

    def __call__(self, batch: dict, *, train: bool, rngs: nnx.Rngs | None
                 ) -> tuple[jax.Array, jax.Array]:
        v = self.encode_clips(batch["features"], batch["clip_mask"], train=train, rngs=rngs)
        t = self.encode_sentences(batch["tokens"], batch["sent_mask"], train=train, rngs=rngs,
                                  token_mask=batch.get("token_mask"))
        return v, t
