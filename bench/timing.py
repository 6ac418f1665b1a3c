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
    """Parses ``argv`` with the trainer's flags and returns ``--config`` (required), after the
    trainer's check of ``--config.key`` overrides."""
    from absl import flags

    from vnr.train import check_overrides, define_flags

    define_flags()
    check_overrides(argv)
    flags.FLAGS(argv)
    if flags.FLAGS.config is None:
        cli.fail("--config is required")
    return flags.FLAGS.config
