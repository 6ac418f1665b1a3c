"""Device mesh, logical-axis rules and global batches.

One mesh with axes `("data", "model")` (Auto axis types). Parameters carry
logical axis names in their NNX metadata (`out_sharding`, set with
`nnx.with_partitioning(init, ("embed", "mlp"))`); `rules` map each logical
name to a mesh axis or None (replicated), e.g.
`(("mlp", "model"), ("heads", "model"), ("vocab", "model"), ("embed", None))`.
A logical name missing from the rules is replicated. Batches are split along
their leading axis over "data".
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec

Rules = Sequence[tuple[str, str | tuple[str, ...] | None]]


def make_mesh(shape: Sequence[int], axes: Sequence[str] = ("data", "model"),
              devices: Sequence[jax.Device] | None = None) -> jax.sharding.Mesh:
    """Builds the device mesh over `devices` (default: all); one -1 entry takes the rest.

    Raises:
      ValueError: naming `mesh.shape` when it does not divide the device count.
    """
    shape = list(shape)
    n = len(devices) if devices is not None else jax.device_count()
    if len(shape) != len(axes):
        raise ValueError(f"mesh.shape {tuple(shape)} must have one entry per axis {tuple(axes)}")
    if shape.count(-1) > 1:
        raise ValueError(f"mesh.shape {tuple(shape)}: at most one entry may be -1")
    if -1 in shape:
        rest = int(np.prod([s for s in shape if s != -1]))
        if rest <= 0 or n % rest:
            raise ValueError(f"mesh.shape {tuple(shape)} does not divide the {n} devices")
        shape[shape.index(-1)] = n // rest
    if any(s <= 0 for s in shape) or int(np.prod(shape)) != n:
        raise ValueError(
            f"mesh.shape {tuple(shape)} needs {int(np.prod(shape))} devices but there are {n} "
            f"(set mesh.shape so its product is {n}, or use -1 for one axis)"
        )
    return jax.make_mesh(tuple(shape), tuple(axes), axis_types=(AxisType.Auto,) * len(axes),
                         devices=devices)


DEFAULT_RULES: Rules = (("vocab", "model"), ("mlp", "model"), ("heads", "model"))


def logical_to_spec(names: Sequence[str | None] | None, rules: Rules | None = None
                    ) -> PartitionSpec:
    """Maps logical axis names to a PartitionSpec (names without a rule: replicated).

    A rule's target may be one mesh axis, a tuple of axes, or None. A mesh axis
    already used by an earlier dim is not used again (that dim is replicated).
    """
    table = dict(DEFAULT_RULES if rules is None else rules)
    used: set[str] = set()
    out = []
    for name in names or ():
        axis = table.get(name) if name is not None else None
        axes = () if axis is None else (axis,) if isinstance(axis, str) else tuple(axis)
        if not axes or used & set(axes):
            out.append(None)
            continue
        used |= set(axes)
        out.append(axis)
    return PartitionSpec(*out)


def named_sharding(names: Sequence[str | None] | None, shape: Sequence[int],
                   mesh: jax.sharding.Mesh, rules: Rules | None = None) -> NamedSharding:
    """NamedSharding for an array of `shape` with logical `names`.

    A dim whose size its mesh axes do not divide is replicated instead of
    failing (small heads or odd vocabularies on big meshes).
    """
    if names and len(names) != len(shape):
        raise ValueError(f"logical axes {tuple(names)} do not match shape {tuple(shape)}")
    spec = []
    for size, axis in zip(shape, tuple(logical_to_spec(names, rules)) + (None,) * len(shape)):
        axes = () if axis is None else (axis,) if isinstance(axis, str) else tuple(axis)
        n = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
        spec.append(axis if size % n == 0 else None)
    return NamedSharding(mesh, PartitionSpec(*spec))


def var_names(v: nnx.Variable) -> tuple[str | None, ...]:
    """The logical names a Variable was annotated with (() if none)."""
    return tuple(v.get_metadata().get("out_sharding") or ())


def state_shardings(state: Any, mesh: jax.sharding.Mesh, rules: Rules | None = None) -> Any:
    """NamedSharding tree matching an `nnx.State` (of Variables or raw arrays)."""

    def one(x: Any) -> NamedSharding:
        if isinstance(x, nnx.Variable):
            return named_sharding(var_names(x), x.value.shape, mesh, rules)
        return NamedSharding(mesh, PartitionSpec())

    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def batch_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
    """Leading (batch) axis over "data", the rest replicated."""
    return NamedSharding(mesh, PartitionSpec("data"))


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def check_batch_size(global_batch: int, mesh: jax.sharding.Mesh, name: str = "batch_size") -> int:
    """Returns the per-process batch; raises naming `name` if it cannot be split."""
    data = mesh.shape["data"]
    if global_batch % data:
        raise ValueError(
            f"{name}={global_batch} is not divisible by the mesh's data axis ({data} devices)"
        )
    if global_batch % jax.process_count():
        raise ValueError(f"{name}={global_batch} is not divisible by {jax.process_count()} hosts")
    return global_batch // jax.process_count()


def global_batch(local: dict[str, np.ndarray], mesh: jax.sharding.Mesh) -> dict[str, jax.Array]:
    """Assembles per-process host batches into global arrays sharded over "data"."""
    sharding = batch_sharding(mesh)
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local.items()}


_KERNEL_FLAG = "jax_threefry_gpu_kernel_lowering"
_KERNEL_LOCK = threading.RLock()  # the flag is process-wide: one toggler at a time


@contextlib.contextmanager
def kernel_threefry(on: bool = True) -> Iterator[None]:
    """Inside (when `on`): threefry lowers to one GPU kernel per draw (jax's own; same bits).

    For random inits: the default GPU lowering unrolls threefry's rounds into every draw, and
    a model's few hundred draws took XLA about 3 minutes (2 min 57 s) to compile on an H200
    (`launch/results/`). Lower and compile inside (jax reads the flag when lowering). No
    effect on other backends, nor where this jax has no such flag. The kernel has no sharding
    rule, so each device would draw every full parameter: callers turn it on for a program
    of one device only.
    """
    if not on or not hasattr(jax.config, _KERNEL_FLAG):
        yield
        return
    with _KERNEL_LOCK:
        before = getattr(jax.config, _KERNEL_FLAG)
        jax.config.update(_KERNEL_FLAG, True)
        try:
            yield
        finally:
            jax.config.update(_KERNEL_FLAG, before)


def create_sharded(make: Any, mesh: jax.sharding.Mesh, rules: Rules,
                   abstract: bool = False) -> tuple[Any, Any, Any]:
    """Initialises `make()` (an NNX graph node) directly into its shardings.

    One trace: the jitted init derives each parameter's sharding from its logical names
    and `rules` while tracing and constrains it there, so every parameter is written
    straight onto its devices (no full host copy) and the model is traced once, not a
    second time by `nnx.eval_shape` (with `vnr.models.rng.rngs` that trace is linear in
    the model's size; with `nnx.Rngs` and jax 0.10 it is quadratic). When every array is
    replicated (one device, or data parallel), the init runs on one device and is copied to
    the others: the same values (threefry does not depend on the placement), a faster compile
    than the mesh's program (one XLA:CPU init of a smoke model on 8 devices: 0.9-1.4 s of
    2.5-8.8 s), and on GPUs threefry as a kernel (`kernel_threefry`).

    `abstract`: the state's shapes and dtypes only (`jax.ShapeDtypeStruct`s, to restore a
    checkpoint into with the returned shardings): nothing is compiled or allocated.

    Returns:
      (graphdef, state, state_shardings).
    """
    found: dict[str, Any] = {}

    def init() -> Any:
        graphdef, state = nnx.split(make())
        found["graphdef"], found["shardings"] = graphdef, state_shardings(state, mesh, rules)
        found["whole"] = fully_replicated(found["shardings"])
        if found["whole"]:
            return state  # one device's program (compiles faster), then copied to each
        return jax.lax.with_sharding_constraint(state, found["shardings"])

    with nnx.use_eager_sharding(False):
        if abstract:
            shapes = jax.eval_shape(init)
            return found["graphdef"], shapes, found["shardings"]
        traced = jax.jit(init).trace()
    state = run_init(traced, found["whole"], found["shardings"])
    return found["graphdef"], state, found["shardings"]


def fully_replicated(shardings: Any) -> bool:
    """Whether every sharding in the tree puts the whole array on each of its devices."""
    return all(s.is_fully_replicated for s in jax.tree.leaves(shardings))


def run_init(traced: jax.stages.Traced, whole: bool, shardings: Any, *args: Any) -> Any:
    """Lowers, compiles and runs a traced random init, then places its output on `shardings`.

    `whole` (every output replicated, traced without output shardings): it is one device's
    program, so threefry lowers as the GPU kernel (`kernel_threefry`; jax reads the flag when
    lowering), and the result is copied onto each device. Otherwise the traced program
    already writes each shard, and the default lowering keeps threefry's sharding rule.
    """
    with kernel_threefry(whole):
        out = traced.lower().compile()(*args)
    # The same placement, under the exact shardings (XLA may name P("model", None) P("model")).
    return jax.device_put(out, shardings)
