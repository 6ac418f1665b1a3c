"""Frame preprocessing for image towers: CLIP's image processor, exactly, and the square resize
of the towers trained from scratch. The one implementation every pipeline that feeds a
pretrained CLIP tower uses (MoviePuzzle frames and its feature cache, Sc2St keyframes).

`resize="clip"` reproduces `transformers.CLIPImageProcessor` (the settings of every OpenAI
CLIP checkpoint, e.g. openai/clip-vit-base-patch32: shortest edge = crop = the tower's side):

1. RGB (PIL `convert("RGB")`);
2. the shorter side resized to `size`, the longer one to `int(size * long / short)` (Python
   float, truncated: the processor's `get_resize_output_image_size`), PIL bicubic;
3. a centre crop `size` x `size` at offsets `(new - size) // 2` (floor, as the processor's
   `center_crop`);
4. pixels `float32(float64(v) * (1 / 255))`, then `(x - mean) / std` in float32 with OpenAI's
   mean/std. The 256 possible values per channel are precomputed (`CLIP_TABLE`), so the host
   ships uint8 crops and a tower normalises them on device with one gather, bit-identical to
   the processor (`clip_normalize`, tests/data/test_clip_preprocessing.py).

`resize="squash"` is the from-scratch towers' preprocessing (the MoviePuzzle main job): the
frame resized to `size` x `size` with PIL bilinear, aspect ratio not kept; a frame already of
that size is not touched. Nothing in it changes with the CLIP path.

`draft=True` (a named option, ours; off by default) lets libjpeg decode at 1/2, 1/4 or 1/8
scale (DCT scaling, `Image.draft`) when the JPEG's shorter side is at least twice `size`,
keeping the shorter side >= `size`, before the resize. It changes pixels slightly (DCT
scaling is not bicubic filtering): the measured tolerance against the exact path is in
tests/data/test_clip_preprocessing.py. Frames whose shorter side is under 2 x `size` (e.g.
MovieNet's 240p keyframes at 224) are decoded at full scale: identical to the exact path.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

RESIZES = ("squash", "clip")
# OpenAI CLIP's normalisation (CLIPImageProcessor's OPENAI_CLIP_MEAN / OPENAI_CLIP_STD).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
# Bumped whenever a path's pixels change; part of every cache key that stores its output.
VERSION = 1


def _normalize_table() -> np.ndarray:
    """float32 [256, 3]: CLIP's normalised value of each uint8 level per channel, computed with
    the processor's dtypes (rescale in float64 then float32; mean/std in float32)."""
    levels = (np.arange(256, dtype=np.float64) * (1 / 255)).astype(np.float32)[:, None]
    mean, std = np.asarray(CLIP_MEAN, np.float32), np.asarray(CLIP_STD, np.float32)
    return ((levels - mean) / std).astype(np.float32)


CLIP_TABLE = _normalize_table()


def clip_normalize(pixels: Any, table: Any = None) -> Any:
    """uint8 RGB [..., 3] -> CLIP's normalised float32 [..., 3]. NumPy arrays by default; pass
    `table=jnp.asarray(CLIP_TABLE)` to run it on device on a jax array (same values)."""
    t = CLIP_TABLE if table is None else table
    return t[pixels.astype("int32"), np.arange(3)]


def clip_geometry(width: int, height: int, size: int) -> tuple[int, int, int, int]:
    """(resized width, resized height, crop left, crop top) of CLIP's resize + centre crop."""
    if width <= height:
        new_w, new_h = size, int(size * height / width)
    else:
        new_w, new_h = int(size * width / height), size
    return new_w, new_h, (new_w - size) // 2, (new_h - size) // 2


def clip_resize(img: Image.Image, size: int) -> np.ndarray:
    """An RGB image -> CLIP's uint8 [size, size, 3] crop (steps 2-3 of the module docstring)."""
    new_w, new_h, left, top = clip_geometry(*img.size, size)
    if (new_w, new_h) != img.size:
        img = img.resize((new_w, new_h), Image.BICUBIC)
    return np.asarray(img)[top:top + size, left:left + size]


def squash(img: Image.Image, size: int) -> np.ndarray:
    """An RGB image -> uint8 [size, size, 3], bilinear, aspect ratio not kept."""
    if img.size != (size, size):
        img = img.resize((size, size), Image.BILINEAR)
    return np.asarray(img)


def open_rgb(data: bytes, size: int = 0, draft: bool = False) -> Image.Image:
    """Encoded image bytes -> RGB PIL image; with `draft`, a JPEG whose shorter side is at least
    2 x `size` is decoded at the largest DCT scale keeping that side >= `size`."""
    img = Image.open(io.BytesIO(data))
    if draft and size and img.format == "JPEG":
        # libjpeg's scale s = floor(shorter / size) capped to 8, 4, 2 or 1: both sides stay
        # >= size (ceil(side / s)); s = 1 (no change) when the shorter side is < 2 x size.
        img.draft("RGB", (size, size))
    return img.convert("RGB")


def check(resize: str) -> str:
    if resize not in RESIZES:
        raise ValueError(f"data.image_resize={resize!r}: use one of {', '.join(RESIZES)}")
    return resize


def decode(data: bytes, size: int, resize: str = "squash", draft: bool = False) -> np.ndarray:
    """One encoded frame -> uint8 [size, size, 3] by `resize` ("squash" or "clip")."""
    img = open_rgb(data, size, draft)
    return clip_resize(img, size) if check(resize) == "clip" else squash(img, size)


def decode_frames(frames: Sequence[bytes], size: int, slots: int, resize: str = "squash",
                  draft: bool = False) -> np.ndarray:
    """Encoded frames -> uint8 [slots, size, size, 3] (zeros after the last frame)."""
    out = np.zeros((slots, size, size, 3), np.uint8)
    for k, data in enumerate(frames):
        out[k] = decode(data, size, resize, draft)
    return out


def describe(resize: str, size: int, draft: bool = False) -> dict[str, Any]:
    """The preprocessing of `decode` as JSON values, for cache keys and reports."""
    what = {"squash": "PIL RGB, bilinear resize to size x size (aspect not kept)",
            "clip": "CLIPImageProcessor: PIL RGB, shorter side to size (bicubic, longer side "
                    "int(size*long/short)), centre crop size x size (floor offsets)"}
    return {"resize": check(resize), "size": int(size), "method": what[resize],
            "jpeg_draft": bool(draft), "version": VERSION}
