"""The lines a dataset build prints, readable in a log file (no carriage returns).

A build (the trainer's first use or `python -m tfds_builders build`) prints plain lines on
stderr: one when it starts, one per split with its examples and time, one every
`PROGRESS_SECONDS` on a long build (reading the inputs, examples so far, writing a split),
and one at the end:

    building moviepuzzle/synthetic_tiny into data/tfds/moviepuzzle/...
      train: 40 examples in 0.4 s
      ...
    built moviepuzzle/synthetic_tiny: 68 examples in 4 splits in 1.3 s

TFDS's own progress bars and its "Downloading and preparing dataset Unknown size" banner
are turned off: they write carriage returns and sizes TFDS does not know. Builders do not
import vnr, so this is not `vnr/progress.py`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds

PROGRESS_SECONDS = 30.0  # a split still being generated says how far it got this often
INFO_FILE = "dataset_info.json"  # what TFDS writes last: a built dataset has it


_SAYING = threading.Lock()  # the background thread's lines never split another's


def say(message: str) -> None:
    """One line of a build on stderr (builders do not import vnr's `progress.say`)."""
    with _SAYING:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def took(seconds: float) -> str:
    """`0.04 s`, `4.2 s` under a minute, else `3m07s` or `1h05m`."""
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"
    minutes = int(seconds) // 60
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else \
        f"{minutes}m{int(seconds) % 60:02d}s"


class BuildLines:
    """The lines of one build: its start, one per split (examples and time, printed once
    the split is written: TFDS writes a split before it starts the next), progress every
    `PROGRESS_SECONDS` (examples so far while a split is generated; from a background
    thread while the builder reads its inputs or TFDS writes a split), and the total."""

    def __init__(self, name: str, where: str):
        self.name, self.where = name, where
        self.t0: float | None = None
        self.total = 0
        self.splits = 0
        self.current: list[Any] | None = None  # [split, examples, start, generated]
        self._stop = threading.Event()

    def counted(self, split_generators: Callable[..., dict[str, Iterable]]
                ) -> Callable[..., dict[str, Iterator]]:
        """The builder's `_split_generators`, its {split: examples} counted and timed (from
        the call on: reading the inputs is part of the build)."""

        @functools.wraps(split_generators)
        def counting(*args: Any, **kwargs: Any) -> dict[str, Iterator]:
            self.t0 = time.perf_counter()
            say(f"building {self.name} into {self.where}")
            threading.Thread(target=self._beat, daemon=True, name="build lines").start()
            return {split: self._examples(split, examples) for split, examples in
                    split_generators(*args, **kwargs).items()}

        return counting

    def _examples(self, split: str, examples: Iterable) -> Iterator:
        self._close()  # TFDS starts this split once the last one is written
        start = shown = time.perf_counter()
        self.current = [split, 0, start, False]
        for example in examples:
            yield example
            self.current[1] += 1
            if (now := time.perf_counter()) - shown >= PROGRESS_SECONDS:
                say(f"  {split}: {self.current[1]} examples so far ({took(now - start)})")
                shown = now
        self.current[3] = True  # generated: TFDS shuffles and writes them now

    def _beat(self) -> None:
        """Progress outside the examples' loop: reading the inputs, writing a split."""
        while not self._stop.wait(max(PROGRESS_SECONDS, 0.01)):
            current, now = self.current, time.perf_counter()
            if current is None:
                say(f"  {self.name}: preparing its inputs ({took(now - self.t0)})")
            elif current[3]:
                say(f"  {current[0]}: writing {current[1]} examples ({took(now - current[2])})")

    def _close(self) -> None:
        if self.current is not None:
            split, n, start, _ = self.current
            say(f"  {split}: {n} examples in {took(time.perf_counter() - start)}")
            self.total, self.splits, self.current = self.total + n, self.splits + 1, None

    def stop(self) -> None:
        """Ends the background lines (the build finished or failed)."""
        self._stop.set()

    def done(self) -> None:
        """The last split's line and the total (nothing when nothing was generated)."""
        self.stop()
        self._close()
        if self.t0 is not None:
            say(f"built {self.name}: {self.total} examples in {self.splits} splits in "
                f"{took(time.perf_counter() - self.t0)}")


_BANNER = re.compile(r"^(Downloading and preparing dataset |Dataset \S+ downloaded and "
                     r"prepared to )")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class _WithoutBanner(io.TextIOBase):
    """Standard output minus TFDS's two banner lines (it prints them; no switch turns them
    off), every other line passed on whole."""

    def __init__(self, out: Any):
        super().__init__()
        self.out, self.pending = out, ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            if not _BANNER.match(_COLOUR.sub("", line)):
                self.out.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending and not _BANNER.match(_COLOUR.sub("", self.pending)):
            self.out.write(self.pending)
        self.pending = ""
        self.out.flush()


@contextlib.contextmanager
def quiet_tfds() -> Iterator[None]:
    """TFDS without its progress bars (carriage returns in a log file; turned off for good:
    this process's builds print their own lines) and without its banner."""
    tfds.disable_progress_bar()
    banner_free = _WithoutBanner(sys.stdout)
    try:
        with contextlib.redirect_stdout(banner_free):
            yield
    finally:
        banner_free.flush()


@contextlib.contextmanager
def build_lines(builder: Any) -> Iterator[None]:
    """Around `builder`'s TFDS `download_and_prepare`: TFDS quiet, and the build's lines
    (nothing when the dataset is reused)."""
    config = getattr(builder.builder_config, "name", None)
    lines = BuildLines(f"{builder.name}/{config}" if config else builder.name,
                       os.fspath(builder.data_dir))
    generators = builder._split_generators  # noqa: SLF001 (TFDS's builder API)
    # Each split generator counted: an instance attribute shadows the builder's method for
    # this build only (TFDS calls `self._split_generators(dl_manager)`).
    builder._split_generators = lines.counted(generators)  # noqa: SLF001
    try:
        with quiet_tfds():
            yield
    finally:
        lines.stop()
        del builder._split_generators  # noqa: SLF001
    lines.done()


def is_built(builder: Any) -> bool:
    """Whether `builder`'s dataset is built (TFDS's `is_prepared`, which warns "Variant
    folder ... has no dataset_info.json" on a first build: asked only when there is one)."""
    return os.path.isfile(os.path.join(os.fspath(builder.data_dir), INFO_FILE)) and \
        builder.is_prepared()

