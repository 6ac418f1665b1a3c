"""The vnr trainer: one loop for every task.

    python -m vnr.train --config configs/<benchmark>/<name>.py[:arg] --workdir DIR \\
        [--config.key=value ...]

The task named by `config.task` ("<benchmark>.<module>") is imported as
`vnr.benchmarks.<benchmark>.<module>` and supplies the hooks of the task contract
(`vnr/task.py`: `make_model`, `train_data`, `loss_fn`, `predict`, its evaluation and the
optional ones). Everything else lives here, in order: validate the config, check its splits against
the built dataset (all before anything compiles), build the mesh, create the sharded model
and optimizer, restore the latest checkpoint if any (else load the
pretrained encoders the task names through its optional `pretrained(config)`, see
`vnr/pretrained.py`; `config.frozen` lists parameters kept fixed), loop (jit-compiled step
with donated state, progress, logs, the evaluators `config.evals` declares at their
cadence, checkpoints through `vnr/saver.py`, an optional profiler window), then select the step
(`config.select`: the best by a validation metric, else the last), restore it and run the
final evaluators into `<workdir>/results.json`.
"""

from __future__ import annotations

import dataclasses
import functools
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

from tfds_builders import ManualDirError, forget_used, used_datasets
from vnr import (
    checkpoint,
    cli,
    distributed,
    evaluation,
    evaluators,
    feature_cache,
    pretrained,
    profiling,
    sharding,
    startup,
)
from vnr import config as config_lib
from vnr import progress as progress_lib
from vnr import task as task_lib
from vnr import workdir as workdir_lib
from vnr.config import ConfigError
from vnr.models import compute, rng
from vnr.optim import make_lr, make_optimizer
from vnr.reports.writer import MetricWriter
from vnr.saver import CheckpointError, Preempted, Saver
from vnr.workdir import RESUMABLE, check_workdir, flatten  # noqa: F401


class InputError(ConfigError):
    """A training batch could not be made (a record the config cannot take: a clip longer
    than data.max_frames, features of another width): one line, not a worker's traceback."""


class NonFiniteLoss(RuntimeError):
    """NaN/inf in the loss, gradients or parameters; the run stops, checkpoints stay good."""


def train_step(graphdef: Any, task: Any, config: Any, state: nnx.State, batch: dict,
               step: jax.Array) -> tuple[nnx.State, dict]:
    """One optimizer step.

    A non-finite loss or gradient skips the update (a `lax.cond`, so the state is updated
    in place and never held twice, like `optax.apply_if_finite`); a non-finite parameter
    after the update (a finite gradient times a bad learning rate) is not undone. Both are
    reported through `metrics["nonfinite"]`, which the host checks at log steps (no
    per-step sync) and before every checkpoint, so no bad state is saved.
    """
    model, opt = nnx.merge(graphdef, state)
    rngs = rng.rngs(dropout=jax.random.fold_in(jax.random.key(config.seed), step))

    def loss(m, r):
        value, aux = task.loss_fn(config, m, batch, r)
        return compute.float32(value), aux  # a bfloat16 model still reports a float32 loss

    wrt = pretrained.trainable(config)  # nnx.Param unless config.frozen names parameters
    grad_fn = nnx.value_and_grad(loss, has_aux=True) if wrt is nnx.Param else \
        nnx.value_and_grad(loss, has_aux=True, argnums=nnx.DiffState(0, wrt))
    (value, metrics), grads = grad_fn(model, rngs)
    grad_norm = optax.global_norm(grads)
    finite = jnp.isfinite(value) & jnp.isfinite(grad_norm)

    def update(st: nnx.State, g: Any) -> nnx.State:
        m, o = nnx.merge(graphdef, st)
        o.update(m, g)
        return nnx.state((m, o))

    # The state after the forward pass: it holds updated batch statistics, if any.
    new_state = jax.lax.cond(finite, update, lambda st, g: st, nnx.state((model, opt)), grads)
    param_norm = optax.global_norm(new_state.filter(nnx.Param))
    ok = finite & jnp.isfinite(param_norm)
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
    predict_fns: dict[str, Any]  # name -> jitted (state, global batch) -> outputs, replicated
    evaluators: list[evaluators.Evaluator] = dataclasses.field(default_factory=list)
    fresh: Any = None  # () -> a freshly initialised state (where `state` is abstract)

    def predictor(self, state: nnx.State) -> evaluation.Predictor:
        """The task's predict functions on `state` (what an evaluation gets)."""
        return evaluation.Predictor(self.predict_fns, state)

    @property
    def predict_fn(self) -> Any:
        """The jitted `predict`: (state, global batch) -> outputs."""
        return self.predict_fns["predict"]


def setup(config: ml_collections.ConfigDict, devices: list | None = None,
          workdir: pathlib.Path | None = None, load_pretrained: bool = True,
          check_splits: bool = False, abstract: bool = False) -> Setup:
    """Validates the config and workdir (one-line ConfigError, before any compile),
    builds the mesh, the sharded model and optimizer state and the jitted steps.

    `load_pretrained`: put the task's pretrained encoder weights into the state
    (`run` passes False and loads them itself only when no checkpoint is restored).
    `check_splits`: run the task's `check_splits` too (it may build the dataset), still
    before anything compiles (`run` passes True). `abstract`: the state as shapes and
    shardings only, for a checkpoint to be restored into (no random init is compiled)."""
    try:
        task = task_lib.load(config.task)
    except task_lib.TaskError as e:
        raise ConfigError(str(e)) from e
    try:
        config_lib.check(config)  # every shared key in range (vnr/config.py)
        mesh = sharding.make_mesh(config.mesh.shape, config.mesh.axes, devices)
        local_batch = sharding.check_batch_size(config.batch_size, mesh)
        sharding.check_batch_size(config.eval_batch_size, mesh, "eval_batch_size")
        compute.settings(config)  # dtype, param_dtype, attention, remat
        evals = evaluators.parse(config, task)
        if validate := task_lib.hook(task, "validate"):
            validate(config)
            evals = evaluators.parse(config, task)  # the hook may set cadences (epochs)
        if feature_cache.requested(config):  # a frozen tower's features, computed once
            feature_cache.check(config, task, pretrained.prefix_frozen(config))
    except ManualDirError as e:  # a `validate` that counts the built train split (epochs)
        raise ConfigError(startup.manual_dir_line(config, e)) from e
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from e
    if workdir is not None:  # every process checks, so all of them stop; `run` writes it
        check_workdir(workdir, config, write=False)
    if check_splits:
        startup.check_splits(task, config)

    try:
        tx = make_optimizer(config)
        make_lr(config)
        wrt = pretrained.trainable(config)
    except ValueError as e:
        raise ConfigError(str(e)) from e

    def make():
        model = compute.configure(task.make_model(config, rng.rngs(config.seed)), config)
        return model, nnx.Optimizer(model, tx, wrt=wrt)

    rules = [tuple(r) for r in config.sharding_rules]
    try:  # a model's own size checks (e.g. image_size vs its stride) raise ValueError
        graphdef, state, state_sh = sharding.create_sharded(make, mesh, rules, abstract)
        fresh = lambda: sharding.create_sharded(make, mesh, rules)[1]  # noqa: E731
        pretrained.check_frozen(state, config)
        if feature_cache.requested(config):  # and now every parameter of those towers
            feature_cache.check(config, task, functools.partial(pretrained.all_frozen, state,
                                                                config))
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from e
    # Checked now (names and shapes), loaded here or, by `run`, only into a fresh run.
    state = startup.load_pretrained(task, config, state, state_sh,
                                    functools.partial(_say, jax.process_index() == 0),
                                    check_only=not load_pretrained)
    batch_sh, repl = sharding.batch_sharding(mesh), sharding.replicated(mesh)
    # Traced under the mesh, so a task can use `jax.shard_map` without naming it
    # (e.g. a contrastive loss that all-gathers the other modality).
    step_fn = jax.jit(
        _under_mesh(mesh, functools.partial(train_step, graphdef, task, config)),
        in_shardings=(state_sh, batch_sh, repl), out_shardings=(state_sh, repl),
        donate_argnums=0)
    predict_fns = {name: jax.jit(_under_mesh(mesh, functools.partial(_predict, graphdef, fn,
                                                                      config)),
                                 in_shardings=(state_sh, batch_sh), out_shardings=repl)
                   for name, fn in task_lib.predictors(task, config).items()}
    return Setup(task, mesh, local_batch, graphdef, state, state_sh, step_fn, predict_fns,
                 evals, fresh)


def _predict(graphdef: Any, fn: Any, config: Any, state: nnx.State, batch: dict) -> dict:
    return fn(config, nnx.merge(graphdef, state)[0], batch)


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
    with workdir_lib.Owner(workdir, functools.partial(_say, primary)) as owner:
        if primary:
            owner.check()  # another live run here: one line before anything compiles
        return _run(config, workdir, owner if primary else None)


def _run(config: ml_collections.ConfigDict, workdir: pathlib.Path,
         owner: workdir_lib.Owner | None) -> dict[str, Any]:
    primary = owner is not None
    forget_used()  # the datasets this run opens (`workdir_lib.check_data`)
    if plots := sys.modules.get("vnr.reports.plots"):  # imported by an earlier run
        plots.new_run()  # a report warning is one line per run
    data_dir = (config.get("data") or {}).get("data_dir") or None
    if data_dir is not None:  # before anything compiles: the build would fail after it
        startup.check_data_dir(data_dir)
    startup.resolve_workers(config, workdir, functools.partial(_say, primary))
    # A workdir with checkpoints resumes: the state is their shape, no random init compiles.
    resuming = distributed.all_true(bool(checkpoint.good_steps(workdir / "checkpoints")))
    s = setup(config, workdir=workdir, load_pretrained=False, check_splits=True,
              abstract=resuming)
    task, mesh, state = s.task, s.mesh, s.state
    n_params = sum(x.size for x in jax.tree.leaves(
        nnx.state(nnx.merge(s.graphdef, state)[0], nnx.Param)))
    n_frozen = pretrained.check_frozen(state, config)
    frozen = f" ({n_frozen:,} frozen)" if n_frozen else ""
    _say(primary, f"model: {n_params:,} parameters{frozen}; mesh {dict(mesh.shape)}; "
                  f"{jax.process_count()} process(es); workdir {workdir}")

    data_iter = startup.train_iterator(task, config, s.local_batch)
    if owner is not None:
        owner.acquire()  # one run per workdir, from its first write to its end
    # the datasets the run reads are built now: the same data as the run's before, if any
    workdir_lib.check_data(workdir, used_datasets())
    check_workdir(workdir, config)  # config.json: only once every check above passed
    warn = functools.partial(_warn, primary)
    say = functools.partial(_say, primary)
    saver = Saver(workdir, config, data_iter, warn)
    writer = None  # opened once the run's state is there (a failed restore leaves no tb/ file)
    try:
        start, state = saver.restore(state, s.state_shardings)
        if resuming and not start:  # no step could be read: a fresh run after all
            state = s.fresh()
        if start:
            say(f"resumed from step {start} ({saver.directory})")
        else:  # a fresh run: pretrained encoders (a resumed one has them in its checkpoint)
            state = startup.load_pretrained(task, config, state, s.state_shardings, say)
        writer = MetricWriter(workdir, active=primary, start=start)
        if writer.dropped:
            say(f"metrics.jsonl: dropped {writer.dropped} row(s) logged after step {start} "
                "(the steps are replayed from that checkpoint)")
        state = _loop(config, s, state, start, saver, writer, workdir, say)
    except InputError:
        saver.finish()
        writer.close()
        if primary and start == 0:  # nothing trained: the corrected command may use this dir
            workdir_lib.unclaim_if_empty(workdir)
        raise
    except NonFiniteLoss as e:
        saver.finish()
        writer.close()
        kept = saver.latest_step()
        raise NonFiniteLoss(f"{e}; " + (f"the last good checkpoint is kept in {saver.directory} "
                                        f"(step {kept})" if kept is not None else
                                        "no checkpoint was saved")) from None
    finally:
        saver.stop_signals()
        data_iter.close()  # stop the grain workers before evaluation starts its own
    final_ok = saver.finish()

    selection = saver.selection()
    if selection["step"] != config.total_steps:
        say(f"selected step {selection['step']} ({selection['metric']} = "
            f"{selection['value']:.4g}, {selection['mode']}); restoring it for the final "
            f"evaluation")
        state = saver.load(selection["step"], state, s.state_shardings)
    report_dir = workdir / "reports" if primary else None
    results = evaluators.final(s.evaluators, config, s.predictor(state), mesh, writer,
                               selection["step"], report_dir, say)
    if primary:
        from vnr.reports import plots
        from vnr.reports import results as results_table

        workdir_lib.write_results(workdir / "results.json", results, selection)
        plots.learning_curves(workdir / "metrics.jsonl", workdir / "reports" / "curves.png")
        print(results_table.markdown(results, task_lib.columns(task, config, results)))
    writer.close()
    if not (saver.close() and final_ok):
        raise CheckpointError(
            f"the final checkpoint (step {config.total_steps}) could not be written to "
            f"{saver.directory} (see the warning above); results.json was written; the newest "
            f"good checkpoint is step {saver.newest_good()}")
    return results


def _loop(config: Any, s: Setup, state: nnx.State, start: int, saver: Saver,
          writer: MetricWriter, workdir: pathlib.Path, say: Any) -> nnx.State:
    """Steps `start + 1 .. config.total_steps`: the jitted step, logs, the periodic
    evaluators and `saver`'s checkpoints (and its SIGTERM stop); returns the last state."""
    primary = jax.process_index() == 0
    progress = progress_lib.Progress(config, start, primary)
    profiler = profiling.Profiler(config, workdir, start + 1)
    selector = evaluators.check_select(config, s.evaluators)
    if profiler.skipped:
        say(profiler.skipped)
    report_dir = workdir / "reports" if primary else None
    pending: list[dict] = []
    step_fn, mesh, data_iter = s.step_fn, s.mesh, saver.data_iter

    def check() -> None:  # a non-finite step stops the run before anything is saved
        if pending:
            _reduce(jax.device_get([{"nonfinite": p["nonfinite"]} for p in pending]),
                    step - len(pending) + 1)

    t0, n0 = time.perf_counter(), start
    try:
        for step in range(start + 1, config.total_steps + 1):
            try:
                local = next(data_iter)
            except ValueError as e:  # a transform's check of a record against the config
                raise InputError(f"the training input failed before step {step}: "
                                 f"{type(e).__name__}: {e}") from None
            batch = sharding.global_batch(local, mesh)
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
            if any(e.due(step) for e in s.evaluators):
                check()  # never evaluate (or rank a checkpoint by) a non-finite model
            logged = evaluators.periodic(s.evaluators, config, s.predictor(state), mesh, step,
                                         writer, report_dir, say)
            if logged:
                t0 = time.perf_counter()  # keep eval time out of examples/s
            saver.maybe_save(step, state, logged,
                             selector is not None and selector.due(step), check)
    finally:
        profiler.stop()
        progress.close()
    return state


def _warn(primary: bool, message: str) -> None:
    """Printed by every process (a failure may be local to one host)."""
    where = f"[process {jax.process_index()}] " if jax.process_count() > 1 else ""
    print(f"warning: {where}{message}", file=sys.stderr, flush=True)


def _reduce(rows: list[dict], first_step: int) -> dict[str, float]:
    """Means over the steps since the last log; raises on any non-finite step."""
    bad = [first_step + i for i, r in enumerate(rows) if int(r["nonfinite"])]
    if bad:
        raise NonFiniteLoss(f"non-finite loss, gradient or parameter at step {bad[0]}")
    keys = [k for k in rows[0] if k != "nonfinite"]
    return {k: float(np.mean([r[k] for r in rows])) for k in keys}


def _say(primary: bool, message: str) -> None:
    if primary:
        progress_lib.say(message)


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
