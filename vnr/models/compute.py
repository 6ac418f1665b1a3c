"""How a built model computes, applied in one place (`vnr.train.setup` calls `configure` on
every task's model right after `make_model`): precision, attention kernel, rematerialisation.

Config keys (defaults in `configs/common.py`):

* `dtype` ("float32" | "bfloat16"): the compute dtype. Every flax layer that has one
  (`nnx.Linear`, `Conv`, `Embed`, `LayerNorm`, ...) gets it, so its inputs and parameters are
  cast to it at call time. What stays float32: LayerNorm statistics (flax reduces in
  float32), the attention softmax (`vnr.models.attention`), and everything the tasks compute
  outside these layers — their losses, logsumexp, metrics, k-means and DTW read the layers'
  outputs through float32 casts in `vnr.ops` and the trainer's loss (`vnr.train.train_step`).
* `param_dtype` ("float32" | "bfloat16"): the stored parameter dtype (and so the optimizer
  state's). float32 with dtype bfloat16 is the usual mixed precision.
* `attention` ("default" | "xla" | "cudnn"): see `vnr.models.attention`.
* `remat` ("none" | "towers" | "full"): "towers" recomputes the activations of the
  pretrained-architecture towers' layers (BERT/ALBERT/XLM-R/CLIP in `vnr.models.encoders`)
  in the backward pass; "full" also those of every `vnr.models.layers.Block`.
* `scan_layers` (bool, default False): the towers' identical transformer layers (CLIP, BERT,
  XLM-R; not ALBERT, whose layers share parameters) run as one `jax.lax.scan`
  (`vnr.models.encoders.layers.apply_stack`): traced and compiled once per stack, so compile
  time stops growing with depth; same values, parameters still stored per layer.

A model attribute that is none of these layers (a raw `nnx.Param` used directly, such as a
position table) is stored in `param_dtype` and computes in whatever its consumer does.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models import attention
from vnr.models.encoders.layers import TransformerLayer
from vnr.models.layers import Block

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
REMAT = ("none", "towers", "full")


def settings(config: Any) -> tuple[str, str, str, str]:
    """(dtype, param_dtype, attention, remat) of a config, checked: ValueError naming the key
    for a value that does not exist or cannot run on this backend."""
    dtype = config.get("dtype", "float32")
    param_dtype = config.get("param_dtype", "float32")
    impl = config.get("attention", "default")
    remat = config.get("remat", "none")
    for key, value in (("dtype", dtype), ("param_dtype", param_dtype)):
        if value not in DTYPES:
            raise ValueError(f"{key}={value!r}: use one of {tuple(DTYPES)}")
    attention.check_implementation(impl)
    if remat not in REMAT:
        raise ValueError(f"remat={remat!r}: use one of {REMAT}")
    if not isinstance(config.get("scan_layers", False), bool):
        raise ValueError(f"scan_layers={config.get('scan_layers')!r}: use True or False")
    return dtype, param_dtype, impl, remat


def is_default(config: Any) -> bool:
    return settings(config) == ("float32", "float32", "default", "none") and not config.get(
        "scan_layers", False)


def configure(model: nnx.Module, config: Any) -> nnx.Module:
    """Applies the config's compute settings to `model` in place (returns it). With the
    defaults nothing changes, so existing runs and checkpoints are bit-identical."""
    dtype, param_dtype, impl, remat = settings(config)
    if is_default(config):
        return model
    scan = bool(config.get("scan_layers", False))
    compute, store = DTYPES[dtype], DTYPES[param_dtype]
    for _, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Variable) and isinstance(node, nnx.Param):
            value = node.get_value()
            if jnp.issubdtype(value.dtype, jnp.floating) and value.dtype != store:
                node.set_value(value.astype(store))
        elif isinstance(node, nnx.Module):
            if hasattr(node, "param_dtype"):
                node.param_dtype = store
            if hasattr(node, "dtype") and not isinstance(node, nnx.Dropout):
                node.dtype = compute
            if isinstance(node, Block | TransformerLayer):
                node.attention_impl = impl
                node.remat = remat == "full" or (remat == "towers"
                                                 and isinstance(node, TransformerLayer))
            if isinstance(node, TransformerLayer):
                node.scan = scan
    return model


def float32(x: jax.Array) -> jax.Array:
    """`x` as float32 if it is a floating array of lower precision (losses and metrics)."""
    return x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x
