"""A training run's checkpoints as its loop sees them: one object, four calls.

`restore` (the newest good step, or a fresh start), `maybe_save` after every step (the
config's cadence, the steps whose validation ranks a checkpoint, and SIGTERM: a forced
save on every process, then `Preempted`), `finish` (wait for the last save) and `close`.
A failed save is a warning and training goes on from memory (`vnr.checkpoint`); a state
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
            if checkpoint.save_guarded(self.mgr, step, state, self.data_iter, self.warn,
                                       metrics=ranked):
                self.saved_at = step
        if not (self.preemption is not None and self.preemption.reached(step) and step < total):
            return
        check()
        if self.saved_at != step and checkpoint.save_guarded(
                self.mgr, step, state, self.data_iter, self.warn, force=True):
            self.saved_at = step
        if not (checkpoint.wait_guarded(self.mgr, self.warn) and self.saved_at == step):
            raise CheckpointError(f"preempted at step {step} but its checkpoint failed; the "
                                  f"newest good one is step {self.newest_good()}")
        checkpoint.close_guarded(self.mgr, self.warn)
        raise Preempted(step, self.directory)

    def newest_good(self) -> int | str:
        good = checkpoint.good_steps(self.directory)
        return max(good) if good else "none"

    def latest_step(self) -> int | None:
        return self.mgr.latest_step()

    def finish(self) -> bool:
        """Waits for the save in flight; True when the last step's checkpoint is written."""
        return checkpoint.wait_guarded(self.mgr, self.warn) and \
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
        return checkpoint.close_guarded(self.mgr, self.warn)
