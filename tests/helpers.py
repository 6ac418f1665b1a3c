"""Helpers shared by the tests: dotted config overrides, a checkpoint's arrays by name, one
run trained once for a test module, and the task modules of the benchmark homes."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp


def override(config: Any, updates: Mapping[str, Any]) -> Any:
    """``config`` with each ``"a.b.c": value`` of ``updates`` set; returns ``config``."""
    for key, value in updates.items():
        node = config
        *parents, leaf = key.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return config


def named_arrays(tree: Any) -> dict[str, np.ndarray]:
    """Leaves by dotted path (orbax keeps list indices as string keys; PRNG keys as data)."""
    key = lambda k: str(getattr(k, "key", getattr(k, "idx", k)))  # noqa: E731
    raw = lambda v: jax.random.key_data(v) if jnp.issubdtype(  # noqa: E731
        getattr(v, "dtype", np.float32), jax.dtypes.prng_key) else v
    return {".".join(map(key, p)): np.asarray(raw(v))
            for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


def params_under(state: Any, under: str) -> dict[str, np.ndarray]:
    """Model parameters below `under` of a trainer's (model, optimizer) state, by local name
    (`under=""`: every model parameter)."""
    from flax import nnx

    head = f"0.{under}." if under else "0."
    return {name.removeprefix(head): np.asarray(v.get_value())
            for name, v in ((".".join(map(str, p)), v) for p, v in nnx.to_flat_state(state))
            if name.startswith(head) and isinstance(v, nnx.Param)}


def checkpoint_arrays(workdir: pathlib.Path, step: int, *, one_device: bool = False
                      ) -> dict[str, np.ndarray]:
    """The arrays of ``workdir``'s checkpoint at ``step`` by name; ``one_device`` restores
    every array onto the first device (the checkpoint may come from another topology)."""
    path = workdir / "checkpoints" / str(step) / "state"
    with ocp.StandardCheckpointer() as ckpt:
        if not one_device:
            return named_arrays(ckpt.restore(path))
        one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=one),
                              ckpt.metadata(path).item_metadata)
        return named_arrays(ckpt.restore(path, target))


def train_once(tmp_path_factory: Any, name: str, make_config: Callable[[str], Any]
               ) -> tuple[str, pathlib.Path]:
    """``(data_dir, workdir)`` of ``make_config(data_dir)`` trained to the end in this process
    on a fresh corpus folder (for a module-scoped reference run)."""
    from vnr import train

    data_dir = str(tmp_path_factory.mktemp("tfds"))
    workdir = tmp_path_factory.mktemp(name)
    train.run(make_config(data_dir), str(workdir))
    return data_dir, workdir


def task_names() -> list[str]:
    """Every task module under vnr/benchmarks ("<benchmark>.<module>"): a file that defines
    every required hook of the task contract (`vnr.task.REQUIRED`) and an evaluation
    (`vnr.task.EVALUATION`), found without importing."""
    from tests import ROOT
    from vnr import task as task_lib

    home = ROOT / "vnr" / "benchmarks"
    found = []
    for path in sorted(home.glob("*/*.py")):
        hooks = set(re.findall(r"^(?:def (\w+)\(|(\w+) = )", path.read_text(), re.M))
        names = {a or b for a, b in hooks}
        if set(task_lib.REQUIRED) <= names and any(set(e) <= names
                                                   for e in task_lib.EVALUATION):
            found.append(".".join(path.relative_to(home).with_suffix("").parts))
    return found
