"""Grain pipelines for Movie Synopsis Association: (segment, synopsis paragraph) pairs.

Records come from `tfds_builders.moviepuzzle.synopsis_source` (a `*synopsis` config of
the moviepuzzle builder): the clip fields in TRUE order plus `synopsis: str`. Frames stay in
their true order (the segment is a story, not a puzzle); a segment longer than `max_frames`
keeps `max_frames` equally spaced frames. Batches, padded:

  frames   uint8 [B, N, S, S, 3]   segment frames (zeros where padded)
  tokens   int32 [B, N, L]         hashed subtitle tokens per frame (vnr.data.text)
  mask     bool  [B, N]            True for real frames (first)
  synopsis int32 [B, Ls]           hashed synopsis tokens (0 = pad)
  valid    bool  [B]               False for eval batch padding
"""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import grain
import numpy as np
from PIL import Image

from vnr.benchmarks.moviepuzzle.data import AugmentClip
from vnr.data import pipeline, text


@dataclasses.dataclass(frozen=True)
class EncodePair(grain.transforms.Map):
    """Decodes, resizes, subsamples and pads one segment; tokenizes its synopsis."""

    max_frames: int
    image_size: int
    max_tokens: int
    vocab_size: int
    synopsis_tokens: int

    def map(self, rec: dict[str, Any]) -> dict[str, np.ndarray]:
        n_all = len(rec["frames"])
        keep = np.arange(n_all) if n_all <= self.max_frames else \
            ((np.arange(self.max_frames) + 0.5) * n_all / self.max_frames).astype(int)
        s, nf = self.image_size, self.max_frames
        frames = np.zeros((nf, s, s, 3), np.uint8)
        tokens = np.zeros((nf, self.max_tokens), np.int32)
        for k, i in enumerate(keep):
            img = Image.open(io.BytesIO(rec["frames"][i])).convert("RGB")
            if img.size != (s, s):
                img = img.resize((s, s), Image.BILINEAR)
            frames[k] = np.asarray(img)
            tokens[k] = text.tokenize(rec["subtitles"][i], self.vocab_size, self.max_tokens)
        return {
            "frames": frames,
            "tokens": tokens,
            "mask": np.arange(nf) < len(keep),
            "synopsis": text.tokenize(rec["synopsis"], self.vocab_size, self.synopsis_tokens),
            "valid": np.asarray(True),
        }


def _source(cfg: Any, split: str):
    from tfds_builders import moviepuzzle as builder

    return builder.synopsis_source(cfg.config, split, data_dir=cfg.data_dir,
                                   manual_dir=cfg.manual_dir or None, build=True)


def _encode(cfg: Any) -> EncodePair:
    return EncodePair(cfg.max_frames, cfg.image_size, cfg.max_tokens, cfg.vocab_size,
                      cfg.synopsis_tokens)


def train_dataset(cfg: Any, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """Endless, per-epoch reshuffled batches for one process."""
    src = _source(cfg, cfg.train_split)
    if len(src) < batch_size * process_count:
        raise ValueError(f"split {cfg.train_split!r} of moviepuzzle/{cfg.config} has {len(src)} "
                         f"pairs < batch_size {batch_size * process_count}")
    augment = [AugmentClip()] if cfg.get("augment", False) else []
    return pipeline.train_stream(src, [_encode(cfg), *augment], batch_size, seed, process_index,
                                 process_count, cfg.num_workers)


def eval_dataset(cfg: Any, split: str, batch_size: int,
                 max_examples: int = 0) -> pipeline.EvalStream:
    """One pass over `split` in stored order."""
    return pipeline.eval_stream(_source(cfg, split), [_encode(cfg)], batch_size,
                                max_examples=max_examples, num_workers=cfg.num_workers)
