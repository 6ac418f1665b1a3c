"""Extraction rates on this machine: `python -m bench extract [--smoke] [--seconds 60]`.

What `python -m vnr.extract` does per unit, measured in its two halves on this machine's
device and host, side by side in one run:

- device: each registered extractor's network at full size with random weights (CLIP
  ViT-B/32's vision tower, S3D-G HowTo100M, TransNetV2), through the same jitted function
  `vnr.extractors` builds (`clip_embed`, `s3d_embed`, `transnetv2.predict_frames`), on a
  batch laid out as `vnr.extract` lays it (`--batch` units, float32 weights), the host ->
  device copy and the copy back included: units per second and seconds of video per second;
- host: decoding and preparing those frames (`vnr.data.video.decode_at` with the extractor's
  plan, pick and resize) from a generated 360p H.264 file (`bench.video.write`), on one
  core, then on every core at once (one process per core): seconds of video per second;
- so the cores that keep the device busy, and which half bounds extraction here.

The weights are random: the rates do not depend on their values, and no checkpoint is needed.
`--smoke`: tiny networks, a 2 s file, TransNetV2 at 4 windows a call only, one timed call
(the CPU test of this file).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import pathlib
import tempfile
import time
from collections.abc import Callable

import numpy as np
from absl import flags

from vnr import cli

SIZE_360P = (640, 360)


@dataclasses.dataclass(frozen=True)
class Case:
    """One extractor's measurement: its network and batch, its frames' plan and resize."""

    name: str
    units: int  # units per device call (vnr.extract's --batch; windows for TransNetV2)
    seconds_per_unit: float  # video seconds one unit covers
    build: Callable[[bool], tuple[Callable[[np.ndarray], np.ndarray], tuple[int, ...]]]
    extractor: str  # vnr.extractors name: its plan, pick and resize drive the decode


def _clip(smoke: bool):
    from flax import nnx

    from vnr.extractors import clip_embed
    from vnr.models.encoders import create

    size = 32 if smoke else 224
    dims = (dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64, patch_size=16) if smoke else
            dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, patch_size=32))
    model = create("scratch:clip-vision-small", rngs=nnx.Rngs(0), image_size=size, **dims)[0]
    return clip_embed(model), (1, size, size, 3)


def _s3d(smoke: bool):
    from flax import nnx

    from vnr.extractors import s3d_embed
    from vnr.models.encoders import s3d

    net = s3d.S3D(s3d.S3D_HOWTO100M, nnx.Rngs(0))
    size = 64 if smoke else s3d.UNIVL.crop
    return s3d_embed(net, s3d.UNIVL), (s3d.UNIVL.fps, size, size, 3)


def _transnetv2(batch: int):
    def build(smoke: bool):
        from flax import nnx

        from vnr.models.encoders import transnetv2

        cfg = (transnetv2.TransNetV2Config(filters=4, dense=32) if smoke
               else transnetv2.TRANSNETV2)
        model = transnetv2.TransNetV2(cfg, nnx.Rngs(0))

        def run(frames: np.ndarray) -> np.ndarray:  # [windows, 50, 27, 48, 3] of new frames
            return transnetv2.predict_frames(model, frames.reshape(-1, *frames.shape[2:]),
                                             batch=batch)[0]
        return run, (transnetv2.STRIDE, *transnetv2.INPUT_HW, 3)
    return build


def cases(smoke: bool) -> list[Case]:
    """The extractors `vnr.extract` registers, at its default batch (TransNetV2 at 4 windows
    a call and at `predict_frames`' default of 32)."""
    from vnr.models.encoders import transnetv2

    unit = transnetv2.STRIDE / 25  # 50 new frames per window at 25 fps
    return [Case("clip (ViT-B/32, 1 frame/s)", 4 if smoke else 64, 1.0, _clip, "clip"),
            Case("s3d_howto100m (16 frames/s)", 1 if smoke else 64, 1.0, _s3d,
                 "s3d_howto100m"),
            Case("transnetv2 (25 fps, 4 windows/call)", 4, unit, _transnetv2(4), "transnetv2"),
            Case("transnetv2 (25 fps, 32 windows/call)", 32, unit, _transnetv2(32),
                 "transnetv2")][:3 if smoke else 4]


def device_rate(case: Case, smoke: bool, repeats: int) -> tuple[float, float]:
    """(units/s, compile+first call s) of the case's function on a host batch of uint8."""
    fn, unit_shape = case.build(smoke)
    frames = np.random.default_rng(0).integers(0, 256, (case.units, *unit_shape), np.uint8)
    t = time.perf_counter()
    fn(frames)
    first = time.perf_counter() - t
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(frames)
        times.append(time.perf_counter() - t)
    return case.units / float(np.median(times)), first


def _resize(extractor: str):
    from vnr import extractors
    from vnr.data import video
    from vnr.models.encoders import s3d

    if extractor == "clip":
        return video.Resize("clip", size=224)
    return extractors.s3d_resize(s3d.UNIVL) if extractor == "s3d_howto100m" else (
        extractors.transnetv2_resize())


def decode_seconds(path: str, extractor: str) -> float:
    """Wall seconds to decode and prepare `path`'s frames as `extractor` plans them, on one
    thread (a worker process of vnr.extract)."""
    from vnr import extractors
    from vnr.data import video

    ex = extractors.get(extractor)
    info = video.probe(path)
    resize = _resize(extractor)
    t = time.perf_counter()
    if ex.whole_video:
        video.decode_all(path, resize=resize, threads=1)
    else:
        video.decode_at(path, ex.plan(info.duration).reshape(-1), resize=resize, pick=ex.pick,
                        threads=1)
    return time.perf_counter() - t


def host_rates(path: str, extractor: str, pool: concurrent.futures.Executor, workers: int
               ) -> tuple[float, float]:
    """(video s/s on one core, video s/s with `pool`'s `workers` processes each decoding the
    file)."""
    from vnr.data import video

    duration = video.probe(path).duration
    one = duration / decode_seconds(path, extractor)
    list(pool.map(decode_seconds, [path] * workers, [extractor] * workers))  # warm up
    t = time.perf_counter()
    list(pool.map(decode_seconds, [path] * workers, [extractor] * workers))
    wall = time.perf_counter() - t
    return one, workers * duration / wall


def report_rows(smoke: bool, seconds: float = 60.0, workdir: str = "") -> list[str]:
    """The markdown table of every case (the accelerator report's extraction section)."""
    import jax

    from bench import video as bench_video

    root = pathlib.Path(workdir or tempfile.mkdtemp(prefix="bench_extract_"))
    root.mkdir(parents=True, exist_ok=True)
    seconds = 2.0 if smoke else seconds
    path = root / f"360p_{seconds:.0f}s.mp4"
    if not path.is_file():
        bench_video.write(path, SIZE_360P, seconds)
    cores = os.cpu_count() or 1
    dev = jax.devices()[0]
    host: dict[str, tuple[float, float]] = {}
    rows = []
    # one pool of decoders for every extractor: each spawned process imports JAX and vnr
    spawn = multiprocessing.get_context("spawn")  # JAX's threads make fork unsafe
    with concurrent.futures.ProcessPoolExecutor(cores, mp_context=spawn) as pool:
        for case in cases(smoke):
            if case.extractor not in host:
                host[case.extractor] = host_rates(str(path), case.extractor, pool, cores)
    for case in cases(smoke):
        units_s, first = device_rate(case, smoke, 1 if smoke else 10)
        dev_video = units_s * case.seconds_per_unit
        one, every = host[case.extractor]
        bound = "device" if dev_video < every else "host decode"
        rows.append((case.name, case.units, f"{units_s:,.1f}", f"{first:.1f}",
                     f"{dev_video:,.1f}", f"{one:,.1f}", f"{every:,.1f}",
                     f"{dev_video / one:,.1f}", bound))
    head = (f"One {dev.device_kind} ({jax.default_backend()}), float32 weights (random), batch "
            f"as `vnr.extract`; host: {cores} cores decoding a generated 360p H.264 file of "
            f"{seconds:.0f} s (x264 veryfast, 25 fps), one process per core. Device rates are "
            "the median of the timed calls after the first (which compiles).")
    return [head, ""] + [
        "| extractor | units/call | units/s on device | first call s | video s/s on device "
        "| video s/s decoded, 1 core | video s/s decoded, all cores | cores to feed the "
        "device | bound here |", "|---|---|---|---|---|---|---|---|---|"] + [
        "| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def main(argv: list[str]) -> None:
    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_bool("smoke", False, "tiny networks and a 2 s file", flag_values=fv)
        flags.DEFINE_float("seconds", 60, "length of the generated 360p file", flag_values=fv)
        flags.DEFINE_string("dir", "", "where the file goes (default: a temporary folder)",
                            flag_values=fv)

    args = cli.parse(argv[1:], "python -m bench extract", __doc__, define)
    print("\n".join(report_rows(args.smoke, args.seconds, args.dir)), flush=True)
