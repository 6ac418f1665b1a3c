"""A profiler window over training steps: `config.profile.start_step` / `num_steps`.

Steps `start_step .. start_step + num_steps - 1` are traced with `jax.profiler` into
`<workdir>/profile/plugins/profile/<run>/`: `*.xplane.pb` (TensorBoard's profile plugin)
and `perfetto_trace.json.gz` (ui.perfetto.dev), each step annotated as `train` with its
number. Off by default (`num_steps = 0`). Start after the
first step so compilation stays out of the trace. A run resumed at or past `start_step`
traces nothing (the window is not moved onto later steps: their trace would not be the one
asked for) and `skipped` says so in one line.
"""

from __future__ import annotations

import contextlib
import pathlib
from typing import Any

import jax


def window(config: Any) -> tuple[int, int]:
    """(start_step, num_steps) of the config; (0, 0) when off."""
    p = config.get("profile") or {}
    return int(p.get("start_step", 0)), int(p.get("num_steps", 0))


def check(config: Any) -> None:
    """ValueError (one line) for a window that cannot be traced in this run."""
    start, num = window(config)
    if num == 0:
        return
    if num < 0 or start < 1:
        raise ValueError(f"profile.start_step={start}, profile.num_steps={num}: need "
                         f"start_step >= 1 and num_steps >= 0")
    if start + num - 1 > config.total_steps:
        raise ValueError(f"profile window steps {start}..{start + num - 1} ends past "
                         f"total_steps={config.total_steps}")


class Profiler:
    """Starts and stops the trace around the window; `step(n)` annotates step n."""

    def __init__(self, config: Any, workdir: pathlib.Path, first_step: int = 1):
        """`first_step`: the first step this run trains (a resumed run's is past 1)."""
        self.start, self.num = window(config)
        self.directory = workdir / "profile"
        if jax.process_count() > 1:
            self.directory = self.directory / f"process_{jax.process_index()}"
        self.active = False
        self.skipped: str | None = None  # one line when a resumed run passed the window
        if self.num and first_step > self.start:
            self.skipped = (f"profile window steps {self.start}..{self.start + self.num - 1} "
                            f"skipped: this run resumed at step {first_step}, after its start "
                            f"(to trace this run, set profile.start_step >= {first_step + 1})")
            self.num = 0

    def step(self, step: int) -> contextlib.AbstractContextManager:
        """The context the step runs in: starts the trace at the window's first step."""
        if self.num and step == self.start:
            self.directory.mkdir(parents=True, exist_ok=True)
            # the xplane.pb for TensorBoard's profile plugin, and a Perfetto JSON trace
            # (ui.perfetto.dev opens it without TensorBoard)
            jax.profiler.start_trace(str(self.directory), create_perfetto_trace=True)
            self.active = True
        if self.active:
            return jax.profiler.StepTraceAnnotation("train", step_num=step)
        return contextlib.nullcontext()

    def after(self, step: int, outputs: Any) -> None:
        """Stops the trace after the window's last step (once its work has finished)."""
        if self.active and step >= self.start + self.num - 1:
            jax.block_until_ready(outputs)
            self.stop()

    def stop(self) -> None:
        if self.active:
            jax.profiler.stop_trace()
            self.active = False
