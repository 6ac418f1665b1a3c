"""`vnr.data.images`: CLIP's preprocessing against transformers' `CLIPImageProcessor` (the
settings of openai/clip-vit-base-patch32; no weights needed), the draft option's tolerance,
and the scratch towers' square resize unchanged."""

import io

import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image
from transformers import CLIPImageProcessor
from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

from vnr.data import images


def _processor(side: int = 224) -> CLIPImageProcessor:
    """openai/clip-vit-base-patch32's preprocessor_config.json, written out (side 224)."""
    return CLIPImageProcessor(
        do_resize=True, size={"shortest_edge": side}, resample=Image.BICUBIC,
        do_center_crop=True, crop_size={"height": side, "width": side}, do_rescale=True,
        rescale_factor=1 / 255, do_normalize=True, image_mean=OPENAI_CLIP_MEAN,
        image_std=OPENAI_CLIP_STD, do_convert_rgb=True)


def _reference(data: bytes, side: int = 224, **kw) -> np.ndarray:
    px = _processor(side)(images=Image.open(io.BytesIO(data)), return_tensors="np", **kw)
    return px["pixel_values"][0].transpose(1, 2, 0)  # CHW -> HWC


def _jpeg(w: int, h: int, seed: int = 0, quality: int = 90) -> bytes:
    """A non-square photo-like JPEG: smooth gradients, edges and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    base = np.stack([np.sin(9 * x + c) * np.cos(7 * y - c) for c in range(3)], -1)
    img = 127 + 90 * base + rng.normal(0, 12, (h, w, 3))
    img[h // 3: h // 2, w // 4: w // 3] = 240  # a hard-edged block
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def _check(data: bytes, side: int = 224) -> None:
    crop = images.decode(data, side, "clip")
    want_crop = _reference(data, side, do_rescale=False, do_normalize=False)
    np.testing.assert_array_equal(crop, want_crop.astype(np.uint8))
    assert crop.dtype == np.uint8 and crop.shape == (side, side, 3)
    got, want = images.clip_normalize(crop), _reference(data, side)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)  # bit for bit, the processor's rounding included


def test_constants_are_openai_clips():
    np.testing.assert_array_equal(images.CLIP_MEAN, OPENAI_CLIP_MEAN)
    np.testing.assert_array_equal(images.CLIP_STD, OPENAI_CLIP_STD)


@pytest.mark.parametrize("w,h", [(564, 240), (443, 240), (240, 397), (301, 227), (224, 224),
                                 (200, 120)])
def test_generated_non_square_frames_match_clip_image_processor(w, h):
    """Landscape and portrait, odd sizes (the processor's int() of the long side and floor
    crop offsets), an exact fit, and an image smaller than the crop (upscaled)."""
    _check(_jpeg(w, h, seed=w))


def test_other_tower_sides_and_non_rgb_inputs():
    _check(_jpeg(577, 240), side=336)
    buf = io.BytesIO()
    Image.fromarray(np.arange(300 * 170, dtype=np.uint32).reshape(170, 300).astype(np.uint8)
                    ).save(buf, "PNG")  # grayscale PNG: converted to RGB as the processor does
    _check(buf.getvalue())


def test_real_moviepuzzle_frames_match_clip_image_processor(shared_data):
    frames = sorted((shared_data / "moviepuzzle_public" / "in_domain").glob("*/*.jpg"))
    if not frames:
        pytest.skip(f"no MoviePuzzle frames under {shared_data / 'moviepuzzle_public'}")
    sizes = set()
    for path in frames[::7]:  # every 7th of the ~1.4k public frames: all clips, all widths
        data = path.read_bytes()
        sizes.add(Image.open(io.BytesIO(data)).size)
        _check(data)
    assert all(w != h for w, h in sizes) and len(sizes) > 5  # 240p, non-square, many widths


def test_on_device_normalisation_is_the_processors():
    """The HCMC tower normalises uint8 frames on device with the same table."""
    crop = images.decode(_jpeg(500, 281), 224, "clip")
    dev = images.clip_normalize(jnp.asarray(crop), jnp.asarray(images.CLIP_TABLE))
    np.testing.assert_array_equal(np.asarray(dev), images.clip_normalize(crop))


def test_draft_is_exact_below_twice_the_side_and_close_above():
    small = _jpeg(564, 240)  # MovieNet's 240p: no DCT scaling at 224
    np.testing.assert_array_equal(images.decode(small, 224, "clip", draft=True),
                                  images.decode(small, 224, "clip"))
    for w, h in [(1920, 800), (1280, 720), (720, 1280)]:
        data = _jpeg(w, h, seed=h)
        exact = images.decode(data, 224, "clip").astype(int)
        fast = images.decode(data, 224, "clip", draft=True).astype(int)
        diff = np.abs(fast - exact)
        # Stated tolerance of the named option (measured: mean 0.6-1.0, max 5-8 levels).
        assert diff.mean() <= 1.5 and diff.max() <= 24, (w, h, diff.mean(), diff.max())
        assert diff.any()  # draft did apply (it is not exact above 2 x side)


def test_squash_is_the_scratch_towers_bilinear_resize():
    data = _jpeg(564, 240)
    img = Image.open(io.BytesIO(data)).convert("RGB")
    np.testing.assert_array_equal(images.decode(data, 64, "squash"),
                                  np.asarray(img.resize((64, 64), Image.BILINEAR)))
    same = _jpeg(64, 64)
    np.testing.assert_array_equal(images.decode(same, 64, "squash"),
                                  np.asarray(Image.open(io.BytesIO(same)).convert("RGB")))
    with pytest.raises(ValueError, match="data.image_resize='crop'"):
        images.decode(data, 64, "crop")
