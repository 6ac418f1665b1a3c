"""Reading another vnr run: the step a reader takes (`run_step`, resolved by
`vnr.selection.choose_step`: by default the step the run's results.json reports) and that
step's model weights (`restore_run`), verified against their checksum manifest. The one way
`init_from` chains, zero-shot sources, two-stage tools, `vnr.evaluate --step` and the
feature cache's run sources read a run."""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging

from vnr import checkpoint, checksums, selection
from vnr import workdir as workdir_lib
from vnr.selection import Chosen


def run_step(workdir: str | pathlib.Path, step: str | int = "selected",
             key: str = "init_from", select: Any = None, flag: str = "") -> Chosen:
    """The step `step` names in the vnr run `workdir` (`selection.choose_step`): ranked by
    `select` (default: its config.json's), `selected` being the step its results.json
    reports. Errors start with `flag` (default `<key>=<workdir>: step`)."""
    root = pathlib.Path(workdir).absolute()
    if not checkpoint.good_steps(root / "checkpoints"):
        raise FileNotFoundError(f"{key}={workdir}: no finished checkpoint under "
                                f"{root / 'checkpoints'} (give the workdir of a finished run)")
    held, reported = workdir_lib.select_and_selection(root, key)
    select = dict((held if select is None else select) or {})
    mgr = checkpoint.reader(root / "checkpoints", select.get("metric") or None,
                            select.get("mode", "max"))
    try:
        return selection.choose_step(mgr, select, step, reported,
                                     flag or f"{key}={workdir}: step")
    finally:
        mgr.close()


def restore_run(workdir: str | pathlib.Path, names: tuple[str, ...] | None = None,
                key: str = "init_from", step: str | int | Chosen = "selected"
                ) -> tuple[int, dict[str, np.ndarray]]:
    """(step, {dotted parameter path: host array}) of the model of another vnr run: the
    checkpoint `step` names (`run_step`: by default the step its results.json reports, so the
    model whose test numbers the run reports; a `Chosen` is taken as it is), model item "0" of
    the saved (model, optimizer) state; only the subtrees `names` when given. The one reader
    of another run's weights (fine-tuning from a run, two-stage training, zero-shot
    transfer). Its files are verified against their checksum manifest first. Errors name
    `key`, the workdir and the step; a corrupt or unreadable checkpoint is a
    CorruptCheckpoint (never another step: that would silently change the weights)."""
    root = pathlib.Path(workdir).absolute()
    n = (step if isinstance(step, Chosen) else run_step(workdir, step, key)).step
    path = root / "checkpoints" / str(n) / "state"
    if not path.is_dir():
        raise FileNotFoundError(f"{key}={workdir}: step {n} has no `state` item")
    where = f"{key}={workdir}: checkpoint step {n} ({path.parent})"
    try:
        checksums.verify(path)
    except FileNotFoundError:
        logging.warning("%s has no checksums (written before they were recorded); read "
                        "unverified", where)
    except checksums.Mismatch as e:
        raise checkpoint.CorruptCheckpoint(f"{where} is corrupt: state/{e}") from None
    ckptr = ocp.PyTreeCheckpointer()
    meta = checkpoint.read_step(where, lambda: ckptr.metadata(path))
    if getattr(meta, "item_metadata", meta) is None:  # orbax logs why and returns none
        raise checkpoint.CorruptCheckpoint(f"{where} is unreadable: no parameter metadata "
                                           "could be read")
    tree = getattr(getattr(meta, "item_metadata", meta), "tree", meta)
    if not isinstance(tree, dict) or "0" not in tree:
        raise ValueError(f"{key}={workdir}: step {n} is not a vnr training state "
                         "((model, optimizer) with the model under item 0)")
    model = tree["0"]
    missing = [x for x in names or () if x not in model]
    if missing:
        raise ValueError(f"{key}={workdir}: the checkpointed model (step {n}) has no "
                         f"{missing[0]!r} (it has {sorted(model)})")
    sub = {"0": {x: model[x] for x in names} if names else model}
    args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), sub)
    restored = checkpoint.read_step(where, lambda: ckptr.restore(
        path, args=ocp.args.PyTreeRestore(item=sub, restore_args=args, partial_restore=True)))
    return n, {k.removeprefix("0."): np.asarray(v) for k, v in checkpoint.flat(restored).items()}
