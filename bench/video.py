"""Video decoding benchmark: `python -m bench video [--seconds 60] [--long_seconds 600]`.

Side by side in one run, on H.264 files it writes (x264 `veryfast`, 25 fps, a moving noisy
texture, so decoding costs what real footage costs), each decoder on ONE core:
- full-rate decode, frames/s: `ffmpeg -threads 1 -i F -f null -` (the command line's own
  decode; the Debian package) beside PyAV's decode of every frame (`vnr.data.video` opens
  files the same way), and PyAV decoding and converting every frame to RGB;
- one frame a second (and one per 10 s) of a long video (`vnr.data.video.decode_at` on the
  grid) beside decoding and converting every frame, at the x264 default keyframe interval
  (250 frames) and at 2 s (48 frames, as streaming encodes use);
- per registered extractor (`vnr.extractors`): its FLOPs per second of video (analytic,
  `bench.flops`, full-size model), the seconds of video one `--device` at 50 % of its bf16
  peak consumes per second, the host core-seconds decoding and preparing one second of video
  at 360p and 720p take (measured here), so the host cores that device needs.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tempfile
import time
from fractions import Fraction

import numpy as np
from absl import flags

from bench import flops
from bench import train as bench_train
from bench.input import DEVICES, MFU
from vnr import cli

SIZES = {"360p": (640, 360), "720p": (1280, 720)}


def write(path: pathlib.Path, size: tuple[int, int], seconds: float, gop: int = 0) -> None:
    """A 25 fps H.264 file: a noisy texture panning, some noise per frame."""
    import av

    w, h = size
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (h // 4 + 1, w // 4 + 1 + 2 * int(seconds * 25), 3), np.uint8)
    base = base.repeat(4, 0)[:h]
    with av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        s.options = {"preset": "veryfast", **({"g": str(gop)} if gop else {})}
        for i in range(int(seconds * 25)):
            col = (2 * i) // 4
            img = base[:, col:col + w // 4 + 1].repeat(4, 1)[:, :w]
            img = img ^ rng.integers(0, 24, img.shape, np.uint8)
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, 25)
            for p in s.encode(frame):
                out.mux(p)
        for p in s.encode():
            out.mux(p)


def ffmpeg_rate(path: pathlib.Path, frames: int) -> float | None:
    exe = shutil.which("ffmpeg")
    if exe is None:
        return None
    t = time.perf_counter()
    subprocess.run([exe, "-v", "error", "-threads", "1", "-i", str(path), "-f", "null", "-"],
                   check=True, capture_output=True)
    return frames / (time.perf_counter() - t)


def pyav_rate(path: pathlib.Path, rgb: bool) -> tuple[float, int]:
    import av

    t = time.perf_counter()
    n = 0
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.codec_context.thread_count = 1
        for f in c.decode(s):
            if rgb:
                f.to_ndarray(format="rgb24")
            n += 1
    return n / (time.perf_counter() - t), n


def sampled_seconds(path: pathlib.Path, duration: float, fps: float, resize) -> float:
    from vnr.data import video

    t = time.perf_counter()
    video.decode_at(path, video.grid(duration, fps), resize=resize, threads=1)
    return time.perf_counter() - t


def extractor_flops() -> dict[str, float]:
    """FLOPs per second of video of each registered extractor at full size."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from vnr.models.encoders import create, s3d

    out = {}
    clip = nnx.eval_shape(lambda: create("scratch:clip-vision-small", rngs=nnx.Rngs(0),
                                         image_size=224, patch_size=32, hidden_size=768,
                                         num_hidden_layers=12, num_attention_heads=12,
                                         intermediate_size=3072)[0])
    g, st = nnx.split(clip)
    x = jax.ShapeDtypeStruct((1, 224, 224, 3), jnp.float32)
    out["clip (ViT-B/32, 1 frame/s)"] = flops.count(lambda s, x: nnx.merge(g, s)(x).pooled, st, x)
    net = nnx.eval_shape(lambda: s3d.S3D(s3d.S3D_HOWTO100M, nnx.Rngs(0)))
    g2, st2 = nnx.split(net)
    x2 = jax.ShapeDtypeStruct((1, 16, 224, 224, 3), jnp.float32)
    out["s3d_howto100m (16 frames/s)"] = flops.count(
        lambda s, x: nnx.merge(g2, s)(x).mixed_5c, st2, x2)
    return out


def main(argv: list[str]) -> None:
    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_float("seconds", 60, "length of the full-rate files", flag_values=fv)
        flags.DEFINE_float("long_seconds", 600, "length of the long (sampled) file",
                           flag_values=fv)
        flags.DEFINE_string("device", "h100", f"device of the demand: {', '.join(DEVICES)}",
                            flag_values=fv)
        flags.DEFINE_string("dir", "", "where the files go (default: a temporary folder)",
                            flag_values=fv)

    args = cli.parse(argv[1:], "python -m bench video", __doc__, define)
    if args.device not in DEVICES:
        cli.fail(f"--device={args.device!r}: use one of {', '.join(DEVICES)}")
    from vnr.data import video

    root = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="bench_video_"))
    root.mkdir(parents=True, exist_ok=True)
    print("| file | ffmpeg CLI decode f/s | PyAV decode f/s | PyAV / ffmpeg | PyAV decode+RGB "
          "f/s |\n|---|---|---|---|---|", flush=True)
    per_core = {}
    for name, size in SIZES.items():
        f = root / f"{name}.mp4"
        if not f.is_file():
            write(f, size, args.seconds)
        av_rate, n = pyav_rate(f, rgb=False)
        rgb_rate, _ = pyav_rate(f, rgb=True)
        ff = ffmpeg_rate(f, n)
        ratio = f"{av_rate / ff:.2f}x" if ff else "n/a (no ffmpeg)"
        print(f"| {name} {args.seconds:.0f} s | {ff or 0:.0f} | {av_rate:.0f} | {ratio} | "
              f"{rgb_rate:.0f} |", flush=True)
        dur = video.probe(f).duration
        per_core[name] = {
            "clip": sampled_seconds(f, dur, 1, video.Resize("clip", size=224)) / dur,
            "s3d": sampled_seconds(f, dur, 16, video.Resize(
                "short_side_crop", size=224, crop=224, interpolation="bicubic")) / dur}
    print("\n| long file | keyframes | every frame decoded + RGB s | 1 frame/s sampled s | "
          "speed-up | 1 frame/10 s sampled s | speed-up |\n|---|---|---|---|---|---|---|",
          flush=True)
    for gop, label in ((0, "x264 default (250)"), (48, "every 48 frames (~2 s)")):
        f = root / f"long_360p_g{gop}.mp4"
        if not f.is_file():
            write(f, SIZES["360p"], args.long_seconds, gop)
        t = time.perf_counter()
        pyav_rate(f, rgb=True)
        full = time.perf_counter() - t
        dur = video.probe(f).duration
        one = sampled_seconds(f, dur, 1, video.Resize())
        tenth = sampled_seconds(f, dur, 0.1, video.Resize())
        print(f"| 360p {args.long_seconds:.0f} s | {label} | {full:.1f} | {one:.1f} | "
              f"{full / one:.1f}x | {tenth:.2f} | {full / tenth:.0f}x |", flush=True)
    peak = bench_train.PEAKS[DEVICES[args.device]]
    print(f"\n| extractor | GFLOP per s of video | video s/s on one {args.device} at "
          f"{MFU:.0%} | core-s per video s 360p / 720p | host cores needed 360p / 720p |\n"
          "|---|---|---|---|---|")
    for label, fl in extractor_flops().items():
        rate = MFU * peak / fl
        key = "clip" if label.startswith("clip") else "s3d"
        c360, c720 = per_core["360p"][key], per_core["720p"][key]
        print(f"| {label} | {fl / 1e9:.1f} | {rate:.0f} | {c360:.3f} / {c720:.3f} | "
              f"{rate * c360:.0f} / {rate * c720:.0f} |", flush=True)
