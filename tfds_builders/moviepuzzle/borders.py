"""Black-border (letterbox / pillarbox) cropping of MovieNet keyframes (MoviePuzzle §2.1:
frames "cropped to eliminate black borders"; the paper gives no method, upstream publishes
no code: every rule here is our choice, written down in README.md).

- A line (row or column) is **black** when at least `BLACK_SHARE` of its pixels have every
  channel <= `BLACK_LEVEL` (JPEG noise in a bar stays below it; the strokes of a subtitle
  burnt into a bar light far fewer than a quarter of a line's pixels). JPEG ringing can
  light the bar's line next to the picture: that line or two is then kept.
- A frame's border on one side is the number of black lines from that edge inwards.
- A **movie's** crop box takes, per side, the `QUANTILE` (lower) of its sampled frames'
  borders: a bar is there in (almost) every frame, while a dark scene, a fade or a caption
  burnt into a bar in a few frames moves the low quantile little. Up to `SAMPLE` keyframes
  spread over the movie are measured (all of the same size as the first one).
- An axis is cropped only when both its borders are at least `MIN_BORDER` px, about equal
  (they differ by at most `MAX_SKEW` of the wider one, or `MIN_BORDER` px) and take less
  than half the frame together: letterbox and pillarbox bars are centred, while a dark
  picture edge is rarely dark on both sides alike. Fewer than `MIN_SAMPLE` measured frames:
  nothing is cropped. (On the public per-clip release, ~10-20 frames of one dark scene per
  movie, a one-sided rule would "find" bars in 6 of 99 movies; this one finds none.)
- Cropped frames are re-encoded as JPEG at `QUALITY` (the paper's frames were re-encoded
  too; its quality is not published); frames of movies without borders keep their bytes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from PIL import Image

BLACK_LEVEL = 24
BLACK_SHARE = 0.75
QUANTILE = 10  # percent
SAMPLE = 64
MIN_BORDER = 4
MAX_SKEW = 0.25
MIN_SAMPLE = 8
QUALITY = 95

Box = tuple[int, int, int, int]  # left, top, right, bottom (PIL crop box)


def _leading_black(lines: np.ndarray) -> int:
    """How many leading entries of a per-line "black" flag vector are True."""
    not_black = np.flatnonzero(~lines)
    return int(not_black[0]) if len(not_black) else len(lines)


def frame_borders(pixels: np.ndarray) -> tuple[int, int, int, int]:
    """uint8 [H, W, 3] -> black lines from the (left, top, right, bottom) edges."""
    dark = pixels.max(-1) <= BLACK_LEVEL
    rows = dark.mean(1) >= BLACK_SHARE
    cols = dark.mean(0) >= BLACK_SHARE
    return (_leading_black(cols), _leading_black(rows), _leading_black(cols[::-1]),
            _leading_black(rows[::-1]))


def movie_box(borders: Sequence[tuple[int, int, int, int]], width: int, height: int
              ) -> Box | None:
    """The crop box of a movie from its frames' borders (see the module docstring); None
    when nothing is cropped."""
    if len(borders) < MIN_SAMPLE:
        return None
    b = np.asarray(borders)
    left, top, right, bottom = (int(np.percentile(b[:, k], QUANTILE, method="lower"))
                                for k in range(4))
    if not _bars(left, right, width):
        left = right = 0
    if not _bars(top, bottom, height):
        top = bottom = 0
    if not (left or top or right or bottom):
        return None
    return left, top, width - right, height - bottom


def _bars(a: int, b: int, side: int) -> bool:
    """Whether borders `a` and `b` of one axis of length `side` are a pair of bars."""
    return (min(a, b) >= MIN_BORDER and abs(a - b) <= max(MIN_BORDER, MAX_SKEW * max(a, b))
            and a + b < side / 2)


def sample_paths(paths: Sequence, k: int = SAMPLE) -> list:
    """Up to `k` paths spread evenly over `paths` (all of them when there are fewer)."""
    if len(paths) <= k:
        return list(paths)
    return [paths[int(i)] for i in np.linspace(0, len(paths) - 1, k).round()]


def crop_jpeg(data: bytes, box: Box, size: tuple[int, int]) -> bytes | None:
    """`data` cropped to `box` and re-encoded, or None when the frame is not `size` (W, H)
    (the box was measured on frames of that size)."""
    with Image.open(io.BytesIO(data)) as im:
        if im.size != tuple(size):
            return None
        buf = io.BytesIO()
        im.convert("RGB").crop(box).save(buf, "JPEG", quality=QUALITY)
    return buf.getvalue()
