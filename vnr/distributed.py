"""Multi-process start-up, barriers and preemption for the trainer.

`initialize` calls `jax.distributed.initialize` when the run spans several
processes, before any JAX backend exists:

  * explicit: `--coordinator_address host:port --num_processes N --process_id I`
    (or the environment `JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`,
    `JAX_PROCESS_ID`), e.g. several CPU processes on one machine;
  * automatic: on a TPU pod, under SLURM (`srun`, more than one task) or Open MPI
    (`mpirun`, more than one rank), JAX finds the coordinator itself.

`--multihost` chooses: `auto` (default: explicit settings or one of the
cluster environments above with more than one process), `on` (always call
`jax.distributed.initialize()`, e.g. on a TPU pod whose workers are not
visible in the environment), `off`. `--init_timeout` bounds the wait for every
process to join (seconds; JAX aborts the process when it expires);
`--heartbeat_timeout` is how long the coordination
service waits for a silent process before it declares it dead and stops the
others with an error (no run hangs forever on a dead peer). On CPU, cross
process collectives use gloo.

Preemption: `Preemption.reached(step)` is True at the same step on every
process once any of them has received SIGTERM. With several processes it is
JAX's preemption sync point (the coordination service agrees on the step
without a per-step device sync); a single process uses its own SIGTERM flag.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import jax
import numpy as np
from absl import flags

flags.DEFINE_enum("multihost", "auto", ["auto", "on", "off"],
                  "Call jax.distributed.initialize: auto (explicit settings or a SLURM/Open "
                  "MPI/TPU-pod environment with >1 process), on (always), off.")
flags.DEFINE_string("coordinator_address", None,
                    "host:port of process 0's coordinator (env JAX_COORDINATOR_ADDRESS).")
flags.DEFINE_integer("num_processes", None, "Number of processes (env JAX_NUM_PROCESSES).")
flags.DEFINE_integer("process_id", None, "This process's index (env JAX_PROCESS_ID).")
flags.DEFINE_integer("init_timeout", 300,
                     "Seconds to wait for every process to join before failing.")
flags.DEFINE_integer("heartbeat_timeout", 100,
                     "Seconds without a heartbeat after which a process counts as dead and "
                     "the others stop with an error.")

_CLUSTER_SIZE_VARS = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE")


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def cluster_processes() -> int:
    """Process count a SLURM/Open MPI/TPU-pod environment announces (1 if none)."""
    for name in _CLUSTER_SIZE_VARS:
        n = _env_int(name)
        if n is not None:
            return n
    hosts = os.environ.get("TPU_WORKER_HOSTNAMES", "")
    return len([h for h in hosts.split(",") if h]) or 1


def initialize(mode: str = "auto", coordinator_address: str | None = None,
               num_processes: int | None = None, process_id: int | None = None,
               init_timeout: int = 300, heartbeat_timeout: int = 100) -> bool:
    """Joins the other processes of this run; returns True if distributed.

    Must run before anything touches a JAX backend (devices, arrays, jit).

    Raises:
      ValueError: naming the missing or inconsistent setting.
    """
    coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    num_processes = num_processes if num_processes is not None else _env_int("JAX_NUM_PROCESSES")
    process_id = process_id if process_id is not None else _env_int("JAX_PROCESS_ID")
    explicit = [coordinator_address, num_processes, process_id]
    if mode == "off":
        return False
    if mode == "auto" and all(v is None for v in explicit) and cluster_processes() <= 1:
        return False
    if any(v is not None for v in explicit) and cluster_processes() <= 1 and mode == "auto":
        missing = [n for n, v in zip(("--coordinator_address", "--num_processes",
                                      "--process_id"), explicit) if v is None]
        if missing:
            raise ValueError(f"multi-process run without a cluster environment: also set "
                             f"{', '.join(missing)} (or the JAX_* environment variables)")
    if num_processes is not None and process_id is not None \
            and not 0 <= process_id < num_processes:
        raise ValueError(f"--process_id={process_id} must be in [0, --num_processes="
                         f"{num_processes})")
    # Cross-process collectives on CPU (no effect on the TPU/GPU backends).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    print(f"joining {num_processes or 'auto'} processes at {coordinator_address or 'auto'} as "
          f"process {'auto' if process_id is None else process_id} (timeout {init_timeout} s)",
          file=sys.stderr, flush=True)
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address, num_processes=num_processes,
            process_id=process_id, initialization_timeout=init_timeout,
            heartbeat_timeout_seconds=heartbeat_timeout)
    except Exception as e:  # JAX raises XlaRuntimeError/ValueError with long texts
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        pid = "auto" if process_id is None else process_id
        raise RuntimeError(
            f"jax.distributed.initialize failed (coordinator {coordinator_address or 'auto'}, "
            f"{num_processes or 'auto'} processes, id {pid}, timeout {init_timeout} s): "
            f"{first}") from e
    return True


def initialize_from_flags() -> bool:
    f = flags.FLAGS
    return initialize(f.multihost, f.coordinator_address, f.num_processes, f.process_id,
                      f.init_timeout, f.heartbeat_timeout)


def barrier(name: str, timeout: float = 3600) -> None:
    """Waits up to `timeout` s until every process gets here (no-op with one process).

    A coordination-service barrier, not a device collective: slow phases such
    as building the dataset on process 0 do not run into collective timeouts.
    """
    if jax.process_count() > 1:
        from orbax.checkpoint import multihost  # public API over JAX's coordination client

        multihost.get_barrier_sync_fn()(key=name, timeout_ms=int(timeout * 1000))


def all_true(flag: bool) -> bool:
    """True only if `flag` is True on every process (one tiny all-gather when several)."""
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.all(multihost_utils.process_allgather(np.asarray(flag, np.int32))))


class Preemption:
    """SIGTERM -> `reached(step)` True on every process at one agreed step boundary."""

    def __init__(self) -> None:
        self.signalled = False
        self._multi = jax.process_count() > 1  # then jax.distributed is initialized
        self._previous: Any = None
        if not self._multi:  # JAX's coordination service watches SIGTERM itself otherwise
            try:
                self._previous = signal.signal(signal.SIGTERM, self._handle)
            except ValueError:  # not the main thread (e.g. a test runner's worker)
                self._previous = None

    def _handle(self, signum: int, frame: Any) -> None:
        self.signalled = True
        print(f"received signal {signum}: saving a checkpoint at the next step boundary",
              file=sys.stderr, flush=True)

    def reached(self, step: int) -> bool:
        if self._multi:
            from jax.experimental import multihost_utils

            self.signalled = multihost_utils.reached_preemption_sync_point(step)
        return self.signalled

    def close(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
