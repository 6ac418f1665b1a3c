"""The image-model scorer base the keyframe embedders and the paper's experts share: JPEGs
through a torchvision-style eval transform, batched, L2-normalised (`embedders.py` builds
the CLIP, DenseNet and Inception scorers on it; `experts.py` the Places365 and SENet ones)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from tfds_builders.sc2st import normalise


def _encode_images(scorer: Any, fwd: Any, jpegs: Sequence[bytes]) -> np.ndarray:
    """L2-normalised image embeddings of JPEGs: `scorer.pixels` per image, then
    `fwd(scorer._state, batch)` on fixed-size batches of `scorer.batch` (zero-padded: one
    compile). The one batching loop of the CLIP and torchvision scorers."""
    out = []
    for lo in range(0, len(jpegs), scorer.batch):
        chunk = [scorer.pixels(j) for j in jpegs[lo:lo + scorer.batch]]
        n = len(chunk)
        chunk += [np.zeros_like(chunk[0])] * (scorer.batch - n)
        out.append(np.asarray(fwd(scorer._state, np.stack(chunk)))[:n])
    return normalise(np.concatenate(out)) if out else np.zeros((0, scorer.dim), np.float32)



IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


class TorchvisionImageScorer:
    """L2-normalised pooled features of JPEGs from a torchvision-architecture image model (an
    image-only `Embedder`), with torchvision's eval transform: shorter side resized
    (bilinear) to `image_size * resize_ratio`, centre crop `image_size`, ImageNet mean/std.
    Subclasses set `batch`, `image_size`, `resize_ratio`, `dim`, `_fwd`, `_state`."""

    batch: int
    image_size: int
    resize_ratio: float
    dim: int

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} embeds images only (a candidate_embedder, "
                        "not the keyframe embedder, which also scores text)")

    def pixels(self, jpeg: bytes) -> np.ndarray:
        """torchvision's eval transform: shorter side to size * ratio, centre crop."""
        from PIL import Image

        img = Image.open(io.BytesIO(jpeg)).convert("RGB")
        short = round(self.image_size * self.resize_ratio)
        w, h = img.size  # torchvision's Resize(int): the long side truncated, not rounded
        size = (short, int(short * h / w)) if w <= h else (int(short * w / h), short)
        img = img.resize(size, Image.BILINEAR)
        w, h = img.size  # torchvision's CenterCrop offsets: int(round(...))
        left = int(round((w - self.image_size) / 2.0))
        top = int(round((h - self.image_size) / 2.0))
        img = img.crop((left, top, left + self.image_size, top + self.image_size))
        return (np.asarray(img, np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD

    def encode_images(self, jpegs: Sequence[bytes]) -> np.ndarray:
        return _encode_images(self, self._fwd, jpegs)
