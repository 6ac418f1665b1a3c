"""Wall-clock timing shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np


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
