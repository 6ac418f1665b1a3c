"""Train-step throughput vs the machine's matmul peak, and input pipeline headroom.

    python -m launch.benchmark train --config configs/moviepuzzle/main.py[:arg] \
        [--steps 20] [--config.key=value ...]

Side by side in one run: (1) the jitted train step's steady-state step time
and examples/s (compile and input excluded: batches are staged on device
first), (2) the step's FLOPs from the compiled cost analysis, (3) this
machine's dense float32 matmul FLOP/s measured now, (4) their ratio
(utilisation), and (5) the grain input pipeline alone in examples/s against
what the step consumes.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from launch.timing import flag_config, wall_times
from vnr import sharding
from vnr.train import setup

FLAGS = flags.FLAGS  # --config (and its overrides) is defined by vnr.train
flags.DEFINE_integer("steps", 20, "Timed train steps (after 3 warm-up steps).")
flags.DEFINE_integer("input_batches", 20, "Batches timed for the input pipeline alone.")
flags.DEFINE_integer("matmul_size", 2048, "Side of the square matmul measuring peak FLOP/s.")


def matmul_flops_per_sec(n: int, repeats: int = 10) -> float:
    """Best-of-`repeats` float32 (n x n) @ (n x n) FLOP/s on the default device."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    return 2 * n**3 / float(wall_times(lambda: f(a), repeats).min())


def step_flops(compiled) -> float:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    return float(cost.get("flops", float("nan")))


def main(argv: list[str]) -> None:
    config = flag_config(argv)
    s = setup(config)

    # Input pipeline alone (first batch excluded: worker start-up).
    it = iter(s.task.train_data(config, s.local_batch, 0, 1))
    next(it)
    t = time.perf_counter()
    host = [next(it) for _ in range(FLAGS.input_batches)]
    input_eps = FLAGS.input_batches * s.local_batch / (time.perf_counter() - t)
    it.close()  # its workers must not compete with the timed train steps

    batches = [sharding.global_batch(b, s.mesh) for b in host[: min(4, len(host))]]
    step0 = jnp.asarray(0, jnp.int32)
    t = time.perf_counter()
    compiled = s.step_fn.lower(s.state, batches[0], step0).compile()
    compile_s = time.perf_counter() - t
    flops = step_flops(compiled)
    state = s.state
    for i in range(3):
        state, m = compiled(state, batches[i % len(batches)], jnp.asarray(i, jnp.int32))
    jax.block_until_ready(m)
    times = []
    for i in range(FLAGS.steps):
        t = time.perf_counter()
        state, m = compiled(state, batches[i % len(batches)], jnp.asarray(i + 3, jnp.int32))
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t)
    step_s = float(np.median(times))
    train_eps = config.batch_size / step_s
    peak = matmul_flops_per_sec(FLAGS.matmul_size)
    achieved = flops / step_s

    rows = [
        ("devices / mesh", f"{jax.device_count()} {jax.devices()[0].platform} / "
                           f"{dict(s.mesh.shape)}"),
        ("global batch", f"{config.batch_size}"),
        ("compile time", f"{compile_s:.1f} s"),
        (f"step time (median of {FLAGS.steps})", f"{step_s * 1e3:.1f} ms"),
        ("train examples/s", f"{train_eps:.1f}"),
        ("step FLOPs (compiled cost analysis)", f"{flops / 1e9:.2f} GFLOP"),
        ("achieved FLOP/s", f"{achieved / 1e9:.1f} GFLOP/s"),
        (f"matmul f32 {FLAGS.matmul_size}^3 FLOP/s (same run)", f"{peak / 1e9:.1f} GFLOP/s"),
        ("utilisation (achieved / matmul)", f"{100 * achieved / peak:.1f} %  (target >= 40 %)"),
        (f"input pipeline alone ({config.data.num_workers} workers)",
         f"{input_eps:.1f} examples/s"),
        ("input / train consumption", f"{input_eps / train_eps:.2f}x  (target >= 3x)"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'measure'.ljust(width)} | value |\n|{'-' * (width + 2)}|---|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")
