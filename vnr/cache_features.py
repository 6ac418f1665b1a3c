"""Builds the feature caches of a config's frozen towers (`vnr/feature_cache.py`).

    python -m vnr.cache_features --config configs/moviepuzzle/hcmc.py:frame_shot,clip=$CLIP \
        --config.data.feature_cache=image [--splits train,val] [--batch 256] [--chunk 64]

The model is built as `vnr.train` builds it (`train.setup`, pretrained weights loaded, the
same mesh and shardings); each tower named by `data.feature_cache` (or `--towers`) then runs
in eval mode over every frame of every split the run reads, in global batches of `--batch`
frames sharded over the mesh's data axis (padded to a fixed size: one compile). Records are
processed in chunks of `--chunk`; each finished chunk is written at once under
`<split>.parts/`, so an interrupted build resumes where it stopped. Finished splits are
assembled into one memory-mappable array and recorded in `meta.json`. With several
processes every process runs every batch (SPMD) and process 0 writes.

Refused, with one line: a tower that is not frozen by `config.frozen`, and a tower whose
training-mode output differs from its eval-mode output on the first batch (dropout or other
train-only behaviour: cached features would not equal the uncached run).
"""

from __future__ import annotations

import copy
import json
import pathlib
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from absl import flags, logging
from flax import nnx

from vnr import cli, distributed, feature_cache, pretrained, progress, sharding
from vnr import task as task_lib
from vnr.train import RUNTIME_FLAGS, ConfigError, setup

PROG = "python -m vnr.cache_features"


def _flags(fv: flags.FlagValues) -> None:
    cli.config_flag(fv, "Config file: path.py[:arg] (the run's; --config.key=value "
                    "overrides it).", lock=True)
    flags.mark_flag_as_required("config", flag_values=fv)
    flags.DEFINE_string("towers", "", "Comma-separated towers (default: data.feature_cache).",
                        flag_values=fv)
    flags.DEFINE_string("splits", "", "Comma-separated splits (default: every split the run "
                        "reads).", flag_values=fv)
    flags.DEFINE_integer("batch", 256, "Frames per global batch (rounded up to the data axis).",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("chunk", 64, "Records per resumable chunk.", lower_bound=1,
                         flag_values=fv)


def _write_json(path: pathlib.Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True))
    tmp.replace(path)


def _batches(inputs: dict[str, np.ndarray], size: int):
    """Fixed-size batches (zero-padded at the end) and the real rows of each."""
    total = len(next(iter(inputs.values())))
    for lo in range(0, max(total, 1), size):
        hi = min(lo + size, total)
        batch = {}
        for k, v in inputs.items():
            part = np.zeros((size, *v.shape[1:]), v.dtype)
            part[:hi - lo] = v[lo:hi]
            batch[k] = part
        yield batch, hi - lo


def _split(tower: feature_cache.Tower, split: str, directory: pathlib.Path,
           embed: Callable[[dict], np.ndarray], chunk: int, say: Callable[[str], None]) -> dict:
    """Every record of `split` through `embed`; returns the split's meta entry."""
    src = tower.source(split)
    n = len(src)
    parts = directory / f"{split}.parts"
    primary = jax.process_index() == 0
    if primary:
        parts.mkdir(parents=True, exist_ok=True)
    distributed.barrier(f"vnr:cache:{split}:start")
    # Every process must run the same batches (SPMD): the chunks left are listed once,
    # by all, before any process writes a new one.
    todo = [lo for lo in range(0, n, chunk) if not (parts / f"{lo:09d}.npz").is_file()]
    done = -(-n // chunk) - len(todo)
    distributed.barrier(f"vnr:cache:{split}:listed")
    every = progress.Every(say)
    for i, lo in enumerate(todo):
        every.tick(f"  {split}: {i} of {len(todo)} chunks embedded")
        part = parts / f"{lo:09d}.npz"
        recs = [src[i] for i in range(lo, min(lo + chunk, n))]
        ins = [tower.prepare(r) for r in recs]
        lengths = np.array([len(next(iter(x.values()))) for x in ins], np.int64)
        feats = embed({k: np.concatenate([x[k] for x in ins]) for k in ins[0]})
        if primary:
            tmp = parts / f".{lo:09d}.tmp.npz"
            np.savez(tmp, features=feats, lengths=lengths,
                     ids=np.array([str(r[tower.id_key]) for r in recs]))
            tmp.replace(part)
    if done:
        say(f"  {split}: resumed, {done} of {-(-n // chunk)} chunks were already done")
    distributed.barrier(f"vnr:cache:{split}")
    files = sorted(parts.glob("[0-9]*.npz"))
    loaded = [np.load(f) for f in files]
    lengths = np.concatenate([x["lengths"] for x in loaded]) if loaded else np.zeros(0, np.int64)
    ids = [str(i) for x in loaded for i in x["ids"]]
    dim = loaded[0]["features"].shape[-1] if loaded else 0
    if primary:
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        out = np.lib.format.open_memmap(directory / f"{split}.npy.tmp", mode="w+",
                                        dtype=np.float32, shape=(int(offsets[-1]), dim))
        start = 0
        for x in loaded:  # parts in record order
            out[start:start + len(x["features"])] = x["features"]
            start += len(x["features"])
        if start != offsets[-1]:
            raise feature_cache.CacheError(f"{parts}: the parts hold {start} frames, their "
                                           f"records {offsets[-1]}: delete {directory}")
        out.flush()
        del out
        (directory / f"{split}.npy.tmp").replace(directory / f"{split}.npy")
        np.save(directory / f"{split}.offsets.npy", offsets)
        _write_json(directory / f"{split}.ids.json", ids)
        shutil.rmtree(parts)
    distributed.barrier(f"vnr:cache:{split}:assembled")
    return {"records": n, "frames": int(lengths.sum()), "dim": int(dim), "took": every.took()}


def build(config: Any, towers: Sequence[str] | None = None, splits: Sequence[str] | None = None,
          batch: int = 256, chunk: int = 64,
          say: Callable[[str], None] = progress.say) -> dict[str, pathlib.Path]:
    """Builds (or completes) the caches of `towers` (default `data.feature_cache`) for
    `splits` (default: every split the run reads); returns {tower: directory}."""
    task = task_lib.load(config.task)
    names = tuple(towers) if towers else feature_cache.requested(config)
    if not names:
        raise feature_cache.CacheError("nothing to cache: set data.feature_cache (e.g. "
                                       "'image') or pass --towers")
    specs = feature_cache.towers_of(config, task, names)
    plain = copy.deepcopy(config)
    plain.data.feature_cache = ""  # this command computes what `check` would look for
    s = setup(plain)  # pretrained weights loaded, as a fresh run
    model_state = s.state
    data_size = s.mesh.shape["data"]
    size = -(-max(batch, data_size) // data_size) * data_size  # a multiple of the data axis
    pc, pi = jax.process_count(), jax.process_index()
    out = {}
    for name, tower in specs.items():
        if not pretrained.all_frozen(model_state, config, tower.module):
            raise feature_cache.CacheError(
                f"the {name} tower ({tower.module}) is not frozen by config.frozen: its "
                "features would change every step, so they are not cached")
        directory, ident = feature_cache.locate(config, task, name, tower)
        meta_path = directory / "meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {
            "identity": ident, "key": directory.name, "splits": {}}
        if pi == 0:
            directory.mkdir(parents=True, exist_ok=True)
            _write_json(meta_path, meta)
        fns = {train: jax.jit(
            lambda st, b, t=train, tw=tower: tw.embed(nnx.merge(s.graphdef, st)[0], b, t),
            in_shardings=(s.state_shardings, sharding.batch_sharding(s.mesh)),
            out_shardings=sharding.replicated(s.mesh)) for train in (False, True)}
        checked = [False]

        def embed(inputs: dict[str, np.ndarray], fns=fns, checked=checked, name=name) -> np.ndarray:
            rows = []
            for host, real in _batches(inputs, size):
                per = size // pc
                local = {k: v[pi * per:(pi + 1) * per] for k, v in host.items()}
                glob = sharding.global_batch(local, s.mesh)
                got = np.asarray(jax.device_get(fns[False](model_state, glob)), np.float32)
                if not np.isfinite(got[:real]).all():
                    raise feature_cache.CacheError(
                        f"the {name} tower ({specs[name].module}) gives non-finite outputs "
                        "on this dataset; nothing is cached")
                if not checked[0]:
                    alt = np.asarray(jax.device_get(fns[True](model_state, glob)), np.float32)
                    if not np.allclose(got[:real], alt[:real], rtol=1e-5, atol=1e-6):
                        raise feature_cache.CacheError(
                            f"the {name} tower ({specs[name].module}) gives other outputs in "
                            "training than in evaluation (dropout > 0?): cached features would "
                            "not equal the uncached run; set its dropout to 0")
                    checked[0] = True
                rows.append(got[:real])
            return np.concatenate(rows)

        say(f"feature cache {name}: {directory}")
        for split in splits or tower.splits:
            if split in meta["splits"]:
                say(f"  {split}: done ({meta['splits'][split]['records']} records)")
                continue
            done = _split(tower, split, directory, embed, chunk, say)
            took = done.pop("took")
            meta["splits"][split] = done
            if pi == 0:
                _write_json(meta_path, meta)
            say(f"  {split}: {done['records']} records, {done['frames']} frames, width "
                f"{done['dim']}, in {took}")
        out[name] = directory
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m vnr.cache_features` (`argv` without the program name; None: `sys.argv[1:]`):
    a bad command line or config is one `error:` line, exit status 2."""
    args = cli.parse(argv, PROG, __doc__, _flags, shared=RUNTIME_FLAGS)
    cli.app(lambda: _main(args))


def _main(args: cli.Args) -> int:
    if not args.flags["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # as the trainer: INFO lines drown progress
    try:
        distributed.initialize_from_flags()
    except (ValueError, RuntimeError) as e:
        cli.fail(str(e))
    try:
        build(args.config, [t for t in args.towers.split(",") if t] or None,
              [t for t in args.splits.split(",") if t] or None, args.batch, args.chunk,
              progress.say if jax.process_index() == 0 else lambda _: None)
    except (ConfigError, feature_cache.CacheError, ValueError, FileNotFoundError) as e:
        cli.fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
