"""A test evaluator: the MoviePuzzle pairwise metrics plus `calls`, how many times it ran
since `CALLS` was reset. Selecting the minimum of `calls` picks the first evaluated step,
so a test knows which step a run must report."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from vnr import evaluation
from vnr.benchmarks.moviepuzzle import pairwise
from vnr.reports import results as results_lib

CALLS = [0]


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_examples: int = 0, report_dir: pathlib.Path | None = None) -> dict[str, float]:
    CALLS[0] += 1
    metrics = evaluation.evaluate(pairwise, config, split, predict_fn, mesh,
                                  max_examples=max_examples, report_dir=report_dir)
    return {**metrics, "calls": float(CALLS[0])}


def metric_columns(config: Any) -> list[results_lib.Column]:
    return [*pairwise.metric_columns(config), *results_lib.unshown(("calls",))]
