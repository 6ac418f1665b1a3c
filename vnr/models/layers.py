"""Small NNX building blocks with logical sharding names on every parameter.

Logical names: "embed" (model width), "mlp" (FFN hidden), "heads" (attention
projection width), "vocab" (embedding rows), "conv" (conv output channels);
`vnr.sharding` maps them to mesh axes with the config's rules.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models import attention

_init = nnx.initializers.lecun_normal()
_zeros = nnx.initializers.zeros_init()
_ones = nnx.initializers.ones_init()


def annotate(init: Any, names: tuple) -> Any:
    """`init` with logical axis names; placement is left to `vnr.sharding` (no eager
    sharding, so modules also build outside a mesh)."""
    return nnx.with_partitioning(init, names, eager_sharding=False)


def dense(din: int, dout: int, names: tuple, rngs: nnx.Rngs, dtype=jnp.float32) -> nnx.Linear:
    """`nnx.Linear` whose kernel and bias carry logical axis names."""
    return nnx.Linear(
        din, dout, dtype=dtype,
        kernel_init=annotate(_init, names),
        bias_init=annotate(_zeros, (names[1],)),
        rngs=rngs,
    )


def layer_norm(dim: int, rngs: nnx.Rngs, epsilon: float = 1e-6) -> nnx.LayerNorm:
    return nnx.LayerNorm(
        dim, epsilon=epsilon,
        scale_init=annotate(_ones, ("norm",)),
        bias_init=annotate(_zeros, ("norm",)),
        rngs=rngs,
    )


class Block(nnx.Module):
    """Pre-LN transformer block: self-attention then MLP, both with dropout."""

    def __init__(self, width: int, heads: int, mlp: int, dropout: float, rngs: nnx.Rngs):
        if width % heads:
            raise ValueError(f"model width {width} is not divisible by heads {heads}")
        self.heads = heads
        self.ln1 = layer_norm(width, rngs)
        # Separate q/k/v projections: with "heads" on a model axis each shard holds
        # whole heads of all three (a fused (W, 3W) kernel would split across them).
        self.q = dense(width, width, ("embed", "heads"), rngs)
        self.k = dense(width, width, ("embed", "heads"), rngs)
        self.v = dense(width, width, ("embed", "heads"), rngs)
        self.out = dense(width, width, ("heads", "embed"), rngs)
        self.ln2 = layer_norm(width, rngs)
        self.up = dense(width, mlp, ("embed", "mlp"), rngs)
        self.down = dense(mlp, width, ("mlp", "embed"), rngs)
        self.drop = nnx.Dropout(dropout)
        self.attention_impl = "default"  # set by vnr.models.compute.configure
        self.remat = False

    def __call__(self, x: jax.Array, mask: jax.Array | None, *, train: bool,
                 rngs: nnx.Rngs | None) -> jax.Array:
        """x [..., T, W]; mask [..., T] True = attend to this key. With `remat` set, the
        block's activations are recomputed in the backward pass instead of stored."""
        if self.remat:
            return nnx.remat(type(self)._forward, static_argnums=(3,))(self, x, mask, train, rngs)
        return self._forward(x, mask, train, rngs)

    def _forward(self, x: jax.Array, mask: jax.Array | None, train: bool,
                 rngs: nnx.Rngs | None) -> jax.Array:
        *lead, t, w = x.shape
        h = self.ln1(x)
        shape = (-1, t, self.heads, w // self.heads)
        q, k, v = (proj(h).reshape(shape) for proj in (self.q, self.k, self.v))
        m = None if mask is None else attention.Mask(mask.reshape(-1, t))
        y = attention.attend(q, k, v, m, implementation=self.attention_impl).reshape(*lead, t, w)
        x = x + self.drop(self.out(y), deterministic=not train, rngs=rngs)
        h = self.down(jax.nn.gelu(self.up(self.ln2(x))))
        return x + self.drop(h, deterministic=not train, rngs=rngs)


class TextEncoder(nnx.Module):
    """Token + position embeddings, transformer blocks, masked mean pool."""

    def __init__(self, vocab: int, max_tokens: int, width: int, layers: int, heads: int,
                 dropout: float, rngs: nnx.Rngs):
        self.embed = nnx.Embed(vocab, width, rngs=rngs, embedding_init=annotate(
            nnx.initializers.normal(0.02), ("vocab", "embed")))
        self.pos = nnx.Param(annotate(nnx.initializers.normal(0.02), (None, "embed"))(
            rngs.params(), (max_tokens, width)))
        self.blocks = nnx.List([Block(width, heads, 2 * width, dropout, rngs)
                                for _ in range(layers)])
        self.ln = layer_norm(width, rngs)

    def __call__(self, tokens: jax.Array, *, train: bool, rngs: nnx.Rngs | None,
                 mask: jax.Array | None = None) -> jax.Array:
        """tokens int [..., L] -> [..., W]; mask [..., L] True = real (default tokens > 0)."""
        lead, length = tokens.shape[:-1], tokens.shape[-1]
        tokens = tokens.reshape(-1, length)
        mask = tokens > 0 if mask is None else mask.reshape(-1, length)
        x = self.embed(tokens) + self.pos.value[:length]
        for block in self.blocks:
            x = block(x, mask, train=train, rngs=rngs)
        m = mask[..., None].astype(x.dtype)
        x = (self.ln(x) * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)
        return x.reshape(*lead, -1)
