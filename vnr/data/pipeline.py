"""Shared grain plumbing: from a batched `MapDataset` to a (multi-process) `IterDataset`.

Worker processes (`num_workers > 0`, grain 0.2.18 `mp_prefetch`) and two grain
behaviours this module works around:

* Order: `mp_prefetch` gives worker i the elements i, i + W, i + 2W, ... and
  interleaves the workers round-robin, so the stream (and a restored one) is the
  same as with `num_workers=0`, element for element (tests/trainer/test_workers.py).
* Shared memory: a worker copies each batch's arrays into POSIX shared memory
  (`/dev/shm`, registered with multiprocessing's resource tracker); the main
  process maps them without a copy and grain unlinks a block only when its array
  is deleted, on a daemon thread pool. Arrays still referenced when the interpreter
  shuts down (a batch held by a caller, or by an iterator never closed, which keeps
  its last batches in reference cycles until the garbage collector runs) are
  deleted after that pool has stopped, so they are never unlinked and the tracker
  prints "There appear to be N leaked shared_memory objects to clean up at
  shutdown" (it unlinks them itself: the warning, not memory, was the leak).
  `_own_shared_memory` unlinks each block's name as soon as the batch reaches this
  process: the mapping stays valid (POSIX), the memory is freed when the arrays
  are, and nothing is left for the tracker to report.
* Flags: grain reads `--grain_enable_multiprocess_worker_profiling` through
  `absl.flags.FLAGS` when a worker starts, which raises `UnparsedFlagAccessError`
  unless absl parsed the command line (`python -m vnr.train` does; pytest, notebooks
  and scripts calling `vnr.train.run` do not). `_readable_grain_flags` makes that
  one flag read its default instead.
* Orphans: a worker outlives a trainer killed with `kill -9` (the kernel kills neither
  children nor daemon processes); `_exit_with_parent` makes each worker end itself within
  `PARENT_POLL_S` of its parent's death, and the resource tracker then exits and unlinks
  what they left in shared memory.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import mmap
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import grain
import numpy as np
from absl import flags
from grain.multiprocessing import SharedMemoryArray

# grain's default ReadOptions prefetch 500 elements per reader. Our elements are
# whole batches (a MoviePuzzle batch of 32 clips is ~8 MB), so the default kept
# ~4 GB per worker process in flight; a few batches per worker keep the step fed.
PREFETCH_BATCHES = 8
# Read by grain in the main process when a worker starts (grain/_src/core/profiler.py).
_MAIN_PROCESS_GRAIN_FLAGS = ("grain_enable_multiprocess_worker_profiling",)


# Cores a host keeps for the training process itself (the main loop that receives batches
# and feeds the devices, and the device runtime's threads): the rest can be input workers.
RESERVED_CORES = 2
PARENT_POLL_S = 1.0  # how often a worker checks that its trainer is still there


def host_cores() -> int:
    """The cores this process may use (its CPU affinity, e.g. a SLURM allocation)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def suggested_workers() -> int:
    """The worker count `data.num_workers=-1` (auto) stands for: this host's cores minus
    `RESERVED_CORES` (at least 1). The trainer turns -1 into this count before it writes
    config.json and keeps it on resume (`vnr.startup.resolve_workers`): grain's iterator
    state depends on the worker count."""
    return max(host_cores() - RESERVED_CORES, 1)


def to_iter(ds: grain.MapDataset, num_workers: int,
            prefetch: int = PREFETCH_BATCHES) -> grain.IterDataset:
    """`ds` (elements are batches) read with a bounded prefetch, in `num_workers`
    spawned processes when > 0 (0: in this process, e.g. tests and debugging; -1:
    `suggested_workers()`, e.g. an evaluation stream, whose state is never saved).

    With workers, close the iterator when done (`it.close()`): that stops the
    worker processes; an unclosed one keeps them until it is garbage-collected.
    """
    it = ds.to_iter_dataset(grain.ReadOptions(num_threads=prefetch, prefetch_buffer_size=prefetch))
    if num_workers < 0:
        num_workers = suggested_workers()
    if num_workers > 0:
        _readable_grain_flags()
        it = it.mp_prefetch(grain.MultiprocessingOptions(num_workers=num_workers),
                            worker_init_fn=functools.partial(_exit_with_parent, os.getpid()))
        return it.map(_own_shared_memory)
    return it


def _exit_with_parent(parent: int, worker_index: int, worker_count: int) -> None:
    """grain worker start: a thread that ends this worker once `parent`, the process that
    started it, is gone. Workers are not killed with a `kill -9`ed trainer (nor is a daemon
    process), and would otherwise run on, orphaned, holding memory and shared memory."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="vnr-parent-watch", daemon=True).start()


def _readable_grain_flags() -> None:
    """Lets grain read its main-process flags at their defaults without parsed flags."""
    if flags.FLAGS.is_parsed():
        return
    for name in _MAIN_PROCESS_GRAIN_FLAGS:
        if name in flags.FLAGS and not flags.FLAGS[name].present:
            # absl lets a flag marked present be read before parsing; a later
            # app.run still parses the command line (and may set it) as usual.
            flags.FLAGS[name].present = 1


def _own_shared_memory(batch: Any) -> Any:
    """Unlinks the shared-memory names of `batch`'s arrays (see the module docstring);
    the arrays stay valid and unchanged. Other leaves pass through."""
    if isinstance(batch, dict):
        return {k: _own_shared_memory(v) for k, v in batch.items()}
    if isinstance(batch, list | tuple):
        return type(batch)(_own_shared_memory(v) for v in batch)
    # grain 0.2.18 marks a received block `_unlink_on_del` (no public reader of the flag); a
    # grain without that attribute keeps its own clean-up (at worst the tracker's warning).
    if (isinstance(batch, SharedMemoryArray) and isinstance(batch.base, mmap.mmap)
            and getattr(batch, "_unlink_on_del", False) is True):
        batch.shm.unlink()  # also unregisters it from the resource tracker
        batch._unlink_on_del = False  # its deletion now only unmaps
    return batch


def pad_batch(batch: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """Pads a short eval batch to `size` rows: zeros (so every mask / valid flag is False)
    and "" in object (text) columns. Every task pads its last eval batch with this."""
    have = len(next(iter(batch.values())))
    if have == size:
        return batch
    out = {}
    for k, v in batch.items():
        fill = np.zeros((size - have, *v.shape[1:]), v.dtype)
        if v.dtype == object:
            fill[...] = ""
        out[k] = np.concatenate([v, fill])
    return out


Transform = grain.transforms.Map | grain.transforms.RandomMap


def transformed(ds: grain.MapDataset, transforms: Sequence[Transform]) -> grain.MapDataset:
    """`ds` with each of `transforms` applied in order (a `RandomMap` draws from the
    dataset's seed and the element's index)."""
    for t in transforms:
        ds = ds.random_map(t) if isinstance(t, grain.transforms.RandomMap) else ds.map(t)
    return ds


def train_stream(source: Any, transforms: Sequence[Transform], local_batch: int, seed: int,
                 process_index: int = 0, process_count: int = 1,
                 num_workers: int = 0) -> grain.IterDataset:
    """The training input of every task: `source` reshuffled every epoch, endless,
    `transforms` per example, batches of `local_batch`. Process p takes the p-th block of
    every global batch, so a global batch (content, row order, random draws) is the same
    whatever the number of processes."""
    ds = grain.MapDataset.source(source).seed(seed).shuffle().repeat(None)
    ds = transformed(ds, transforms).batch(local_batch, drop_remainder=True)
    return to_iter(ds[process_index::process_count], num_workers)


def require_supervision(source: Any, supervised: Callable[[Any], bool], what: str,
                        lacks: str) -> None:
    """Refuses, in one line, a training split in which no record is `supervised`: its loss
    would be 0 at every step and its metrics NaN. Stops at the first supervised record (the
    first, in a real split), so it costs one read; an empty split says so too."""
    n = len(source)
    if not any(supervised(source[i]) for i in range(n)):
        raise ValueError(f"{what}: none of its {n} records {lacks}, so there is nothing to "
                         "train on (check the annotations the dataset was built from)")


@dataclasses.dataclass
class EvalStream:
    """One pass over an evaluation split for this process: host batches of `local_batch`
    rows (the last may be short; `vnr.evaluation.predict_split` pads it), `n_batches`
    the same on every process, `examples` in the split (after any cap). `host_columns`:
    the text columns the evaluation gathers from every process beside the outputs. `info`:
    what the metrics need to know of the split beyond its rows (the same on every process),
    handed on as `SplitOutputs.info`."""

    batches: Iterable[dict]
    n_batches: int
    local_batch: int
    examples: int
    host_columns: tuple[str, ...] = ()
    info: Any = None

    def __iter__(self) -> Iterator[dict]:
        return iter(self.batches)


def eval_stream(source: Any, transforms: Sequence[Transform], global_batch: int, *,
                seed: int = 0, max_examples: int = 0, num_workers: int = 0,
                process_index: int | None = None,
                process_count: int | None = None) -> EvalStream:
    """The evaluation input of every task: the first `max_examples` of `source` (0: all)
    in order, `transforms` per example (random ones seeded by `seed`, so every evaluation
    sees the same draws), split round-robin over processes (default: this JAX process of
    all of them) in batches of `global_batch // process_count`."""
    import jax

    pi = jax.process_index() if process_index is None else process_index
    pc = jax.process_count() if process_count is None else process_count
    ds = grain.MapDataset.source(source)
    if max_examples:
        ds = ds[:max_examples]
    n, local = len(ds), global_batch // pc
    ds = transformed(ds.seed(seed), transforms)[pi::pc].batch(local, drop_remainder=False)
    return EvalStream(to_iter(ds, num_workers), eval_batch_count(n, pc, local), local, n)


def eval_batch_count(n: int, process_count: int, local_batch: int) -> int:
    """Eval batches every process runs for `n` examples split round-robin over processes:
    the largest shard in `local_batch` rows (a process whose shard ends first pads)."""
    largest_shard = -(-n // process_count)
    return -(-largest_shard // local_batch)


def resolve_epochs(config: Any, count: Callable[[], int], what: str, barrier: str
                   ) -> int | None:
    """`config.epochs` > 0 (a paper's epoch count): total_steps = ceil(epochs x `count()` /
    batch_size), and with `warmup_epochs` > 0 warmup_steps the same way, on whatever corpus
    the run reads; returns the steps (None: `epochs` is 0 and the step counts stand).
    `count` (the items of the built train split, named `what` in errors) runs on process 0
    first, which may build the dataset; the others wait at `barrier`, then count. A count
    shorter than the validation cadence of a selecting run is one ValueError line."""
    epochs = config.get("epochs", 0)
    if not epochs:
        return None
    import jax

    from vnr import distributed

    n = count() if jax.process_index() == 0 else 0
    if jax.process_count() > 1:
        distributed.barrier(barrier)
        n = n or count()
    steps = math.ceil(epochs * n / config.batch_size)
    val = (config.get("evals") or {}).get("val") or {}
    if (config.get("select") or {}).get("metric") and val.get("every", 0) > steps:
        raise ValueError(f"epochs={epochs} of {n} {what} at batch {config.batch_size} is "
                         f"{steps} steps, fewer than evals.val.every={val['every']}: set "
                         f"--config.eval_every to at most {steps}")
    config.total_steps = steps
    if warmup := config.get("warmup_epochs", 0):
        config.warmup_steps = math.ceil(warmup * n / config.batch_size)
    return steps
