"""Orbax checkpoints of the whole training state and the data iterator.

One async `ocp.CheckpointManager` per run under `<workdir>/checkpoints`, keeping the newest
`keep` steps and, when a metric selects the model (`config.select`), the best step by it
(`best_mode` "max" or "min"; saved with the selecting evaluator's metrics at each checkpoint
it evaluates at). Resuming takes the newest.
Each step holds two items:
  state: the model and optimizer `nnx.State` as a pure dict (the optimizer's
         step counter included; a PRNG key a module keeps, as its key data). Dropout
         keys derive from (seed, step), so the step restores the RNG too.
  data:  the grain iterator state, one JSON file per process.
Each item directory also holds `vnr_checksums.json` (`vnr/checksums.py`: every file's size
and SHA-256; Orbax checksums no array chunk), written by the item's handler in `finalize`,
which Orbax runs on process 0 after every process wrote and before the step is committed.

Restoring takes an abstract target with the *current* shardings (any mesh).
`restore_latest` first verifies the step's files against their manifests (sizes on every
process, the hashes split over the processes) and falls back to the previous step when the
newest one differs or cannot be read (bytes changed, a truncated or deleted file), with a
one-line warning naming the step and the file, and moves the bad one aside to
`corrupt-<step>-<unix time>` (the full error in `restore_error.process<i>.txt` inside it) so
it is never picked again; a checkpoint of another model is an `IncompatibleCheckpoint` error
naming the checkpoint and the parameter, never skipped. A step without manifests restores
with a warning that it is unverified. Reading another run (`vnr/run_reader.py`) verifies its
checkpoint too; the step a reader of a finished run takes (`selected`, `best`, `last`, a
number) is `vnr.selection.choose_step`'s, for `vnr.evaluate --step` and `restore_run` alike.

The metrics that select the best step are Orbax's own item `<step>/metrics/metrics`; `save`
also writes them into the data item (`vnr_metrics.json`, in its manifest) and `manager` /
`reader` compare the two before Orbax reads them (`metrics_problem`): the trainer moves a step
whose metrics differ or cannot be read aside (one warning line; the others are selected
from), evaluation stops with one line naming it. Orbax rewrites `<step>/_CHECKPOINT_METADATA`
after the items are final (commit times), so no manifest covers it; its `metrics` are empty
(Orbax reads the item) and an unreadable one is logged by Orbax and ignored.
"""

from __future__ import annotations

import contextlib
import gc
import json
import pathlib
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grain
import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from etils import epath
from flax import nnx

from vnr import checksums, distributed, selection

ITEMS = ("state", "data")
T = TypeVar("T")
METRICS_COPY = "vnr_metrics.json"  # in the data item: the metrics the step was saved with


class IncompatibleCheckpoint(ValueError):
    """The checkpoint holds another model (names the first mismatched parameter)."""


class CorruptCheckpoint(ValueError):
    """A checkpoint's files differ from their manifest, or it cannot be read (one line
    naming it; `gist`: the reading library's error in short, when that was the cause)."""

    def __init__(self, message: str, gist: str | None = None):
        super().__init__(message)
        self.gist = gist


class _Checksummed:
    """Mixin for an Orbax item handler: the item's checksum manifest is written in
    `finalize` (process 0, after every process wrote, before the step is committed)."""

    def finalize(self, directory: epath.Path) -> None:
        super().finalize(directory)
        checksums.write(pathlib.Path(directory))


# Orbax writes a replicated array replica-parallel, each replica a slice: one compiled slice
# per array and replica (120 per save of a smoke model on 8 CPU devices). Only arrays whose
# per-replica slice reaches this size are (Orbax's option).
REPLICA_SLICE_MIN_BYTES = 1 << 20


def _type_handlers() -> Any:
    """Orbax's standard handlers with `REPLICA_SLICE_MIN_BYTES`. Without Orbax's private
    array-metadata store they cannot restore a typed PRNG key: `_keys_out` saves its data."""
    th, scalar = ocp.type_handlers, ocp.type_handlers.ScalarHandler()
    return th.create_type_handler_registry(
        (int, scalar), (float, scalar), (bytes, scalar), (np.number, scalar),
        (np.ndarray, th.NumpyHandler()), (str, th.StringHandler()), (jax.Array, th.ArrayHandler(
            min_slice_bytes_for_replica_parallel=REPLICA_SLICE_MIN_BYTES)))


class _StateHandler(_Checksummed, ocp.PyTreeCheckpointHandler):
    def __init__(self) -> None:
        super().__init__(type_handler_registry=_type_handlers())


class _DataHandler(_Checksummed, grain.checkpoint.CheckpointHandler):
    """grain's iterator state, plus (process 0) the metrics the step is saved with."""

    def save(self, directory: epath.Path, item: Any = None, args: Any = None) -> None:
        super().save(directory, item, args)
        metrics = getattr(item or args.item, "metrics", None)
        if metrics is not None and jax.process_index() == 0:
            (pathlib.Path(directory) / METRICS_COPY).write_text(json.dumps(metrics))


def _args(handler: type, base: type, **direction: bool) -> type:
    """A subclass of the Orbax args type `base` registered with `handler` (Orbax picks an
    item's handler by the type of its args, so our handlers need args of their own)."""
    cls = type(f"_{handler.__name__}{base.__name__}", (base,), {"__module__": __name__})
    return ocp.args.register_with_handler(handler, **direction)(cls)


_StateSave = _args(_StateHandler, ocp.args.PyTreeSave, for_save=True)
_StateRestore = _args(_StateHandler, ocp.args.PyTreeRestore, for_restore=True)
_DataSave = _args(_DataHandler, grain.checkpoint.CheckpointSave, for_save=True)
_DataRestore = _args(_DataHandler, grain.checkpoint.CheckpointRestore, for_restore=True)


class _IteratorState:
    """The iterator state captured now, so an async save cannot see a later one (and the
    metrics the step is saved with, as JSON values)."""

    def __init__(self, iterator: Any, metrics: dict | None = None):
        self._state = json.dumps(iterator.get_state(), indent=2).encode()
        self.metrics = None if metrics is None else json.loads(json.dumps(metrics,
                                                                          default=float))

    def get_state(self) -> bytes:
        return self._state


def manager(directory: str | epath.Path, keep: int = 3, best_metric: str | None = None,
            best_mode: str = "max", warn: Callable[[str], None] = print
            ) -> ocp.CheckpointManager:
    """CheckpointManager for the `state` and `data` items: keeps the newest `keep` steps
    and, with `best_metric`, also the best step by that metric (the selected model). A
    step whose saved metrics differ or cannot be read is moved aside first (`warn`: one
    line naming it)."""
    for step, problem in _metrics_problems(pathlib.Path(directory)):
        _move_aside(pathlib.Path(directory).absolute(), step, "has unusable metrics",
                    f"metrics/metrics, which selects the best step, {problem}", None, warn,
                    "selecting among the other steps")
    policies = [ocp.checkpoint_managers.LatestN(n=keep)]
    best_fn = None
    if best_metric:
        best_fn = lambda m: m[best_metric]  # noqa: E731
        policies.append(ocp.checkpoint_managers.BestN(
            get_metric_fn=best_fn, reverse=best_mode == "min", n=1,
            keep_checkpoints_without_metrics=False))
    options = ocp.CheckpointManagerOptions(
        enable_async_checkpointing=True,
        best_fn=best_fn,
        best_mode=best_mode,
        preservation_policy=ocp.checkpoint_managers.AnyPreservationPolicy(policies),
        create=True,
    )
    return ocp.CheckpointManager(
        epath.Path(directory).absolute(),  # orbax's tensorstore needs absolute paths
        options=options,
        item_handlers={"state": _StateHandler(), "data": _DataHandler()},
    )


def reader(directory: str | epath.Path, best_metric: str | None = None,
           best_mode: str = "max") -> ocp.CheckpointManager:
    """A read-only manager of a run's checkpoints (evaluation): deletes and writes nothing.

    Raises:
      CorruptCheckpoint: a step's saved metrics differ or cannot be read (names it).
    """
    if bad := _metrics_problems(pathlib.Path(directory)):
        step, problem = bad[0]
        raise CorruptCheckpoint(
            f"checkpoint step {step} in {pathlib.Path(directory).absolute()} has unusable "
            f"metrics (metrics/metrics, which selects the best step, {problem}); move that "
            f"step directory aside to evaluate the others")
    options = ocp.CheckpointManagerOptions(
        read_only=True, best_fn=(lambda m: m[best_metric]) if best_metric else None,
        best_mode=best_mode)
    return ocp.CheckpointManager(
        epath.Path(directory).absolute(), options=options,
        item_handlers={"state": _StateHandler(), "data": _DataHandler()})


best = selection.best  # (step, its metrics) of a manager's best checkpoint, or None


def save(mgr: ocp.CheckpointManager, step: int, state: nnx.State, data_iter: Any,
         metrics: dict[str, float] | None = None, force: bool = False) -> bool:
    """Starts an async save of `state` and the iterator position at `step`."""
    return mgr.save(
        step,
        args=ocp.args.Composite(
            state=_StateSave(_keys_out(state.to_pure_dict())),
            data=_DataSave(_IteratorState(data_iter, metrics)),
        ),
        metrics=metrics,
        force=force,
    )


def restore(mgr: ocp.CheckpointManager, step: int, state: nnx.State, shardings: Any,
            data_iter: Any | None, verify: bool = True) -> nnx.State:
    """Restores `step` into the structure of `state`, placed with `shardings`, once its
    files match their checksum manifest (`verify`; a step without one is read with a
    logged warning).

    Args:
      state: a state (or abstract state) of the model being trained; only its
        structure, shapes and dtypes are used.
      shardings: NamedSharding tree matching `state` (the current mesh).
      data_iter: the freshly built training iterator, moved to the saved position.

    Raises (each one line naming the step and the directory):
      IncompatibleCheckpoint: naming the first parameter whose shape or presence differs.
      CorruptCheckpoint: naming the first file that differs, or Orbax's / TensorStore's
        error (its gist, `short`) when the step cannot be read.
    """
    directory = pathlib.Path(mgr.directory)
    where = f"checkpoint step {step} in {directory}"
    try:
        if verify and not verify_step(directory / str(step)):
            logging.warning("checkpoint step %d in %s has no checksums (written before they "
                            "were recorded); restored unverified", step, directory)
    except checksums.Mismatch as e:
        raise CorruptCheckpoint(f"{where}: {e}") from None
    typed = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
        state.to_pure_dict(),
        _pure(shardings),
    )
    target = jax.tree.map(_key_data_target, typed)
    items = {"state": _StateRestore(
        item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target))}
    if data_iter is not None:
        items["data"] = _DataRestore(data_iter)

    def read() -> Any:
        _check_compatible(mgr.item_metadata(step)["state"], typed)
        return mgr.restore(step, args=ocp.args.Composite(**items))

    restored = read_step(where, read)
    out = jax.tree.map(lambda x: x, state)
    nnx.replace_by_pure_dict(out, _keys_in(restored["state"], typed))
    return out


def _is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key)


def _keys_out(tree: Any) -> Any:
    """PRNG key arrays (dropout streams) -> their key data, as they are saved."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def _key_data_target(x: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    """A key leaf's restore target: its key data, sharded as the key (trailing axes whole)."""
    if not _is_key(x):
        return x
    data, sharding = jax.eval_shape(jax.random.key_data, x), x.sharding
    if isinstance(sharding, jax.sharding.NamedSharding):
        sharding = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(
            *sharding.spec, *(None,) * (data.ndim - x.ndim)))
    return jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=sharding)


def _keys_in(restored: Any, typed: Any) -> Any:
    """Restored key data -> key arrays of the target's PRNG implementation."""
    def wrap(x: Any, want: jax.ShapeDtypeStruct) -> Any:
        if not _is_key(want):
            return x
        impl: list = []
        jax.eval_shape(lambda k: impl.append(jax.random.key_impl(k)), want)
        return jax.random.wrap_key_data(x, impl=impl[0])
    return jax.tree.map(wrap, restored, typed)


def _pure(tree: Any) -> Any:
    return nnx.State(tree).to_pure_dict() if not isinstance(tree, nnx.State) \
        else tree.to_pure_dict()


def flat(tree: Any) -> dict[str, Any]:
    """Leaves by dotted path; orbax metadata stringifies integer keys, so we do too."""
    def name(path: tuple) -> str:
        return ".".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))))
                        for k in path)

    return {name(p): v for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _check_compatible(saved: Any, target: Any) -> None:
    """Raises ValueError naming the first mismatched parameter."""
    flat_saved = flat(saved)
    flat_target = flat(target)
    for name, want in flat_target.items():
        if name not in flat_saved:
            raise IncompatibleCheckpoint(
                f"checkpoint has no parameter {name} (model expects {want.shape})")
        have = getattr(flat_saved[name], "shape", None)
        expect = tuple(want.shape)
        if _is_key(want):  # saved as its key data
            expect = jax.eval_shape(jax.random.key_data, want).shape
        if have is not None and tuple(have) != expect:
            raise IncompatibleCheckpoint(
                f"checkpoint parameter {name} has shape {tuple(have)}, model expects "
                f"{expect}"
            )
    extra = sorted(set(flat_saved) - set(flat_target))
    if extra:
        raise IncompatibleCheckpoint(f"checkpoint has parameters the model lacks, e.g. {extra[0]}")


def good_steps(directory: str | pathlib.Path) -> list[int]:
    """Committed checkpoint steps in `directory` (ascending; tmp and corrupt ones excluded)."""
    d = pathlib.Path(directory)
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def restore_latest(mgr: ocp.CheckpointManager, state: nnx.State, shardings: Any,
                   data_iter: Any | None, warn: Callable[[str], None] = print
                   ) -> tuple[int, nnx.State]:
    """Restores the newest intact step; returns (step, state), (0, state) if none.

    A step whose files differ from their checksum manifest or cannot be read (changed
    bytes, a truncated or deleted file, bad metadata) is reported through `warn` in one
    line naming the step and the file, renamed to `corrupt-<step>-<unix time>` by process 0
    (each failing process writes its full error into it), and the previous step is tried.
    All processes agree on each attempt's outcome. Raises `IncompatibleCheckpoint` for a
    checkpoint of another model (not skipped)."""
    directory = pathlib.Path(mgr.directory)
    log: pathlib.Path | None = None  # the last failed step's details file
    for step in sorted(mgr.all_steps(), reverse=True):
        error: Exception | None = None
        found: tuple[int, nnx.State] | None = None
        leftover: list[str] = []  # what Orbax's abandoned reads of a failed step raise
        with unraisable_into(leftover) as failed:
            if log is not None:  # a failed step's reads may still finish: collect again
                failed()
            try:
                verified = verify_step(directory / str(step))
                restored = restore(mgr, step, state, shardings, data_iter, verify=False)
            except IncompatibleCheckpoint:
                raise  # names the step: another model is an error, never skipped
            except CorruptCheckpoint as e:  # orbax/tensorstore errors, wrapped by `restore`
                error = e
            except Exception as e:  # a checksum mismatch
                error = e
            if distributed.all_true(error is None):
                if not verified:
                    warn(f"checkpoint step {step} in {directory} has no checksums (written "
                         "before they were recorded); restored unverified")
                found = step, restored
            else:
                reason = "failed on another process" if error is None else (
                    getattr(error, "gist", None) or short(error))
                log = _move_aside(directory, step, "is unreadable", reason, error, warn) or log
                failed()
                error = None  # its frames hold those reads: collected on leaving the block
        if leftover and log is not None:
            with log.open("a") as f:
                f.write("\nraised while the failed reads were discarded:\n" + "".join(leftover))
        if found is not None:
            return found
        mgr.reload()
    return 0, state


def read_step(where: str, read: Callable[[], T]) -> T:
    """`read()` of a checkpoint step named `where`. An orbax/tensorstore/json error of a
    damaged step becomes one CorruptCheckpoint line (the error's gist, kept as its `gist`);
    its traceback, and what Python could only print while the failed reads are discarded
    (`unraisable_into`), ride on the error's notes instead of pages on stderr. An
    IncompatibleCheckpoint gets `where` in front. Not chained: the cause's frames hold the
    reads, which must be collected inside the hook."""
    leftover: list[str] = []
    error: Exception | None = None
    with unraisable_into(leftover) as failed:
        try:
            return read()
        except IncompatibleCheckpoint as e:
            error = IncompatibleCheckpoint(f"{where}: {e}")
        except Exception as e:
            failed()
            error = CorruptCheckpoint(f"{where} is unreadable: {short(e)}", gist=short(e))
            error.add_note("".join(traceback.format_exception(e)))
    for text in leftover:
        error.add_note("raised while the failed reads were discarded:\n" + text)
    raise error


@contextlib.contextmanager
def unraisable_into(sink: list[str]) -> Iterator[Callable[[], None]]:
    """Exceptions Python can only print (`sys.unraisablehook`: the coroutines of a failed
    Orbax restore that nobody awaited, each a multi-page TensorStore spec) go into `sink`, not
    stderr. Call the function the block is given after a failed read: garbage is then
    collected before the hook is put back, so those arrive inside. A good read leaves none,
    and a full collection with a model and its compiled steps in memory takes ~0.4 s."""
    before, failed = sys.unraisablehook, []
    sys.unraisablehook = lambda u: sink.append("".join(traceback.format_exception(
        u.exc_value)) if u.exc_value is not None else f"{u.err_msg}: {u.object!r}\n")
    try:
        yield lambda: failed.append(True)
    finally:
        if failed:
            gc.collect()
        sys.unraisablehook = before


def _move_aside(directory: pathlib.Path, step: int, what: str, reason: str,
                error: Exception | None, warn: Callable[[str], None],
                then: str = "trying the previous one") -> pathlib.Path | None:
    """One `warn` line (`checkpoint step N in D <what> (<reason>); moved to ..., <then>`),
    then step `step` renamed to `corrupt-<step>-<unix time>` by process 0 (every process
    waits), `error`'s traceback written into it; returns that file (None without `error`)."""
    aside = directory / f"corrupt-{step}-{int(time.time())}"
    log = aside / f"restore_error.process{jax.process_index()}.txt"
    details = f"; details in {log.relative_to(directory)}" if error is not None else ""
    warn(f"checkpoint step {step} in {directory} {what} ({reason}{details}); moved to "
         f"{aside.name}, {then}")
    if jax.process_index() == 0:
        (directory / str(step)).rename(aside)
    distributed.barrier(f"vnr:ckpt_aside_{step}")
    if error is None:
        return None
    log.write_text("".join(traceback.format_exception(error)))
    return log


def _metrics_problems(directory: pathlib.Path) -> list[tuple[int, str]]:
    """(step, what is wrong) for each step of `directory` whose Orbax metrics item differs
    from the metrics it was saved with or cannot be read (all processes agree)."""
    out = []
    for step in good_steps(directory):
        problem = metrics_problem(directory / str(step))
        if not distributed.all_true(problem is None):
            out.append((step, problem or "differs on another process"))
    return out


def metrics_problem(step_dir: pathlib.Path) -> str | None:
    """Why a step's `metrics/metrics` (what Orbax selects by) cannot be trusted, or None:
    unreadable, missing, or other values than its verified copy `data/vnr_metrics.json`
    (a step saved before copies existed is only read)."""
    ours_file, theirs_file = step_dir / "data" / METRICS_COPY, step_dir / "metrics" / "metrics"
    ours = None
    if ours_file.is_file():
        try:
            if checksums.has_manifest(step_dir / "data"):
                checksums.verify(step_dir / "data")
            ours = json.loads(ours_file.read_text())
        except checksums.Mismatch as e:
            return f"cannot be checked: data/{e}"
        except (OSError, ValueError) as e:
            return f"cannot be checked: data/{METRICS_COPY} is unreadable ({short(e)})"
    try:
        theirs = json.loads(theirs_file.read_text())
    except FileNotFoundError:
        return "is missing" if ours is not None else None
    except (OSError, ValueError) as e:  # undecodable bytes and bad JSON are ValueErrors
        return f"is unreadable ({type(e).__name__}: {short(e)})"
    if ours is not None and theirs != ours:
        return f"differs from the metrics the step was saved with (data/{METRICS_COPY})"
    return None


def verify_step(step_dir: pathlib.Path, whole: bool = False) -> bool:
    """Checks each item of `step_dir` against its checksum manifest (every size; this
    process's share of the hashes, or all of them if `whole`); raises checksums.Mismatch
    naming the file. False when the step has no manifest (written before they existed)."""
    part, parts = (0, 1) if whole else (jax.process_index(), jax.process_count())
    found = False
    for item in ITEMS:
        if checksums.has_manifest(step_dir / item):
            try:
                checksums.verify(step_dir / item, part, parts)
            except checksums.Mismatch as e:
                raise checksums.Mismatch(f"{item}/{e}") from None
            found = True
    return found


def short(error: BaseException) -> str:
    """The gist of `error` in one short line (TensorStore appends its whole JSON spec)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    for tail in (" [tensorstore_spec", " [source locations=", " See full TensorStore details"):
        text = text.split(tail, 1)[0]
    return text if len(text) <= 240 else text[:237] + "..."
