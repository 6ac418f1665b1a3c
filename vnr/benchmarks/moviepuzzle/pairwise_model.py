"""Multimodal pairwise-order model (the MoviePuzzle "+fusion" baseline shape).

Each frame: a small CNN over the image and a small transformer over the hashed
subtitle tokens, both trained from scratch, fused into one vector. A pair
(i, j) is two tokens (frame vectors plus segment embeddings) run through a
transformer; a 2-way head says whether i comes before j (class 1) or after
(class 0). `modalities` selects ("vision", "text"), ("vision",) or ("text",)
for the fusion / vision-only / text-only baselines.

`fusion="late"` (default, the main job) fuses a frame's modality vectors into one
vector by a dense layer before the pair transformer; `fusion="early"` keeps them as
separate tokens, so the pair transformer attends over [img_i, txt_i, img_j, txt_j]
(segment + modality embeddings) and fuses the modalities itself (the early-fusion
baseline). `TextPairModel` is the NSP/SOP-style text-pair baseline on BERT/ALBERT.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import Block, TextEncoder, annotate, dense, layer_norm

_conv_init = nnx.initializers.lecun_normal()


class Patchify(nnx.Module):
    """Non-overlapping k x k patches through one matmul: a conv with kernel = stride = k,
    written as reshape + dense so XLA:CPU runs it as a plain GEMM."""

    def __init__(self, cin: int, cout: int, k: int, rngs: nnx.Rngs):
        self.k = k
        self.proj = dense(k * k * cin, cout, (None, "conv"), rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, h, w, c = x.shape
        k = self.k
        x = x.reshape(b, h // k, k, w // k, k, c).transpose(0, 1, 3, 2, 4, 5)
        return self.proj(x.reshape(b, h // k, w // k, k * k * c))


class ImageEncoder(nnx.Module):
    """A stem that cuts the image by `stem` (patchify when stem > 1), then layers that
    halve it, then the flattened map (which keeps the layout: where things are
    matters) through a dense layer.

    `conv="3x3"`: the halving layers are stride-2 3x3 convolutions.
    `conv="patch"`: they are 2x2 patchify layers (pure GEMMs, faster on CPU).
    """

    def __init__(self, image_size: int, channels: tuple[int, ...], width: int, rngs: nnx.Rngs,
                 stem: int = 1, conv: str = "3x3"):
        if conv not in ("3x3", "patch"):
            raise ValueError(f"model.conv={conv!r}: use '3x3' or 'patch'")
        chans = (3, *channels)
        first = stem if stem > 1 else 2
        side = image_size // first // 2 ** (len(channels) - 1)
        if side < 1 or image_size % (first * 2 ** (len(channels) - 1)):
            raise ValueError(f"data.image_size={image_size} is not divisible by the encoder's "
                             f"total stride {first * 2 ** (len(channels) - 1)}")
        if conv == "patch":
            layers = [Patchify(3, chans[1], first, rngs)]
            layers += [Patchify(a, b, 2, rngs) for a, b in zip(chans[1:-1], chans[2:])]
        else:
            c3 = lambda a, b, k, st: nnx.Conv(  # noqa: E731
                a, b, (k, k), strides=st, padding="SAME", rngs=rngs,
                kernel_init=annotate(_conv_init, (None, None, None, "conv")),
                bias_init=annotate(nnx.initializers.zeros_init(), ("conv",)))
            layers = [c3(3, chans[1], stem, stem) if stem > 1 else c3(3, chans[1], 3, 2)]
            layers += [c3(a, b, 3, 2) for a, b in zip(chans[1:-1], chans[2:])]
        self.convs = nnx.List(layers)
        self.proj = dense(side * side * channels[-1], width, ("conv", "embed"), rngs)
        self.ln = layer_norm(width, rngs)

    def __call__(self, images: jax.Array) -> jax.Array:
        """images uint8 [..., S, S, 3] -> [..., W]."""
        lead = images.shape[:-3]
        x = images.reshape(-1, *images.shape[-3:]).astype(jnp.float32) / 127.5 - 1.0
        for layer in self.convs:
            x = jax.nn.gelu(layer(x))
        x = self.proj(x.reshape(x.shape[0], -1))
        return self.ln(x).reshape(*lead, -1)


class _AllPairs:
    """``all_pair_logits`` from a model's ``pair_logits`` (both pair models share it)."""

    def all_pair_logits(self, feats: jax.Array) -> jax.Array:
        """Per-frame vectors [B, N, W] -> logits for every ordered pair [B, N, N, 2]."""
        n = feats.shape[1]
        first = jnp.broadcast_to(feats[:, :, None], (feats.shape[0], n, n, feats.shape[-1]))
        second = jnp.broadcast_to(feats[:, None, :], first.shape)
        return self.pair_logits(first, second, train=False, rngs=None)


class PairOrderModel(_AllPairs, nnx.Module):
    """Frame encoder (fused modalities) + pair transformer + 2-way order head."""

    def __init__(self, *, modalities: tuple[str, ...], image_size: int, stem: int, conv: str,
                 channels: tuple[int, ...], vocab_size: int, max_tokens: int, width: int,
                 text_layers: int, pair_layers: int, heads: int, mlp: int, dropout: float,
                 rngs: nnx.Rngs, fusion: str = "late"):
        if fusion not in ("late", "early"):
            raise ValueError(f"model.fusion={fusion!r}: use 'late' or 'early'")
        unknown = set(modalities) - {"vision", "text"}
        if unknown or not modalities:
            raise ValueError(f"model.modalities={modalities}: use 'vision' and/or 'text'")
        self.modalities = tuple(modalities)
        self.image = ImageEncoder(image_size, channels, width, rngs, stem, conv) \
            if "vision" in modalities else None
        self.text = TextEncoder(vocab_size, max_tokens, width, text_layers, heads, dropout, rngs) \
            if "text" in modalities else None
        self.fusion = fusion
        tokens = 1
        if fusion == "late":
            self.fuse = dense(width * len(modalities), width, ("mlp", "embed"), rngs)
        else:
            tokens = len(modalities)
            self.modality = nnx.Param(annotate(nnx.initializers.normal(0.02), (None, "embed"))(
                rngs.params(), (tokens, width)))
        self.tokens = tokens
        self.segment = nnx.Param(annotate(nnx.initializers.normal(0.02),
                                                       (None, "embed"))(rngs.params(), (2, width)))
        self.blocks = nnx.List([Block(width, heads, mlp, dropout, rngs)
                                for _ in range(pair_layers)])
        self.ln = layer_norm(width, rngs)
        self.head = dense(2 * tokens * width, 2, ("embed", None), rngs)

    def encode_frames(self, frames: jax.Array, tokens: jax.Array, *, train: bool,
                      rngs: nnx.Rngs | None, token_mask: jax.Array | None = None) -> jax.Array:
        """frames [B, N, S, S, 3], tokens [B, N, L] (token_mask [B, N, L] with a checkpoint
        tokenizer) -> per-frame vectors [B, N, W]."""
        parts = []
        if self.image is not None:
            parts.append(self.image(frames))
        if self.text is not None:
            parts.append(self.text(tokens, train=train, rngs=rngs, mask=token_mask))
        if self.fusion == "early":  # [B, N, T * W]: one token per modality, fused later
            return jnp.concatenate(parts, -1)
        return jax.nn.gelu(self.fuse(jnp.concatenate(parts, -1)))

    def pair_logits(self, first: jax.Array, second: jax.Array, *, train: bool,
                    rngs: nnx.Rngs | None) -> jax.Array:
        """Frame vectors [..., W] of i and j -> logits [..., 2]; class 1 = i before j."""
        x = jnp.stack([first, second], axis=-2)
        lead = x.shape[:-2]
        if self.fusion == "early":  # [..., 2, T*W] -> 2T tokens of width W
            t, w = self.tokens, x.shape[-1] // self.tokens
            x = x.reshape(*lead, 2, t, w) + self.modality.value
            x = (x + self.segment.value[:, None]).reshape(-1, 2 * t, w)
        else:
            x = (x + self.segment.value).reshape(-1, 2, x.shape[-1])
        for block in self.blocks:
            x = block(x, None, train=train, rngs=rngs)
        x = self.ln(x).reshape(x.shape[0], -1)
        return self.head(x).reshape(*lead, 2)



class TextPairModel(_AllPairs, nnx.Module):
    """Text-pair baseline: "[CLS] utt_i [SEP] utt_j [SEP]" through BERT/ALBERT, 2-way head.

    The head (on BERT's pooler output, tanh(dense([CLS])); the [CLS] state when the
    checkpoint has no pooler) is trained NSP-style (class 1 = utt_j directly follows utt_i)
    or SOP-style (class 1 = a consecutive pair in its true order) by the task; either way
    S[i, j] of Eq. 5 says "j after i".

    `encoder`: `scratch:<bert|albert>-<size>` (random init, trained here) or a BERT/ALBERT
    checkpoint (architecture from its config.json; weights through the task's `pretrained`
    hook).
    `pad_id`: None for hashed subtitle ids (`vnr.data.text`, 0 = pad): [CLS] and [SEP] are
    then the two ids after the vocabulary, added here. With a checkpoint tokenizer (its pad
    id given) every utterance already reads "[CLS] utt [SEP]" (its own special ids, padded
    with `pad_id`); a pair is the first utterance followed by the second without its [CLS],
    which is exactly the tokenizer's pair encoding: token types 0 up to the first [SEP], 1
    after, positions counted over real tokens only (the padding between the two parts is
    masked out and skipped).
    """

    def __init__(self, *, encoder: str, vocab_size: int, max_tokens: int, dropout: float,
                 rngs: nnx.Rngs, pad_id: int | None = None):
        from vnr.models.encoders import builder, scratch_config, towers

        self.pad_id = pad_id
        if towers.is_checkpoint(encoder):
            self.encoder, cfg = towers.build(encoder, None, rngs)
        else:
            arch, _, size = encoder.removeprefix("scratch:").rpartition("-")
            if not encoder.startswith("scratch:") or arch not in ("bert", "albert"):
                raise ValueError(
                    f"model.encoder={encoder!r}: use 'scratch:bert-<size>', "
                    "'scratch:albert-<size>' or a BERT/ALBERT checkpoint directory")
            extra = 0 if pad_id is not None else 2  # hashed ids: [CLS], [SEP] added here
            cfg = scratch_config(arch, size, vocab_size=vocab_size + extra, type_vocab_size=2,
                                 max_position_embeddings=max(2 * max_tokens + 3, 16),
                                 hidden_dropout_prob=dropout,
                                 attention_probs_dropout_prob=dropout)
            ctor, _, _ = builder(cfg)
            self.encoder = towers.raw_rng_keys(ctor(rngs))  # restorable dropout streams
        self.cls_id, self.sep_id = vocab_size, vocab_size + 1  # hashed ids only
        self.head = dense(cfg.hidden_size, 2, ("embed", None), rngs)

    def encode_frames(self, frames: jax.Array, tokens: jax.Array, *, train: bool,
                      rngs: nnx.Rngs | None, token_mask: jax.Array | None = None) -> jax.Array:
        """The per-frame "features" are the token ids themselves [B, N, L]."""
        del frames, train, rngs, token_mask
        return tokens

    def pair_inputs(self, first: jax.Array, second: jax.Array) -> tuple[jax.Array, ...]:
        """Token ids [P, L] of i and j -> (ids, mask, token types, positions) of the pairs."""
        p, length = first.shape
        if self.pad_id is None:
            col = lambda v: jnp.full((p, 1), v, first.dtype)  # noqa: E731
            ids = jnp.concatenate([col(self.cls_id), first, col(self.sep_id), second,
                                   col(self.sep_id)], 1)
            real = ids > 0
            n_first = length + 2
        else:
            ids = jnp.concatenate([first, second[:, 1:]], 1)
            real = ids != self.pad_id
            n_first = length
        types = jnp.concatenate([jnp.zeros((p, n_first), ids.dtype),
                                 jnp.ones((p, ids.shape[1] - n_first), ids.dtype)], 1)
        pos = jnp.maximum(jnp.cumsum(real, 1) - 1, 0)  # positions skip the padding between parts
        return ids, real.astype(jnp.int32), types, pos

    def pooled(self, first: jax.Array, second: jax.Array, *, train: bool) -> jax.Array:
        """Token ids [P, L] of i and j -> the encoder's pooled pair vectors [P, H]."""
        ids, mask, types, pos = self.pair_inputs(first, second)
        out = self.encoder(ids, mask, types, pos, deterministic=not train)
        return out.pooler_output if out.pooler_output is not None else \
            out.last_hidden_state[:, 0]

    def pair_logits(self, first: jax.Array, second: jax.Array, *, train: bool,
                    rngs: nnx.Rngs | None) -> jax.Array:
        """Token ids [..., L] of i and j -> logits [..., 2]."""
        del rngs
        lead, length = first.shape[:-1], first.shape[-1]
        x = self.pooled(first.reshape(-1, length), second.reshape(-1, length), train=train)
        return self.head(x).reshape(*lead, 2)

