"""The trainer's start-up steps besides building the sharded state (`vnr.train.setup`/`run`),
each ending in one `ConfigError` line instead of a traceback: whether `data.data_dir` can hold
a build, the input worker count, the task's split check, opening the training data (process 0
first: it may build the dataset) and loading the pretrained towers the task names."""

from __future__ import annotations

import contextlib
import json
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from flax import nnx

from tfds_builders import DataDirError, ManualDirError, failed_write
from tfds_builders import check_data_dir as check_builder_data_dir
from vnr import distributed, pretrained
from vnr import task as task_lib
from vnr.config import ConfigError
from vnr.data import pipeline


def check_data_dir(data_dir: str) -> None:
    """ConfigError when `data.data_dir` is a file or cannot be created: the builder command's
    rule (`tfds_builders/data_dir.py`), so the first-use build cannot fail after compiling."""
    try:
        check_builder_data_dir(data_dir, "data.data_dir")
    except DataDirError as e:
        raise ConfigError(str(e)) from None


def resolve_workers(config: Any, workdir: pathlib.Path, say: Callable[[str], None]) -> None:
    """`data.num_workers=-1` (auto) becomes a count before config.json is written: the count
    a resumed run started with (grain's iterator state holds one stream per worker, so a
    checkpoint restores only with its own count: config.json keeps it, and a resumption
    with another explicit count is refused as another config), else this host's cores minus
    `pipeline.RESERVED_CORES` (process 0's, so every process of a run uses one count)."""
    data = config.get("data")
    if not data or data.get("num_workers", 0) != -1:
        return
    started = None
    try:
        started = json.loads((workdir / "config.json").read_text())["data"]["num_workers"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # a fresh run (an unreadable config.json is check_workdir's error)
    if isinstance(started, int) and not isinstance(started, bool) and started >= 0:
        n, why = started, "the count this run started with"
    else:
        n = pipeline.suggested_workers()
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils
            n = int(multihost_utils.broadcast_one_to_all(np.int32(n)))
        why = (f"{pipeline.host_cores()} cores minus {pipeline.RESERVED_CORES} for the "
               "training process")
    data.num_workers = n
    say(f"data.num_workers=-1: {n} input worker process(es) ({why})")


def check_splits(task: Any, config: Any) -> None:
    """The task's optional `check_splits` (every configured split exists, evaluators' too),
    a ConfigError line naming the key. It may build the dataset: process 0 checks first,
    the others after a barrier (several processes building one dataset in a shared
    directory race)."""
    check = task_lib.hook(task, "check_splits")
    if check is None:
        return
    primary = jax.process_index() == 0
    with data_errors(config):
        if primary:
            check(config)
        distributed.barrier("vnr:splits_checked")
        if not primary:
            check(config)


def manual_dir_line(config: Any, error: ManualDirError) -> str:
    """The builder's word on a missing or wrong release, led by the key that names it."""
    d = config.get("data") or {}
    given = d.get("manual_dir") or ""
    key = f"data.manual_dir={given!r}" if given else \
        f"data.manual_dir is required for data.config={d.get('config')!r}"
    return f"{key}: {' '.join(str(error).split())}"


@contextlib.contextmanager
def data_errors(config: Any) -> Iterator[None]:
    """Opening or building the dataset: a bad dataset (ValueError, FileNotFoundError) or a
    build that cannot write into `data.data_dir` becomes one ConfigError line; any other
    OSError is raised as it is (not ours to explain). A release the builder needs and does
    not find (its `ManualDirError`, saying what the release must hold) names
    `data.manual_dir`: each builder knows which of its configs read one, so no task
    repeats it."""
    try:
        yield
    except ManualDirError as e:
        raise ConfigError(manual_dir_line(config, e)) from e
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(" ".join(str(e).split())) from e
    except OSError as e:
        data_dir = (config.get("data") or {}).get("data_dir") or None
        line = data_dir and failed_write(e, data_dir, "data.data_dir")
        if not line:
            raise
        raise ConfigError(line) from e


def train_iterator(task: Any, config: Any, local_batch: int) -> Any:
    """This process's training iterator (errors as `data_errors`).

    Several processes building one dataset in a shared directory race, so the others wait
    at a barrier until process 0 built it (through the task's optional
    `prepare_data(config)`, or else by opening its iterator).
    """
    with data_errors(config):
        return _open_train_data(task, config, local_batch)


def _open_train_data(task: Any, config: Any, local_batch: int) -> Any:
    def make() -> Any:
        return iter(task.train_data(config, local_batch, jax.process_index(),
                                    jax.process_count()))

    if jax.process_count() == 1:
        return make()
    primary = jax.process_index() == 0
    if prepare := task_lib.hook(task, "prepare_data"):
        if primary:
            prepare(config)
        distributed.barrier("vnr:data_prepared")
        return make()
    it = make() if primary else None
    distributed.barrier("vnr:data_prepared")
    return it if primary else make()


def load_pretrained(task: Any, config: Any, state: nnx.State, shardings: Any,
                    say: Callable[[str], None], check_only: bool = False) -> nnx.State:
    """The state with the task's pretrained encoders loaded (every process reads the
    slices of its own shards); unchanged when the task names none or `check_only`."""
    try:
        hook = task_lib.hook(task, "pretrained")
        sources = hook(config) if hook is not None else {}
        if not sources:
            return state
        if check_only:
            pretrained.check(state, sources)
            return state
        return pretrained.load(state, shardings, sources, say=say)
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from e

