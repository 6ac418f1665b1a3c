"""CCLM's training augmentation of images, on device, per frame (M-SyMoN §6.1's "random
augmentation", read as the transform CCLM fine-tunes retrieval with).

CCLM's `train_transform` (zengyan-97/CCLM `dataset/__init__.py`) is, per image: torchvision's
RandomResizedCrop (area 0.5-1 of the image, aspect 3/4-4/3, PIL bicubic), a horizontal flip
with probability 0.5, and its `RandomAugment(2, 7)` (`dataset/randaugment.py`): two of ten
operations drawn with replacement, each applied with probability 0.5, at level 7 of 10.
`augment` does the same to a batch of uint8 images inside a jitted step, every image with its
own draws (JAX random numbers, so a run is reproducible and nothing runs on the host):

- the crop: torchvision's sampling (10 tries, then the centre crop), resampled as PIL resizes a
  cropped image (bicubic, a = -0.5, the horizontal then the vertical pass, each rounded);
- identity; autocontrast, equalize and brightness (x1.36) as per-channel lookup tables;
  sharpness (x1.36 away from the 3x3 smoothing, the border rows and columns kept);
- shear x / y (0.21), translate x / y (7 px) and rotate (21 degrees about the image centre),
  each of random sign, as one bilinear warp whose source coordinates are rounded to 1/32 of
  a pixel and whose outside is grey 128, as OpenCV's `warpAffine` upstream calls.

Against upstream's code (tests/ops/test_randaugment.py on tests/golden/randaugment/): equal
for the lookup tables, shears and translations; the crop and the rotation within one grey
level on all but about 0.01-0.02 % of the pixels of a 224 px image (up to 2 and 4 levels
there: OpenCV's and PIL's fixed-point coordinates and weights against ours). Two upstream
behaviours are not copied, as their docstrings promise other output: its autocontrast negates the
channel's minimum as an unsigned byte (a channel whose darkest value is above 0 turns white;
here PIL's `ImageOps.autocontrast`, which it says it equals), and its sharpness casts values
outside 0-255 to bytes without clipping (they wrap; here clipped, as PIL's `ImageEnhance`).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

OPS = ("identity", "autocontrast", "equalize", "brightness", "sharpness", "shear_x",
       "shear_y", "translate_x", "translate_y", "rotate")
MAX_LEVEL = 10
FILL = 128  # upstream's replace value of the geometric operations
TRANSLATE_PIXELS = 10  # upstream's translate_const: pixels at the maximum level
_HIGHEST = jax.lax.Precision.HIGHEST


def magnitudes(level: float) -> dict[str, float]:
    """Each operation's strength at `level` (upstream's `arg_dict`, before the random sign)."""
    f = level / MAX_LEVEL
    return {"enhance": f * 1.8 + 0.1, "shear": f * 0.3, "translate": f * TRANSLATE_PIXELS,
            "rotate": f * 30}


# ---- the random crop ------------------------------------------------------------------


def crop_box(key: jax.Array, height: int, width: int, scale: tuple[float, float] = (0.5, 1.0),
             ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> jax.Array:
    """int32 [4] (top, left, crop height, crop width): torchvision's RandomResizedCrop draw."""
    return _crop_box(jax.random.uniform(key, (CROP_UNIFORMS,)), height, width, scale, ratio)


CROP_UNIFORMS = 22  # 10 tries of (area, aspect), then top and left


def _crop_box(u: jax.Array, height: int, width: int, scale: tuple[float, float],
              ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> jax.Array:
    area = height * width
    target = area * (scale[0] + (scale[1] - scale[0]) * u[:10])
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = jnp.exp(lo + (hi - lo) * u[10:20])
    w = jnp.round(jnp.sqrt(target * aspect)).astype(jnp.int32)
    h = jnp.round(jnp.sqrt(target / aspect)).astype(jnp.int32)
    ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = jnp.argmax(ok)
    # the fallback: the centre crop of the largest box whose aspect is within `ratio`
    in_ratio = width / height
    if in_ratio < ratio[0]:
        fw, fh = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        fw, fh = int(round(height * ratio[1])), height
    else:
        fw, fh = width, height
    h = jnp.where(ok.any(), h[first], fh)
    w = jnp.where(ok.any(), w[first], fw)
    top = jnp.floor(u[20] * (height - h + 1)).astype(jnp.int32)
    left = jnp.floor(u[21] * (width - w + 1)).astype(jnp.int32)
    top = jnp.where(ok.any(), top, (height - fh) // 2)
    left = jnp.where(ok.any(), left, (width - fw) // 2)
    return jnp.stack([top, left, h, w]).astype(jnp.int32)


def _bicubic(x: jax.Array, a: float = -0.5) -> jax.Array:
    x = jnp.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return jnp.where(x < 1, near, jnp.where(x < 2, far, 0.0))


def _resample_weights(start: jax.Array, length: jax.Array, size_in: int, size_out: int
                      ) -> jax.Array:
    """float32 [size_out, size_in]: PIL's bicubic coefficients resizing pixels
    [start, start + length) of a line to `size_out` (zero outside the crop, normalised)."""
    scale = length.astype(jnp.float32) / size_out
    filterscale = jnp.maximum(scale, 1.0)
    support = 2.0 * filterscale
    center = (jnp.arange(size_out, dtype=jnp.float32) + 0.5) * scale  # in the crop
    lo = jnp.maximum(jnp.trunc(center - support + 0.5), 0.0)
    hi = jnp.minimum(jnp.trunc(center + support + 0.5), length.astype(jnp.float32))
    x = jnp.arange(size_in, dtype=jnp.float32)[None, :] - start.astype(jnp.float32)
    w = _bicubic((x - center[:, None] + 0.5) / filterscale)
    w = jnp.where((x >= lo[:, None]) & (x < hi[:, None]), w, 0.0)
    return w / w.sum(axis=1, keepdims=True)


def _round_u8(x: jax.Array) -> jax.Array:
    return jnp.clip(jnp.floor(x + 0.5), 0, 255)


def resized_crop(image: jax.Array, box: jax.Array, size: int) -> jax.Array:
    """uint8 [H, W, 3] -> uint8 [size, size, 3]: the `box` (top, left, height, width) cropped
    and resized as PIL's bicubic `resize` of the cropped image."""
    h, w = image.shape[:2]
    wy = _resample_weights(box[0], box[2], h, size)
    wx = _resample_weights(box[1], box[3], w, size)
    x = image.astype(jnp.float32)
    rows = _round_u8(jnp.einsum("hwc,ow->hoc", x, wx, precision=_HIGHEST))
    out = _round_u8(jnp.einsum("hwc,oh->owc", rows, wy, precision=_HIGHEST))
    return out.astype(jnp.uint8)


# ---- the ten operations -----------------------------------------------------------------


def _luts(image: jax.Array, factor: float) -> jax.Array:
    """int32 [4, 3, 256]: identity, autocontrast, equalize and brightness tables per channel."""
    v = jnp.arange(256, dtype=jnp.int32)
    pix = image.reshape(-1, 3).astype(jnp.int32)
    lo, hi = pix.min(axis=0)[:, None], pix.max(axis=0)[:, None]
    stretch = jnp.where(hi > lo, jnp.clip((v - lo) * 255 // jnp.maximum(hi - lo, 1), 0, 255), v)
    hist = jax.vmap(lambda ch: jnp.bincount(ch, length=256))(pix.T)  # [3, 256]
    n = pix.shape[0]
    step = (n - jnp.take_along_axis(hist, hi, axis=1)) // 255  # all but the last used bin
    below = jnp.cumsum(hist, axis=1) - hist  # pixels darker than each value
    eq = jnp.clip((step // 2 + below) // jnp.maximum(step, 1), 0, 255)
    eq = jnp.where(step > 0, eq, v)
    bright = jnp.clip(v.astype(jnp.float32) * jnp.float32(factor), 0, 255).astype(jnp.int32)
    return jnp.stack([jnp.broadcast_to(v, (3, 256)), stretch, eq,
                      jnp.broadcast_to(bright, (3, 256))])


def _sharpen(image: jax.Array, factor: float) -> jax.Array:
    """float32 [H, W, 3]: upstream's sharpness (interior only), clipped."""
    x = image.astype(jnp.float32)
    k = jnp.asarray([[1, 1, 1], [1, 5, 1], [1, 1, 1]], jnp.float32) / 13
    h, w = x.shape[:2]
    smooth = sum(k[i, j] * x[i:h - 2 + i, j:w - 2 + j] for i in range(3) for j in range(3))
    smooth = jnp.round(smooth)  # OpenCV rounds filter2D's output to a byte
    inner = x[1:-1, 1:-1]
    inner = jnp.floor(jnp.clip(smooth + jnp.float32(factor) * (inner - smooth), 0, 255))
    return x.at[1:-1, 1:-1].set(inner)


def _inverse_map(op: jax.Array, sign: jax.Array, height: int, width: int, level: float
                 ) -> jax.Array:
    """float32 [2, 3]: destination pixel -> source pixel of the geometric operation `op`
    (the identity for the others), as `warpAffine` inverts upstream's matrices."""
    m = magnitudes(level)
    s, t = sign * m["shear"], sign * m["translate"]
    theta = jnp.deg2rad(sign * m["rotate"])
    a, b = jnp.cos(theta), jnp.sin(theta)
    cx, cy = width / 2, height / 2
    # getRotationMatrix2D((cx, cy), angle, 1) = [[a, b, tx], [-b, a, ty]]; its inverse:
    rot = jnp.stack([jnp.stack([a, -b, cx - a * cx + b * cy]),
                     jnp.stack([b, a, cy - b * cx - a * cy])])
    one, zero = jnp.ones_like(s), jnp.zeros_like(s)
    eye = jnp.stack([jnp.stack([one, zero, zero]), jnp.stack([zero, one, zero])])
    shear_x = eye.at[0, 1].set(-s)
    shear_y = eye.at[1, 0].set(-s)
    trans_x = eye.at[0, 2].set(t)
    trans_y = eye.at[1, 2].set(t)
    table = jnp.stack([eye] * 5 + [shear_x, shear_y, trans_x, trans_y, rot])
    return table[op].astype(jnp.float32)


def _warp(image: jax.Array, inv: jax.Array) -> jax.Array:
    """float32 [H, W, 3]: bilinear warp with `inv` (destination -> source), outside = FILL;
    source coordinates in 1/32 pixel as `warpAffine` (INTER_BITS 5, AB_BITS 10)."""
    h, w = image.shape[:2]
    ys, xs = jnp.meshgrid(jnp.arange(h, dtype=jnp.float32), jnp.arange(w, dtype=jnp.float32),
                          indexing="ij")

    def fixed(row: jax.Array) -> jax.Array:  # row . (x, y, 1) in 1/32 pixel, floor-rounded
        part_x = jnp.round(row[0] * xs * 1024)
        part_y = jnp.round((row[1] * ys + row[2]) * 1024)
        return jnp.floor((part_x + part_y + 16) / 32)

    qx, qy = fixed(inv[0]), fixed(inv[1])
    x0, y0 = jnp.floor(qx / 32), jnp.floor(qy / 32)
    fx, fy = (qx - 32 * x0) / 32, (qy - 32 * y0) / 32
    x0, y0 = x0.astype(jnp.int32), y0.astype(jnp.int32)
    src = image.astype(jnp.float32)
    out = jnp.zeros_like(src)
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            yy, xx = y0 + dy, x0 + dx
            inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            tap = src[jnp.clip(yy, 0, h - 1), jnp.clip(xx, 0, w - 1)]
            out = out + (wy * wx)[..., None] * jnp.where(inside[..., None], tap, FILL)
    return _round_u8(out)


def apply_op(image: jax.Array, op: jax.Array, sign: jax.Array, level: float = 7) -> jax.Array:
    """uint8 [H, W, 3] -> uint8: operation `OPS[op]` at `level`, `sign` (+1 / -1) the
    direction of the geometric ones."""
    h, w = image.shape[:2]
    factor = magnitudes(level)["enhance"]
    lut = _luts(image, factor)[jnp.where(op < 4, op, 0)]  # [3, 256]; the identity past them
    x = lut[jnp.arange(3), image.astype(jnp.int32)].astype(jnp.float32)
    x = jnp.where(op == OPS.index("sharpness"), _sharpen(image, factor), x)
    return _warp(x, _inverse_map(op, sign.astype(jnp.float32), h, w, level)).astype(jnp.uint8)


# ---- the whole transform ---------------------------------------------------------------


def draw(key: jax.Array, height: int, width: int, *, num_ops: int = 2, prob: float = 0.5,
         scale: tuple[float, float] = (0.5, 1.0)) -> dict[str, jax.Array]:
    """One image's random choices: `box` [4], `flip` [], `ops` [num_ops] (0, the identity,
    where an operation is skipped), `signs` [num_ops]."""
    u = jax.random.uniform(key, (uniforms(num_ops),))
    return choices(u, height, width, num_ops=num_ops, prob=prob, scale=scale)


def uniforms(num_ops: int) -> int:
    """Uniform numbers one image's choices take."""
    return CROP_UNIFORMS + 1 + 3 * num_ops


def choices(u: jax.Array, height: int, width: int, *, num_ops: int, prob: float = 0.5,
            scale: tuple[float, float] = (0.5, 1.0)) -> dict[str, jax.Array]:
    """`draw`'s choices from `uniforms(num_ops)` numbers uniform in [0, 1)."""
    ops_u, keep_u, sign_u = u[CROP_UNIFORMS + 1:].reshape(3, num_ops)
    ops = jnp.minimum(jnp.floor(ops_u * len(OPS)), len(OPS) - 1).astype(jnp.int32)
    return {"box": _crop_box(u[:CROP_UNIFORMS], height, width, scale),
            "flip": u[CROP_UNIFORMS] < 0.5,
            "ops": jnp.where(keep_u <= prob, ops, 0),
            "signs": jnp.where(sign_u < 0.5, 1.0, -1.0)}


def augment_one(image: jax.Array, choice: dict[str, jax.Array], *, size: int,
                level: float = 7) -> jax.Array:
    """uint8 [H, W, 3] -> uint8 [size, size, 3] by the choices of `draw`."""
    x = resized_crop(image, choice["box"], size)
    x = jnp.where(choice["flip"], x[:, ::-1], x)

    def step(y: jax.Array, op_sign: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        return apply_op(y, *op_sign, level), None

    return jax.lax.scan(step, x, (choice["ops"], choice["signs"]))[0]


@functools.partial(jax.jit, static_argnames=("num_ops", "level", "scale"))
def augment(key: jax.Array, images: jax.Array, *, num_ops: int = 2, level: float = 7,
            scale: tuple[float, float] = (0.5, 1.0)) -> jax.Array:
    """uint8 [N, H, W, 3] -> uint8 [N, H, W, 3]: CCLM's training transform, every image its own
    draw (see the module docstring)."""
    n, h, w = images.shape[:3]
    u = jax.random.uniform(key, (n, uniforms(num_ops)))  # one draw for the batch
    picked = jax.vmap(lambda v: choices(v, h, w, num_ops=num_ops, scale=scale))(u)
    return jax.vmap(lambda x, c: augment_one(x, c, size=h, level=level))(images, picked)
