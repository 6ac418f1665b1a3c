"""Sc2St keyframe embedder for the builder: a CLIP dual encoder of `vnr.models.encoders`.

`tfds_builders.sc2st` picks keyframes by CLIP text-image cosine but holds no model code; it
takes `clip_embedder` (or any `keyframes.MakeEmbedder`) as an argument. `ClipScorer` wraps
any encoder `vnr.models.encoders.create` accepts: a local pretrained CLIP checkpoint by name
or directory (offline: `$VNR_ENCODERS_DIR`), or `scratch:<size>` (random weights: plumbing
and tests only). Pretrained names use the checkpoint's tokenizer; scratch encoders use the
hashed word tokenizer `vnr.data.text`. Images are resized (bicubic) to the encoder's size
and normalised with CLIP's mean/std.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from tfds_builders.sc2st.keyframes import normalise

CLIP_MEAN = np.array([0.48145466, 0.4578275, 0.40821073], np.float32)
CLIP_STD = np.array([0.26862954, 0.26130258, 0.27577711], np.float32)


def clip_embedder(encoder: str, seed: int = 0) -> ClipScorer:
    """The builder's `MakeEmbedder`: the builder config's encoder name and seed."""
    return ClipScorer(encoder, seed=seed)


class ClipScorer:
    """Text and image embeddings (L2-normalised, numpy) from a CLIP dual encoder."""

    def __init__(self, name: str, seed: int = 0, batch: int = 64):
        import jax
        from flax import nnx

        from vnr.models.encoders import create

        self.name, self.batch = name, batch
        model, tokenizer, cfg = create(name, rngs=nnx.Rngs(seed))
        if getattr(cfg, "model_type", None) != "clip":
            raise ValueError(f"keyframe encoder {name!r} must be a CLIP dual encoder "
                             f"(model_type 'clip'), got {getattr(cfg, 'model_type', None)!r}")
        self.tokenizer = tokenizer
        self.image_size = int(cfg.vision_config.image_size)
        self.max_tokens = int(cfg.text_config.max_position_embeddings)
        self.vocab = int(cfg.text_config.vocab_size)
        self.dim = int(cfg.projection_dim)
        graphdef, state = nnx.split(model)
        self._img = jax.jit(lambda st, px: nnx.merge(graphdef, st).encode_image(
            px, deterministic=True).pooled)
        self._txt = jax.jit(lambda st, ids, m: nnx.merge(graphdef, st).encode_text(
            ids, m, deterministic=True).pooled)
        self._state = state

    def _tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if self.tokenizer is not None:
            enc = self.tokenizer(list(texts), padding="max_length", truncation=True,
                                 max_length=self.max_tokens, return_tensors="np")
            return enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)
        from vnr.data import text

        ids = np.stack([text.tokenize(t, self.vocab, self.max_tokens) for t in texts])
        # CLIP pools at the highest token id (EOS); hashed ids carry no EOS, so the
        # scratch encoder pools wherever the largest hash lands: fine for random weights.
        return ids, (ids > 0).astype(np.int32)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for lo in range(0, len(texts), self.batch):
            chunk = list(texts[lo:lo + self.batch])
            pad = self.batch - len(chunk)
            ids, mask = self._tokens(chunk + [""] * pad)
            out.append(np.asarray(self._txt(self._state, ids, mask))[:len(chunk)])
        return normalise(np.concatenate(out)) if out else np.zeros((0, self.dim), np.float32)

    def pixels(self, jpeg: bytes) -> np.ndarray:
        from PIL import Image

        img = Image.open(io.BytesIO(jpeg)).convert("RGB")
        img = img.resize((self.image_size, self.image_size), Image.BICUBIC)
        return (np.asarray(img, np.float32) / 255.0 - CLIP_MEAN) / CLIP_STD

    def encode_images(self, jpegs: Sequence[bytes]) -> np.ndarray:
        out = []
        for lo in range(0, len(jpegs), self.batch):
            chunk = [self.pixels(j) for j in jpegs[lo:lo + self.batch]]
            n = len(chunk)
            chunk += [np.zeros_like(chunk[0])] * (self.batch - n)
            out.append(np.asarray(self._img(self._state, np.stack(chunk)))[:n])
        return normalise(np.concatenate(out)) if out else np.zeros((0, self.dim), np.float32)
