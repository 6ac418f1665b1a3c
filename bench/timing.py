"""Shared by the benchmarks: wall-clock timing, and the trainer's ``--config`` flag."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from vnr import cli


def wall_times(fn: Callable[[], object], repeats: int, warmup: int = 1) -> np.ndarray:
    """Seconds per call of `fn()` (outputs awaited) over `repeats` calls after `warmup`."""
    for _ in range(warmup):
        jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return np.asarray(times)


def flag_config(argv: list[str]) -> Any:
    """Parses ``argv`` (the program name first) with absl's global FLAGS plus the trainer's
    ``--config`` (required; the file runs once, its ``--config.key`` overrides checked
    first, as ``python -m vnr.train`` does) and returns that config."""
    from absl import flags

    if "config" not in flags.FLAGS:
        cli.config_flag(flags.FLAGS, "Config file: path.py[:arg] (the trainer's).", lock=True)
    flags.FLAGS([argv[0], *cli.load_config(flags.FLAGS, list(argv[1:]))])
    if flags.FLAGS.config is None:
        cli.fail("--config is required")
    return flags.FLAGS.config
