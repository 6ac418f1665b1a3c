"""Shared grain plumbing: from a batched `MapDataset` to a (multi-process) `IterDataset`."""

from __future__ import annotations

import grain

# grain's default ReadOptions prefetch 500 elements per reader. Our elements are
# whole batches (a MoviePuzzle batch of 32 clips is ~8 MB), so the default kept
# ~4 GB per worker process in flight; a few batches per worker keep the step fed.
PREFETCH_BATCHES = 8


def to_iter(ds: grain.MapDataset, num_workers: int,
            prefetch: int = PREFETCH_BATCHES) -> grain.IterDataset:
    """`ds` (elements are batches) read with a bounded prefetch, in `num_workers`
    spawned processes when > 0 (0: in this process, e.g. tests and debugging)."""
    it = ds.to_iter_dataset(grain.ReadOptions(num_threads=prefetch, prefetch_buffer_size=prefetch))
    if num_workers > 0:
        return it.mp_prefetch(grain.MultiprocessingOptions(num_workers=num_workers))
    return it
