"""Benchmark of the sharded NCE step: ``python -m bench contrastive [--repeats 3]``.

Side by side in one run on 8 simulated CPU devices (mesh ("data",) = 8): the
bidirectional NCE of SYMON Eq. 5, forward + backward through a small linear
projection (features [B, F] -> embeddings [B, D] for each modality, gradients
w.r.t. the two projections), at global batch 1024 and 4096:

- ``allgather``: `vnr.ops.contrastive.nce_loss` (shard_map; each device all-gathers
  the other modality and computes its [B/8, B] logit blocks);
- ``naive-replicated``: `nce_loss_reference` on embeddings constrained to be
  replicated (what computing the single-device loss on the gathered batch does:
  every device materialises the [B, B] logits);
- ``naive-gspmd``: `nce_loss_reference` jitted on the same batch-sharded inputs with
  no constraint, leaving the partitioning of the [B, B] logits to XLA's SPMD
  partitioner (shown for honesty: it finds a row-sharded layout by itself).

Reported per row: wall time (best of --repeats after a warm-up, compile excluded),
the compiled executable's `memory_analysis()` temp bytes per device (the scratch the
step needs besides its inputs and outputs), and the bytes all-gathered per step per
device, summed over the all-gather ops of the compiled HLO (result size minus the
local operand size). This machine is shared and loaded: compare ratios within one run.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import re  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from bench.timing import wall_times  # noqa: E402
from vnr import cli, sharding  # noqa: E402
from vnr.ops import contrastive  # noqa: E402

SIZES = (1024, 4096)
FEAT, DIM = 256, 128
_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "pred": 1, "f64": 8, "s8": 1}
_GROUP = re.compile(r"replica_groups=\{\{([\d,]+)\}")
_MESH_GROUP = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_SHAPE = re.compile(r"(f32|bf16|f16|s32|u32|pred|f64|s8)\[([\d,]*)\]")


def _nbytes(dtype: str, dims: str) -> int:
    return _BYTES[dtype] * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))


def _group_size(text: str) -> int:
    """Replica-group size of a collective: `{{0,1,..}}` or `mesh['a'=8,'b'=1] {'a'}` forms."""
    m = _GROUP.search(text)
    if m:
        return len(m.group(1).split(","))
    m = _MESH_GROUP.search(text)
    if m:
        sizes = {k: int(v) for k, v in re.findall(r"'(\w+)'=(\d+)", m.group(1))}
        return int(np.prod([sizes[a] for a in re.findall(r"'(\w+)'", m.group(2))]))
    return 0


def collective_bytes(hlo: str, op: str = "all-gather") -> int:
    """Bytes each device receives per call from `op` ops of compiled HLO text:
    Σ result size · (g - 1) / g over the ops, g = the replica-group size."""
    total = 0
    for line in hlo.splitlines():
        m = re.search(rf"=\s*(.*?)\s{op}(?:-start)?\((.*)$", line)
        if not m:
            continue
        shapes, g = _SHAPE.findall(m.group(1)), _group_size(m.group(2))
        if shapes and g:
            total += sum(_nbytes(*sh) for sh in shapes) * (g - 1) // g
    return total


def make_step(loss_fn, mesh, replicate: bool = False):
    rep = NamedSharding(mesh, P())

    def loss(params, xv, xt, valid):
        v = xv @ params["wv"]
        t = xt @ params["wt"]
        if replicate:  # what a single-device loss does after gathering the batch
            v, t, valid = (jax.lax.with_sharding_constraint(a, rep) for a in (v, t, valid))
        return loss_fn(v, t, valid)

    @jax.jit
    def step(params, xv, xt, valid):
        with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            return jax.value_and_grad(loss)(params, xv, xt, valid)

    return step


def run(batch: int, repeats: int, mesh) -> list[dict]:
    rng = np.random.default_rng(0)
    sh, rep = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    xv = jax.device_put(rng.normal(size=(batch, FEAT)).astype(np.float32), sh)
    xt = jax.device_put(rng.normal(size=(batch, FEAT)).astype(np.float32), sh)
    valid = jax.device_put(np.ones(batch, bool), sh)
    params = jax.device_put({"wv": rng.normal(size=(FEAT, DIM)).astype(np.float32) / 16,
                             "wt": rng.normal(size=(FEAT, DIM)).astype(np.float32) / 16}, rep)
    rows, values = [], {}
    for name, fn, replicate in (("allgather", contrastive.nce_loss, False),
                                ("naive-replicated", contrastive.nce_loss_reference, True),
                                ("naive-gspmd", contrastive.nce_loss_reference, False)):
        step = make_step(fn, mesh, replicate)
        compiled = step.lower(params, xv, xt, valid).compile()
        mem = compiled.memory_analysis()
        hlo = compiled.as_text()
        secs = float(wall_times(lambda s=step: s(params, xv, xt, valid), repeats).min())
        values[name] = float(step(params, xv, xt, valid)[0])
        rows.append(dict(batch=batch, impl=name, ms=1e3 * secs,
                         temp_mib=mem.temp_size_in_bytes / 2**20,
                         args_mib=mem.argument_size_in_bytes / 2**20,
                         gathered_kib=collective_bytes(hlo) / 2**10,
                         reduced_kib=collective_bytes(hlo, "all-reduce") / 2**10))
    if not np.allclose(list(values.values()), values["allgather"], rtol=1e-4):
        raise SystemExit(f"loss mismatch at B={batch}: {values}")
    return rows


def main(argv: list[str] | None = None) -> None:
    args = cli.parse((argv or [])[1:], "python -m bench contrastive", __doc__,
                     lambda fv: flags.DEFINE_integer("repeats", 3, "timed runs per entry",
                                                     lower_bound=1, flag_values=fv))
    if jax.device_count() < 8:
        raise SystemExit(f"needs 8 devices, found {jax.device_count()} (jax imported before "
                         "XLA_FLAGS was set?)")
    mesh = sharding.make_mesh((8,), ("data",))
    print(f"bidirectional NCE fwd+bwd through [{FEAT}->{DIM}] projections, 8 CPU devices "
          "(loaded shared machine: compare within this run)")
    print("| B | impl | time ms | temp MiB/device | args MiB/device | all-gathered KiB/device "
          "| all-reduced KiB/device |")
    print("|---|---|---|---|---|---|---|")
    for b in SIZES:
        rows = run(b, args.repeats, mesh)
        for r in rows:
            print(f"| {r['batch']} | {r['impl']} | {r['ms']:.1f} | {r['temp_mib']:.2f} | "
                  f"{r['args_mib']:.2f} | {r['gathered_kib']:.0f} | {r['reduced_kib']:.0f} |")
        ours = rows[0]
        for naive in rows[1:]:
            print(f"| {b} | {naive['impl']} / allgather | {naive['ms'] / ours['ms']:.2f}x | "
                  f"{naive['temp_mib'] / max(ours['temp_mib'], 1e-9):.2f}x | | | |")


if __name__ == "__main__":
    import sys

    main(sys.argv)
