"""Video files in: probe, decode the frames shown at given times, and the papers' sampling
policies (PyAV, whose wheel carries FFmpeg).

**Time.** Seconds of presentation time from the video stream's first timestamp, read from
the stream's own timestamps (pts x time base), never from frame counts, so variable frame
rates and streams that do not start at 0 are exact. The frame "at" time t is the frame on
screen at t: the last one whose timestamp is <= t (`pick="shown"`); `pick="nearest"` takes
the frame whose timestamp is nearest t instead (ties to the earlier one; FFmpeg's `fps`
filter rounds the same way). A time past the last frame is clamped to it and counted
(`Decoded.clamped`), one before the first gets the first frame.

**Cost.** Frames are decoded forward with FFmpeg's threaded decoding. Before a requested
time whose preceding keyframe lies ahead of the decoder, the demuxer seeks to that keyframe
(the container's index), so sparse sampling decodes only from the keyframes it needs. Only
the frames returned are converted to RGB and resized (in the calling process, so a worker
ships only the small frames).

**Orientation.** A display-matrix rotation (phones) is applied, as FFmpeg's command line
does by default: frames come out as a viewer sees them; `Info.width/height` are that size.

Bad files raise `VideoError`, one line naming the file (missing, empty, not a video, no
video stream, nothing decodable); a file that stops decoding part way (truncated) returns
what decoded, clamps later times and says so in `Decoded.truncated`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

PICKS = ("shown", "nearest")
RESIZES = ("none", "squash", "short_side_crop", "clip")
_EPS = 1e-6  # seconds: a requested time equal to a timestamp up to float rounding
# Seek only over more than this many seconds of frames (ours): a seek flushes the decoder,
# and a nearer keyframe is reached as fast by decoding forward (`python -m bench video`).
SEEK_SKIP = 1.0


class VideoError(ValueError):
    """A video file that cannot be read (the message names the file)."""


@dataclasses.dataclass(frozen=True)
class Info:
    """What the container says of its first video stream (display orientation)."""

    path: str
    duration: float  # seconds, from the stream (else the container)
    fps: float  # average frame rate
    frames: int  # the container's frame count (0 when it keeps none)
    width: int
    height: int
    rotation: int  # degrees counter-clockwise applied to stored frames for display
    codec: str
    start: float  # the stream's first timestamp, seconds (time 0 of this module)
    variable_frame_rate: bool  # average and nominal rates disagree by more than 1 %


@dataclasses.dataclass(frozen=True)
class Resize:
    """What a consumer's preprocessing needs, done in the decoding worker.

    `squash`: to `width` x `height`, aspect not kept; `short_side_crop`: the shorter side to
    `size`, then a centre crop `crop` x `crop` (0: no crop). Interpolation is swscale's
    (`bilinear`, `bicubic`, `area`, ...), named because it changes pixels. `clip`: CLIP's
    image processor exactly (`vnr.data.images.clip_resize`, PIL bicubic) to `size`."""

    mode: str = "none"
    width: int = 0
    height: int = 0
    size: int = 0
    crop: int = 0
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        if self.mode not in RESIZES:
            raise ValueError(f"resize mode {self.mode!r}: use one of {', '.join(RESIZES)}")
        if self.mode == "squash" and (self.width <= 0 or self.height <= 0):
            raise ValueError("resize squash needs width > 0 and height > 0")
        if self.mode == "clip" and self.size <= 0:
            raise ValueError("resize clip needs size > 0")
        if self.mode == "short_side_crop" and (self.size <= 0 or self.crop > self.size):
            raise ValueError(f"resize short_side_crop needs size > 0 and crop <= size "
                             f"(got size={self.size}, crop={self.crop})")

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Decoded:
    """Frames at the requested times, in the order asked."""

    frames: np.ndarray  # uint8 [len(times), H, W, 3]
    times: np.ndarray  # float64: the returned frames' own timestamps
    clamped: int  # requested times past the last frame (or the truncation point)
    truncated: bool  # decoding stopped on an error before the end of the stream


def _check_file(path: str | os.PathLike) -> str:
    p = os.fspath(path)
    if not os.path.exists(p):
        raise VideoError(f"video {p}: no such file")
    if not os.path.isfile(p):
        raise VideoError(f"video {p}: not a regular file")
    if os.path.getsize(p) == 0:
        raise VideoError(f"video {p}: empty file")
    return p


def _open(path: str | os.PathLike, threads: int = 0) -> tuple[Any, Any, str]:
    import av

    p = _check_file(path)
    try:
        container = av.open(p)
    except (av.error.FFmpegError, UnicodeDecodeError) as e:
        raise VideoError(f"video {p}: not a readable video ({_why(e)})") from None
    if not container.streams.video:
        container.close()
        raise VideoError(f"video {p}: no video stream")
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    stream.codec_context.thread_count = threads
    return container, stream, p


def _why(e: BaseException) -> str:
    return (getattr(e, "strerror", None) or str(e)).splitlines()[0]


def _seconds(value: Any, base: Fraction | None) -> float | None:
    return None if value is None or base is None else float(value * base)


def probe(path: str | os.PathLike) -> Info:
    """The first video stream's duration, rate, size, rotation and codec."""
    container, stream, p = _open(path)
    try:
        base = stream.time_base
        start = _seconds(stream.start_time, base) or 0.0
        duration = _seconds(stream.duration, base)
        if duration is None and container.duration is not None:
            duration = container.duration / 1_000_000
        avg = _rate(stream)
        nominal = float(stream.base_rate or 0)
        rotation = _stream_rotation(container, stream)
        w, h = stream.codec_context.width, stream.codec_context.height
        if rotation % 180:
            w, h = h, w
        return Info(path=p, duration=float(duration or 0.0), fps=avg,
                    frames=int(stream.frames or 0), width=int(w), height=int(h),
                    rotation=rotation, codec=stream.codec_context.name, start=start,
                    variable_frame_rate=bool(avg and nominal and abs(avg - nominal) > 0.01
                                             * nominal))
    finally:
        container.close()


def _stream_rotation(container: Any, stream: Any) -> int:
    """The rotation of the first decodable frame (frames carry the display matrix)."""
    import av

    try:
        for frame in container.decode(stream):
            return _quarter(frame.rotation)
    except av.error.FFmpegError:
        pass
    return 0


def _quarter(rotation: float | int | None) -> int:
    return int(round((rotation or 0) / 90.0)) * 90 % 360


def _to_rgb(frame: Any, resize: Resize) -> np.ndarray:
    """A decoded frame -> uint8 [H, W, 3] in display orientation, resized as asked."""
    k = _quarter(frame.rotation) // 90
    if resize.mode == "clip":
        from PIL import Image

        from vnr.data import images

        img = np.rot90(frame.to_ndarray(format="rgb24"), k)
        return images.clip_resize(Image.fromarray(np.ascontiguousarray(img)), resize.size)
    w, h = (frame.height, frame.width) if k % 2 else (frame.width, frame.height)
    if resize.mode == "squash":
        w, h = resize.width, resize.height
    elif resize.mode == "short_side_crop":  # the longer side int(long * size / short)
        w, h = ((resize.size, int(h * resize.size / w)) if w <= h else
                (int(w * resize.size / h), resize.size))
    # swscale scales the stored frame; rotate after, so stored sizes swap when k is odd
    sw, sh = (h, w) if k % 2 else (w, h)
    img = frame.reformat(width=sw, height=sh, format="rgb24",
                         interpolation=resize.interpolation.upper()
                         if resize.mode != "none" else None).to_ndarray()
    img = np.rot90(img, k) if k else img
    if resize.mode == "short_side_crop" and resize.crop:
        c = resize.crop  # offsets int((side - crop) / 2)
        top, left = (img.shape[0] - c) // 2, (img.shape[1] - c) // 2
        img = img[top:top + c, left:left + c]
    return np.ascontiguousarray(img)


def _keyframes(stream: Any) -> np.ndarray:
    """Seconds from the stream start of the container's indexed keyframes, sorted; empty
    when the container keeps no index (then the decoder only reads forward). The index holds
    decode times: a keyframe is shown at or after its entry, so a seek decided by them never
    overshoots."""
    try:
        entries = stream.index_entries
    except (AttributeError, NotImplementedError):
        return np.zeros((0,))
    start = stream.start_time or 0
    raw = np.sort(np.asarray([e.timestamp for e in entries if e.is_keyframe], np.int64))
    return (raw - start) * float(stream.time_base)


def decode_at(path: str | os.PathLike, times: Sequence[float], *, resize: Resize | None = None,
              pick: str = "shown", threads: int = 0) -> Decoded:
    """The frames at `times` (seconds from the stream start, any order, repeats allowed).

    Raises:
      VideoError: one line naming the file (see the module docstring).
    """
    import av

    if pick not in PICKS:
        raise ValueError(f"pick={pick!r}: use one of {', '.join(PICKS)}")
    resize = resize or Resize()
    want = np.asarray(times, np.float64).reshape(-1)
    if not np.all(np.isfinite(want)):
        raise ValueError(f"video {os.fspath(path)}: non-finite requested time")
    order = np.argsort(want, kind="stable")
    container, stream, p = _open(path, threads)
    out: list[np.ndarray | None] = [None] * len(want)
    got_t = np.zeros(len(want))
    try:
        base, start = stream.time_base, stream.start_time or 0
        keys = _keyframes(stream)
        state = _Walker(container, stream, base, start, pick, resize)
        for i in order:
            t = float(want[i])
            state.advance_to(t, keys)
            img, ts = state.answer(t)
            out[i], got_t[i] = img, ts
        if state.last is None:
            raise VideoError(f"video {p}: no frame could be decoded"
                             + (f" ({state.error})" if state.error else ""))
    except av.error.FFmpegError as e:  # e.g. a seek the demuxer refuses: one line
        raise VideoError(f"video {p}: {_why(e)}") from None
    finally:
        container.close()
    frames = np.stack(out) if out else np.zeros((0, 0, 0, 3), np.uint8)
    return Decoded(frames=frames, times=got_t, clamped=state.clamped,
                   truncated=state.error is not None or state.seek_failed
                   or _short(state, stream))


def _short(w: _Walker, stream: Any) -> bool:
    """Whether decoding reached the end well before the duration the container states."""
    stated = _seconds(stream.duration, stream.time_base)
    if not w.ended or w.last is None or not stated:
        return False
    return w.last[0] + 2 * _frame_length(w) < stated


class _Walker:
    """Decodes forward through a stream, seeking ahead over frames no request needs."""

    def __init__(self, container: Any, stream: Any, base: Fraction, start: int, pick: str,
                 resize: Resize):
        self.container, self.stream, self.base, self.start = container, stream, base, start
        self.pick, self.resize = pick, resize
        self.frames = None  # the decoder's iterator
        self.prev = None  # (time, frame): the last frame at or before the position
        self.next = None  # (time, frame): the first frame after it, when seen
        self.last = None  # the latest frame decoded at all
        self.ended, self.error, self.clamped = False, None, 0
        self.no_seek = self.seek_failed = False
        self._cache: dict[float, np.ndarray] = {}

    def _time(self, frame: Any) -> float:
        return float((frame.pts - self.start) * self.base) if frame.pts is not None else 0.0

    def _pull(self) -> tuple[float, Any] | None:
        import av

        if self.ended:
            return None
        if self.frames is None:
            self.frames = self.container.decode(self.stream)
        try:
            frame = next(self.frames)
        except StopIteration:
            self.ended = True
            return None
        except (av.error.FFmpegError, EOFError) as e:  # truncated or corrupt data
            self.ended, self.error = True, _why(e)
            return None
        item = (self._time(frame), frame)
        self.last = item
        return item

    def _seek(self, t: float) -> None:
        """To the last keyframe shown at or before `t` (the demuxers seek by display time)."""
        target = int(math.floor(t / self.base + 1e-6)) + self.start
        self.container.seek(target, stream=self.stream, backward=True)
        self.frames, self.prev, self.next, self.ended = None, None, None, False
        first = self._pull()
        if first is None or first[0] > t + _EPS:
            # nothing decodes there (the index lists data a truncated file lacks), or that
            # keyframe is shown after t: read forward from the start, seeking no more
            self.no_seek, self.seek_failed = True, first is None
            self.container.seek(self.start, stream=self.stream, backward=True)
            self.frames, self.ended = None, False
            first = self._pull()
        self.next = first

    def advance_to(self, t: float, keys: np.ndarray) -> None:
        """Decode until `prev` is the last frame at or before t and `next` the one after;
        seek first when the last keyframe before t lies more than `SEEK_SKIP` ahead."""
        if self.frames is None and self.prev is None and self.next is None:
            self.next = self._pull()
        k = np.searchsorted(keys, t + _EPS, side="right") - 1
        ahead = self.next[0] if self.next is not None else (
            self.prev[0] if self.prev is not None else -math.inf)
        if k >= 0 and keys[k] > ahead + SEEK_SKIP and not self.ended and not self.no_seek:
            self._seek(t)
        while self.next is not None and self.next[0] <= t + _EPS:
            self.prev, self.next = self.next, self._pull()

    def answer(self, t: float) -> tuple[np.ndarray, float]:
        cands = [c for c in (self.prev, self.next) if c is not None]
        if not cands:
            if self.last is None:
                return np.zeros((0, 0, 3), np.uint8), 0.0
            cands = [self.last]
        if self.prev is None:
            chosen = cands[0]  # before the first frame: the first frame
        elif self.next is None:
            chosen = self.prev
            if self.ended and t > self.prev[0] + _frame_length(self) + _EPS:
                self.clamped += 1  # past the last (or the last decodable) frame
        elif self.pick == "nearest" and self.next[0] - t < t - self.prev[0] - _EPS:
            chosen = self.next
        else:
            chosen = self.prev
        key = chosen[0]
        if key not in self._cache:  # repeated times convert once
            self._cache = {key: _to_rgb(chosen[1], self.resize)}
        return self._cache[key], chosen[0]


def _rate(stream: Any) -> float:
    """Frames per second: the stream's average rate, else FFmpeg's guess (0 if neither)."""
    return float(stream.average_rate or 0) or float(stream.guessed_rate or 0)


def _frame_length(w: _Walker) -> float:
    rate = _rate(w.stream)
    return 1.0 / rate if rate else 0.0


def decode_all(path: str | os.PathLike, *, resize: Resize | None = None,
               threads: int = 0) -> Decoded:
    """Every frame of the first video stream, in presentation order."""
    import av

    resize = resize or Resize()
    container, stream, p = _open(path, threads)
    frames, times, error = [], [], None
    try:
        base, start = stream.time_base, stream.start_time or 0
        stated = _seconds(stream.duration, base) or 0.0
        rate = _rate(stream) or 25.0
        it = container.decode(stream)
        while True:
            try:
                frame = next(it)
            except StopIteration:
                break
            except (av.error.FFmpegError, EOFError) as e:
                error = _why(e)
                break
            frames.append(_to_rgb(frame, resize))
            times.append(float((frame.pts - start) * base) if frame.pts is not None else 0.0)
    finally:
        container.close()
    if not frames:
        raise VideoError(f"video {p}: no frame could be decoded" + (f" ({error})" if error
                                                                   else ""))
    short = bool(stated) and times[-1] + 2 / rate < stated
    return Decoded(frames=np.stack(frames), times=np.asarray(times), clamped=0,
                   truncated=error is not None or short)


# ---- sampling policies: times (seconds) for `decode_at` ----------------------------------

def grid(duration: float, fps: float, start: float = 0.0) -> np.ndarray:
    """`fps` times per second from `start` to the end: start + k / fps, k = 0, 1, ..."""
    if fps <= 0:
        raise ValueError(f"fps={fps}: must be > 0")
    n = max(1, math.ceil((duration - start) * fps - _EPS))
    return start + np.arange(n, dtype=np.float64) / fps


def uniform(start: float, end: float, k: int) -> np.ndarray:
    """`k` times at the centres of `k` equal parts of [start, end)."""
    if k <= 0:
        raise ValueError(f"k={k}: must be > 0")
    return start + (np.arange(k) + 0.5) * (end - start) / k


def random(start: float, end: float, k: int, *, seed: int, epoch: int, key: str) -> np.ndarray:
    """`k` sorted times drawn uniformly in [start, end), a function of (seed, epoch, key):
    the same clip gets other frames each epoch and the same frames on a rerun."""
    if k <= 0:
        raise ValueError(f"k={k}: must be > 0")
    digest = int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)
    rng = np.random.default_rng([int(seed), int(epoch), digest])
    return np.sort(start + rng.random(k) * (end - start))


def center(start: float, end: float) -> np.ndarray:
    """The central time of [start, end)."""
    return np.asarray([(start + end) / 2.0])


def store_frames(record: dict, *, resize: Resize, pick: str = "shown",
                 video_key: str = "video", times_key: str = "times") -> np.ndarray:
    """`vnr.data.frame_store.build`'s `prepare` for frames from videos: the frames of
    `record[video_key]` at `record[times_key]` (seconds), resized in the worker, uint8
    [len(times), H, W, 3]. Bind the keywords with `functools.partial` (picklable)."""
    return decode_at(record[video_key], record[times_key], resize=resize, pick=pick).frames


def describe_store(resize: Resize, pick: str, policy: str) -> dict[str, Any]:
    """The preprocessing of `store_frames` as JSON values, for a frame store's identity."""
    return {"source": "video", "decoder": "PyAV", "resize": resize.describe(), "pick": pick,
            "policy": policy, "version": 1}
