"""The vnr trainer: one loop for every task.

    python -m vnr.train --config configs/<benchmark>/<name>.py[:arg] --workdir DIR \\
        [--config.key=value ...]

The task named by `config.task` ("<benchmark>.<module>") is imported as
`vnr.benchmarks.<benchmark>.<module>` and supplies the hooks of the task contract
(`vnr/task.py`: `make_model`, `train_data`, `loss_fn`, `predict`, `evaluate` and the optional
ones). Everything else lives here, in order: validate the config, build the mesh, create
the sharded model and optimizer, restore the latest checkpoint if any (else load the
pretrained encoders the task names through its optional `pretrained(config)`, see
`vnr/pretrained.py`; `config.frozen` lists parameters kept fixed), loop (jit-compiled step
with donated state, progress, logs, the evaluators `config.evals` declares at their
cadence, checkpoints, an optional profiler window), then select the step
(`config.select`: the best by a validation metric, else the last), restore it and run the
final evaluators into `<workdir>/results.json`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import flags, logging
from flax import nnx
from ml_collections import config_flags

from vnr import (
    checkpoint,
    cli,
    distributed,
    evaluators,
    feature_cache,
    pretrained,
    profiling,
    sharding,
)
from vnr import progress as progress_lib
from vnr import task as task_lib
from vnr import workdir as workdir_lib
from vnr.config_checks import check as check_config
from vnr.config_file import check_overrides  # noqa: F401 (vnr.train.check_overrides)
from vnr.models import compute
from vnr.optim import make_lr, make_optimizer
from vnr.reports import plots
from vnr.reports import results as results_table
from vnr.reports.writer import MetricWriter
from vnr.workdir import RESUMABLE, ConfigError, check_workdir, flatten  # noqa: F401

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The trainer's `--config` (a file, with `--config.key=value` overrides) and
    `--workdir`; defined by the commands that take them, not on import (`vnr.evaluate`
    defines its own `--config`)."""
    if "config" not in FLAGS:
        config_flags.DEFINE_config_file("config", None, "Config file: path.py[:arg].",
                                        lock_config=True)
    if "workdir" not in FLAGS:
        flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs, reports and "
                                             "results.")


class NonFiniteLoss(RuntimeError):
    """NaN/inf in the loss, gradients or parameters; the run stops, checkpoints stay good."""


class Preempted(Exception):  # noqa: N818 (a normal stop, not an error)
    """SIGTERM: every process saved a checkpoint at `step`; rerun the command to resume."""

    def __init__(self, step: int, directory: pathlib.Path):
        super().__init__(f"preempted: saved step {step} in {directory}; rerun the same "
                         f"command to resume")
        self.step = step


class CheckpointError(RuntimeError):
    """The final checkpoint could not be written (e.g. disk full)."""


def train_step(graphdef: Any, task: Any, config: Any, state: nnx.State, batch: dict,
               step: jax.Array) -> tuple[nnx.State, dict]:
    """One optimizer step.

    A non-finite loss, gradient or updated parameter leaves `state` unchanged
    and is reported through `metrics["nonfinite"]`; the host checks it at log
    steps (no per-step sync) and stops naming the first bad step.
    """
    old = state.to_pure_dict()  # arrays: merge shares Variables, update mutates them
    model, opt = nnx.merge(graphdef, state)
    rngs = nnx.Rngs(dropout=jax.random.fold_in(jax.random.key(config.seed), step))

    def loss(m, r):
        value, aux = task.loss_fn(config, m, batch, r)
        return compute.float32(value), aux  # a bfloat16 model still reports a float32 loss

    wrt = pretrained.trainable(config)  # nnx.Param unless config.frozen names parameters
    grad_fn = nnx.value_and_grad(loss, has_aux=True) if wrt is nnx.Param else \
        nnx.value_and_grad(loss, has_aux=True, argnums=nnx.DiffState(0, wrt))
    (value, metrics), grads = grad_fn(model, rngs)
    grad_norm = optax.global_norm(grads)
    opt.update(model, grads)
    new_state = nnx.state((model, opt))
    param_norm = optax.global_norm(nnx.state(model, nnx.Param))
    ok = jnp.isfinite(value) & jnp.isfinite(grad_norm) & jnp.isfinite(param_norm)
    nnx.replace_by_pure_dict(new_state, jax.tree.map(
        lambda n, o: jnp.where(ok, n, o), new_state.to_pure_dict(), old))
    metrics = dict(metrics, loss=value, grad_norm=grad_norm, nonfinite=(~ok).astype(jnp.int32))
    return new_state, metrics


def _under_mesh(mesh: jax.sharding.Mesh, fn: Any) -> Any:
    """`fn` traced with `mesh` as the abstract mesh in context (`get_abstract_mesh()`)."""
    @functools.wraps(fn)
    def traced(*args: Any) -> Any:
        with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            return fn(*args)
    return traced


@dataclasses.dataclass
class Setup:
    """Everything a loop (training, benchmark, test) needs, built from a config."""

    task: Any
    mesh: jax.sharding.Mesh
    local_batch: int
    graphdef: Any
    state: nnx.State
    state_shardings: Any
    step_fn: Any  # (state, global batch, step) -> (state, metrics); donates state
    predict_fn: Any  # (state, global batch) -> task outputs, replicated
    evaluators: list[evaluators.Evaluator] = dataclasses.field(default_factory=list)


def setup(config: ml_collections.ConfigDict, devices: list | None = None,
          workdir: pathlib.Path | None = None, load_pretrained: bool = True) -> Setup:
    """Validates the config and workdir (one-line ConfigError, before any compile),
    builds the mesh, the sharded model and optimizer state and the jitted steps.

    `load_pretrained`: put the task's pretrained encoder weights into the state
    (`run` passes False and loads them itself only when no checkpoint is restored)."""
    try:
        task = task_lib.load(config.task)
    except task_lib.TaskError as e:
        raise ConfigError(str(e)) from e
    try:
        check_config(config)  # every shared key in range (vnr/config_checks.py)
        mesh = sharding.make_mesh(config.mesh.shape, config.mesh.axes, devices)
        local_batch = sharding.check_batch_size(config.batch_size, mesh)
        sharding.check_batch_size(config.eval_batch_size, mesh, "eval_batch_size")
        compute.settings(config)  # dtype, param_dtype, attention, remat
        evals = evaluators.parse(config, task)
        if validate := task_lib.hook(task, "validate"):
            validate(config)
        if feature_cache.requested(config):  # a frozen tower's features, computed once
            feature_cache.check(config, task, pretrained.prefix_frozen(config))
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from e
    if workdir is not None:  # every process checks, so all of them stop; `run` writes it
        check_workdir(workdir, config, write=False)

    try:
        tx = make_optimizer(config)
        make_lr(config)
        wrt = pretrained.trainable(config)
    except ValueError as e:
        raise ConfigError(str(e)) from e

    def make():
        model = compute.configure(task.make_model(config, nnx.Rngs(config.seed)), config)
        return model, nnx.Optimizer(model, tx, wrt=wrt)

    rules = [tuple(r) for r in config.sharding_rules]
    try:  # a model's own size checks (e.g. image_size vs its stride) raise ValueError
        graphdef, state, state_sh = sharding.create_sharded(make, mesh, rules)
        pretrained.check_frozen(state, config)
        if feature_cache.requested(config):  # and now every parameter of those towers
            feature_cache.check(config, task, functools.partial(pretrained.all_frozen, state,
                                                                config))
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from e
    # Checked now (names and shapes), loaded here or, by `run`, only into a fresh run.
    state = _pretrained(task, config, state, state_sh, jax.process_index() == 0,
                        check_only=not load_pretrained)
    batch_sh, repl = sharding.batch_sharding(mesh), sharding.replicated(mesh)
    # Traced under the mesh, so a task can use `jax.shard_map` without naming it
    # (e.g. a contrastive loss that all-gathers the other modality).
    step_fn = jax.jit(
        _under_mesh(mesh, functools.partial(train_step, graphdef, task, config)),
        in_shardings=(state_sh, batch_sh, repl), out_shardings=(state_sh, repl),
        donate_argnums=0)
    predict_fn = jax.jit(
        _under_mesh(mesh, lambda st, b: task.predict(config, nnx.merge(graphdef, st)[0], b)),
        in_shardings=(state_sh, batch_sh), out_shardings=repl)
    return Setup(task, mesh, local_batch, graphdef, state, state_sh, step_fn, predict_fn,
                 evals)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
    """Trains and evaluates; returns the final results dict (split -> metric -> value).

    Every process runs this (one per host or per accelerator); only process 0
    writes logs, reports and results, all write their checkpoint shards.

    Raises:
      Preempted: after SIGTERM, once every process saved a checkpoint.
      NonFiniteLoss: NaN/inf at some step (the last good checkpoint stays).
      CheckpointError: the final checkpoint could not be written (results are).
    """
    workdir = pathlib.Path(workdir).absolute()
    primary = jax.process_index() == 0
    plots.new_run()  # a report warning is one line per run
    data_dir = (config.get("data") or {}).get("data_dir") or None
    if data_dir is not None:  # before anything compiles: the build would fail after it
        _check_data_dir(data_dir)
    s = setup(config, workdir=workdir, load_pretrained=False)
    task, mesh, state, step_fn = s.task, s.mesh, s.state, s.step_fn
    n_params = sum(x.size for x in jax.tree.leaves(
        nnx.state(nnx.merge(s.graphdef, state)[0], nnx.Param)))
    n_frozen = pretrained.check_frozen(state, config)
    frozen = f" ({n_frozen:,} frozen)" if n_frozen else ""
    _say(primary, f"model: {n_params:,} parameters{frozen}; mesh {dict(mesh.shape)}; "
                  f"{jax.process_count()} process(es); workdir {workdir}")

    try:  # building or opening the dataset (and its splits): one line, not a traceback
        data_iter = _train_iterator(task, config, s.local_batch)
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(" ".join(str(e).split())) from e
    except OSError as e:  # a build that cannot write into data_dir (else not ours: raised)
        failed = pathlib.Path(os.fsdecode(e.filename or "")).absolute()
        if data_dir is None or not e.filename or not failed.is_relative_to(
                pathlib.Path(data_dir).absolute()):
            raise
        raise ConfigError(f"data.data_dir={data_dir}: the build cannot write there "
                          f"({type(e).__name__}: {e.strerror}: {failed})") from e
    check_workdir(workdir, config)  # config.json: only once every check above passed
    ckpt_dir = workdir / "checkpoints"
    select = config.get("select") or {}
    mgr = checkpoint.manager(ckpt_dir, config.keep_ckpts, select.get("metric") or None,
                             select.get("mode", "max"), warn=functools.partial(_warn, primary))
    try:
        start, state = checkpoint.restore_latest(mgr, state, s.state_shardings, data_iter,
                                                 warn=functools.partial(_warn, primary))
    except BaseException:
        data_iter.close()
        raise
    if start:
        _say(primary, f"resumed from step {start} ({ckpt_dir})")
    else:  # a fresh run: pretrained encoders (a resumed one has them in its checkpoint)
        try:
            state = _pretrained(task, config, state, s.state_shardings, primary)
        except BaseException:
            data_iter.close()
            raise

    writer = MetricWriter(workdir, active=primary)
    progress = progress_lib.Progress(config, start, primary)
    profiler = profiling.Profiler(config, workdir, start + 1)
    preemption = distributed.Preemption()
    warn = _warner(primary)
    say = functools.partial(_say, primary)
    selector = evaluators.check_select(config, s.evaluators)
    if profiler.skipped:
        say(profiler.skipped)
    report_dir = workdir / "reports" if primary else None
    pending: list[dict] = []
    t0, n0 = time.perf_counter(), start
    saved_at = start  # step of the newest checkpoint whose save started without error
    try:
        for step in range(start + 1, config.total_steps + 1):
            batch = sharding.global_batch(next(data_iter), mesh)
            step_arr = jnp.asarray(step, jnp.int32)
            if step == start + 1 and jax.process_count() > 1:
                # Compile first, then start the first collective on every process
                # together (gloo's connection set-up has a short fixed timeout).
                step_fn = step_fn.lower(state, batch, step_arr).compile()
                distributed.barrier("vnr:compiled")
            with profiler.step(step):
                state, metrics = step_fn(state, batch, step_arr)
            profiler.after(step, metrics)
            pending.append(metrics)
            if step == start + 1:  # keep compile time out of examples/s
                jax.block_until_ready(metrics)
                t0, n0 = time.perf_counter(), step
                progress.started(step)
            if step % config.log_every == 0 or step == config.total_steps:
                logs = _reduce(jax.device_get(pending), step - len(pending) + 1)
                pending = []
                dt = time.perf_counter() - t0
                logs["examples_per_sec"] = (step - n0) * config.batch_size / max(dt, 1e-9)
                logs["lr"] = float(make_lr(config)(step))
                t0, n0 = time.perf_counter(), step
                writer.write(step, {f"train/{k}": v for k, v in logs.items()})
                progress.log(step, logs)
            progress.update()
            logged = evaluators.periodic(s.evaluators, config, functools.partial(
                s.predict_fn, state), mesh, step, writer, report_dir, say)
            if logged:
                t0 = time.perf_counter()  # keep eval time out of examples/s
            selecting = selector is not None and selector.due(step)
            if step % config.ckpt_every == 0 or step == config.total_steps or selecting:
                # Only metrics measured at this very step rank a checkpoint.
                if checkpoint.save_guarded(mgr, step, state, data_iter, warn,
                                           metrics=evaluators.ranked(logged, select)
                                           if selecting else None):
                    saved_at = step
            if preemption.reached(step) and step < config.total_steps:
                if pending:  # a non-finite step must not be checkpointed as good
                    _reduce(jax.device_get(pending), step - len(pending) + 1)
                if saved_at != step and checkpoint.save_guarded(mgr, step, state, data_iter,
                                                                warn, force=True):
                    saved_at = step
                if not (checkpoint.wait_guarded(mgr, warn) and saved_at == step):
                    good = checkpoint.good_steps(ckpt_dir)
                    raise CheckpointError(f"preempted at step {step} but its checkpoint "
                                          f"failed; the newest good one is step "
                                          f"{max(good) if good else 'none'}")
                checkpoint.close_guarded(mgr, warn)
                raise Preempted(step, ckpt_dir)
    except NonFiniteLoss as e:
        checkpoint.wait_guarded(mgr, warn)
        writer.close()
        raise NonFiniteLoss(f"{e}; the last good checkpoint is kept in "
                            f"{ckpt_dir} (step {mgr.latest_step()})") from None
    finally:
        profiler.stop()
        preemption.close()
        progress.close()
        data_iter.close()  # stop the grain workers before evaluation starts its own
    final_ok = checkpoint.wait_guarded(mgr, warn) and saved_at >= config.total_steps

    selection = evaluators.selected_step(mgr, config)
    if selection["step"] != config.total_steps:
        say(f"selected step {selection['step']} ({selection['metric']} = "
            f"{selection['value']:.4g}, {selection['mode']}); restoring it for the final "
            f"evaluation")
        state = checkpoint.restore(mgr, selection["step"], state, s.state_shardings, None)
    results = evaluators.final(s.evaluators, config, functools.partial(s.predict_fn, state),
                               mesh, writer, selection["step"], report_dir, say)
    if primary:
        workdir_lib.write_results(workdir / "results.json", results, selection)
        plots.learning_curves(workdir / "metrics.jsonl", workdir / "reports" / "curves.png")
        print(results_table.markdown(results, task_lib.columns(task, config, results)))
    writer.close()
    final_ok = checkpoint.close_guarded(mgr, warn) and final_ok
    if not final_ok:
        good = checkpoint.good_steps(ckpt_dir)
        raise CheckpointError(
            f"the final checkpoint (step {config.total_steps}) could not be written to "
            f"{ckpt_dir} (see the warning above); results.json was written; the newest good "
            f"checkpoint is step {max(good) if good else 'none'}")
    return results


def _check_data_dir(data_dir: str) -> None:
    """ConfigError when `data.data_dir` is a file or cannot be created (a file on its path,
    its nearest existing folder not writable). An existing folder may be read-only: a
    finished build is only read. The builder command's rule too (tfds_builders/data_dir.py;
    the trainer reads builders only through their packages' APIs, so it is not imported)."""
    path = pathlib.Path(data_dir).absolute()
    try:
        existing = next(p for p in (path, *path.parents) if p.exists())
    except OSError as e:  # a folder on the path this user may not enter
        raise ConfigError(f"data.data_dir={data_dir} cannot be created or read: "
                          f"{e.strerror}: {e.filename}") from None
    if existing == path and not path.is_dir():
        raise ConfigError(f"data.data_dir={data_dir} is a file, not a directory")
    if existing != path and not existing.is_dir():
        raise ConfigError(f"data.data_dir={data_dir} cannot be created: {existing} is a file, "
                          f"not a directory")
    if existing != path and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"data.data_dir={data_dir} cannot be created: {existing} is not "
                          f"writable by this user")


def _pretrained(task: Any, config: Any, state: nnx.State, shardings: Any,
                primary: bool, check_only: bool = False) -> nnx.State:
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
        return pretrained.load(state, shardings, sources, say=functools.partial(_say, primary))
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from e


def _train_iterator(task: Any, config: Any, local_batch: int) -> Any:
    """This process's training iterator; process 0 builds the dataset first.

    Several processes building one dataset in a shared directory race, so the
    others wait at a barrier until process 0 built it (through the task's
    optional `prepare_data(config)`, or else by opening its iterator). The task's
    `check_splits` runs before the iterator opens a split (a ConfigError naming the key).
    """
    def make() -> Any:
        if check_splits := task_lib.hook(task, "check_splits"):
            try:
                check_splits(config)
            except ValueError as e:
                raise ConfigError(str(e)) from e
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


def _warner(primary: bool) -> Any:
    return functools.partial(_warn, primary)


def _warn(primary: bool, message: str) -> None:
    """Printed by every process (a failure may be local to one host)."""
    where = f"[process {jax.process_index()}] " if jax.process_count() > 1 else ""
    print(f"warning: {where}{message}", file=sys.stderr, flush=True)


def _reduce(rows: list[dict], first_step: int) -> dict[str, float]:
    """Means over the steps since the last log; raises on any non-finite step."""
    bad = [first_step + i for i, r in enumerate(rows) if int(r["nonfinite"])]
    if bad:
        raise NonFiniteLoss(f"non-finite loss or gradient at step {bad[0]} (update skipped)")
    keys = [k for k in rows[0] if k != "nonfinite"]
    return {k: float(np.mean([r[k] for r in rows])) for k in keys}


def _say(primary: bool, message: str) -> None:
    if primary:
        progress_lib.say(message)


def _fmt(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in metrics.items())


PROG = "python -m vnr.train"
# Flags libraries read from absl's global FLAGS: multi-host set-up, absl's logging.
RUNTIME_FLAGS = ("vnr.distributed", "absl.logging")


def _flags(fv: flags.FlagValues) -> None:
    cli.config_flag(fv, "Config file: path.py[:arg] (--config.key=value overrides it).",
                    lock=True)
    flags.mark_flag_as_required("config", flag_values=fv)
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs, reports and "
                        "results.", required=True, flag_values=fv)


def main(argv: list[str] | None = None) -> int:
    """`python -m vnr.train` (`argv` without the program name; None: `sys.argv[1:]`): a bad
    command line or a run that cannot go on is one `error:` line, exit status 2."""
    args = cli.parse(argv, PROG, __doc__, _flags, shared=RUNTIME_FLAGS)
    cli.app(lambda: _main(args))


def _main(args: cli.Args) -> int:
    if not args.flags["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # orbax/grain INFO lines drown the progress bar
    try:
        distributed.initialize_from_flags()
    except (ValueError, RuntimeError) as e:
        cli.fail(str(e))
    try:
        run(args.config, args.workdir)
    except Preempted as e:
        print(e, file=sys.stderr, flush=True)
        return 0
    except (ConfigError, evaluators.EvaluatorError, NonFiniteLoss, CheckpointError,
            checkpoint.CorruptCheckpoint, checkpoint.IncompatibleCheckpoint) as e:
        cli.fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
