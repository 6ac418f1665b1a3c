"""Pretrained encoder weights for a fresh training state, and frozen parameters.

**The hook.** A task opts in with one plain function:

    def pretrained(config) -> dict[str, tuple[str, str | None]]:
        return {"encoders.frame.image": (config.model.image_encoder, "vision")}

Keys are dotted paths of parameter subtrees of the task's model (attribute names and list
indices, as `nnx.state(model)` spells them). Values are `(checkpoint, part)`: `checkpoint`
is a local Hugging Face directory, a name under `$VNR_ENCODERS_DIR` (default
~/.cache/vnr/encoders) or a `loading.HUB_IDS` name already in the Hugging Face cache
(resolved offline: nothing is downloaded at run time); `part` is `"vision"` or `"text"` to
take one tower of a CLIP checkpoint, None for the whole checkpoint (BERT, ALBERT, XLM-R, a
single-tower CLIP), a port of `vnr.models.encoders.ports` (`"univl"`, `"s3d"`,
`"cclm_vision"`, `"cclm_text"`, `"videomae"`, `"timesformer"`, `"videoclip"`,
`"singularity"`, `"chinese_clip"`, `"cn_clip"`: `checkpoint` is then that upstream's own file or
directory, read by its port's key rules), or `"run"`: `checkpoint` is
then the workdir of another finished vnr run and the subtree is copied from its model under
the same path (fine-tuning from a run, two-stage training, zero-shot transfer; read by
`vnr.run_reader.restore_run`). A run source may carry a third element, the step to read
(`run_source(workdir, step)`: `selected`, the default, is the step the run's results.json
reports, i.e. its model selected by validation; `best`, `last` or a number as `python -m
vnr.evaluate --step`); the line printed names the step and why. The trainer (`vnr.train`)
calls it after creating the sharded state and only when no checkpoint is restored (a resumed
run reloads nothing), then `load` reads each checkpoint with the encoder loader
(`loading.read_checkpoint` + `match_tensors`: renames, transposes, every parameter gets
exactly one tensor of its shape, no tensor is left unused except pre-training heads and the
other CLIP tower) and writes the arrays into the state's existing `NamedSharding`s with
`jax.make_array_from_callback`: each process reads only the slices of its addressable shards
(safetensors are memory-mapped), so no host holds a copy of the whole model and nothing is
baked into the jitted init. One line per subtree is printed.

**The model side.** `make_model` builds the subtree with
`vnr.models.encoders.towers.build(checkpoint, part, rngs)`: the architecture comes from the
directory's `config.json`, initialised randomly under the trainer's jit as any other layer;
the weights then come through the hook (MoviePuzzle HCMC and text-pair, Sc2St and M-SYMON
text encoders). Checkpoint tokenizers for the data side: `vnr.models.encoders.tokenizers`.

**Frozen parameters.** `config.frozen` (optional, default empty) lists regexes matched at the
start of dotted parameter paths (so a plain prefix such as `encoders.frame.image` works).
Matching parameters get no gradient and no optimizer state (`trainable` is the `wrt` filter
of both `nnx.Optimizer` and the gradient): they stay bit-identical, and no backward pass runs
through a frozen feature extractor. With no patterns the filter is `nnx.Param`, so the state
and its checkpoints are exactly those of a run without this feature.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np
from flax import nnx

Source = tuple[str, str | None] | tuple[str, str, str]
Sources = Mapping[str, Source]
RUN = "run"  # the `part` that names another vnr run's workdir as the source


def run_source(workdir: str, step: str | int = "selected") -> tuple[str, str, str]:
    """The source of a subtree copied from another vnr run at `step` (see the module
    docstring): what a task's hook returns for `init_from` and the like."""
    return (str(workdir), RUN, str(step))


def unpack(source: Source) -> tuple[str, str | None, str]:
    """(checkpoint, part, step) of a source; `step` is "selected" unless a run source
    names one."""
    name, part, *rest = source
    return name, part, str(rest[0]) if rest else "selected"


def _key(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _matched(state: nnx.State, sources: Sources, root: tuple):
    """Per source: (prefix, directory, {state path: array in the Flax layout}), checked
    against the state's parameter shapes. Arrays are memory-mapped views where possible."""
    flat = list(nnx.to_flat_state(state))
    # the encoder machinery only where a checkpoint is read (a scratch run never imports it)
    from vnr.models.encoders import ports, towers
    from vnr.models.encoders.loading import CheckpointError, match_tensors, read_checkpoint

    files: dict = {}  # a port file read once for all its towers (CCLM's image and text)
    for prefix, source in sources.items():
        name, part, step = unpack(source)
        want = tuple(int(p) if p.isdigit() else p for p in prefix.split(".")) if prefix else ()
        full = (*root, *want)
        targets = {_key(p[len(full):]): (p, v) for p, v in flat
                   if p[:len(full)] == full and isinstance(v, nnx.Param)}
        if not targets:
            raise ValueError(f"pretrained {prefix!r} <- {name!r}: the model has no parameters "
                             "under that path")
        if part == RUN:
            others = {_key(p[len(full):]) for p, v in flat
                      if p[:len(full)] == full and not isinstance(v, nnx.Param)}
            yield prefix, *_from_run(prefix, name, targets, others, step)
            continue
        if ports.is_port(part):  # an upstream's own file (univl.pretrained.bin, a .th)
            shapes = {k: tuple(v.get_value().shape) for k, (_, v) in targets.items()}
            arrays = ports.read(part, name, shapes, files)
            yield prefix, f"{name} ({part})", {p: arrays[k] for k, (p, _) in targets.items()}
            continue
        _, prefixes, ignore, cfg, directory = towers.spec(name, part)
        tensors, layout = read_checkpoint(directory)
        shapes = {k: tuple(v.get_value().shape) for k, (_, v) in targets.items()}
        try:
            arrays = match_tensors(shapes, tensors, layout, prefixes=prefixes, ignore=ignore)
        except CheckpointError as e:
            lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
            first = re.sub(r"parameter '([^']+)'", lambda m, p=prefix: f"parameter '{p}.{m[1]}'",
                           lines[0] if lines else str(e))
            more = f" (and {len(lines) - 1} more problems)" if len(lines) > 1 else ""
            raise CheckpointError(f"pretrained {prefix} <- {directory} "
                                  f"(model_type={cfg.model_type!r}): {first}{more}") from None
        yield prefix, directory, {p: arrays[k] for k, (p, _) in targets.items()}


def _from_run(prefix: str, workdir: str, targets: dict[str, tuple[tuple, Any]],
              others: set[str], step: str = "selected"):
    """(description, {state path: array}) of the subtree `prefix` of another run's model at
    `step` (the description names the step read and why); every parameter must be there
    with this model's shape, and nothing extra but the model's non-parameter state
    (`others`: RNG counters, which stay this run's)."""
    top = prefix.split(".")[0] if prefix else None
    key = f"pretrained {prefix or '<model>'}"
    from vnr import run_reader  # reads another run: only when a run source is named

    chosen = run_reader.run_step(workdir, step, key)
    _, saved = run_reader.restore_run(workdir, (top,) if top else None, key=key, step=chosen)
    head = f"{prefix}." if prefix else ""
    have = {k[len(head):]: v for k, v in saved.items() if k.startswith(head)}
    where = f"{key} <- run {workdir} (step {chosen.step})"
    extra = sorted(set(have) - set(targets) - others)
    if extra:
        raise ValueError(f"{where}: checkpoint parameter {head}{extra[0]} has no counterpart "
                         "in this model (the same model.* and data widths are needed)")
    out = {}
    for k, (path, var) in targets.items():
        shape = tuple(var.get_value().shape)
        got = have.get(k)
        if got is None or tuple(got.shape) != shape:
            what = "missing" if got is None else f"shape {tuple(got.shape)}"
            raise ValueError(f"{where}: parameter {head}{k} is {what}, this model expects "
                             f"{shape} (the same model.* and data widths are needed)")
        out[path] = got
    return f"run {workdir} (step {chosen.step}: {chosen.why})", out


def check(state: nnx.State, sources: Sources, *, root: tuple = (0,)) -> None:
    """Every source fits its subtree (names and shapes only; raises as `load`)."""
    for _ in _matched(state, sources, root):
        pass


def load(state: nnx.State, shardings: Any, sources: Sources, *, root: tuple = (0,),
         say: Callable[[str], None] = print) -> nnx.State:
    """The state with each source's subtree replaced by its checkpoint's tensors.

    Args:
      state: the sharded training state (`(model, optimizer)`: the model under `root`).
      shardings: its `NamedSharding` tree (same structure).
      sources: subtree path -> (checkpoint, part), see the module docstring.
      root: the model's path inside `state`.
      say: one line per loaded subtree.

    Returns:
      A new state (same shardings); the untouched leaves are the same arrays.

    Raises:
      ValueError: a path that is not a parameter subtree, or a checkpoint that does not fit
        it (the message names the parameter, the checkpoint directory and both shapes).
      FileNotFoundError: a checkpoint that is not on this machine.
    """
    flat = list(nnx.to_flat_state(state))
    shard = dict(nnx.to_flat_state(shardings))
    new = dict(flat)
    for prefix, directory, arrays in _matched(state, sources, root):
        count = 0
        for path, arr in arrays.items():
            var = new[path]
            dtype = var.get_value().dtype
            # Each process builds only its addressable shards, from slices of the memmap.
            value = jax.make_array_from_callback(
                tuple(arr.shape), shard[path],
                lambda idx, a=arr, dt=dtype: np.asarray(a[idx], dtype=dt, order="C"))
            new[path] = var.replace(value)
            count += int(np.prod(arr.shape))
        say(f"pretrained: {prefix or '<model>'} <- {directory} ({count:,} parameters)")
    return nnx.from_flat_state([(p, new[p]) for p, _ in flat])


def _patterns(config: Any) -> list[re.Pattern]:
    out = []
    for p in config.get("frozen", ()) or ():
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise ValueError(f"frozen: {p!r} is not a regex ({e})") from None
    return out


def trainable(config: Any) -> Any:
    """The `wrt` filter: `nnx.Param` minus the parameters `config.frozen` matches."""
    pats = _patterns(config)
    if not pats:
        return nnx.Param

    def keep(path: tuple, x: Any) -> bool:
        return isinstance(x, nnx.Param) and not any(p.match(_key(path)) for p in pats)

    return keep


def check_frozen(state: nnx.State, config: Any, root: tuple = (0,)) -> int:
    """Number of frozen parameters; ValueError when a pattern matches none (a typo)."""
    sizes = {_key(p[len(root):]): v.get_value().size for p, v in nnx.to_flat_state(state)
             if p[:len(root)] == root and isinstance(v, nnx.Param)}
    frozen: set[str] = set()
    for pat in _patterns(config):
        hit = {k for k in sizes if pat.match(k)}
        if not hit:
            raise ValueError(f"frozen: {pat.pattern!r} matches no parameter (paths look like "
                             f"{next(iter(sizes))!r})")
        frozen |= hit
    return sum(sizes[k] for k in frozen)


def prefix_frozen(config: Any) -> Callable[[str], bool]:
    """Whether a `config.frozen` pattern matches a module's path prefix (so, every parameter
    under it): checkable before the state exists; `all_frozen` checks the parameters."""
    pats = _patterns(config)
    return lambda module: any(p.match(module + ".") for p in pats)


def all_frozen(state: nnx.State, config: Any, module: str, root: tuple = (0,)) -> bool:
    """Whether `module` (a dotted path) has parameters and `config.frozen` matches all."""
    pats = _patterns(config)
    keys = [_key(p[len(root):]) for p, v in nnx.to_flat_state(state)
            if p[:len(root)] == root and isinstance(v, nnx.Param)]
    under = [k for k in keys if k == module or k.startswith(module + ".")]
    return bool(under) and all(any(p.match(k) for p in pats) for k in under)
