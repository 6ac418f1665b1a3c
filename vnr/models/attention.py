"""The one attention function of every shared vnr layer (`vnr.models.layers.Block`, the
BERT/ALBERT/XLM-R/CLIP towers), built on `jax.nn.dot_product_attention`.

Masks come in the form the fused kernels accept: a key padding mask [B, S] (True = attend)
and a causal flag, never an arbitrary additive bias. `implementation` (config key
`attention`, set on the layers by `vnr.models.compute.configure`):

* "default": `jax.nn.dot_product_attention` with implementation=None (XLA today; JAX may
  pick a fused kernel in future versions).
* "xla": the XLA einsum-softmax-einsum path on every backend (logits upcast to float32 for
  the softmax, as JAX does).
* "cudnn": cuDNN flash attention (GPU only). It needs float16/bfloat16 inputs, a head
  dimension that is a multiple of 8 (at most 128), and padding at the end of each row: the
  padding mask is passed as per-row key lengths (`key_value_seq_lengths`), so a mask with a
  hole in the middle is not representable (every vnr tokenizer and batcher pads at the end).
  It accepts no arbitrary bias.

Dropout on the attention probabilities (BERT's `attention_probs_dropout_prob` while
training) has no fused form: those calls take an explicit XLA path with the same masking.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx, struct

IMPLEMENTATIONS = ("default", "xla", "cudnn")


@struct.dataclass
class Mask:
    """Which keys a query may attend to: `key` [B, S] (nonzero = attend; None = all) and,
    when `causal`, only keys at or before the query's position."""

    key: jax.Array | None = None
    causal: bool = struct.field(pytree_node=False, default=False)


def check_implementation(name: str, backend: str | None = None) -> None:
    """ValueError (one line) for an unknown name or "cudnn" on a backend without cuDNN."""
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"attention={name!r}: use one of {IMPLEMENTATIONS}")
    backend = backend or jax.default_backend()
    if name == "cudnn" and backend != "gpu":
        raise ValueError(f"attention='cudnn' needs an NVIDIA GPU (cuDNN flash attention); this "
                         f"run's backend is {backend!r}: use 'default' or 'xla'")


def _dropout_active(drop: nnx.Dropout | None, deterministic: bool | None) -> bool:
    if drop is None or drop.rate == 0:
        return False
    return not (drop.deterministic if deterministic is None else deterministic)


def _explicit(q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask | None,
              drop: nnx.Dropout, deterministic: bool | None) -> jax.Array:
    """XLA attention with dropout on the probabilities (float32 softmax)."""
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    allowed = None
    if mask is not None and mask.key is not None:
        allowed = (mask.key > 0)[:, None, None, :]
    if mask is not None and mask.causal:
        tri = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), dtype=bool))[None, None]
        allowed = tri if allowed is None else allowed & tri
    if allowed is not None:
        scores = jnp.where(allowed, scores, jnp.finfo(jnp.float32).min)
    probs = drop(jax.nn.softmax(scores, axis=-1).astype(v.dtype), deterministic=deterministic)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask | None = None, *,
           implementation: str = "default", drop: nnx.Dropout | None = None,
           deterministic: bool | None = None) -> jax.Array:
    """Multi-head attention of q [B, T, H, D] over k, v [B, S, H, D] -> [B, T, H, D]."""
    if _dropout_active(drop, deterministic):
        return _explicit(q, k, v, mask, drop, deterministic)
    key = None if mask is None else mask.key
    causal = bool(mask is not None and mask.causal)
    if implementation == "cudnn":
        if q.dtype not in (jnp.bfloat16, jnp.float16):
            raise ValueError(f"attention='cudnn' needs bfloat16/float16 inputs (got {q.dtype}); "
                             "set dtype='bfloat16'")
        if q.shape[-1] % 8 or q.shape[-1] > 128:
            raise ValueError(f"attention='cudnn' needs a head dimension that is a multiple of 8 "
                             f"and at most 128 (got {q.shape[-1]})")
        lengths = None if key is None else (key > 0).sum(-1).astype(jnp.int32)
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                            key_value_seq_lengths=lengths,
                                            implementation="cudnn")
    m = None if key is None else (key > 0)[:, None, None, :]
    impl = None if implementation == "default" else implementation
    return jax.nn.dot_product_attention(q, k, v, mask=m, is_causal=causal, implementation=impl)
