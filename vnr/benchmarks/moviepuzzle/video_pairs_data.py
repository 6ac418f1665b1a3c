"""Frames for the video-model pair baselines: `VideoMAEImageProcessor`'s resize and crop.

The processor that VideoMAE and TimeSformer checkpoints name resizes the shorter side to
`size` (the longer one to int(size * long / short)) with PIL bilinear, then centre-crops
size x size (floor offsets): CLIP's geometry (`vnr.data.images.clip_geometry`) with another
filter. `ProcessorFrames` does that to a record's JPEG frames in the grain workers and hands
uint8 [n, S, S, 3] to MoviePuzzle's usual `Encode` (padding, subtitles, ids) and
`ShuffleFrames`; rescaling and normalisation run on device (`video_pairs_model.Pixels`).
Batches are those of `vnr.benchmarks.moviepuzzle.data` (frames, tokens, mask, position,
shot_id, scene_id; text at evaluation), with the same per-epoch and evaluation shuffles.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import grain
import numpy as np
from PIL import Image

from vnr.benchmarks.moviepuzzle import data
from vnr.data import images, pipeline, text


def processor_resize(img: Image.Image, size: int) -> np.ndarray:
    """An RGB image -> uint8 [size, size, 3]: shorter side to `size` (PIL bilinear), centre
    crop."""
    new_w, new_h, left, top = images.clip_geometry(*img.size, size)
    if (new_w, new_h) != img.size:
        img = img.resize((new_w, new_h), Image.BILINEAR)
    return np.asarray(img)[top:top + size, left:left + size]


def decode_frames(frames: list[bytes], size: int) -> np.ndarray:
    """Encoded frames -> uint8 [n, size, size, 3]."""
    out = np.zeros((len(frames), size, size, 3), np.uint8)
    for k, raw in enumerate(frames):
        out[k] = processor_resize(images.open_rgb(raw), size)
    return out


@dataclasses.dataclass(frozen=True)
class ProcessorFrames(grain.transforms.Map):
    """A record's JPEG frames -> uint8 [n, S, S, 3] by the processor's resize and crop."""

    image_size: int

    def map(self, rec: dict[str, Any]) -> dict[str, Any]:
        return dict(rec, frames=decode_frames(rec["frames"], self.image_size))


def _transforms(cfg: Any, keep_text: bool) -> list:
    return [ProcessorFrames(cfg.image_size),
            data.Encode(cfg.max_frames, cfg.image_size, cfg.max_tokens, cfg.vocab_size,
                        keep_text, text.HASH),
            data.ShuffleFrames()]


def train_dataset(cfg: Any, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """Endless, per-epoch reshuffled (clips and frames) batches for one process."""
    return pipeline.train_stream(data.source(cfg, cfg.train_split), _transforms(cfg, False),
                                 batch_size, seed, process_index, process_count,
                                 cfg.num_workers)


def eval_dataset(cfg: Any, split: str, batch_size: int, seed: int,
                 max_examples: int = 0) -> pipeline.EvalStream:
    """One pass over `split` with the fixed per-clip frame shuffle of every MoviePuzzle
    row (seeded by `seed` + 1, as `data.eval_dataset`)."""
    return pipeline.eval_stream(data.source(cfg, split), _transforms(cfg, True), batch_size,
                                seed=seed + 1, max_examples=max_examples,
                                num_workers=cfg.num_workers)
