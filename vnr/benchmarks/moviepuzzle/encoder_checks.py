"""HCMC and text-pair rows: the pretrained towers a config names fit its data (tokenizer,
vocabulary, positions, pooling token); checked by `hcmc.validate` before anything compiles."""

from __future__ import annotations

from typing import Any

from vnr.benchmarks.moviepuzzle import pairwise as base
from vnr.models.encoders import tokenizers, towers


def clip_towers(config: Any) -> None:
    """HCMC towers: 'small', 'scratch:clip-<size>' or CLIP checkpoints fitting the data."""
    m, d = config.model, config.data
    tok = base.check_tokenizer(config)
    for name, part, modality in (("image_encoder", "vision", "vision"),
                                 ("text_encoder", "text", "text")):
        enc = m[name]
        if modality not in m.modalities or enc == "small" or enc.startswith("scratch:clip"):
            continue
        if not towers.is_checkpoint(enc):
            raise ValueError(f"model.{name}={enc!r}: use 'small', 'scratch:clip-<size>' or a "
                             "CLIP checkpoint directory")
        cfg = towers.config_of(enc, part, f"model.{name}")
        cfg = getattr(cfg, f"{part}_config", cfg)
        if part == "vision":
            continue
        if tok is None:
            raise ValueError(f"model.text_encoder={enc!r} is a pretrained CLIP text tower: set "
                             "data.tokenizer to its tokenizer (e.g. the same directory) and "
                             "data.vocab_size=0")
        if tok["vocab"] > cfg.vocab_size:
            raise ValueError(f"data.tokenizer={d.tokenizer!r} has {tok['vocab']} tokens but "
                             f"model.text_encoder={enc!r} embeds {cfg.vocab_size}")
        if d.max_tokens > cfg.max_position_embeddings:
            raise ValueError(f"data.max_tokens={d.max_tokens} > the {cfg.max_position_embeddings}"
                             f" positions of model.text_encoder={enc!r}")
        pooled = tok["vocab"] - 1 if cfg.eos_token_id == 2 else cfg.eos_token_id
        if tok["eos"] != pooled:
            raise ValueError(f"data.tokenizer={d.tokenizer!r} ends texts with id {tok['eos']} but "
                             f"model.text_encoder={enc!r} pools the token with id {pooled}")
    scratch_text = "text" in m.modalities and m.text_encoder.startswith("scratch:clip")
    if scratch_text and tok is not None and tok["eos"] is None and tok["sep"] is None:
        raise ValueError(f"data.tokenizer={d.tokenizer!r} has no EOS/[SEP] token for the "
                         "scratch CLIP text tower to pool")


def text_pair(config: Any) -> None:
    """Text pairs: a checkpoint encoder needs its tokenizer; pairs fit its positions."""
    m, d = config.model, config.data
    tok = base.check_tokenizer(config)
    if towers.is_checkpoint(m.encoder):
        cfg = towers.config_of(m.encoder, None, "model.encoder")
        if cfg.model_type not in ("bert", "albert"):
            raise ValueError(f"model.encoder={m.encoder!r} is a {cfg.model_type!r} checkpoint; "
                             "the text-pair rows need BERT or ALBERT")
        if tok is None:
            raise ValueError(f"model.encoder={m.encoder!r} is pretrained: set data.tokenizer to "
                             "its tokenizer (e.g. the same directory) and data.vocab_size=0")
        if tok["vocab"] > cfg.vocab_size:
            raise ValueError(f"data.tokenizer={d.tokenizer!r} has {tok['vocab']} tokens but "
                             f"model.encoder={m.encoder!r} embeds {cfg.vocab_size}")
        if 2 * d.max_tokens - 1 > cfg.max_position_embeddings:
            raise ValueError(f"data.max_tokens={d.max_tokens}: a pair of {2 * d.max_tokens - 1} "
                             f"tokens exceeds the {cfg.max_position_embeddings} positions of "
                             f"model.encoder={m.encoder!r}")
    elif not m.encoder.startswith(("scratch:bert-", "scratch:albert-")):
        raise ValueError(f"model.encoder={m.encoder!r}: use 'scratch:bert-<size>', "
                         "'scratch:albert-<size>' or a BERT/ALBERT checkpoint directory")
    if tok is not None:
        ids, _ = tokenizers.encode(tokenizers.resolve(d.tokenizer), ["a"],
                                   max(d.max_tokens, 4))
        if tok["cls"] is None or tok["sep"] is None or ids[0, 0] != tok["cls"]:
            raise ValueError(f"data.tokenizer={d.tokenizer!r} does not write '[CLS] text [SEP]' "
                             "(a BERT/ALBERT tokenizer is needed for the text-pair rows)")
