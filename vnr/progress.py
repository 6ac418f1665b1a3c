"""Training progress for humans and for log files.

On a terminal a tqdm bar; when stderr is a file or a pipe (SLURM, TPU launchers,
`nohup`), or when `config.progress_lines` asks for it, one plain line every
`log_every` steps instead:

    step 1200/20000 (6.0 %) loss 0.412 examples/s 143 ETA 1h52m

Carriage returns never reach a log file. Only the primary process prints.

Long tools (`vnr.cache_features`, M-SYMON's translate and punctuate) say how far they got
every `PROGRESS_SECONDS` with `Every`, and how long each part took with `duration`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

PROGRESS_SECONDS = 30.0  # a long tool says how far it got this often


def duration(seconds: float) -> str:
    """`12.3 s`, `4m05s` or `1h52m`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def say(message: str, stream: TextIO | None = None) -> None:
    """One line on stderr, written so a tqdm bar (if any) stays intact."""
    stream = stream or sys.stderr
    if _BAR[0] is not None:
        _BAR[0].write(message, file=stream)
    else:
        print(message, file=stream, flush=True)


_BAR: list[Any] = [None]  # the bar being drawn, so `say` can print around it


class Every:
    """A long loop's lines: `tick(message)` says `message (time so far)` at most once every
    `PROGRESS_SECONDS`; `took()` is the time since the start, for the loop's last line."""

    def __init__(self, out: Callable[[str], None] = say):
        self.out = out
        self.start = self.shown = time.perf_counter()

    def tick(self, message: str) -> None:
        now = time.perf_counter()
        if now - self.shown >= PROGRESS_SECONDS:
            self.out(f"{message} ({duration(now - self.start)})")
            self.shown = now

    def took(self) -> str:
        return duration(time.perf_counter() - self.start)


class Progress:
    """The loop's progress display: `update()` every step, `log()` at log steps."""

    def __init__(self, config: Any, start: int, active: bool, stream: TextIO | None = None):
        self.total, self.start = config.total_steps, start
        self.stream = stream or sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.lines = active and (not tty or bool(config.get("progress_lines", False)))
        self.bar = None
        if active and tty and config.get("progress", True) and not self.lines:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, initial=start, dynamic_ncols=True, unit="step",
                            file=self.stream)
            _BAR[0] = self.bar
        self._t0: float | None = None  # after the first (compiling) step
        self._n0 = start

    def started(self, step: int) -> None:
        """The first step finished compiling and running: time from here on."""
        self._t0, self._n0 = time.perf_counter(), step

    def update(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def log(self, step: int, logs: dict[str, float]) -> None:
        """The step's line (lines mode) or the bar's postfix."""
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{logs['loss']:.4f}",
                                 ex_s=f"{logs['examples_per_sec']:.1f}")
        if not self.lines:
            return
        eta = ""
        if self._t0 is not None and step > self._n0:
            per_step = (time.perf_counter() - self._t0) / (step - self._n0)
            eta = f" ETA {duration(per_step * (self.total - step))}"
        say(f"step {step}/{self.total} ({100 * step / self.total:.1f} %) loss "
            f"{logs['loss']:.4g} examples/s {logs['examples_per_sec']:.4g}{eta}", self.stream)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            _BAR[0] = None
