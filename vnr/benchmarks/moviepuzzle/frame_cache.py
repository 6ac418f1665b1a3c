"""The HCMC frame encoder's towers as cacheable feature extractors (`vnr.feature_cache`):
the `feature_towers` hook of `moviepuzzle.hcmc`, and the tower calls the cache build runs."""

from __future__ import annotations

import functools
import pathlib
from typing import Any

import jax
from flax import nnx

from vnr import feature_cache
from vnr.benchmarks.moviepuzzle import data, hcmc_model
from vnr.benchmarks.moviepuzzle import pairwise as base
from vnr.data import text
from vnr.models import rng
from vnr.models.encoders import tokenizers


def feature_towers(config: Any) -> dict[str, feature_cache.Tower]:
    """The HCMC frame encoder's image and text towers, cacheable when frozen (the hook of
    `vnr.feature_cache`); none for the other kinds or per-level (`separate`) encoders."""
    m, d = config.model, config.data
    if m.kind != "hcmc" or m.separate:
        return {}
    from tfds_builders import moviepuzzle as builder

    vocab, _ = base.text_vocab(config)
    tok = tokenizers.resolve(d.get("tokenizer", text.HASH))
    common = dict(dataset=builder.dataset_name(d.config),
                  data_dir=d.data_dir, source=functools.partial(data.source, d),
                  splits=(d.train_split, d.val_split, *d.test_splits))
    out = {}
    frames = data.preprocessing(d)
    if "vision" in m.modalities:
        out["image"] = feature_cache.Tower(
            module="encoders.frame.image",
            prepare=data.FrameInputs("image", d.image_size, d.max_tokens, vocab, tok,
                                     frames["resize"], frames["jpeg_draft"]),
            embed=functools.partial(_embed, "image"),
            preprocessing={"encoder": m.image_encoder, "image_size": d.image_size,
                           "decode": frames,
                           "tower_input": "CLIP normalisation table on uint8 (the processor's "
                                          "float32 values), then bilinear resize to the "
                                          "tower's side if it differs (checkpoint and "
                                          "scratch:clip towers)"},
            **common)
    if "text" in m.modalities:
        out["text"] = feature_cache.Tower(
            module="encoders.frame.text",
            prepare=data.FrameInputs("text", d.image_size, d.max_tokens, vocab, tok),
            embed=functools.partial(_embed, "text"),
            preprocessing={"encoder": m.text_encoder, "max_tokens": d.max_tokens,
                           "vocab_size": vocab, "tokenizer": tok if tok == text.HASH
                           else {"path": tok, "sha256": feature_cache.digest(tok)}},
            **common)
    return out


def _embed(tower: str, model: hcmc_model.HCMC, inputs: dict, train: bool) -> jax.Array:
    enc = model.encoders["frame"]
    if tower == "image":
        return enc.embed_image(inputs["frames"], train)
    rngs = rng.rngs(dropout=jax.random.key(0)) if train else None
    return enc.embed_text(inputs["tokens"], inputs.get("token_mask"), train, rngs)


def directories(config: Any, task: Any) -> dict[str, pathlib.Path]:
    """{tower: cache directory} of `config.data.feature_cache` for the task module `task`."""
    if not feature_cache.requested(config):
        return {}
    return {n: feature_cache.locate(config, task, n, t)[0]
            for n, t in feature_cache.towers_of(config, task).items()}


def encode_batch(model: hcmc_model.HCMC, batch: dict, train: bool,
                 rngs: nnx.Rngs | None, tokens: bool = False) -> Any:
    """HCMC frame features of a batch: towers on frames/tokens, or their cached outputs;
    `tokens`: with the frame level's token sequences and mask (`HCMC.encode_tokens`)."""
    if tokens:
        return model.encode_tokens(batch.get("frames"), batch["tokens"], train=train,
                                   rngs=rngs, token_mask=batch.get("token_mask"))
    return model.encode(batch.get("frames"), batch["tokens"], train=train, rngs=rngs,
                        token_mask=batch.get("token_mask"),
                        image_features=batch.get("image_features"),
                        text_features=batch.get("text_features"))
