"""The trainer's start-up steps besides building the sharded state (`vnr.train.setup`/`run`),
each ending in one `ConfigError` line instead of a traceback: whether `data.data_dir` can hold
a build, the task's split check, opening the training data (process 0 first: it may build the
dataset) and loading the pretrained towers the task names."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
from flax import nnx

from tfds_builders import DataDirError, failed_write
from tfds_builders import check_data_dir as check_builder_data_dir
from vnr import distributed, pretrained
from vnr import task as task_lib
from vnr.workdir import ConfigError


def check_data_dir(data_dir: str) -> None:
    """ConfigError when `data.data_dir` is a file or cannot be created: the builder command's
    rule (`tfds_builders/data_dir.py`), so the first-use build cannot fail after compiling."""
    try:
        check_builder_data_dir(data_dir, "data.data_dir")
    except DataDirError as e:
        raise ConfigError(str(e)) from None


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


@contextlib.contextmanager
def data_errors(config: Any) -> Iterator[None]:
    """Opening or building the dataset: a bad dataset (ValueError, FileNotFoundError) or a
    build that cannot write into `data.data_dir` becomes one ConfigError line; any other
    OSError is raised as it is (not ours to explain)."""
    try:
        yield
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

