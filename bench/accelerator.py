"""One accelerator report: ``python -m bench accelerator --out FILE.md [--smoke]``.

Runs every accelerator measurement in one process and writes one markdown report (commit it
as a dated file under ``launch/results/``):

1. device and versions (jax, jaxlib, backend, device kind and count, flax, optax, ...);
2. the HCMC paper row's train step (``configs/moviepuzzle/hcmc.py:frame_shot,paper``: Table 7
   with CLIP ViT-B/32-shaped towers trained end to end, ``scratch:clip-b32``, 224 px, 8 clips
   of 20 frames) in float32 and bfloat16, remat none and towers: step time, clips/s, MFU
   (compiled FLOPs / step time / device peak, ``bench/train.py``), per-device peak
   bytes of the compiled step;
3. attention ``xla`` vs ``cudnn`` on the bfloat16 step (cuDNN only on a GPU backend);
4. Movie101 decode: the batched beam search vs a per-example loop over the same step
   (``bench/decode.py``, the RMN decoder at configs/movie101/mcn.py's size);
5. soft-DTW vs ott-jax and Drop-DTW vs the NumPy cell loop (``bench/dtw.py``; ott-jax
   is a benchmark requirement, ``requirements-bench.txt``);
6. the sharded contrastive loss at B = 4096 over every device (``bench/contrastive.py``);
7. input headroom (``bench/input.py`` when present: its ``report_rows(smoke)`` gives
   (measure, value) pairs);
8. extraction rates (``bench/extract.py``): each ``vnr.extract`` network's units/s on the
   device beside decoding its frames on the host's cores;
9. M-SYMON's Table 3 model (§5.1: CCLM's Swin-B and XLM-R text layers on 3 augmented frames a
   shot) beside the feature-mean model: step clips/s, the augmentation alone, the frame
   store's build and input rates (``bench/msymon.py``);
10. targets: >= 50 % MFU for the bfloat16 paper step, decode >= 20x the loop, soft-DTW >= 3x
   ott-jax, each met / not met on an NVIDIA H100, else not measured on this device.

A section that fails says so in one line and the others still run. ``--smoke``: every section
at tiny sizes (the CPU test of this file, so the report cannot rot); ``--data_dir``: where the
synthetic corpus of the paper row is (built there on first use); ``--only train,decode``: a
subset of the sections (e.g. to fit a machine's time limit).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata as md
import importlib.util
import os
import platform
import subprocess
import time
import traceback
from collections.abc import Callable

import jax
from absl import flags

from bench import train as bt
from vnr import cli

flags.DEFINE_string("out", None, "Markdown report to write (e.g. launch/results/DATE-h100.md).")
flags.DEFINE_bool("smoke", False, "Every section at tiny sizes (CPU test of the report).")
flags.DEFINE_string("data_dir", "", "TFDS data_dir of the paper row's synthetic corpus "
                    "(default: the config's, data/tfds).")
flags.DEFINE_list("only", [], "Run only these sections (train, attention, decode, dtw, "
                  "contrastive, input, extract, msymon), e.g. to fit a time limit; versions "
                  "and targets always.")

PAPER_ROW = "frame_shot,paper,clip"  # configs/moviepuzzle/hcmc.py args (clip: token frames)
TARGET_DEVICE = "NVIDIA H100"
VERSIONS = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "grain",
            "tensorflow-datasets", "transformers", "numpy", "ml_dtypes", "ott-jax")


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Everything the report's size depends on."""

    hcmc_args: str  # configs/moviepuzzle/hcmc.py args
    encoder: str  # both towers
    image_size: int
    steps: int
    warmup: int
    input_batches: int
    matmul: int  # CPU peak: the side of the measured matmul
    decode: tuple[int, ...] | None  # bench_decode size tuple; None = configs/movie101/mcn.py
    decode_run: dict  # bench_decode's batch, beam, length, loop_examples, repeats
    soft_sizes: tuple[tuple[int, int, int], ...]
    drop_size: tuple[int, int, int]
    contrastive_batch: int
    repeats: int
    batch_per_device: int = 0  # 0: the config's global batch (Table 7: 8 clips)


FULL = Sizes(PAPER_ROW, "scratch:clip-b32", 224, steps=20, warmup=3, input_batches=10,
             matmul=2048, decode=None,
             decode_run=dict(batch=64, beam=5, length=80, loop_examples=8, repeats=3),
             soft_sizes=((64, 64, 64), (64, 256, 256), (8, 1024, 1024)),
             drop_size=(24, 200, 20), contrastive_batch=4096, repeats=5)
# smoke: the frame level alone (half the compile time of frame_shot), 2 clips per device
SMOKE = Sizes("frame,paper,smoke,clip", "scratch:clip-tiny", 32, steps=2, warmup=1,
              input_batches=2, matmul=128, decode=(32, 1, 2, 64, 100, 4, 8),
              decode_run=dict(batch=4, beam=2, length=6, loop_examples=2, repeats=1),
              soft_sizes=((4, 16, 16),), drop_size=(2, 16, 4), contrastive_batch=64,
              repeats=1, batch_per_device=2)


def table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def paper_config(sz: Sizes, data_dir: str, **overrides):
    """The HCMC paper row at `sz`'s sizes, with config `overrides` (dtype, remat, ...)."""
    from configs.moviepuzzle import hcmc

    c = hcmc.get_config(sz.hcmc_args)
    c.model.update(image_encoder=sz.encoder, text_encoder=sz.encoder)
    c.data.update(image_size=sz.image_size, max_tokens=32)
    if data_dir:
        c.data.data_dir = data_dir
    if sz.batch_per_device:
        c.batch_size = c.eval_batch_size = sz.batch_per_device * jax.device_count()
    c.update(overrides)
    return c


def step_stats(sz: Sizes, data_dir: str, peak: float, **overrides) -> dict:
    """Setup, compile and time the paper row's train step with config `overrides`."""
    from vnr.train import setup

    c = paper_config(sz, data_dir, **overrides)
    s = setup(c)
    input_eps, compile_s, compiled, step_s, _ = bt.timed_steps(c, s, sz.steps, sz.warmup,
                                                               sz.input_batches)
    flops = bt.step_flops(compiled)
    return dict(step_ms=step_s * 1e3, clips_s=c.batch_size / step_s, compile_s=compile_s,
                gflop=flops / 1e9, mfu=flops / step_s / (peak * jax.device_count()),
                mib=bt.peak_bytes(compiled) / 2**20, input_eps=input_eps,
                batch=c.batch_size, frames=bt.frames_per_example(c))


def section_versions(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    from jax.extend import backend

    dev = jax.devices()[0]
    rows = [("date (UTC)", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")),
            ("devices", f"{jax.device_count()} x {dev.device_kind}"),
            ("backend / platform version",
             f"{jax.default_backend()} / {backend.get_backend().platform_version}"),
            ("python / host CPUs", f"{platform.python_version()} / {os.cpu_count()}")]
    plugins = sorted(d.metadata["Name"] for d in md.distributions()
                     if (d.metadata["Name"] or "").lower().startswith(("jax-cuda", "libtpu")))
    for name in (*VERSIONS, *plugins):
        try:
            rows.append((name, md.version(name)))
        except md.PackageNotFoundError:
            rows.append((name, "not installed"))
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown (not a git checkout)"
    rows.append(("vnr commit", commit))
    found["kind"] = dev.device_kind
    return table(("what", "value"), rows)


def section_train(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    peak, peak_what = bt.device_peak(sz.matmul)
    rows = []
    for dtype in ("float32", "bfloat16"):
        for remat in ("none", "towers"):
            r = step_stats(sz, data_dir, peak, dtype=dtype, remat=remat, attention="xla")
            if (dtype, remat) == ("bfloat16", "none"):
                found["mfu"], found["xla"] = r["mfu"], r
            rows.append((dtype, remat, f"{r['step_ms']:.1f}", f"{r['clips_s']:.1f}",
                         f"{r['gflop']:.1f}", f"{100 * r['mfu']:.1f} %", f"{r['mib']:,.0f}",
                         f"{r['compile_s']:.1f}", f"{r['input_eps']:.1f}"))
    head = (f"`configs/moviepuzzle/hcmc.py:{sz.hcmc_args}`, towers `{sz.encoder}`, "
            f"{sz.image_size} px, batch {r['batch']} clips x {r['frames']} frames, "
            f"{jax.device_count()} device(s), attention xla; median of {sz.steps} steps after "
            f"{sz.warmup}; "
            f"peak: {peak_what} ({peak / 1e12:.3g} TFLOP/s per device).")
    return [head, ""] + table(("dtype", "remat", "step ms", "clips/s", "GFLOP/step", "MFU",
                               "peak MiB/device", "compile s", "input alone, clips/s"), rows)


def section_attention(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    """cuDNN beside the train section's bfloat16 / remat none / xla step."""
    if "xla" not in found:
        return ["not measured: the train section did not finish"]
    rows = [("xla", found["xla"])]
    if jax.default_backend() == "gpu":
        peak, _ = bt.device_peak(sz.matmul)
        rows.append(("cudnn", step_stats(sz, data_dir, peak, dtype="bfloat16",
                                         attention="cudnn")))
    cells = [(impl, f"{r['step_ms']:.1f}", f"{100 * r['mfu']:.1f} %", f"{r['mib']:,.0f}")
             for impl, r in rows]
    if jax.default_backend() != "gpu":
        cells.append(("cudnn", "not available", f"backend {jax.default_backend()!r}: cuDNN "
                      "flash attention needs an NVIDIA GPU", ""))
    return ["bfloat16 paper-row step, remat none, `--config.attention=IMPL`.", ""] + table(
        ("attention", "step ms", "MFU", "peak MiB/device"), cells)


def section_decode(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    from bench import decode as bd

    a = argparse.Namespace(**sz.decode_run)
    size = sz.decode or bd.mcn_size()
    r = bd.run_size("mcn" if sz.decode is None else "smoke", size, a)
    ours, loop = bd.rates(r, a)
    found["decode"] = ours / loop
    return [f"RMN decoder (width {size[0]}, {size[1]} layers, vocab {size[4]} + {size[5]} "
            f"roles), beam {a.beam}, batch {a.batch}, {a.length} tokens, early stop off.", ""
            ] + table(("measure", "value"), [
                ("batched jit beam search", f"{ours:,.0f} tok/s"),
                (f"per-example Python loop ({a.loop_examples} examples)", f"{loop:,.0f} tok/s"),
                ("speedup", f"{ours / loop:.1f}x"),
                ("batched / compute floor (time)", f"{r['t_ours'] / r['t_floor']:.2f}"),
                ("best sequences identical", str(r["same"]))])


def section_dtw(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    from bench import dtw as bdtw

    soft, errors = bdtw.soft_rows(sz.soft_sizes, sz.repeats, references=("ott",))
    drop = bdtw.drop_row(sz.repeats, sz.drop_size)
    rows = [(f"soft-DTW fwd+bwd {r['size']} vs ott-jax", f"{r['ours'] * 1e3:.2f}",
             "not measured" if r["ott"] is None else f"{r['ott'] * 1e3:.2f}",
             "" if r["ott"] is None else f"{r['ott'] / r['ours']:.1f}x",
             "" if r["diff_ott"] is None else f"{r['diff_ott']:.2g}") for r in soft]
    rows.append((f"Drop-DTW {drop['size']} (vs NumPy loop)", f"{drop['ours'] * 1e3:.2f}",
                 f"{drop['loop'] * 1e3:.2f}", f"{drop['loop'] / drop['ours']:.1f}x",
                 f"{drop['diff']:.2g}"))
    ratios = [r["ott"] / r["ours"] for r in soft if r["ott"] is not None]
    if ratios:
        found["dtw"] = min(ratios)
    notes = [f"not measured: {e}; `pip install -r requirements-bench.txt`" for e in errors]
    return table(("what", "ours ms", "reference ms", "reference / ours", "max |diff|"),
                 rows) + ([""] + notes if notes else [])


def section_contrastive(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    from bench import contrastive as bc
    from vnr import sharding

    n = jax.device_count()
    rows = bc.run(sz.contrastive_batch, sz.repeats, sharding.make_mesh((n,), ("data",)))
    return [f"Bidirectional NCE fwd+bwd, B = {sz.contrastive_batch}, mesh ('data',) = {n}.",
            ""] + table(("impl", "time ms", "temp MiB/device", "all-gathered KiB/device"),
                        [(r["impl"], f"{r['ms']:.2f}", f"{r['temp_mib']:.2f}",
                          f"{r['gathered_kib']:.0f}") for r in rows])


def section_extract(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    from bench import extract

    return extract.report_rows(sz is SMOKE)


def section_input(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    if importlib.util.find_spec("bench.input") is None:
        return ["not measured: bench/input.py missing"]
    from bench import input as bench_input

    rows = getattr(bench_input, "report_rows", None)
    if rows is None:
        return ["not measured: bench/input.py has no report_rows(smoke)"]
    return table(("measure", "value"), rows(sz is SMOKE, data_dir))


def section_msymon(sz: Sizes, data_dir: str, found: dict) -> list[str]:
    from bench import msymon

    return table(("measure", "value"), msymon.report_rows(sz is SMOKE, data_dir))


def targets(found: dict) -> list[str]:
    on_target = found.get("kind", "").startswith(TARGET_DEVICE)
    rows = []
    for name, key, goal, fmt in (
            ("bf16 HCMC paper step MFU", "mfu", 0.5, lambda v: f"{100 * v:.1f} %"),
            ("decode batched / per-example loop", "decode", 20.0, lambda v: f"{v:.1f}x"),
            ("soft-DTW ott-jax / ours (smallest ratio)", "dtw", 3.0, lambda v: f"{v:.1f}x")):
        value = found.get(key)
        shown = "not measured" if value is None else fmt(value)
        if not on_target:
            status = f"not measured on this device ({found.get('kind', '?')})"
        elif value is None:
            status = "not measured (see its section)"
        else:
            status = "met" if value >= goal else "not met"
        rows.append((name, f">= {fmt(goal)} on an {TARGET_DEVICE}", shown, status))
    return table(("target", "goal", "measured", "status"), rows)


SECTIONS: dict[str, tuple[str, Callable[[Sizes, str, dict], list[str]]]] = {
    "versions": ("Device and versions", section_versions),
    "train": ("HCMC paper row: train step, float32 vs bfloat16, remat", section_train),
    "attention": ("Attention: xla vs cudnn", section_attention),
    "decode": ("Movie101 decode: batched vs per-example loop", section_decode),
    "dtw": ("soft-DTW / Drop-DTW vs references", section_dtw),
    "contrastive": ("Sharded contrastive loss", section_contrastive),
    "input": ("Input headroom", section_input),
    "extract": ("Extraction rates: device vs host decode", section_extract),
    "msymon": ("M-SYMON Table 3 model: CCLM frame step vs feature model, frame store",
               section_msymon),
}


def report(sz: Sizes, data_dir: str, only: list[str] | None = None,
           say: Callable[[str], None] = print,
           partial: Callable[[str], None] | None = None) -> str:
    """The markdown report of every section (or `only` these, plus versions); each section
    is timed and a failing one is one line. `partial` gets the report so far after each
    section, so a run stopped by a time limit keeps what it measured."""
    found: dict = {}
    command = "python -m bench accelerator" + (" --smoke" if sz is SMOKE else "")
    command += f" --only {','.join(only)}" if only else ""
    out = [f"# Accelerator report{' (smoke sizes)' if sz is SMOKE else ''}", "",
           f"`{command}`", ""]
    for key, (title, fn) in SECTIONS.items():
        if only and key != "versions" and key not in only:
            continue
        say(f"[accelerator] {title} ...")
        t = time.perf_counter()
        try:
            body = fn(sz, data_dir, found)
        except Exception as e:  # noqa: BLE001 - one failing section must not lose the rest
            traceback.print_exc()
            first = (str(e).strip().splitlines() or [""])[0][:300]
            body = [f"failed: {type(e).__name__}: {first}"]
        out += [f"## {title}", "", *body, "", f"_{time.perf_counter() - t:.0f} s_", ""]
        if partial:
            partial("\n".join(out + ["_(report in progress: later sections not run yet)_", ""]))
    return "\n".join(out + ["## Targets", "", *targets(found), ""])


def main(argv: list[str]) -> None:
    try:
        flags.FLAGS(argv)
    except flags.Error as e:
        cli.fail(str(e))
    if not flags.FLAGS.out:
        cli.fail("--out FILE.md is required")
    unknown = sorted(set(flags.FLAGS.only) - set(SECTIONS))
    if unknown:
        cli.fail(f"--only {','.join(unknown)}: choose from {', '.join(SECTIONS)}")
    out = os.path.abspath(flags.FLAGS.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    def write(text: str) -> None:
        with open(out, "w") as f:
            f.write(text)

    text = report(SMOKE if flags.FLAGS.smoke else FULL, flags.FLAGS.data_dir,
                  flags.FLAGS.only, partial=write)
    write(text)
    print(text)
    print(f"[accelerator] report written to {out}")
