"""CCLM's training augmentation (`vnr.ops.randaugment`) against upstream's own code
(tests/golden/randaugment/, written by tests/golden/make_randaugment.py with CCLM's
`dataset/randaugment.py`, OpenCV and Pillow) and against torchvision's crop sampling rules."""

from __future__ import annotations

import math
import pathlib
import random
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vnr.ops import randaugment as ra

GOLDEN = np.load(pathlib.Path(__file__).parents[1] / "golden" / "randaugment" / "io.npz")
IMAGES = GOLDEN["images"]


def _name(upstream: str) -> str:  # "ShearX" -> "shear_x", "AutoContrast" -> "autocontrast"
    return re.sub(r"(?<!^)([XY])$", r"_\1", upstream).lower()


_APPLY = jax.jit(jax.vmap(ra.apply_op, (0, None, None)))  # one program for every op


def _ours(name: str, sign: int) -> np.ndarray:
    out = _APPLY(jnp.asarray(IMAGES), jnp.int32(ra.OPS.index(name)), jnp.float32(sign))
    return np.asarray(out).astype(int)


CASES = [(k[3:-2], 1 if k.endswith("+") else -1) for k in GOLDEN.files if k.startswith("op_")]


@pytest.mark.parametrize(("upstream", "sign"), CASES, ids=[f"{u}{s:+d}" for u, s in CASES])
def test_each_operation_gives_upstreams_output(upstream: str, sign: int):
    want = GOLDEN[f"op_{upstream}_{'+' if sign > 0 else '-'}"].astype(int)
    got = _ours(_name(upstream), sign)
    diff = np.abs(got - want)
    if upstream == "AutoContrast":  # upstream equals PIL only where every channel reaches 0
        assert diff[0].max() == 0
        pil = np.abs(got - GOLDEN["autocontrast_pil"].astype(int))
        assert pil.max() <= 1 and (pil == 0).mean() > 0.999  # PIL's float64 truncation
        assert (want[1:] == 255).all(), "upstream's unsigned negation whitens these images"
        return
    if upstream == "Sharpness":  # compare where upstream's bytes do not wrap
        inner = GOLDEN["sharp_in_range"]
        assert inner.mean() > 0.9
        assert diff[:, 1:-1, 1:-1][inner].max() <= 1
        assert set(np.unique(got[:, 1:-1, 1:-1][~inner])) <= {0, 255}  # clipped, not wrapped
        img = IMAGES.astype(int)
        for edge in (np.s_[:, 0], np.s_[:, -1], np.s_[:, :, 0], np.s_[:, :, -1]):
            np.testing.assert_array_equal(got[edge], img[edge])  # the border is kept
            np.testing.assert_array_equal(want[edge], img[edge])
        return
    if upstream in ("Identity", "Equalize", "Brightness"):
        np.testing.assert_array_equal(got, want)
        return
    # the warps: OpenCV's fixed-point coordinates and weights against ours (equal on these
    # images; at 224 px a rotation differs by up to 4 levels on ~0.02 % of pixels)
    assert diff.max() <= 2, upstream
    assert (diff == 0).mean() > 0.999, upstream


def test_each_operation_changes_the_image_it_names():
    """The table of operations is not a no-op: every non-identity op moves some pixels."""
    for name in ra.OPS[1:]:
        got = _ours(name, 1)
        assert (got != IMAGES.astype(int)).any(), name


def test_the_crop_resize_gives_pils_bicubic_of_the_cropped_image():
    fn = jax.jit(jax.vmap(jax.vmap(lambda x, b: ra.resized_crop(x, b, 48), (None, 0)),
                          (0, None)))
    got = np.asarray(fn(jnp.asarray(IMAGES), jnp.asarray(GOLDEN["boxes"]))).astype(int)
    diff = np.abs(got - GOLDEN["crops"].astype(int))
    assert diff.max() <= 2  # PIL's fixed-point weights; 2 on one pixel under some XLA flags
    assert (diff == 0).mean() > 0.999


def _torchvision_area(rng: random.Random, height: int, width: int) -> float:
    """torchvision's RandomResizedCrop.get_params written out in Python (the area fraction)."""
    for _ in range(10):
        target = height * width * rng.uniform(0.5, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            return h * w / (height * width)
    return 1.0


def test_crop_boxes_follow_torchvisions_rules():
    """Area 0.5-1 of the image, aspect 3/4-4/3 (rounded to pixels), inside the image, every
    position reachable; the fallback is the centre crop of the whole image."""
    keys = jax.random.split(jax.random.key(0), 4000)
    boxes = np.asarray(jax.vmap(lambda k: ra.crop_box(k, 224, 224))(keys))
    top, left, h, w = boxes.T
    assert (top >= 0).all() and (left >= 0).all()
    assert (top + h <= 224).all() and (left + w <= 224).all()
    area = h * w / 224**2
    assert area.min() > 0.49 and area.max() <= 1.0
    aspect = w / h
    assert aspect.min() > 0.74 and aspect.max() < 1.35
    ref = np.asarray([_torchvision_area(random.Random(k), 224, 224) for k in range(4000)])
    assert abs(area.mean() - ref.mean()) < 0.006  # draws past the edges are redrawn: < 0.75
    assert abs(np.median(area) - np.median(ref)) < 0.01
    assert top.max() >= 60 and left.max() >= 60 and (top == 0).any()
    # a wide image whose every draw fails lands on the fallback: its centre crop at 4/3
    tall = np.asarray(jax.vmap(lambda k: ra.crop_box(k, 2, 200, scale=(0.9, 1.0)))(keys[:50]))
    np.testing.assert_array_equal(tall, np.tile([[0, 99 - 1, 2, 3]], (50, 1)))


def test_the_draws_follow_upstreams_probabilities():
    """Flip 1/2; each of the two operations uniform over the ten and kept with probability
    1/2 (skipped = the identity); signs 1/2."""
    keys = jax.random.split(jax.random.key(1), 20000)
    d = jax.vmap(lambda k: ra.draw(k, 32, 32))(keys)
    assert abs(float(d["flip"].mean()) - 0.5) < 0.02
    ops = np.asarray(d["ops"]).reshape(-1)
    counts = np.bincount(ops, minlength=10) / ops.size
    assert abs(counts[0] - (0.5 + 0.05)) < 0.01  # skipped, or the identity drawn
    np.testing.assert_allclose(counts[1:], 0.05, atol=0.006)
    assert abs(float((np.asarray(d["signs"]) > 0).mean()) - 0.5) < 0.02


def test_augment_keeps_shape_and_dtype_and_depends_on_the_key():
    frames = jnp.asarray(np.resize(IMAGES[:, :40, :40], (4, 40, 40, 3)))
    a = jax.jit(ra.augment)(jax.random.key(0), frames)
    b = jax.jit(ra.augment)(jax.random.key(0), frames)
    c = jax.jit(ra.augment)(jax.random.key(1), frames)
    assert a.shape == frames.shape and a.dtype == jnp.uint8
    np.testing.assert_array_equal(a, b)
    assert (np.asarray(a) != np.asarray(c)).any()
    assert (np.asarray(a[0]) != np.asarray(a[1])).any()  # each image its own draw
