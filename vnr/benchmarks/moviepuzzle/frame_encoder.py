"""HCMC's frame encoder: the image and utterance towers of a frame (the small encoders of
`pairwise_model`, a `scratch:clip-<size>` CLIP tower or a CLIP checkpoint), fused into one
frame vector and, for `frame_repr="tokens"`, also kept as the frame's token sequence."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.benchmarks.moviepuzzle.pairwise_model import ImageEncoder
from vnr.data import images
from vnr.models.layers import TextEncoder, dense, layer_norm


def _clip_tower(name: str, tower: str, rngs: nnx.Rngs, vocab_size: int, max_tokens: int,
                eos_id: int | None):
    """(CLIP tower, its output width, its hidden width): from a checkpoint (architecture from
    its config.json, weights through the task's `pretrained` hook) or a `scratch:clip-<size>`
    name (random init).

    Scratch text towers pool the EOS token: `eos_id` of a checkpoint tokenizer, or, for
    hashed ids (`eos_id=None`), the largest id (legacy CLIP rule: `_text` appends it)."""
    from vnr.models.encoders import builder, scratch_config, towers

    if towers.is_checkpoint(name):
        module, cfg = towers.build(name, tower, rngs)
    elif name.startswith("scratch:clip"):
        size = name.removeprefix("scratch:").rpartition("-")[2]
        over = {} if tower == "vision" else {
            # + 1: hashed ids get an EOS appended after the last real token (`embed_text`)
            "vocab_size": vocab_size, "max_position_embeddings": max(max_tokens + 1, 16),
            "eos_token_id": 2 if eos_id is None else eos_id}
        cfg = scratch_config("clip", size, **over)
        ctor, _, _ = builder(cfg, tower=tower)
        module = towers.raw_rng_keys(ctor(rngs))  # restorable dropout streams
    else:
        raise ValueError(f"encoder {name!r}: use 'small', 'scratch:clip-<size>' or a CLIP "
                         "checkpoint directory")
    proj = module.visual_projection if tower == "vision" else module.text_projection
    hidden = getattr(cfg, "vision_config" if tower == "vision" else "text_config", cfg).hidden_size
    return module, proj.kernel.shape[-1] if proj is not None else hidden, hidden


class FrameEncoder(nnx.Module):
    """Image and utterance towers, concatenated and projected: [B, N, ...] -> [B, N, W].

    `tokens=True` (CLIP towers only) also gives the frame as a token sequence: the image
    tower's last hidden states (CLS + patches) then the utterance's (its real tokens), each
    projected to W (§3.2: both encoded into token sequences, then concatenated)."""

    def __init__(self, *, modalities: tuple[str, ...], image_encoder: str, text_encoder: str,
                 image_size: int, stem: int, conv: str, channels: tuple[int, ...],
                 vocab_size: int, max_tokens: int, width: int, text_layers: int, heads: int,
                 dropout: float, rngs: nnx.Rngs, eos_id: int | None = None,
                 tokens: bool = False):
        unknown = set(modalities) - {"vision", "text"}
        if unknown or not modalities:
            raise ValueError(f"model.modalities={modalities}: use 'vision' and/or 'text'")
        small = [n for n, m in (("image_encoder", "vision"), ("text_encoder", "text"))
                 if m in modalities and {"image_encoder": image_encoder,
                                         "text_encoder": text_encoder}[n] == "small"]
        if tokens and small:
            raise ValueError(f"model.frame_repr='tokens' reads CLIP towers' token sequences; "
                             f"model.{small[0]}='small' has none (use clip or clip=<checkpoint>)")
        self.modalities = tuple(modalities)
        image = text = None
        dims, hidden = [], {}
        if "vision" in modalities:
            if image_encoder == "small":
                image = ImageEncoder(image_size, channels, width, rngs, stem, conv)
                dims.append(width)
            else:
                image, dim, hidden["image"] = _clip_tower(image_encoder, "vision", rngs,
                                                          vocab_size, max_tokens, eos_id)
                dims.append(dim)
        if "text" in modalities:
            if text_encoder == "small":
                text = TextEncoder(vocab_size, max_tokens, width, text_layers, heads, dropout,
                                   rngs)
                dims.append(width)
            else:
                text, dim, hidden["text"] = _clip_tower(text_encoder, "text", rngs, vocab_size,
                                                        max_tokens, eos_id)
                dims.append(dim)
        self.image, self.text = nnx.data(image), nnx.data(text)
        self.image_kind, self.text_kind = image_encoder, text_encoder
        # a `tokens` encoder's frame vector comes from the pair transformer (`HCMC`)
        self.fuse = nnx.data(None if tokens else dense(sum(dims), width, ("mlp", "embed"), rngs))
        self.ln = nnx.data(None if tokens else layer_norm(width, rngs))
        self.tokens = tokens
        self.seq_proj = nnx.Dict({k: dense(h, width, ("mlp", "embed"), rngs)
                                  for k, h in hidden.items()} if tokens else {})
        self.seq_ln = nnx.data(layer_norm(width, rngs) if tokens else None)

    def embed_image(self, frames: jax.Array, train: bool) -> jax.Array:
        """The image tower on uint8 frames [..., S, S, 3] -> [..., D] (what the feature cache
        stores for a frozen tower)."""
        if self.image_kind == "small":
            return self.image(frames)
        return self._image_out(frames, train).pooled.reshape(*frames.shape[:-3], -1)

    def _image_out(self, frames: jax.Array, train: bool):
        """The CLIP image tower's output on uint8 frames [..., S, S, 3] (flattened lead)."""
        side = self.image.vision_model.image_size
        x = images.clip_normalize(frames.reshape(-1, *frames.shape[-3:]),
                                  jnp.asarray(images.CLIP_TABLE))
        if x.shape[1] != side:
            x = jax.image.resize(x, (x.shape[0], side, side, 3), "bilinear")
        return self.image(x, deterministic=not train)

    def embed_text(self, tokens: jax.Array, token_mask: jax.Array | None, train: bool,
                   rngs: nnx.Rngs | None) -> jax.Array:
        """The text tower on token ids [..., L] -> [..., D]."""
        if self.text_kind == "small":
            return self.text(tokens, train=train, rngs=rngs, mask=token_mask)
        out, _ = self._text_out(tokens, token_mask, train)
        return out.pooled.reshape(*tokens.shape[:-1], -1)

    def _text_out(self, tokens: jax.Array, token_mask: jax.Array | None, train: bool):
        """(the CLIP text tower's output, its attention mask [B', L']) on ids [..., L]."""
        t = tokens.reshape(-1, tokens.shape[-1])
        if token_mask is not None:  # a checkpoint tokenizer: its own BOS ... EOS
            m = token_mask.reshape(t.shape).astype(jnp.int32)
            return self.text(t, m, deterministic=not train), m
        # The tower pools the token with the largest id (legacy CLIP EOS rule, set for hashed
        # ids by `_clip_tower`); hashed ids have no EOS, so the last real token is made the
        # largest-id one by appending vocab_size - 1 after it.
        n = (t > 0).sum(-1)
        eos = self.text.text_model.embeddings.token_embedding.num_embeddings - 1
        t = jnp.concatenate([t, jnp.zeros_like(t[:, :1])], -1)
        t = t.at[jnp.arange(t.shape[0]), n].set(eos)
        m = (t > 0).astype(jnp.int32)
        return self.text(t, m, deterministic=not train), m

    def __call__(self, frames: jax.Array | None, tokens: jax.Array | None, *, train: bool,
                 rngs: nnx.Rngs | None, token_mask: jax.Array | None = None,
                 image_features: jax.Array | None = None,
                 text_features: jax.Array | None = None, with_tokens: bool = False):
        """token_mask: with a checkpoint tokenizer (else tokens > 0 are the real ones).
        `image_features` / `text_features`: a frozen tower's outputs read from the feature
        cache (`vnr.feature_cache`), used instead of running that tower. `with_tokens`
        (a `tokens` encoder): (sequence [B, N, T, W], its mask [B, N, T])."""
        if with_tokens:
            return self._with_tokens(frames, tokens, token_mask, train)
        if self.tokens:
            raise ValueError("a tokens=True frame encoder gives token sequences "
                             "(with_tokens=True); its frame vector is the pair transformer's")
        parts = []
        if self.image is not None:
            parts.append(self.embed_image(frames, train) if image_features is None
                         else image_features)
        if self.text is not None:
            parts.append(self.embed_text(tokens, token_mask, train, rngs) if text_features is None
                         else text_features)
        return self._fuse(parts)

    def _fuse(self, parts: list[jax.Array]) -> jax.Array:
        dtype = self.fuse.dtype or jnp.float32
        return self.ln(jax.nn.gelu(self.fuse(jnp.concatenate(
            [p.astype(dtype) for p in parts], -1))))

    def _with_tokens(self, frames: jax.Array | None, tokens: jax.Array | None,
                     token_mask: jax.Array | None, train: bool):
        """The frame's token sequence: the image tower's hidden states, then the utterance's
        (each tower run once)."""
        if not self.tokens:
            raise ValueError("this frame encoder was built without tokens=True")
        lead = (frames if frames is not None else tokens).shape[:2]
        seqs, masks = [], []
        if self.image is not None:
            out = self._image_out(frames, train)
            seqs.append(self.seq_proj["image"](out.last_hidden_state))
            masks.append(jnp.ones(seqs[-1].shape[:2], bool))
        if self.text is not None:
            out, m = self._text_out(tokens, token_mask, train)
            seqs.append(self.seq_proj["text"](out.last_hidden_state))
            masks.append(m.astype(bool))
        seq = self.seq_ln(jnp.concatenate(seqs, -2))
        mask = jnp.concatenate(masks, -1).at[:, 0].set(True)  # never an empty frame
        return seq.reshape(*lead, *seq.shape[-2:]), mask.reshape(*lead, mask.shape[-1])
