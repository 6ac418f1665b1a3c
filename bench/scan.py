"""Compile time of a tower's forward + backward by depth: layers looped vs one lax.scan.

    python -m bench scan [--depths 2,6,12,24] [--size small] [--arch bert]

For each depth, a scratch tower (`vnr.models.encoders.scratch_config`, `num_hidden_layers`
set) is built twice, with `config.scan_layers` off and on (`vnr.models.compute`), and the
jitted gradient of a scalar of its pooled output is traced, lowered and compiled (timed
together, nothing cached between them); the two gradients are compared. Side by side in one
run, so both see the same machine.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import flags
from flax import nnx

from vnr import cli


def _compile(arch: str, size: str, depth: int, scan: bool, ids: jax.Array):
    from vnr.models import compute
    from vnr.models.encoders import builder, scratch_config

    ctor, _, _ = builder(scratch_config(arch, size, num_hidden_layers=depth))
    model = ctor(nnx.Rngs(0))
    model.eval()  # compile time of the layers' math; dropout draws are not the point
    compute.configure(model, ml_collections.ConfigDict(dict(scan_layers=scan)))
    graphdef, state, rest = nnx.split(model, nnx.Param, ...)
    mask = (ids > 0).astype(jnp.int32)

    def loss(st, other):
        return (nnx.merge(graphdef, st, other)(ids, mask).pooled ** 2).sum()

    t = time.perf_counter()
    compiled = jax.jit(jax.grad(loss)).lower(state, rest).compile()
    seconds = time.perf_counter() - t
    return seconds, jax.tree.leaves(compiled(state, rest))


def main(argv: list[str]) -> None:
    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_string("depths", "2,6,12,24", "comma-separated layer counts",
                            flag_values=fv)
        flags.DEFINE_string("size", "small", "scratch tower size", flag_values=fv)
        flags.DEFINE_string("arch", "bert", "scratch tower architecture", flag_values=fv)

    args = cli.parse(argv[1:], "python -m bench scan", __doc__, define)
    ids = jnp.asarray(np.random.default_rng(0).integers(1, 100, (8, 32)), jnp.int32)
    print(f"\n{args.arch}-{args.size} forward + backward, 8 x 32 tokens, "
          f"{jax.devices()[0].platform}\n")
    print("| layers | compile, looped | compile, scanned | max grad difference |")
    print("|---|---|---|---|")
    for depth in (int(d) for d in args.depths.split(",")):
        loop_s, g_loop = _compile(args.arch, args.size, depth, False, ids)
        scan_s, g_scan = _compile(args.arch, args.size, depth, True, ids)
        diff = max(float(jnp.abs(a - b).max()) for a, b in zip(g_loop, g_scan, strict=True))
        print(f"| {depth} | {loop_s:.2f} s | {scan_s:.2f} s | {diff:.1e} |")
