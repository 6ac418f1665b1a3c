"""A test evaluator: the MoviePuzzle pairwise metrics plus `calls`, how many times it ran
since `CALLS` was reset. Selecting the minimum of `calls` picks the first evaluated step,
so a test knows which step a run must report."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from vnr.benchmarks.moviepuzzle import pairwise

CALLS = [0]


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_examples: int = 0, report_dir: pathlib.Path | None = None) -> dict[str, float]:
    CALLS[0] += 1
    metrics = pairwise.evaluate(config, split, predict_fn, mesh, max_examples=max_examples,
                                report_dir=report_dir)
    return {**metrics, "calls": float(CALLS[0])}


def metric_names(config: Any) -> tuple[str, ...]:
    return (*pairwise.metric_names(config), "calls")
