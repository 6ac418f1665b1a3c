"""Forward throughput: our NNX CLIP vision tower vs transformers' FlaxCLIPVisionModel.

    python -m bench encoders [--size base|small|tiny] [--patch 32|16]
                                        [--batch 8] [--iters 10] [--dtype float32|bfloat16]

Both get the same random weights (ours loaded through the checkpoint mapping from the Flax
parameter tree), the same images (ours channels-last, theirs channels-first as each takes
them) and are jitted; runs alternate between the two so machine noise hits both alike.
Prints images/s (median over iterations) and our speed relative to theirs.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from vnr import cli

_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
SIZES = {  # CLIPVisionConfig fields above, then image side
    "base": (768, 12, 12, 3072, 224),
    "small": (256, 4, 4, 1024, 224),
    "tiny": (32, 2, 2, 64, 64),
}


def _models(size: str, patch: int, dtype):
    from flax import nnx
    from flax.traverse_util import flatten_dict, unflatten_dict
    from transformers import CLIPVisionConfig, FlaxCLIPVisionModel

    from vnr.models.encoders import factory, loading

    *widths, image = SIZES[size]
    cfg = CLIPVisionConfig(patch_size=patch, image_size=image, **dict(zip(_FIELDS, widths)))
    theirs = FlaxCLIPVisionModel(cfg, dtype=dtype, _do_init=False)
    shapes = jax.eval_shape(
        lambda k: theirs.init_weights(k, theirs.input_shape), jax.random.PRNGKey(0)
    )
    rng = np.random.default_rng(0)
    flat = {
        k: (rng.normal(size=v.shape) * 0.02).astype(np.float32)
        for k, v in flatten_dict(shapes).items()
    }
    params = jax.tree.map(jnp.asarray, unflatten_dict(flat))
    ctor, _, _ = factory.builder(cfg, dtype=dtype)
    named = {".".join(k): v for k, v in flat.items()}
    arrays = loading.match_tensors(loading.param_shapes(ctor), named, "flax")
    ours = loading.instantiate(ctor, arrays, key=jax.random.key(0))
    graphdef, state = nnx.split(ours)

    @jax.jit
    def ours_fwd(state, images):
        return nnx.merge(graphdef, state)(images).pooler_output

    @jax.jit
    def theirs_fwd(params, images_nchw):
        return theirs(images_nchw, params=params).pooler_output

    return cfg, (ours_fwd, state), (theirs_fwd, params)


def _time(fn, arg, images) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(arg, images))
    return time.perf_counter() - t0


def main(argv: list[str]) -> None:
    """Runs the benchmark; ``argv[0]`` is the benchmark name."""
    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_enum("size", "base", sorted(SIZES), "CLIP vision tower size",
                          flag_values=fv)
        flags.DEFINE_enum("patch", "32", ("16", "32"), "patch size", flag_values=fv)
        flags.DEFINE_integer("batch", 8, "images per batch", lower_bound=1, flag_values=fv)
        flags.DEFINE_integer("iters", 10, "timed iterations", lower_bound=1, flag_values=fv)
        flags.DEFINE_enum("dtype", "float32", ("float32", "bfloat16"), "compute dtype",
                          flag_values=fv)

    args = cli.parse(argv[1:], "python -m bench encoders", __doc__, define)
    patch = int(args.patch)
    dtype = jnp.dtype(args.dtype)
    cfg, (ours, state), (theirs, params) = _models(args.size, patch, dtype)
    s = cfg.image_size
    nhwc = jnp.asarray(np.random.default_rng(1).normal(size=(args.batch, s, s, 3)), jnp.float32)
    nchw = jnp.transpose(nhwc, (0, 3, 1, 2))
    t0 = time.perf_counter()
    a, b = ours(state, nhwc), theirs(params, nchw)
    jax.block_until_ready((a, b))
    diff = float(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32)).max())
    compile_s = time.perf_counter() - t0
    times = {"ours (vnr NNX)": [], "transformers Flax": []}
    for _ in range(args.iters):
        times["ours (vnr NNX)"].append(_time(ours, state, nhwc))
        times["transformers Flax"].append(_time(theirs, params, nchw))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"CLIP vision tower {args.size} (width {cfg.hidden_size}, {cfg.num_hidden_layers} "
        f"layers, {s}x{s}, patch {patch}), batch {args.batch}, {args.dtype}, "
        f"{args.iters} iters, backend {jax.default_backend()} x{jax.device_count()}"
    )
    print(f"outputs agree to {diff:.1e} (max abs); compile+first run {compile_s:.1f}s")
    print(f"{'model':<20} {'ms/batch':>10} {'images/s':>10} {'vs transformers':>16}")
    base = med["transformers Flax"]
    for name, t in med.items():
        print(f"{name:<20} {t * 1e3:>10.1f} {args.batch / t:>10.1f} {base / t:>15.2f}x")


if __name__ == "__main__":
    import sys

    main(["encoders", *sys.argv[1:]])
