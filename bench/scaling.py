"""Data-parallel scaling of the main job's train step on 1, 2, 4, 8 CPU devices.

    python -m bench scaling [--config configs/moviepuzzle/main.py] \
        [--devices 1,2,4,8] [--per_device_batch 4] [--steps 10]

Each device count runs in its own subprocess with
`--xla_force_host_platform_device_count=n` (a process cannot change its device
count), mesh (n, 1), global batch `per_device_batch * n` (weak scaling). Side by
side in one table: the step time (median, compile and input excluded), examples/s
and examples/s per device, and the collectives of the compiled step read from its
optimised HLO: for each kind (all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute) the bytes of the arrays involved per step and the bytes each
device receives with ring algorithms -- all-reduce 2(g-1)/g * S, all-gather
(g-1)/g * S_out, reduce-scatter (g-1)/g * S_in, for groups of g devices.

Simulated CPU devices share this machine's cores, so examples/s per device falls
with n here by construction; the communication volume is what carries over to a
pod (see docs/scale.md, "Predicting communication", for the formula).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("devices", "1,2,4,8", "Device counts to run, comma-separated.")
flags.DEFINE_integer("per_device_batch", 4, "Clips per device (global batch = this * n).")
flags.DEFINE_integer("steps", 10, "Timed steps per device count (after 2 warm-up steps).")
flags.DEFINE_string("bench_config", "configs/moviepuzzle/main.py",
                    "Config file[:args] of the step to time.")
flags.DEFINE_boolean("child", False, "Internal: run one device count and print JSON.")

DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
               "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8,
               "c128": 16}
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_SHAPE = re.compile(r"\b(" + "|".join(DTYPE_BYTES) + r")\[([0-9,]*)\]")
_OP = re.compile(r"=\s*(.+?)\s+(" + "|".join(KINDS) + r")(-start)?\((.*)$")


def _bytes(shapes: str) -> int:
    total = 0
    for dtype, dims in _SHAPE.findall(shapes):
        total += DTYPE_BYTES[dtype] * int(np.prod([int(d) for d in dims.split(",") if d]))
    return total


def _group_size(line: str, devices: int) -> int:
    m = re.search(r"replica_groups=\{\{([0-9,]+)\}", line)
    if m:
        return len(m.group(1).split(","))
    m = re.search(r"replica_groups=\[([0-9,]+)\]<=", line)  # iota form [groups,size]
    if m:
        return int(m.group(1).split(",")[-1])
    return devices


def collectives(hlo: str, devices: int) -> dict[str, dict[str, float]]:
    """Per collective kind in an optimised HLO text: count, array bytes, and ring bytes
    received per device. Sizes come from the result shapes (the printed operands carry
    only names): all-reduce S = result; all-gather S_out = result; reduce-scatter
    S_in = g * result; all-to-all and collective-permute S = result."""
    out = {k: {"count": 0, "bytes": 0.0, "received": 0.0} for k in KINDS}
    for line in hlo.splitlines():
        m = _OP.search(line)
        if not m:
            continue
        result, kind, start, _ = m.groups()
        g = _group_size(line, devices)
        frac = (g - 1) / g if g > 1 else 0.0
        r = _bytes(result)
        if start and kind == "all-gather":  # async: result is (operand, output)
            r = r * g / (g + 1)
        size = r * g if kind == "reduce-scatter" else r
        recv = {"all-reduce": 2 * frac * size, "collective-permute": size}.get(kind, frac * size)
        out[kind]["count"] += 1
        out[kind]["bytes"] += size
        out[kind]["received"] += recv
    return out


def _load_config(spec: str):
    import importlib.util

    path, _, arg = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location("_bench_config", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg or None)


def run_child() -> dict:
    import jax
    import jax.numpy as jnp

    from vnr import sharding
    from vnr.train import setup

    n = jax.device_count()
    config = _load_config(FLAGS.bench_config)
    config.mesh.shape = (n, 1)
    config.batch_size = config.eval_batch_size = FLAGS.per_device_batch * n
    s = setup(config)
    it = iter(s.task.train_data(config, s.local_batch, 0, 1))
    host = [next(it) for _ in range(2)]
    it.close()
    batches = [sharding.global_batch(b, s.mesh) for b in host]
    step0 = jnp.asarray(0, jnp.int32)
    compiled = s.step_fn.lower(s.state, batches[0], step0).compile()
    comm = collectives(compiled.as_text(), n)
    from flax import nnx

    model = nnx.merge(s.graphdef, s.state)[0]
    param_bytes = sum(x.nbytes for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    state = s.state
    for i in range(2):
        state, m = compiled(state, batches[i % 2], jnp.asarray(i, jnp.int32))
    jax.block_until_ready(m)
    times = []
    for i in range(FLAGS.steps):
        t = time.perf_counter()
        state, m = compiled(state, batches[i % 2], jnp.asarray(i + 2, jnp.int32))
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t)
    step_s = float(np.median(times))
    return {"devices": n, "batch": config.batch_size, "step_s": step_s,
            "examples_per_s": config.batch_size / step_s, "comm": comm,
            "param_bytes": param_bytes}


def main(argv: list[str]) -> None:
    FLAGS(argv)
    if FLAGS.child:
        print("RESULT " + json.dumps(run_child()))
        return
    rows = []
    for n in [int(x) for x in FLAGS.devices.split(",")]:
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=" ".join(
            [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
            + [f"--xla_force_host_platform_device_count={n}"]))
        cmd = [sys.executable, "-m", "bench", "scaling", "--child",
               f"--bench_config={FLAGS.bench_config}",
               f"--per_device_batch={FLAGS.per_device_batch}", f"--steps={FLAGS.steps}"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if out.returncode or line is None:
            sys.exit(f"error: the {n}-device run failed:\n{out.stderr[-3000:]}")
        rows.append(json.loads(line[len("RESULT "):]))
        print(f"{n} device(s) done", file=sys.stderr)

    print(f"\nmain job step, weak scaling ({FLAGS.per_device_batch} clips/device), "
          f"{FLAGS.bench_config}, CPU devices simulated on {os.cpu_count()} cores\n")
    print(f"parameters: {rows[0]['param_bytes'] / 2**20:.2f} MB (the gradient all-reduce "
          f"moves this much per step)\n")
    print("| devices | global batch | step ms | examples/s | examples/s/device | "
          "all-reduce: ops, MB, MB recv/dev | all-gather: ops, MB, MB recv/dev | "
          "other collectives MB recv/dev |")
    print("|---|---|---|---|---|---|---|---|")
    mb = 1 / 2**20
    for r in rows:
        c = r["comm"]
        other = sum(c[k]["received"] for k in KINDS if k not in ("all-reduce", "all-gather"))
        ar, ag = c["all-reduce"], c["all-gather"]
        print(f"| {r['devices']} | {r['batch']} | {r['step_s'] * 1e3:.1f} | "
              f"{r['examples_per_s']:.1f} | {r['examples_per_s'] / r['devices']:.1f} | "
              f"{ar['count']}, {ar['bytes'] * mb:.3f}, {ar['received'] * mb:.3f} | "
              f"{ag['count']}, {ag['bytes'] * mb:.3f}, {ag['received'] * mb:.3f} | "
              f"{other * mb:.3f} |")
