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

`FrameAligner` is §5.1's model itself (`model.encoder="cclm"`): each clip's frames through
CCLM's Swin-B (its patch projection, the "trainable MLP projection layer" that maps each
frame's 4x4 patches to tokens, then the Swin stages), a frame's representation being CCLM's
image feature (the mean over the last stage's tokens, `image_embeds[:, 0]` upstream), the
mean over the clip's frames; each sentence through CCLM's XLM-R text layers, its [CLS] (first
token) last hidden state. `head="none"` compares the two directly (the paper's v_i and t_i;
both 1024-d in CCLM-base); `head="linear"` (ours) adds a trainable linear map of each to
`embed` dims, as CCLM's contrastive heads (not loaded: the ports read the towers only).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.data import images
from vnr.models.encoders import cclm, swin
from vnr.models.layers import Block, TextEncoder, dense, layer_norm
from vnr.ops import randaugment

HEADS = ("none", "linear")
AUGMENTS = ("none", "cclm")


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


def frame_features(tower: swin.SwinTransformer, frames: jax.Array, train: bool
                   ) -> jax.Array:
    """uint8 [..., S, S, 3] -> float32 [..., D]: CCLM's image feature of each frame (CLIP's
    normalisation, as CCLM's transforms; the Swin's pooled token)."""
    lead, (h, w) = frames.shape[:-3], frames.shape[-3:-1]
    x = images.clip_normalize(frames.reshape(-1, h, w, 3), jnp.asarray(images.CLIP_TABLE))
    return tower(x, deterministic=not train).pooled.astype(jnp.float32).reshape(*lead, -1)


class FrameAligner(nnx.Module):
    """Clips from frames `[B, C, F, S, S, 3]` uint8 and sentences `[B, S, L]` (XLM-R ids) ->
    unit vectors `[B, *, E]` (see the module docstring).

    Args:
      swin_cfg: the Swin's widths (`vnr.models.encoders.swin.SwinConfig`).
      text_cfg: the text tower's (`vnr.models.encoders.cclm.TextConfig`).
      head: "none" (the towers' features, equal widths) or "linear" (ours, to `embed`).
      chunk: clips per Swin call at evaluation (0: every clip of the batch at once).
      remat: recompute each Swin block's activations in the backward pass.
      augment: "cclm" (§6.1's random augmentation: CCLM's training transform of every frame,
        `vnr.ops.randaugment`, in training only) or "none".
    """

    def __init__(self, swin_cfg: swin.SwinConfig, text_cfg: cclm.TextConfig, *, head: str,
                 embed: int, chunk: int, remat: bool, rngs: nnx.Rngs, augment: str = "none"):
        if head not in HEADS:
            raise ValueError(f"model.cclm_head={head!r}: one of {HEADS}")
        width, text_width = swin_cfg.num_features, text_cfg.hidden_size
        if head == "none" and width != text_width:
            raise ValueError(f"model.cclm_head='none' compares the Swin's {width}-d and the "
                             f"text tower's {text_width}-d features directly: they must be "
                             "equal (or use model.cclm_head='linear')")
        self.swin = swin.SwinTransformer(swin_cfg, remat=remat, rngs=rngs)
        self.text = cclm._text_model(text_cfg, rngs=rngs)
        if augment not in AUGMENTS:
            raise ValueError(f"data.frames.augment={augment!r}: one of {AUGMENTS}")
        self.head, self.chunk, self.augment = head, int(chunk), augment
        self.clip_proj = dense(width, embed, (None, "embed"), rngs) if head == "linear" else None
        self.text_proj = (dense(text_width, embed, (None, "embed"), rngs)
                          if head == "linear" else None)

    def encode_clips(self, frames: jax.Array, mask: jax.Array, *, train: bool) -> jax.Array:
        b, c = frames.shape[:2]
        k = self.chunk
        if train or not k or c <= k:
            feats = frame_features(self.swin, frames, train)
        else:  # evaluation: k clips per Swin call (`lax.map`), memory bound by the chunk
            n = -(-c // k)
            x = jnp.pad(frames, ((0, 0), (0, n * k - c)) + ((0, 0),) * (frames.ndim - 2))
            x = jnp.moveaxis(x.reshape(b, n, k, *frames.shape[2:]), 1, 0)
            graphdef, state = nnx.split(self.swin)

            def chunk(xc: jax.Array) -> jax.Array:
                tower = nnx.merge(graphdef, state)  # a functional copy inside the map
                for block in tower.blocks():
                    block.remat = False  # no backward pass here (nnx.remat cannot nest)
                return frame_features(tower, xc, False)

            feats = jax.lax.map(chunk, x)
            feats = jnp.moveaxis(feats, 0, 1).reshape(b, n * k, *feats.shape[3:])[:, :c]
        v = feats.mean(axis=2)  # the clip: the mean over its frames
        if self.clip_proj is not None:
            v = self.clip_proj(v)
        return l2_normalize(jnp.where(mask[..., None], v, 0.0))

    def encode_sentences(self, tokens: jax.Array, token_mask: jax.Array, *,
                         train: bool) -> jax.Array:
        b, s, length = tokens.shape
        out = self.text(tokens.reshape(b * s, length),
                        token_mask.reshape(b * s, length).astype(jnp.int32),
                        deterministic=not train)
        t = out.pooled.reshape(b, s, -1)  # the first token: XLM-R's <s>, its [CLS]
        if self.text_proj is not None:
            t = self.text_proj(t)
        return l2_normalize(t)

    def augmented(self, frames: jax.Array, key: jax.Array) -> jax.Array:
        """uint8 frames [..., S, S, 3], each through CCLM's training transform."""
        flat = frames.reshape(-1, *frames.shape[-3:])
        return randaugment.augment(key, flat).reshape(frames.shape)

    def __call__(self, batch: dict, *, train: bool, rngs: nnx.Rngs | None
                 ) -> tuple[jax.Array, jax.Array]:
        frames = batch["frames"]
        if train and self.augment == "cclm":
            frames = self.augmented(frames, rngs.dropout())
        v = self.encode_clips(frames, batch["clip_mask"], train=train)
        t = self.encode_sentences(batch["tokens"], batch["token_mask"], train=train)
        return v, t
