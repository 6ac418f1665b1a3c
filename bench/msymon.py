"""M-SYMON's Table 3 model beside the feature-mean model on one host: a training step's clips/s,
and the frame store's input rate (the accelerator report's `msymon` section).

    python -m bench accelerator --only msymon [--smoke]

Both models train `configs/msymon/main.py:individual:en,annotated,paper` on one generated
release (`tfds_builders.msymon.write_synthetic`) whose videos `frames.write_videos` writes
(320 x 180 at 25 frames/s; shots of 1.5 and 3.5 s from its cuts files):

- **§5.1's model** (`cclm`): CCLM-base's towers (Swin-B at 224 px and the 6 XLM-R-large text
  layers), randomly initialised, since a step's time does not depend on the weights (the
  task's `pretrained` hook is bypassed: no checkpoint is read); 8 videos a step, a window of
  32 shots each, 3 frames a shot through the Swin, CCLM's training augmentation on every
  frame (`paper`), layers recomputed in the backward pass (`remat=towers`), the config's
  dtype;
- **the feature-mean model**: per-second 512-d features averaged per clip, the hashed-word text
  encoder, the same batch and window.

Rows: the jitted step's median time (input excluded), clips/s and frames/s (real clips: a
generated video holds 20-40 shots, so some window slots are padding, counted in a row of
their own); the augmentation
alone on one step's frames; the frame store's build (decode + bicubic resize, one process) and
its batches made in this process (`num_workers=0`: one grain worker's work) per second. `smoke`
is tiny towers at 32 px on short videos, for the CPU test that keeps the section running.
"""

from __future__ import annotations

import pathlib
import tempfile
import time

import jax
import numpy as np

from bench import train as bench_train


def _release(root: pathlib.Path, smoke: bool) -> tuple[pathlib.Path, pathlib.Path]:
    """(release with videos and cuts, its word-level tokenizer)."""
    import json

    from tfds_builders.msymon import write_synthetic
    from vnr.benchmarks.msymon import frames

    n = 4 if smoke else 16
    release = write_synthetic(root / "release", seed=0, dim=32 if smoke else 512,
                              languages=("en",), sizes={"train": n, "val": 1, "test": 1,
                                                        "weak": 0})
    frames.write_videos(release, fps=4.0 if smoke else 25.0, width=96 if smoke else 320,
                        height=64 if smoke else 180)
    words = sorted({w.strip(".") for f in (release / "annotations" / "en").glob("*.json")
                    for v in json.loads(f.read_text()).values() for e in v
                    for w in e["text"].split()})
    return release, frames.write_tokenizer(root / "tokenizer", words)


def configs(root: pathlib.Path, smoke: bool):
    """(the §5.1 model's config, the feature-mean model's) on the generated release."""
    from vnr import config as config_lib

    release, tok = _release(root, smoke)
    placeholder = root / "no_weights.th"  # never read (`_step`)
    placeholder.write_bytes(b"")
    # built next to the generated release (a shared --data_dir would hold another run's)
    common = dict(manual_dir=str(release), data_dir=str(root / "tfds"), num_workers=0)
    cclm = config_lib.load("configs/msymon/main.py:individual:en,annotated,paper,cclm")
    cclm.data.update(tokenizer=str(tok), **common)
    cclm.model.cclm_checkpoint = str(placeholder)
    cclm.data.frames.workers = 0
    feats = config_lib.load("configs/msymon/main.py:individual:en,annotated,paper")
    feats.data.update(**common)
    for c in (cclm, feats):
        c.epochs = 0
        c.update(total_steps=10, eval_every=10, ckpt_every=10)
    if smoke:
        cclm.model.swin.update(image_size=32, embed_dim=16, depths=(1, 1), num_heads=(1, 2),
                               window_size=4)
        cclm.model.cclm_text.update(vocab_size=256, hidden_size=32, layers=1, heads=2,
                                    intermediate_size=64, max_positions=42)
        cclm.data.frames.image_size = 32
        cclm.data.frames.pool = 3
        feats.data.dim = 32
        feats.model.update(width=32, embed=32, text_layers=1, heads=2)
        for c in (cclm, feats):
            c.batch_size = jax.device_count()
            c.data.max_clips = 8
    feats.batch_size, feats.data.max_clips = cclm.batch_size, cclm.data.max_clips
    return cclm, feats


def _step(config, steps: int, warmup: int, batches: int) -> dict:
    from unittest import mock

    from vnr.benchmarks.msymon import alignment
    from vnr.train import setup

    # random towers: the task's pretrained hook names no checkpoint, so none is read
    with mock.patch.object(alignment, "pretrained", lambda config: {}):
        s = setup(config, load_pretrained=False)
    input_eps, compile_s, _, step_s, batch = bench_train.timed_steps(config, s, steps, warmup,
                                                                     batches)
    clips = int(np.asarray(jax.device_get(batch["clip_mask"])).sum())
    return dict(step_s=step_s, clips=clips, compile_s=compile_s, input_eps=input_eps,
                batch=batch)


def report_rows(smoke: bool, data_dir: str = "") -> list[tuple[str, str]]:
    """The section's rows (see the module docstring); `data_dir` is unused: the generated
    release is built in a temporary directory."""
    from vnr.benchmarks.msymon import data
    from vnr.ops import randaugment

    steps, warmup, batches = (2, 1, 2) if smoke else (10, 2, 8)
    with tempfile.TemporaryDirectory(prefix="bench_msymon_") as tmp:
        cclm, feats = configs(pathlib.Path(tmp), smoke)
        data.source(data.records_only(cclm.data), cclm.data.train_split)  # built untimed
        t = time.perf_counter()
        src = data.source(cclm.data, cclm.data.train_split)  # builds the frame store
        build_s = time.perf_counter() - t
        stored = sum(r["frames"].shape[0] for r in (src[i] for i in range(len(src))))
        f = _step(cclm, steps, warmup, batches)
        frames = f["batch"]["frames"]
        aug = jax.jit(randaugment.augment)
        flat = frames.reshape(-1, *frames.shape[-3:])
        jax.block_until_ready(aug(jax.random.key(0), flat))
        t = time.perf_counter()
        for k in range(steps):
            jax.block_until_ready(aug(jax.random.key(k + 1), flat))
        aug_s = (time.perf_counter() - t) / steps
        g = _step(feats, steps, warmup, batches)
    per_clip = cclm.data.frames.per_clip
    s, m = cclm.model.swin, cclm.model.cclm_text
    what = (f"Swin {s.embed_dim}x{tuple(s.depths)} at {s.image_size} px + {m.layers} text "
            f"layers of {m.hidden_size}, {cclm.get('dtype', 'float32')}, remat "
            f"{cclm.get('remat', 'none')}")
    window = f"{cclm.batch_size} videos x <= {cclm.data.max_clips} clips"
    rows = [
        (f"§5.1 model ({what}; {window}): step ms, clips/s, frames/s, compile s",
         f"{1e3 * f['step_s']:.1f}, {f['clips'] / f['step_s']:,.1f}, "
         f"{f['clips'] * per_clip / f['step_s']:,.0f}, {f['compile_s']:.1f}"),
        ("real clips / window slots of the timed batch (every slot runs through the Swin)",
         f"{f['clips']} / {cclm.batch_size * cclm.data.max_clips}"),
        (f"feature-mean model ({feats.data.dim}-d features, hashed words; {window}): step ms, "
         "clips/s, compile s",
         f"{1e3 * g['step_s']:.1f}, {g['clips'] / g['step_s']:,.1f}, {g['compile_s']:.1f}"),
        ("§5.1 model / feature-mean model: step time", f"{f['step_s'] / g['step_s']:.1f}x"),
        (f"CCLM augmentation alone ({flat.shape[0]} frames of one step): ms, frames/s",
         f"{1e3 * aug_s:.1f}, {flat.shape[0] / aug_s:,.0f}"),
        (f"frame store build (decode + resize, 1 process): frames/s ({stored} frames)",
         f"{stored / build_s:,.0f}"),
        ("frame store batches, 1 worker: videos/s, clips/s",
         f"{f['input_eps']:,.2f}, {f['input_eps'] * f['clips'] / cclm.batch_size:,.1f}"),
        ("feature-mean batches, 1 worker: videos/s", f"{g['input_eps']:,.2f}"),
    ]
    return rows
