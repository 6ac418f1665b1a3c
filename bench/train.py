"""Train-step throughput vs the device's peak, memory by batch size, and input headroom.

    python -m bench train --config configs/moviepuzzle/main.py[:arg] \
        [--steps 20] [--memory_batches 8,16,32,64] [--config.dtype=bfloat16] \
        [--config.remat=towers] [--config.key=value ...]

Side by side in one run: (1) the jitted train step's compile time and steady-state step
time, examples/s and frames/s (input excluded: batches are staged on device first); (2) the
step's FLOPs from the compiled cost analysis and from an analytic count of its jaxpr's
matmuls and convolutions (`bench/flops.py`); (3) the peak: on CPU this machine's dense
float32 matmul FLOP/s measured now, on GPU/TPU the dense bf16 peak of the device kind
(`PEAKS`, with sources); (4) MFU = achieved / peak; (5) per-device peak bytes of the compiled
step (`memory_analysis`: arguments + outputs + temporaries - aliased) for each batch size of
`--memory_batches`, with the config's remat and without; (6) the grain input pipeline alone,
224 px JPEG decode frames/s per worker, and the host cores it takes to feed one device at
the measured step rate; (7) with `--feature_cache image` (a config whose image tower is
frozen), the same step and pipeline reading the tower's cached outputs, beside (1) and (6).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from bench import flops as flop_count
from bench.timing import flag_config, wall_times
from vnr import sharding
from vnr.data import pipeline
from vnr.train import setup

FLAGS = flags.FLAGS  # --config (and its overrides) is defined by vnr.train
flags.DEFINE_integer("steps", 20, "Timed train steps (after --warmup steps).")
flags.DEFINE_integer("warmup", 3, "Untimed train steps after compiling.")
flags.DEFINE_integer("input_batches", 20, "Batches timed for the input pipeline alone.")
flags.DEFINE_integer("matmul_size", 2048, "Side of the square matmul measuring peak FLOP/s.")
flags.DEFINE_string("memory_batches", "", "Comma-separated global batch sizes whose compiled "
                    "step memory is reported (compile only), e.g. 8,16,32,64.")
flags.DEFINE_integer("jpeg_frames", 200, "224 px JPEGs decoded to time one input worker.")
flags.DEFINE_bool("gemm_bound", False, "Also time every matmul/convolution of the step alone "
                  "at its own shapes: the step time and MFU the GEMMs alone allow.")
flags.DEFINE_bool("breakdown", False, "Also time the loss forward alone and forward + "
                  "backward (no optimizer update) on the same batch.")
flags.DEFINE_bool("scan_compare", False, "Also compile the step with scan_layers off and on "
                  "(encoder layers as one lax.scan) and report both compile times.")
flags.DEFINE_string("feature_cache", "", "Also time the step reading these frozen towers' "
                    "cached outputs (e.g. image; vnr/feature_cache.py), side by side.")

# Dense bf16 peak FLOP/s (no sparsity) by `jax.devices()[0].device_kind`, from the vendors'
# data sheets: NVIDIA H100 SXM / H200 (H100 datasheet, 989.4 TFLOPS bf16 dense), H100 PCIe
# (756), A100 (312, A100 datasheet); Google Cloud TPU docs: v4 275, v5e 197, v5p 459, v6e 918.
PEAKS = {
    "NVIDIA H100 80GB HBM3": 989.4e12, "NVIDIA H100": 989.4e12, "NVIDIA H200": 989.4e12,
    "NVIDIA H100 PCIe": 756e12, "NVIDIA A100-SXM4-80GB": 312e12, "NVIDIA A100-SXM4-40GB": 312e12,
    "TPU v4": 275e12, "TPU v5 lite": 197e12, "TPU v5e": 197e12, "TPU v5p": 459e12,
    "TPU v6 lite": 918e12, "TPU v6e": 918e12,
}


def matmul_flops_per_sec(n: int, repeats: int = 10) -> float:
    """Best-of-`repeats` float32 (n x n) @ (n x n) FLOP/s on the default device."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    return 2 * n**3 / float(wall_times(lambda: f(a), repeats).min())


def step_flops(compiled) -> float:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    return float(cost.get("flops", float("nan")))


def device_peak(matmul_size: int) -> tuple[float, str]:
    """(FLOP/s, what it is) of the first device: the table above, or on CPU the measured
    float32 matmul rate (`matmul_size`^3)."""
    dev = jax.devices()[0]
    if dev.platform == "cpu":
        return matmul_flops_per_sec(matmul_size), (
            f"matmul f32 {matmul_size}^3 measured in this run")
    kind = dev.device_kind
    for name, peak in PEAKS.items():
        if kind == name or kind.startswith(name):
            return peak, f"{kind} dense bf16 data-sheet peak"
    return float("nan"), f"{kind}: not in bench.train.PEAKS"


def peak_bytes(compiled) -> int:
    m = compiled.memory_analysis()
    return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
               - m.alias_size_in_bytes)


def memory_table(config, batches: list[int]) -> list[tuple[str, str]]:
    """Per-device peak bytes of the compiled train step by global batch, remat off / on."""
    from vnr.data import pipeline  # noqa: F401  (keeps the import cost out of timings)

    rows = []
    remats = ["none"] + ([config.remat] if config.get("remat", "none") != "none" else ["full"])
    for b in batches:
        cells = []
        for remat in remats:
            c = config.copy_and_resolve_references()
            c.batch_size, c.eval_batch_size, c.remat = b, b, remat
            s = setup(c)
            it = iter(s.task.train_data(c, s.local_batch, 0, 1))
            batch = sharding.global_batch(next(it), s.mesh)
            it.close()
            compiled = s.step_fn.lower(s.state, batch, jnp.asarray(0, jnp.int32)).compile()
            cells.append(f"remat={remat}: {peak_bytes(compiled) / 2**20:,.0f} MiB")
        rows.append((f"peak bytes / device, batch {b}", "; ".join(cells)))
    return rows


def jpeg_frames_per_sec(n: int, side: int = 224) -> float:
    """One worker's 224 px JPEG decode (PIL, to an RGB uint8 array) in frames/s."""
    import io

    from PIL import Image

    rng = np.random.default_rng(0)
    img = Image.fromarray((rng.random((side, side, 3)) * 255).astype(np.uint8))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    t = time.perf_counter()
    for _ in range(n):
        np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return n / (time.perf_counter() - t)


def frames_per_example(config) -> int:
    d = config.get("data", {})
    return int(d.get("max_frames", 1) or 1)


def timed_steps(config, s, steps: int, warmup: int, input_batches: int):
    """(input examples/s, compile s, compiled step, median step s, first device batch) of
    `steps` timed train steps after `warmup`; the input pipeline alone over `input_batches`."""
    # Input pipeline alone (first batch excluded: worker start-up).
    it = iter(s.task.train_data(config, s.local_batch, 0, 1))
    next(it)
    t = time.perf_counter()
    host = [next(it) for _ in range(input_batches)]
    input_eps = input_batches * s.local_batch / (time.perf_counter() - t)
    it.close()  # its workers must not compete with the timed train steps

    batches = [sharding.global_batch(b, s.mesh) for b in host[: min(4, len(host))]]
    step0 = jnp.asarray(0, jnp.int32)
    t = time.perf_counter()
    compiled = s.step_fn.lower(s.state, batches[0], step0).compile()
    compile_s = time.perf_counter() - t
    state = jax.tree.map(lambda x: x.copy() if hasattr(x, "copy") else x, s.state)
    for i in range(warmup):
        state, m = compiled(state, batches[i % len(batches)], jnp.asarray(i, jnp.int32))
        jax.block_until_ready(m)
    times = []
    for i in range(steps):
        t = time.perf_counter()
        state, m = compiled(state, batches[i % len(batches)],
                            jnp.asarray(i + warmup, jnp.int32))
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t)
    return input_eps, compile_s, compiled, float(np.median(times)), batches[0]


def gemm_bound(fn, *args, repeats: int = 5) -> tuple[float, float, int]:
    """(seconds, FLOPs, distinct shapes) of the step's matmuls and convolutions each run
    alone, jitted, at its own shapes and dtypes (best of `repeats`), times how often the
    step runs it: the time a step made only of its GEMMs would take on this device."""
    eqns = flop_count.matmul_eqns(jax.make_jaxpr(fn)(*args))
    groups: dict = {}
    for eqn, times in eqns:
        key = (eqn.primitive.name, tuple((v.aval.shape, str(v.aval.dtype)) for v in eqn.invars),
               repr(sorted(eqn.params.items(), key=lambda kv: kv[0])))
        if key in groups:
            groups[key][1] += times
        else:
            groups[key] = [eqn, times]
    total_s = total_f = 0.0
    rng = np.random.default_rng(0)
    for eqn, times in groups.values():
        xs = [jnp.asarray(rng.standard_normal(v.aval.shape), v.aval.dtype) for v in eqn.invars]
        f = jax.jit(lambda *a, e=eqn: e.primitive.bind(*a, **e.params))
        total_s += times * float(wall_times(lambda f=f, xs=xs: f(*xs), repeats).min())
        total_f += times * flop_count.eqn_flops(eqn)
    return total_s, total_f, len(groups)


def breakdown(s, config, batch) -> list[tuple[str, str]]:
    """Median times of the jitted loss forward alone and of forward + backward (gradients
    of the trainable parameters, no optimizer update), on `batch`."""
    from flax import nnx

    from vnr import pretrained

    rngs_key = jax.random.key(0)

    def fwd(state, b):
        model = nnx.merge(s.graphdef, state)[0]
        return s.task.loss_fn(config, model, b, nnx.Rngs(dropout=rngs_key))[0]

    def fwd_bwd(state, b):
        model = nnx.merge(s.graphdef, state)[0]
        wrt = pretrained.trainable(config)
        return nnx.grad(lambda m: s.task.loss_fn(config, m, b, nnx.Rngs(dropout=rngs_key))[0],
                        argnums=nnx.DiffState(0, wrt))(model)

    out = []
    for name, fn in (("loss forward alone", fwd), ("forward + backward, no update", fwd_bwd)):
        f = jax.jit(fn)
        t = float(np.median(wall_times(lambda f=f: f(s.state, batch), max(FLAGS.steps, 3))))
        out.append((name, f"{t * 1e3:.1f} ms"))
    return out


def scan_table(config, batch) -> list[tuple[str, str]]:
    """Trace + compile time of the train step with `scan_layers` off and on (same run)."""
    cells = []
    for scan in (False, True):
        c = config.copy_and_resolve_references()
        c.scan_layers = scan
        s = setup(c)
        t = time.perf_counter()
        s.step_fn.lower(s.state, batch, jnp.asarray(0, jnp.int32)).compile()
        cells.append(f"scan_layers={scan}: {time.perf_counter() - t:.1f} s")
    return [("compile time, encoder layers looped / scanned", "; ".join(cells))]


def cache_table(config, step_s: float, input_eps: float) -> list[tuple[str, str]]:
    """The same step and input pipeline reading `--feature_cache` towers' cached outputs
    (built now if missing, `vnr.cache_features`), beside the uncached numbers."""
    from vnr import cache_features

    c = config.copy_and_resolve_references()
    c.data.feature_cache = FLAGS.feature_cache
    t = time.perf_counter()
    cache_features.build(c, say=lambda _: None)
    build_s = time.perf_counter() - t
    s = setup(c)
    c_input, _, _, c_step, _ = timed_steps(c, s, FLAGS.steps, FLAGS.warmup, FLAGS.input_batches)
    return [
        (f"cached {FLAGS.feature_cache} features: cache build (or check), once",
         f"{build_s:.1f} s"),
        ("cached: step time / uncached", f"{c_step * 1e3:.1f} ms / {step_s * 1e3:.1f} ms "
                                         f"({step_s / c_step:.2f}x faster)"),
        ("cached: train examples/s / uncached",
         f"{c.batch_size / c_step:.1f} / {c.batch_size / step_s:.1f}"),
        ("cached: input pipeline alone / uncached", f"{c_input:.1f} / {input_eps:.1f} "
                                                    f"examples/s ({c_input / input_eps:.2f}x)"),
    ]


def main(argv: list[str]) -> None:
    config = flag_config(argv)
    s = setup(config)
    input_eps, compile_s, compiled, step_s, batch0 = timed_steps(
        config, s, FLAGS.steps, FLAGS.warmup, FLAGS.input_batches)
    step0 = jnp.asarray(0, jnp.int32)
    flops = step_flops(compiled)
    analytic = flop_count.count(s.step_fn, s.state, batch0, step0)
    train_eps = config.batch_size / step_s
    frames = frames_per_example(config)
    peak, peak_what = device_peak(FLAGS.matmul_size)
    achieved = flops / step_s
    jpeg = jpeg_frames_per_sec(FLAGS.jpeg_frames)
    per_device_fps = train_eps * frames / jax.device_count()

    rows = [
        ("devices / mesh", f"{jax.device_count()} {jax.devices()[0].platform} / "
                           f"{dict(s.mesh.shape)}"),
        ("global batch / frames per example", f"{config.batch_size} / {frames}"),
        ("dtype / param_dtype / remat / attention",
         f"{config.get('dtype', 'float32')} / {config.get('param_dtype', 'float32')} / "
         f"{config.get('remat', 'none')} / {config.get('attention', 'default')}"),
        ("compile time", f"{compile_s:.1f} s"),
        (f"step time (median of {FLAGS.steps})", f"{step_s * 1e3:.1f} ms"),
        ("train examples/s", f"{train_eps:.1f}"),
        ("train frames/s", f"{train_eps * frames:.1f}"),
        ("step FLOPs (compiled cost analysis)", f"{flops / 1e9:.2f} GFLOP"),
        ("step FLOPs (analytic: jaxpr matmuls + convs)",
         f"{analytic / 1e9:.2f} GFLOP ({100 * (analytic / flops - 1):+.1f} %)"),
        ("achieved FLOP/s", f"{achieved / 1e9:.1f} GFLOP/s"),
        (f"peak ({peak_what})", f"{peak / 1e9:.1f} GFLOP/s per device"),
        ("MFU (achieved / devices x peak)",
         f"{100 * achieved / (peak * jax.device_count()):.1f} %"),
        (f"input pipeline alone ({_workers(config.data.num_workers)} workers)",
         f"{input_eps:.1f} examples/s"),
        ("input / train consumption", f"{input_eps / train_eps:.2f}x  (target >= 3x)"),
        ("224 px JPEG decode, one worker", f"{jpeg:.0f} frames/s"),
        ("host cores to feed one device (JPEG decode only)",
         f"{per_device_fps / jpeg:.3g}"),
    ]
    if FLAGS.gemm_bound:
        g_s, g_f, shapes = gemm_bound(s.step_fn, s.state, batch0, step0)
        rows += [
            (f"GEMMs alone at the step's shapes ({shapes} distinct)",
             f"{g_s * 1e3:.1f} ms = {100 * g_s / step_s:.0f} % of the step; "
             f"{g_f / g_s / 1e9:.1f} GFLOP/s = {100 * g_f / g_s / peak:.1f} % of peak"),
            ("step time not in GEMMs (elementwise, gathers, softmax, layout)",
             f"{(step_s - g_s) * 1e3:.1f} ms"),
        ]
    if FLAGS.breakdown:
        rows += breakdown(s, config, batch0)
    if FLAGS.scan_compare:
        rows += scan_table(config, batch0)
    if FLAGS.feature_cache:
        rows += cache_table(config, step_s, input_eps)
    if FLAGS.memory_batches:
        rows += memory_table(config, [int(b) for b in FLAGS.memory_batches.split(",")])
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'measure'.ljust(width)} | value |\n|{'-' * (width + 2)}|---|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


def _workers(n: int) -> str:
    """`data.num_workers` as the pipeline reads it (-1: this host's spare cores)."""
    return f"{pipeline.suggested_workers()} (auto)" if n < 0 else str(n)
