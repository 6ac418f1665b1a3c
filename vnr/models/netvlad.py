"""NetVLAD pooling and gated embedding units as MoEE (Miech et al. 2018) uses them, trainable.

MoEE's text side pools a sentence's word vectors [B, N, D] into one descriptor with NetVLAD
(K clusters), then maps it with a gated embedding unit per expert. `NetVLAD`:

    a = softmax_K(BN(x @ C))                      soft assignment of each word to K clusters
    v[d, k] = sum_n a[n, k] x[n, d] - (sum_n a[n, k]) C2[d, k]
    v = l2-normalise over d (per cluster), flatten d-major to [D * K], l2-normalise

with two learned cluster matrices (C scores, C2 centres, both [D, K], initialised
N(0, 1/D)) and a batch norm over the K assignment scores (`batch_norm=True` as MoEE). The
flattened order is d * K + k, MoEE's. `GatedEmbeddingUnit`: y = W x + b, y * sigmoid(BN(W' y
+ b')) (the context gating, its batch norm optional), l2-normalised.

Batch norm (`BatchNorm`) follows torch's `BatchNorm1d` exactly: training normalises with
the batch's mean and biased variance and moves the running statistics (`nnx.BatchStat`, not
trained) by momentum 0.1 towards the batch mean and the *unbiased* variance; evaluation uses
the running statistics; eps 1e-5. l2 normalisation is x / max(|x|, 1e-12), torch's
`F.normalize`, with a finite gradient at 0.

Padding: MoEE pads sentences with zero vectors and pools them like words (a zero word still
gets an assignment, so it moves the centre term and the batch statistics). That is the
default here (`mask=None`). With `mask` [B, N] (True = word) padding is left out of the
batch statistics and of both sums, so a sentence's descriptor does not depend on how much
it is padded: ours, not MoEE's.

Parameters carry logical axis names ("embed": the word-vector width, "cluster": K) for
`vnr.sharding`; both are replicated by the default rules.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import annotate, dense

_ones = nnx.initializers.ones_init()
_zeros = nnx.initializers.zeros_init()


def l2_normalize(x: jax.Array, axis: int = -1, eps: float = 1e-12) -> jax.Array:
    """x / max(|x|, eps) along `axis` (torch's F.normalize), finite gradient at x = 0."""
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=axis, keepdims=True), eps * eps))


class BatchNorm(nnx.Module):
    """torch's BatchNorm1d over the last axis (module docstring)."""

    def __init__(self, features: int, names: tuple[str | None], rngs: nnx.Rngs, *,
                 eps: float = 1e-5, momentum: float = 0.1):
        self.eps, self.momentum = eps, momentum
        key = rngs.params()
        self.scale = nnx.Param(annotate(_ones, names)(key, (features,)))
        self.bias = nnx.Param(annotate(_zeros, names)(key, (features,)))
        self.mean = nnx.BatchStat(annotate(_zeros, names)(key, (features,)))
        self.var = nnx.BatchStat(annotate(_ones, names)(key, (features,)))

    def __call__(self, x: jax.Array, *, train: bool, mask: jax.Array | None = None
                 ) -> jax.Array:
        """x [..., F] (every leading position a row); mask [...] (True = counted in the
        batch statistics) or None (all)."""
        if train:
            shape, x = x.shape, x.reshape(-1, x.shape[-1])
            w = jnp.ones(x.shape[:1], x.dtype) if mask is None else mask.reshape(-1).astype(
                x.dtype)
            n = w.sum()
            mean = (w[:, None] * x).sum(0) / jnp.maximum(n, 1)
            var = (w[:, None] * (x - mean) ** 2).sum(0) / jnp.maximum(n, 1)
            m = jnp.where(n > 0, self.momentum, 0.0)  # no rows counted: statistics kept
            unbiased = var * n / jnp.maximum(n - 1, 1)
            self.mean.value = (1 - m) * self.mean.value + m * jax.lax.stop_gradient(mean)
            self.var.value = (1 - m) * self.var.value + m * jax.lax.stop_gradient(unbiased)
            x = x.reshape(shape)
        else:
            mean, var = self.mean.value, self.var.value
        return (x - mean) * jax.lax.rsqrt(var + self.eps) * self.scale.value + self.bias.value


class NetVLAD(nnx.Module):
    """Word vectors [B, N, D] -> descriptor [B, D * K] (module docstring)."""

    def __init__(self, feature_size: int, cluster_size: int, rngs: nnx.Rngs, *,
                 batch_norm: bool = True):
        self.feature_size, self.cluster_size = feature_size, cluster_size
        init = nnx.initializers.normal(feature_size ** -0.5)
        self.clusters = nnx.Param(annotate(init, ("embed", "cluster"))(
            rngs.params(), (feature_size, cluster_size)))
        self.clusters2 = nnx.Param(annotate(init, (None, "embed", "cluster"))(
            rngs.params(), (1, feature_size, cluster_size)))
        self.batch_norm = BatchNorm(cluster_size, ("cluster",), rngs) if batch_norm else None

    @property
    def out_dim(self) -> int:
        return self.feature_size * self.cluster_size

    def __call__(self, x: jax.Array, *, train: bool, mask: jax.Array | None = None
                 ) -> jax.Array:
        """x [B, N, D]; mask [B, N] (True = word; None: every slot, MoEE's padding)."""
        b, n, d = x.shape
        if d != self.feature_size:
            raise ValueError(f"NetVLAD: word vectors of width {d}, built for "
                             f"{self.feature_size}")
        flat_mask = None if mask is None else mask.reshape(b * n)
        a = x.reshape(b * n, d) @ self.clusters.value
        if self.batch_norm is not None:
            a = self.batch_norm(a, train=train, mask=flat_mask)
        a = jax.nn.softmax(a, axis=-1).reshape(b, n, self.cluster_size)
        if mask is not None:
            a = a * mask[..., None].astype(a.dtype)
        vlad = jnp.einsum("bnk,bnd->bdk", a, x) - a.sum(1, keepdims=True) * self.clusters2.value
        vlad = l2_normalize(vlad, axis=1).reshape(b, self.out_dim)
        return l2_normalize(vlad, axis=-1)


class ContextGating(nnx.Module):
    """y * sigmoid(BN(W y + b)): MoEE's context gating (batch norm optional)."""

    def __init__(self, dim: int, rngs: nnx.Rngs, *, batch_norm: bool = True):
        self.fc = dense(dim, dim, ("embed", None), rngs)
        self.batch_norm = BatchNorm(dim, (None,), rngs) if batch_norm else None

    def __call__(self, y: jax.Array, *, train: bool) -> jax.Array:
        g = self.fc(y)
        if self.batch_norm is not None:
            g = self.batch_norm(g, train=train)
        return y * jax.nn.sigmoid(g)


class GatedEmbeddingUnit(nnx.Module):
    """[B, din] -> l2-normalised [B, dout]: linear, context gating (`gating`), normalise."""

    def __init__(self, din: int, dout: int, rngs: nnx.Rngs, *, gating: bool = True,
                 batch_norm: bool = True):
        self.fc = dense(din, dout, ("embed", None), rngs)
        self.cg = ContextGating(dout, rngs, batch_norm=batch_norm) if gating else None

    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        y = self.fc(x)
        if self.cg is not None:
            y = self.cg(y, train=train)
        return l2_normalize(y, axis=-1)
