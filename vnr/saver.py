"""A training run's checkpoints as its loop sees them: one object, four calls.

`restore` (the newest good step, or a fresh start), `maybe_save` after every step (the
config's cadence, the steps whose validation ranks a checkpoint, and SIGTERM: a forced
save on every process, then `Preempted`), `finish` (wait for the last save) and `close`.
A failed save is a warning and training goes on from memory (`save_guarded`); a state
the step reported non-finite is never saved (`check` runs first).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

from flax import nnx

from vnr import checkpoint, distributed, evaluators


class Preempted(Exception):  # noqa: N818 (a normal stop, not an error)
    """SIGTERM: every process saved a checkpoint at `step`; rerun the command to resume."""

    def __init__(self, step: int, directory: pathlib.Path):
        super().__init__(f"preempted: saved step {step} in {directory}; rerun the same "
                         f"command to resume")
        self.step = step


class CheckpointError(RuntimeError):
    """The final checkpoint could not be written (e.g. disk full)."""


class Saver:
    """The checkpoints of the run in `workdir` for `config`, with `data_iter`'s position."""

    def __init__(self, workdir: pathlib.Path, config: Any, data_iter: Any,
                 warn: Callable[[str], None]):
        self.directory = workdir / "checkpoints"
        self.config, self.data_iter, self.warn = config, data_iter, warn
        self.select = config.get("select") or {}
        self.mgr = checkpoint.manager(self.directory, config.keep_ckpts,
                                      self.select.get("metric") or None,
                                      self.select.get("mode", "max"), warn=warn)
        self.saved_at = 0  # the newest step whose save started without error
        self.preemption: distributed.Preemption | None = None

    def restore(self, state: nnx.State, shardings: Any) -> tuple[int, nnx.State]:
        """(newest good step, its state), or (0, `state`) for a fresh run."""
        start, state = checkpoint.restore_latest(self.mgr, state, shardings, self.data_iter,
                                                 warn=self.warn)
        self.saved_at = start
        self.preemption = distributed.Preemption()  # SIGTERM from here on saves and stops
        return start, state

    def maybe_save(self, step: int, state: nnx.State, logged: dict[str, float],
                   selecting: bool, check: Callable[[], None]) -> None:
        """Saves at the config's cadence, the last step and a step whose validation ranks
        checkpoints (`selecting`: only the metrics `logged` at this very step rank it).
        On SIGTERM, saves (if not just done) and raises `Preempted` once every process
        has. `check()` raises if a step since the last check was non-finite."""
        total = self.config.total_steps
        if step % self.config.ckpt_every == 0 or step == total or selecting:
            check()
            ranked = evaluators.ranked(logged, self.select) if selecting else None
            if save_guarded(self.mgr, step, state, self.data_iter, self.warn,
                                       metrics=ranked):
                self.saved_at = step
        if not (self.preemption is not None and self.preemption.reached(step) and step < total):
            return
        check()
        if self.saved_at != step and save_guarded(
                self.mgr, step, state, self.data_iter, self.warn, force=True):
            self.saved_at = step
        if not (wait_guarded(self.mgr, self.warn) and self.saved_at == step):
            raise CheckpointError(f"preempted at step {step} but its checkpoint failed; the "
                                  f"newest good one is step {self.newest_good()}")
        close_guarded(self.mgr, self.warn)
        raise Preempted(step, self.directory)

    def newest_good(self) -> int | str:
        good = checkpoint.good_steps(self.directory)
        return max(good) if good else "none"

    def latest_step(self) -> int | None:
        return self.mgr.latest_step()

    def finish(self) -> bool:
        """Waits for the save in flight; True when the last step's checkpoint is written."""
        return wait_guarded(self.mgr, self.warn) and \
            self.saved_at >= self.config.total_steps

    def selection(self) -> dict[str, Any]:
        """The step the final evaluation reads (`config.select`; `vnr.evaluators`)."""
        return evaluators.selected_step(self.mgr, self.config)

    def load(self, step: int, state: nnx.State, shardings: Any) -> nnx.State:
        return checkpoint.restore(self.mgr, step, state, shardings, None)

    def stop_signals(self) -> None:
        """Gives SIGTERM back to its previous handler (the loop is over)."""
        if self.preemption is not None:
            self.preemption.close()
            self.preemption = None

    def close(self) -> bool:
        """Closes the manager; False if a save failed."""
        self.stop_signals()
        return close_guarded(self.mgr, self.warn)


# ------------------------------------------------ the trainer's saves: failures are warnings

_IN_FLIGHT: dict[int, int] = {}  # id(manager) -> step of the async save in flight


def save_guarded(mgr: Any, step: int, state: nnx.State, data_iter: Any, warn: Callable,
          metrics: dict | None = None, force: bool = False) -> bool:
    """Starts a checkpoint; a failure (disk full, permissions) is a warning, not a crash:
    training goes on from memory and the previous checkpoints stay valid.

    The previous async save is finished first, so its failure is reported as its
    own and does not take this save down with it.
    """
    wait_guarded(mgr, warn)
    for attempt in range(2):
        try:
            checkpoint.save(mgr, step, state, data_iter, metrics=metrics, force=force)
            _IN_FLIGHT[id(mgr)] = step
            return True
        except Exception as e:
            if attempt == 0 and f"/{step}." not in str(e) and f"/{step}/" not in str(e):
                # orbax re-raises an earlier save's background failure (it names that
                # step's directory) at the next save; it is consumed now: retry once.
                warn(f"an earlier checkpoint write failed ({type(e).__name__}: "
                               f"{_first_line(e)})")
                continue
            warn(f"checkpoint at step {step} failed ({type(e).__name__}: "
                           f"{_first_line(e)}); training continues from memory, the previous "
                           f"checkpoints are kept; next attempt at the next checkpoint step")
            return False
    return False


def wait_guarded(mgr: Any, warn: Callable) -> bool:
    """Waits for the async save in flight; False (with a warning) if it failed."""
    step = _IN_FLIGHT.pop(id(mgr), "?")
    try:
        mgr.wait_until_finished()
        return True
    except Exception as e:
        warn(f"checkpoint at step {step} failed while writing in the background "
                       f"({type(e).__name__}: "
                       f"{_first_line(e)}); training continues from memory, the previous "
                       f"checkpoints are kept")
        return False


def close_guarded(mgr: Any, warn: Callable) -> bool:
    """Closes the manager; False (with a warning) if a pending write failed."""
    try:
        mgr.close()
        return True
    except Exception as e:
        warn(f"a checkpoint write failed ({type(e).__name__}: {_first_line(e)})")
        return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
