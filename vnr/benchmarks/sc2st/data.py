"""Grain pipelines for Sc2St storyboards.

Records come from `tfds_builders.sc2st.data_source` (ordered by storyboard
index). Each record becomes (NumPy, per storyboard):

  tokens   int32   [L, T]      sentence tokens: a scratch BERT gets hashed words
                               (`vnr.data.text`) after a [CLS] id (vocab_size - 1);
                               a pretrained one its own tokenizer (CLS ... SEP)
  features float32 [L, D]      stored features of the 10 keyframes (CLIP image
                               embeddings; Inception-v3's for `lsmdc_paper`)
  cands    float32 [L-1, C, D] candidate features of rounds t = 2..L, gathered
                               from the split's keyframe pool
  answer   int32   [L-1]       index of the correct candidate
  index    int32   []          storyboard index in its split
  mask     bool    []          True for real storyboards (False = padding)
  x_<e>    float32 [L, D_e]    expert e's features of the 10 keyframes (`*_experts`
                               builder configs only: MoEE rows)
  c_<e>    float32 [L-1, C, D_e] expert e's candidate features
  words    float32 [L, 30, D_w]  each sentence's word vectors, zero padded (only with
                               `data.word_vectors`: the MoEE rows' text, `words.py`)

The split's pools (`pool_<split>[_expert_<e>].npy`: its storyboards' keyframes, then its
isolated keyframes; written on first use next to the built dataset) are memory-mapped
lazily in each worker, never pickled.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import grain
import numpy as np

from vnr.benchmarks.sc2st import words
from vnr.data import pipeline, text
from vnr.models.encoders import tokenizers


@functools.lru_cache(maxsize=4)
def _directory(name: str) -> str:
    """The checkpoint directory of the text encoder `name`, found once per process."""
    return tokenizers.resolve(name)


def tokenize(sentences: list[str], encoder: str, vocab_size: int, max_tokens: int) -> np.ndarray:
    """[len(sentences), max_tokens] int32 ids (0 = padding) for `encoder`."""
    if encoder.startswith("scratch:"):
        out = np.zeros((len(sentences), max_tokens), np.int32)
        for i, s in enumerate(sentences):
            out[i, 0] = vocab_size - 1  # [CLS]: BERT's pooler reads position 0
            out[i, 1:] = text.tokenize(s, vocab_size - 1, max_tokens - 1)
        return out
    ids, mask = tokenizers.encode(_directory(encoder), list(sentences), max_tokens)
    return (ids * mask).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class Encode(grain.transforms.Map):
    """Tokenizes the script and gathers candidate features from the memory-mapped pool."""

    pool_path: str
    encoder: str
    vocab_size: int
    max_tokens: int
    expert_pools: tuple[tuple[str, str], ...] = ()  # (expert name, its pool path)
    word_table: Any = None  # the corpus's word vectors (`words.corpus_table`), or None

    def map(self, rec: dict[str, Any]) -> dict[str, np.ndarray]:
        pool = _pool(self.pool_path)
        cands = rec["candidates"]
        if cands.max() >= len(pool):
            raise ValueError(f"storyboard {rec['storyboard_id']!r}: candidate index "
                             f"{cands.max()} outside the pool {self.pool_path} ({len(pool)})")
        experts = {}
        for name, path in self.expert_pools:
            epool = _pool(path)
            experts[f"x_{name}"] = rec[f"expert_{name}"].astype(np.float32)
            experts[f"c_{name}"] = np.asarray(epool[cands.reshape(-1)], np.float32).reshape(
                *cands.shape, -1)
        if self.word_table is not None:
            experts["words"] = words.embed(self.word_table, rec["sentences"])
        return {
            **experts,
            "tokens": tokenize(rec["sentences"], self.encoder, self.vocab_size, self.max_tokens),
            "features": rec["features"].astype(np.float32),
            "cands": np.asarray(pool[cands.reshape(-1)], np.float32).reshape(
                *cands.shape, -1),
            "answer": rec["answer"].astype(np.int32),
            "index": np.int32(rec["index"]),
            "mask": np.bool_(True),
        }


@functools.lru_cache(maxsize=8)
def _pool(path: str) -> np.ndarray:
    return np.load(path, mmap_mode="r")


def _source(cfg: Any, split: str):
    from tfds_builders import sc2st as builder
    from vnr.benchmarks.sc2st.embedders import builder_models

    models = builder_models(builder.CONFIGS[cfg.config], cfg)
    return builder.data_source(cfg.config, split, data_dir=cfg.data_dir,
                               manual_dir=cfg.manual_dir or None, build=True, **models)


def _encode(cfg: Any, split: str, text_encoder: str) -> Encode:
    from tfds_builders import sc2st as builder

    path = builder.pool(cfg.config, split, cfg.data_dir)
    names = [n for n, _ in builder.CONFIGS[cfg.config].experts]
    pools = tuple((n, str(builder.pool(cfg.config, split, cfg.data_dir, f"expert_{n}")))
                  for n in names)
    table = words.corpus_table(cfg) if cfg.get("word_vectors") else None
    return Encode(str(path), text_encoder, cfg.vocab_size, cfg.max_tokens, pools, table)


def train_dataset(cfg: Any, text_encoder: str, batch_size: int, seed: int,
                  process_index: int = 0, process_count: int = 1) -> grain.IterDataset:
    """Endless, per-epoch reshuffled batches for one process."""
    return pipeline.train_stream(_source(cfg, cfg.train_split),
                                 [_encode(cfg, cfg.train_split, text_encoder)], batch_size, seed,
                                 process_index, process_count, cfg.num_workers)


def eval_dataset(cfg: Any, split: str, text_encoder: str, batch_size: int,
                 max_examples: int = 0) -> pipeline.EvalStream:
    """One pass over `split`'s storyboards."""
    return pipeline.eval_stream(_source(cfg, split), [_encode(cfg, split, text_encoder)],
                                batch_size, max_examples=max_examples,
                                num_workers=cfg.num_workers)
