"""Can a host feed an accelerator? The input pipeline's rate per worker, side by side for each
input path, against the demand of one named device running the config's train step.

    python -m bench input --config CFG --device h100|h200|a100|v5e|v5p|v4 \
        [--clip_shapes] [--batches 16] [--host_cores 16] [--workers 0] [--config.key=value ...]

The HCMC paper row (Table 7 trains ViT-B/32 towers end to end on 224 px frames) on the
public clips, with random-init towers of ViT-B/32's shapes standing in for the checkpoint
(`--clip_shapes`: `scratch:clip-b32`, 224 px, CLIP's preprocessing, 32 tokens):

    python -m bench input --device h100 --clip_shapes \
        --config configs/moviepuzzle/hcmc.py:frame_shot,paper,clips \
        --config.data.manual_dir=../shared/data/moviepuzzle_public \
        --config.data.train_split=in_domain --config.data.val_split=in_domain \
        --config.data.test_splits='("in_domain",)'

What it prints, all from one run:
- **demand**: the train step's FLOPs from the compiled cost analysis (compiled here, on the
  host's CPU; nothing runs) / (50 % x the device's dense bf16 peak, `bench.train.PEAKS`
  with its sources) = steps/s, x the global batch = clips/s one device consumes. The
  analytic jaxpr count (`bench/flops.py`) is printed beside it and the larger of the two is
  used: XLA's cost analysis counts a while loop's body once (Movie101's scanned decoder:
  0.26 vs 6.2 TFLOP), the analytic count leaves out elementwise work (HCMC: 5.51 vs 5.49);
- **rate per worker** (one core): `--batches` training batches made in this process
  (`num_workers=0`: exactly a grain worker's work: record reads, decode or stored pixels,
  tokenization, the frame shuffle, augmentation, batching), counted per CPU-second of the
  process (all its threads), so other load on the host does not count, after the prefetch
  ramp; clips/s and frames/s (real frames). For MoviePuzzle configs one row per input path
  (`data.image_resize`, `data.jpeg_draft`, `data.frame_store`; a store is built first, its
  build timed apart);
- **headroom** = per-worker rate x (`--host_cores` - 2) workers / demand. The extrapolation
  assumes workers scale linearly: each grain worker process does the same work on its own
  records and hands whole batches to the training process through shared memory; the two
  cores kept back run that process and the device runtime. `--workers N` also measures the
  real multi-process pipeline with N workers here, to check the assumption on this host.

Bad input: an unknown `--device` is one error line, before anything is built or compiled.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from bench import flops as flop_count
from bench import train as bench_train
from bench.timing import flag_config
from vnr import cli, sharding
from vnr.data import pipeline

FLAGS = flags.FLAGS
# --device name -> the device kind of bench.train.PEAKS (dense bf16 peaks, sources there).
DEVICES = {"h100": "NVIDIA H100", "h200": "NVIDIA H200", "a100": "NVIDIA A100-SXM4-80GB",
           "v5e": "TPU v5e", "v5p": "TPU v5p", "v4": "TPU v4"}
MFU = 0.5  # the demand assumes the step runs at 50 % of the dense bf16 peak

flags.DEFINE_string("device", None, f"Device whose demand is computed: {', '.join(DEVICES)}.")
flags.DEFINE_integer("batches", 16, "Timed training batches per input path.")
flags.DEFINE_integer("host_cores", 16, "Cores of the host the headroom is computed for.")
flags.DEFINE_integer("workers", 0, "Also time the multi-process pipeline with this many "
                     "workers (0: skip).")
flags.DEFINE_bool("clip_shapes", False, "Random-init CLIP ViT-B/32 towers (scratch:clip-b32) "
                  "stand in for a CLIP checkpoint: 224 px, CLIP's preprocessing, 32 tokens.")


def device_peak(argv: list[str]) -> tuple[str, float]:
    """(name, dense bf16 peak FLOP/s) of `--device`, read from argv before anything else;
    one error line (exit 2) for a missing or unknown name."""
    name = next((a.split("=", 1)[1] for a in argv if a.startswith("--device=")), None)
    if name is None and "--device" in argv[:-1]:
        name = argv[argv.index("--device") + 1]
    if name not in DEVICES:
        cli.fail(f"--device={name!r}: use one of {', '.join(DEVICES)}")
    return name, bench_train.PEAKS[DEVICES[name]]


def use_clip_shapes(config: Any) -> None:
    """The paper row's tower shapes without a checkpoint (hashed subtitles: no tokenizer)."""
    config.model.update(image_encoder="scratch:clip-b32", text_encoder="scratch:clip-b32")
    config.data.update(image_size=224, image_resize="clip", max_tokens=32)


def input_paths(config: Any) -> list[tuple[str, dict[str, Any]]]:
    """(label, data overrides) of each input path to time: today's JPEG path and the new ones
    for MoviePuzzle configs; the config as it is for the others."""
    d = config.data
    if "image_resize" not in d:
        return [("as configured", {})]
    jpeg = {"jpeg_draft": False, "frame_store": False}
    resize = d.image_resize
    paths = []
    if resize == "clip":
        paths.append(("before: JPEG each epoch, square bilinear resize (main's code)",
                      {**jpeg, "image_resize": "squash"}))
        paths.append(("JPEG each epoch, CLIP's processor (exact)",
                      {**jpeg, "image_resize": "clip"}))
        paths.append(("JPEG each epoch, CLIP + jpeg_draft (DCT scaling; not exact)",
                      {**jpeg, "image_resize": "clip", "jpeg_draft": True}))
    else:
        paths.append((f"JPEG each epoch, {resize} (as configured)",
                      {**jpeg, "image_resize": resize}))
    paths.append((f"after: frame_store, {resize} pixels stored once (exact)",
                  {**jpeg, "image_resize": resize, "frame_store": True}))
    return paths


def real_frames(batch: dict) -> int:
    """Real frames in a batch: its [B, N] frame mask when it has one, else examples."""
    for key in ("mask", "frame_mask"):
        m = batch.get(key)
        if m is not None and np.ndim(m) == 2:
            return int(np.asarray(m).sum())
    return len(next(iter(batch.values())))


def per_worker_rate(task: Any, config: Any, local_batch: int, n: int,
                    workers: int = 0) -> tuple[float, float]:
    """(clips/s, frames/s) of `n` training batches (after `PREFETCH_BATCHES` + 1 untimed).

    `workers=0`: made in this process, per CPU-second of the process (all its threads: grain
    prefetches batches on `PREFETCH_BATCHES` threads, and PIL releases the GIL), i.e. the
    rate of one fully used core, whatever else loads the host. `workers > 0`: the wall-clock
    rate of that many grain worker processes."""
    c = config.copy_and_resolve_references()
    c.data.num_workers = workers
    it = iter(task.train_data(c, local_batch, 0, 1))
    clock = time.perf_counter if workers else time.process_time
    for _ in range(pipeline.PREFETCH_BATCHES + 1):  # worker start-up, the prefetch ramp
        next(it)
    clips = frames = 0
    t = clock()
    for _ in range(n):
        b = next(it)
        clips += len(next(iter(b.values())))
        frames += real_frames(b)
    dt = clock() - t
    if hasattr(it, "close"):
        it.close()
    return clips / dt, frames / dt


def step_demand(s: Any, task: Any, config: Any, peak: float) -> tuple[float, float, float]:
    """(step FLOPs from the compiled cost analysis, the analytic jaxpr count, clips/s one
    device consumes at MFU x peak from the larger of the two: XLA's cost analysis counts a
    while loop's body once (a scanned decoder, a memory bank over time steps), the analytic
    count multiplies scan bodies by their trip count but leaves out elementwise work)."""
    c = config.copy_and_resolve_references()
    c.data.num_workers = 0
    if "frame_store" in c.data:
        c.data.frame_store = False
    it = iter(task.train_data(c, s.local_batch, 0, 1))
    batch = sharding.global_batch(next(it), s.mesh)
    if hasattr(it, "close"):
        it.close()
    step = jnp.asarray(0, jnp.int32)
    compiled = s.step_fn.lower(s.state, batch, step).compile()
    flops = bench_train.step_flops(compiled)
    analytic = flop_count.count(s.step_fn, s.state, batch, step)
    return flops, analytic, config.batch_size * MFU * peak / max(flops, analytic)


def _store_size(config: Any) -> str:
    root = pathlib.Path(config.data.data_dir).absolute() / "frame_store"
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
    return f"{size / 2**20:,.0f} MiB under {root}"


def measure(config: Any, name: str, peak: float, batches: int, host_cores: int,
            workers: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, float, float, str]],
                                       float, int]:
    """(rows of the demand, [(input path, clips/s, frames/s per worker, note)], the demand in
    clips/s, worker count for `host_cores`) of `config`'s train step on device `name`."""
    from vnr.train import setup

    s = setup(config)
    t = time.perf_counter()
    flops, analytic, demand = step_demand(s, s.task, config, peak)
    compile_s = time.perf_counter() - t
    n_workers = host_cores - pipeline.RESERVED_CORES
    d = config.data
    rows = [
        ("config", f"{config.task}, global batch {config.batch_size}, "
                   f"{d.get('max_frames', '-')} frames/clip, image {d.get('image_size', '-')} px "
                   f"{d.get('image_resize', '')}, towers {config.model.get('image_encoder', '-')}"
                   f" / {config.model.get('text_encoder', '-')}, data {d.config}"),
        ("step FLOPs (compiled cost analysis, global batch)",
         f"{flops / 1e12:.3f} TFLOP (compile {compile_s:.0f} s on {jax.devices()[0].platform})"),
        ("step FLOPs (analytic: jaxpr matmuls + convs, bench/flops.py)",
         f"{analytic / 1e12:.3f} TFLOP"),
        (f"{name}: 50 % of the dense bf16 peak ({DEVICES.get(name, name)}, bench.train.PEAKS)",
         f"{MFU * peak / 1e12:.1f} TFLOP/s -> "
         f"{MFU * peak / max(flops, analytic):,.1f} steps/s (the larger FLOP count)"),
        (f"demand of one {name}", f"{demand:,.1f} clips/s"),
    ]
    table = []
    for label, over in input_paths(config):
        c = config.copy_and_resolve_references()
        c.data.update(over)
        note = ""
        if over.get("frame_store"):
            t = time.perf_counter()
            from vnr.benchmarks.moviepuzzle.data import store_directory

            store_directory(c.data)
            note = f"; store built once in {time.perf_counter() - t:.0f} s, {_store_size(c)}"
        clips, frames = per_worker_rate(s.task, c, s.local_batch, batches)
        table.append((label, clips, frames, note))
    if workers:
        c = config.copy_and_resolve_references()
        c.data.update(input_paths(config)[-1][1])
        clips, frames = per_worker_rate(s.task, c, s.local_batch, batches, workers)
        table.append((f"measured here with {workers} worker processes "
                      f"(last path; rate of all of them)", clips, frames, ""))
    return rows, table, demand, n_workers


def report_rows(smoke: bool, data_dir: str = "") -> list[tuple[str, str]]:
    """The accelerator report's input section (`bench/accelerator.py`): the HCMC paper row's
    input (ViT-B/32 shapes, 224 px, CLIP's preprocessing; the public clips when
    ../shared/data/moviepuzzle_public exists, else the generated corpus) against this
    machine's device (an H100 when the device is not in `bench.train.PEAKS`), for a host
    of this machine's cores. `smoke`: the frame level at test sizes on the tiny corpus."""
    import os

    from vnr import config as config_lib

    kind = jax.devices()[0].device_kind
    name = next((n for n, k in DEVICES.items() if k == kind), "h100")
    peak = bench_train.PEAKS[DEVICES[name]]
    cores = os.cpu_count() or 1
    if smoke:
        config = config_lib.load("configs/moviepuzzle/hcmc.py:frame,paper,smoke")
        config.data.image_resize = "clip"
        batches = 2
    else:
        config = config_lib.load("configs/moviepuzzle/hcmc.py:frame_shot,paper")
        use_clip_shapes(config)
        public = pathlib.Path(__file__).resolve().parents[2] / "shared/data/moviepuzzle_public"
        if public.is_dir():
            config.data.update(config="clips", manual_dir=str(public), train_split="in_domain",
                               val_split="in_domain", test_splits=("in_domain",))
        batches = 10
    if data_dir:
        config.data.data_dir = data_dir
    rows, table, demand, n_workers = measure(config, name, peak, batches, max(cores, 3))
    out = list(rows)
    for label, clips, frames, note in table:
        out.append((f"{label}: clips/s, frames/s per worker; headroom with {n_workers} "
                    f"workers ({cores}-core host)",
                    f"{clips:,.1f}, {frames:,.0f}; {clips * n_workers / demand:.2f}x{note}"))
    return out


def main(argv: list[str]) -> None:
    name, peak = device_peak(argv)
    config = flag_config(argv)
    if FLAGS.clip_shapes:
        use_clip_shapes(config)
    rows, table, demand, workers = measure(config, name, peak, FLAGS.batches,
                                           FLAGS.host_cores, FLAGS.workers)
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'measure'.ljust(width)} | value |\n|{'-' * (width + 2)}|---|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")
    print(f"\n| input path | clips/s per worker | frames/s per worker | {workers} workers "
          f"({FLAGS.host_cores}-core host), clips/s | headroom vs one {name} |\n"
          "|---|---|---|---|---|")
    for label, clips, frames, note in table:
        many = "-" if label.startswith("measured") else f"{clips * workers:,.0f}"
        room = ("-" if label.startswith("measured")
                else f"{clips * workers / demand:.2f}x{note}")
        print(f"| {label} | {clips:,.1f} | {frames:,.0f} | {many} | {room} |")
