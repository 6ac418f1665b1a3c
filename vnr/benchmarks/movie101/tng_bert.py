"""BERT-base-Chinese word features for Table 5's RNL rows (configs/movie101/tng.py:release).

§5.3 names RNL's text feature extractor: pre-trained BERT-base-Chinese. Upstream's RNL reads
its outputs pre-extracted: the README releases them (`grounding_text_feature.zip` on
TeraBox), but its loader finds a narration's file by a `text_feat_id` that only the
unreleased `data/movie101/*_role.json` holds, so they cannot be matched to the release's
narrations; the extraction script is not released. Here `data.text_encoder` names the
checkpoint directory (bert-base-chinese as Hugging Face publishes it: config.json, its
weights, vocab.txt). Its tokenizer reads the whole narration (up to
`data.text_encoder_tokens`, default 512, the checkpoint's positions; one token a Chinese
character; [CLS] and [SEP] kept: ours), the tower (`towers.build`, weights through the
trainer's `pretrained` hook) runs frozen (`config.frozen` matches `text.`: a feature
extractor, as upstream's pre-extracted features are) without dropout, and RNL reads the
first `data.max_tokens` (80, upstream's max_num_words, which cuts its extracted features
the same way) of its last layer's states (which layer upstream took is not said: the
last, ours). An empty `data.text_encoder` (`tng.py:release,hashed_words`) is our earlier
stand-in: a learned table over hashed words.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
from absl import logging
from flax import nnx

from vnr import config as config_lib

TOWER = "text"  # WindowRNL's attribute, the hook's prefix and the frozen pattern's
FROZEN = rf"{TOWER}\."
REQUIRED = "BERT_BASE_CHINESE_REQUIRED"


def enabled(config: Any) -> bool:
    """A release-arch config naming a checkpoint (the placeholder is refused by `check`)."""
    name = config.data.get("text_encoder", "")
    return config.model.get("arch") == "release" and bool(name) and name != REQUIRED


def check(config: Any) -> None:
    """One line for a missing, placeholder or non-BERT `data.text_encoder` (or one whose
    tokenizer is missing), one on a model other than the release RNL, token counts past its
    positions, or a tower left trainable; a warning for a tokenizer without Chinese."""
    from vnr.models.encoders import tokenizers, towers

    name = config.data.get("text_encoder", "")
    if not name:
        return
    if config.model.get("arch") != "release":
        raise ValueError(f"data.text_encoder={name!r} is read by the RNL rows only (model.arch"
                         f"='release', tng.py:release), not model.arch="
                         f"{config.model.get('arch', 'rnl')!r}")
    if name == REQUIRED:
        raise ValueError("data.text_encoder: the RNL rows read BERT-base-Chinese word "
                         "features (§5.3): set it to the bert-base-chinese directory "
                         "(config.json, weights, vocab.txt), or use tng.py:release,"
                         "hashed_words for our hashed-word stand-in")
    cfg = towers.config_of(name, None, "data.text_encoder")
    if cfg.model_type != "bert":
        raise ValueError(f"data.text_encoder={name!r} is a {cfg.model_type!r} checkpoint; the "
                         "RNL rows read BERT-base-Chinese (a 'bert' checkpoint)")
    if tokens(config) < config.data.max_tokens:
        raise ValueError(f"data.text_encoder_tokens={tokens(config)} is below data.max_tokens="
                         f"{config.data.max_tokens}: the tower must see every word RNL reads")
    config_lib.fits_positions(config, "data.text_encoder_tokens", "data.text_encoder")
    try:
        tok = tokenizers.load_tokenizer(str(tokenizers.resolve(name)))
    except (OSError, ValueError) as e:
        raise ValueError(f"data.text_encoder={name!r}: no usable tokenizer ({e})") from None
    if set(tok("电影的人")["input_ids"]) <= set(tok.all_special_ids):
        logging.warning("data.text_encoder=%r: its tokenizer maps Chinese to [UNK] (an "
                        "English BERT?); §5.3's is bert-base-chinese", name)
    if FROZEN not in tuple(config.get("frozen", ()) or ()):
        raise ValueError(f"data.text_encoder: the BERT words are a frozen extractor's (§5.3): "
                         f"config.frozen must hold {FROZEN!r} (tng.py:release sets it)")


def width(config: Any) -> int:
    """The tower's hidden size: the width of the words RNL reads."""
    from vnr.models.encoders import towers

    return int(towers.config_of(config.data.text_encoder, None, "data.text_encoder")
               .hidden_size)


def tokens(config: Any) -> int:
    """How many tokens of a narration the tower reads (`data.text_encoder_tokens`)."""
    return int(config.data.get("text_encoder_tokens", 512) or 512)


def tower(config: Any, rngs: nnx.Rngs) -> nnx.Module | None:
    """The BERT tower (structure; weights through `sources`), or None without one."""
    from vnr.models.encoders import towers

    if config.data.get("text_encoder") == REQUIRED:
        check(config)  # the placeholder's one line
    return towers.build(config.data.text_encoder, None, rngs)[0] if enabled(config) else None


def sources(config: Any) -> dict[str, tuple[str, None]]:
    return {TOWER: (config.data.text_encoder, None)}


def encode(name: str, text: str, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids int32 [max_tokens], mask bool [max_tokens]) of one narration (the tower's input:
    `max_tokens` is `tokens(config)`)."""
    from vnr.models.encoders import tokenizers

    ids, mask = tokenizers.encode(tokenizers.resolve(name), [text], max_tokens)
    return ids[0], mask[0]


def smoke_checkpoint(path: pathlib.Path | str) -> str:
    """A random tiny BERT (width 16, 2 heads, 128 positions) in the Hugging Face layout with
    a WordPiece vocab.txt of letters, digits and a few CJK characters: the `--scale smoke`
    stand-in for bert-base-chinese."""
    from vnr.models.encoders.testing import write_tiny_checkpoint

    path = pathlib.Path(path)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "，", "。", "[", "]"]
    vocab += list("abcdefghijklmnopqrstuvwxyz0123456789")
    vocab += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    vocab += list("老李小猫走进房间看着他她说")
    write_tiny_checkpoint("bert", path, "pt-safetensors", config_overrides=dict(
        vocab_size=len(vocab), hidden_size=16, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=128))
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 128}))
    return str(path)
