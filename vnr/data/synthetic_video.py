"""Videos whose frames carry their own index in their pixels, for tests and benchmarks.

`write(path, times, ...)` encodes frame i (shown from `times[i]` seconds) with a 4 x 4 grid
of black or white cells spelling i in binary (16 bits, most significant first, row by row),
over a textured background; `read_index(frame)` reads it back from any decoded frame in
display orientation, at any size down to ~16 px, through lossy compression. So a test can
check that a decoder returned exactly the frame shown at a requested time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

GRID = 4  # cells per side; 16 bits
_TICKS = 1000  # stream time base 1/1000 s: variable rates are exact to the millisecond


def frame_image(index: int, width: int, height: int, texture: np.ndarray | None = None
                ) -> np.ndarray:
    """uint8 [height, width, 3]: the code of `index` (cells' inner 60 %) on a texture."""
    if not 0 <= index < 2 ** (GRID * GRID):
        raise ValueError(f"index {index} does not fit {GRID * GRID} bits")
    img = np.full((height, width, 3), 128, np.uint8) if texture is None else texture.copy()
    bits = [(index >> (GRID * GRID - 1 - b)) & 1 for b in range(GRID * GRID)]
    ch, cw = height / GRID, width / GRID
    for b, bit in enumerate(bits):
        r, c = divmod(b, GRID)
        y0, y1 = int(r * ch + 0.2 * ch), int(r * ch + 0.8 * ch)
        x0, x1 = int(c * cw + 0.2 * cw), int(c * cw + 0.8 * cw)
        img[y0:y1, x0:x1] = 255 if bit else 0
    return img


def read_index(frame: np.ndarray) -> int:
    """The index a `frame_image` spells (the mean of each cell's central 20 %)."""
    h, w = frame.shape[:2]
    ch, cw = h / GRID, w / GRID
    value = 0
    for b in range(GRID * GRID):
        r, c = divmod(b, GRID)
        y0, y1 = int(r * ch + 0.4 * ch), max(int(r * ch + 0.6 * ch), int(r * ch + 0.4 * ch) + 1)
        x0, x1 = int(c * cw + 0.4 * cw), max(int(c * cw + 0.6 * cw), int(c * cw + 0.4 * cw) + 1)
        value = (value << 1) | int(frame[y0:y1, x0:x1].mean() > 127)
    return value


def write(path: str | os.PathLike, times: Sequence[float], *, width: int = 128,
          height: int = 96, codec: str = "libx264", rotation: int = 0, gop: int = 0,
          preset: str = "ultrafast", seed: int = 0, images: Sequence[np.ndarray] | None = None
          ) -> None:
    """Encodes one frame per entry of `times` (seconds, increasing), shown from that time.

    `rotation` (0/90/180/270, counter-clockwise) is stored as the display matrix and the
    pixels stored turned back, so a decoder that honours it shows the frames upright at
    `width` x `height`. `gop`: keyframe interval in frames (0: the encoder's default).
    `images` replaces the coded frames (then `read_index` does not apply)."""
    import av

    times = np.asarray(times, np.float64)
    if len(times) > 1 and np.any(np.diff(times) <= 0):
        raise ValueError("times must increase")
    rng = np.random.default_rng(seed)
    texture = rng.integers(60, 196, (height // 8 + 1, width // 8 + 1, 3), np.uint8)
    texture = texture.repeat(8, 0).repeat(8, 1)[:height, :width]
    k = (rotation // 90) % 4
    sw, sh = (height, width) if k % 2 else (width, height)
    gaps = np.diff(times)
    rate = Fraction(round(1 / float(np.median(gaps)))) if len(gaps) else Fraction(25)
    with av.open(os.fspath(path), "w") as out:
        stream = out.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = sw, sh, "yuv420p"
        stream.codec_context.time_base = Fraction(1, _TICKS)
        stream.time_base = Fraction(1, _TICKS)
        if gop:
            stream.codec_context.gop_size = gop
        if codec == "libx264":
            stream.options = {"preset": preset}
        elif codec == "libvpx-vp9":
            stream.options = {"deadline": "realtime", "cpu-used": "8"}
        if k:
            stream.set_display_rotation(rotation)
        for i, t in enumerate(times):
            img = images[i] if images is not None else frame_image(i, width, height, texture)
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(np.rot90(img, -k)),
                                               format="rgb24")
            frame.pts = int(round(t * _TICKS))
            frame.time_base = Fraction(1, _TICKS)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
