"""Layers of Movie101's RNL (`rnl.py`), each behaving as the PyTorch module of Movie101's
release it stands for (`CNCLIP+RNL/RNL/modules_/`, read as reference behaviour, not copied).

* `GRU` / `BiGRU`: torch's `nn.GRU` cell (gates r, z, n; the reset gate scales the hidden
  projection *with* its bias) run over padded sequences the way upstream's `DynamicGRU`
  packs them: a sequence's state stops at its length, the backward direction starts at its
  last real step, and every output past the length is zero.
* `LocalSelfAttention`: fairseq's `MultiHeadAttention` as the video encoder calls it: one
  packed input projection, queries scaled by head_dim^-1/2, an additive -1e10 mask outside
  +-`width` steps, no key-padding mask.
* `GatedAttention`: `coa.NormalSubLayer1` (`cross=True`) and `sea.NormalSubLayer2`: weights
  from bias-free projections split into heads, applied to the *unprojected* features and
  averaged over heads; no mask (upstream comments it out), so padded words and empty portrait
  slots take part; each side then becomes g * x + (1 - g) * tanh(W [x, attended]),
  g = sigmoid(W' [x, attended]).
* `TanhAttention`: each clip attends over the query with additive tanh scores, masked slots
  at -1e30.

Initialisers are torch's defaults (Linear / Conv1d: U(+-1/sqrt(fan_in)) for weight and
bias; GRU: U(+-1/sqrt(hidden)); the attention's projections: Xavier-uniform, zero biases),
so a model trained from scratch starts as upstream's does. Parameters carry logical axis
names ("embed": the model width, "mlp": a wider hidden or input width; replicated by the
default rules).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import annotate

Names = tuple[str | None, ...]


def _uniform(bound: float):
    def init(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)
    return init


def linear(din: int, dout: int, names: Names, rngs: nnx.Rngs, *, use_bias: bool = True,
           bound: float | None = None) -> nnx.Linear:
    """`nnx.Linear` initialised as torch's `nn.Linear` (U(+-`bound`), default 1/sqrt(din))."""
    init = _uniform(din ** -0.5 if bound is None else bound)
    return nnx.Linear(din, dout, use_bias=use_bias, kernel_init=annotate(init, names),
                      bias_init=annotate(init, names[1:]), rngs=rngs)


class GRU(nnx.Module):
    """One direction of torch's `nn.GRU` (one layer): `ih` / `hh` hold weight_ih / weight_hh
    (transposed) and their biases, gate blocks in torch's order r, z, n."""

    def __init__(self, din: int, hidden: int, rngs: nnx.Rngs):
        self.hidden = hidden
        self.ih = linear(din, 3 * hidden, ("mlp", "embed"), rngs, bound=hidden ** -0.5)
        self.hh = linear(hidden, 3 * hidden, ("embed", None), rngs, bound=hidden ** -0.5)

    def __call__(self, x: jax.Array, valid: jax.Array, *, reverse: bool = False) -> jax.Array:
        """x [B, T, din], valid [B, T] (a prefix per row) -> outputs [B, T, hidden], zero
        where not valid. `reverse`: right to left, from each row's last valid step."""
        gates_x = jnp.swapaxes(self.ih(x), 0, 1)  # [T, B, 3H]
        keep = jnp.swapaxes(valid, 0, 1)[..., None]
        w_hh, b_hh = self.hh.kernel[...], self.hh.bias[...]

        def step(h: jax.Array, inputs: tuple[jax.Array, jax.Array]):
            gx, ok = inputs
            xr, xz, xn = jnp.split(gx, 3, -1)
            hr, hz, hn = jnp.split(h @ w_hh + b_hh, 3, -1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            new = (1 - z) * jnp.tanh(xn + r * hn) + z * h
            return jnp.where(ok, new, h if not reverse else 0.0), jnp.where(ok, new, 0.0)

        h0 = jnp.zeros((x.shape[0], self.hidden), gates_x.dtype)
        _, out = jax.lax.scan(step, h0, (gates_x, keep), reverse=reverse)
        return jnp.swapaxes(out, 0, 1)


class BiGRU(nnx.Module):
    """Upstream's `DynamicGRU(din, width // 2, bidirectional=True)`: [forward, backward]."""

    def __init__(self, din: int, width: int, rngs: nnx.Rngs):
        self.fwd = GRU(din, width // 2, rngs)
        self.bwd = GRU(din, width // 2, rngs)

    def __call__(self, x: jax.Array, lengths: jax.Array) -> jax.Array:
        """x [B, T, din], lengths [B] -> [B, T, width], zero past each length."""
        valid = jnp.arange(x.shape[1])[None] < lengths[:, None]
        return jnp.concatenate([self.fwd(x, valid), self.bwd(x, valid, reverse=True)], -1)


class LocalSelfAttention(nnx.Module):
    """Multi-head self-attention over [B, T, E] restricted to |i - j| <= `width`."""

    def __init__(self, dim: int, heads: int, width: int, rngs: nnx.Rngs):
        if dim % heads:
            raise ValueError(f"LocalSelfAttention: width {dim} not divisible by {heads} heads")
        self.heads, self.width = heads, width
        xavier = nnx.initializers.xavier_uniform()
        zeros = nnx.initializers.zeros_init()
        self.in_proj = nnx.Linear(dim, 3 * dim, kernel_init=annotate(xavier, ("embed", "mlp")),
                                  bias_init=annotate(zeros, ("mlp",)), rngs=rngs)
        self.out_proj = nnx.Linear(dim, dim, kernel_init=annotate(xavier, ("embed", "embed")),
                                   bias_init=annotate(zeros, ("embed",)), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, e = x.shape
        dh = e // self.heads
        q, k, v = (y.reshape(b, t, self.heads, dh) for y in jnp.split(self.in_proj(x), 3, -1))
        s = jnp.einsum("bihd,bjhd->bhij", q * dh ** -0.5, k)
        i = jnp.arange(t)
        s = s + jnp.where(jnp.abs(i[:, None] - i[None]) <= self.width, 0.0, -1e10)
        o = jnp.einsum("bhij,bjhd->bihd", jax.nn.softmax(s, -1), v)
        return self.out_proj(o.reshape(b, t, e))


class GatedAttention(nnx.Module):
    """IA-Net's gated co-attention (`cross`) or self-attention layer on (clips a [B, La, W],
    query b [B, Lb, W]); both sequences are updated (module docstring)."""

    def __init__(self, width: int, heads: int, cross: bool, rngs: nnx.Rngs):
        self.heads, self.cross = heads, cross
        self.query = nnx.List([linear(width, width, ("embed", None), rngs, use_bias=False)
                               for _ in range(2)])
        self.update = nnx.List([linear(2 * width, width, ("mlp", "embed"), rngs)
                                for _ in range(2)])
        self.gate = nnx.List([linear(2 * width, width, ("mlp", "embed"), rngs)
                              for _ in range(2)])

    def _attend(self, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        """Per-head softmax(q k^T / sqrt(d_k)), averaged over heads, applied to v."""
        b, lq, w = q.shape
        dk = w // self.heads
        qh = q.reshape(b, lq, self.heads, dk)
        kh = k.reshape(b, k.shape[1], self.heads, dk)
        p = jax.nn.softmax(jnp.einsum("bihd,bjhd->bhij", qh, kh) / math.sqrt(dk), -1)
        return jnp.einsum("bij,bjw->biw", p.mean(1), v)

    def __call__(self, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        qa, qb = self.query[0](a), self.query[1](b)
        if self.cross:  # each clip reads the query, each query slot the clips
            ctx = (self._attend(qa, qb, b), self._attend(qb, qa, a))
        else:
            ctx = (self._attend(qa, qa, a), self._attend(qb, qb, b))
        out = []
        for k, (x, c) in enumerate(zip((a, b), ctx)):
            xc = jnp.concatenate([x, c], -1)
            g = jax.nn.sigmoid(self.gate[k](xc))
            out.append(g * x + (1 - g) * jnp.tanh(self.update[k](xc)))
        return out[0], out[1]


class TanhAttention(nnx.Module):
    """x [B, L1, W] attends over memory [B, L2, W] (mask [B, L2], True = real):
    softmax_j(w^T tanh(W1 x_i + b + W2 m_j)) m."""

    def __init__(self, width: int, rngs: nnx.Rngs):
        self.ws1 = linear(width, width, ("embed", "mlp"), rngs)
        self.ws2 = linear(width, width, ("embed", "mlp"), rngs, use_bias=False)
        self.wst = linear(width, 1, ("mlp", None), rngs, use_bias=False)

    def __call__(self, x: jax.Array, memory: jax.Array, mask: jax.Array) -> jax.Array:
        s = self.wst(jnp.tanh(self.ws1(x)[:, :, None] + self.ws2(memory)[:, None]))[..., 0]
        p = jax.nn.softmax(jnp.where(mask[:, None], s, -1e30), -1)
        return jnp.einsum("bij,bjw->biw", p, memory)
