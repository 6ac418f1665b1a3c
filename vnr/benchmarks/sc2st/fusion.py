"""Sc2St fusion encoders (paper §4.4.3-4.4.4): the context gist g_t from the two recurrent
outputs r_S^t (text, round t) and r_I^{t-1} (keyframe history).

* `GatedFusion` (GF, Eq. 1): g = G_S(r_S) * r_I + G_I(r_I) * r_S, with G(x) = sigmoid(W x + b)
  (a linear layer and a sigmoid, element-wise gates, summed).
* `ProseGatedFusion` ("gf_prose", ours as an option): the §4.4.3 prose read literally —
  the two gated streams concatenated, then an MLP — r_S' = r_S * G_I(r_I),
  r_I' = r_I * G_S(r_S), g = MLP([r_S'; r_I']).
* `ChannelAttentionFusion` (SA, Eq. 2-3): u = MLP([r_S; r_I]) reshaped to N channels of
  width U (u in R^{U x N}); alpha_{i,j} = (W_q u_i)^T (W_k u_j);
  w_{j,i} = exp(alpha_{i,j}) / sum_k exp(alpha_{i,k}) as printed (for output j the weights
  over i are normalised over the *second* index of alpha; `normalise="query"` is the usual
  non-local reading exp(alpha_{j,i}) / sum_k exp(alpha_{j,k}), an option);
  u'_j = W_v sum_i w_{j,i} u_i; g = the N channels u'_j flattened (N * U).
  Linear maps W_q, W_k, W_v have no bias (Eq. 2-3 print none).

The decoder that follows the gist (§4.4.1: "the following decoder takes the gist") is not
specified; `StoryboardModel` uses an MLP to the candidate space (ours).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import annotate, dense

NORMALISE = ("printed", "query")


class GatedFusion(nnx.Module):
    """Eq. 1: element-wise cross gates, summed. Output width = input width."""

    def __init__(self, width: int, rngs: nnx.Rngs):
        self.gate_s = dense(width, width, ("embed", None), rngs)  # G_S, reads r_S
        self.gate_i = dense(width, width, ("embed", None), rngs)  # G_I, reads r_I
        self.out_dim = width

    def __call__(self, rs: jax.Array, ri: jax.Array) -> jax.Array:
        return jax.nn.sigmoid(self.gate_s(rs)) * ri + jax.nn.sigmoid(self.gate_i(ri)) * rs


class ProseGatedFusion(nnx.Module):
    """The prose variant: gated streams concatenated (then the model's MLP). Out: 2 * width."""

    def __init__(self, width: int, rngs: nnx.Rngs):
        self.gate_s = dense(width, width, ("embed", None), rngs)
        self.gate_i = dense(width, width, ("embed", None), rngs)
        self.out_dim = 2 * width

    def __call__(self, rs: jax.Array, ri: jax.Array) -> jax.Array:
        return jnp.concatenate([rs * jax.nn.sigmoid(self.gate_i(ri)),
                                ri * jax.nn.sigmoid(self.gate_s(rs))], -1)


class ChannelAttentionFusion(nnx.Module):
    """Eq. 2-3: self-attention across the N channels of u = MLP([r_S; r_I]). Out: N * U."""

    def __init__(self, width: int, mlp: int, channels: int, unit: int, rngs: nnx.Rngs,
                 normalise: str = "printed"):
        if normalise not in NORMALISE:
            raise ValueError(f"sa_normalise={normalise!r}: choose one of {NORMALISE}")
        self.channels, self.unit, self.normalise = channels, unit, normalise
        self.up = dense(2 * width, mlp, ("embed", "mlp"), rngs)
        self.down = dense(mlp, channels * unit, ("mlp", "embed"), rngs)
        init = annotate(nnx.initializers.lecun_normal(), (None, None))
        self.wq = nnx.Param(init(rngs.params(), (unit, unit)))
        self.wk = nnx.Param(init(rngs.params(), (unit, unit)))
        self.wv = nnx.Param(init(rngs.params(), (unit, unit)))
        self.out_dim = channels * unit

    def channels_of(self, rs: jax.Array, ri: jax.Array) -> jax.Array:
        """u: [..., N, U] (row i = channel u_i)."""
        u = self.down(jax.nn.gelu(self.up(jnp.concatenate([rs, ri], -1))))
        return u.reshape(*u.shape[:-1], self.channels, self.unit)

    def __call__(self, rs: jax.Array, ri: jax.Array) -> jax.Array:
        u = self.channels_of(rs, ri)
        q = u @ self.wq[...].T  # W_q u_i as rows
        k = u @ self.wk[...].T
        alpha = jnp.einsum("...iu,...ju->...ij", q, k)  # alpha[i, j]
        if self.normalise == "printed":  # w[j, i] = softmax_k(alpha[i, k]) at k = j
            w = jnp.swapaxes(jax.nn.softmax(alpha, axis=-1), -1, -2)
        else:  # w[j, i] = softmax_k(alpha[j, k]) at k = i
            w = jax.nn.softmax(alpha, axis=-1)
        mixed = jnp.einsum("...ji,...iu->...ju", w, u)
        out = mixed @ self.wv[...].T  # W_v applied to each channel
        return out.reshape(*out.shape[:-2], self.channels * self.unit)
