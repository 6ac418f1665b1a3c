"""The NCE loss of SYMON Eq. 5 over in-batch negatives of the whole global batch.

For video embeddings v [B, D] and text embeddings t [B, D] of B paired items with
s(i, k) = v_i · t_k / tau, Eq. 5 puts the positive and BOTH directions' negatives
under ONE log:

    L = 1/N Σ_i valid_i · ( -s(i, i) + log( exp s(i, i) + Σ_{k≠i} exp s(i, k)
                                                        + Σ_{k≠i} exp s(k, i) ) )

i.e. a log-sum-exp over row i and column i of the logit matrix (the diagonal counted
once). This is not the sum of a video->text and a text->video softmax (the "two
softmax" or symmetric InfoNCE form, which has two logs); that form is not provided
because no task of vnr uses it.

Documented choices: the paper writes dot-product similarity, so `temperature`
defaults to 1 (tau is our knob, 1 = the paper); N = Σ_i valid_i (the paper's N is
the number of anchors in the batch); padded items (valid = False) are neither anchors
nor negatives (k runs over the valid items only); the negatives are every other valid
item of the GLOBAL batch (the paper's K = N - 1 with in-batch negatives).

Two implementations with the same value and gradients:

* `nce_loss_reference` — the full-matrix version: [B, B] logits (under jit on a mesh,
  XLA materialises them on every device unless it partitions them itself).
* `nce_loss` — sharded: inside `jax.shard_map` over the batch axis ("data"), each
  device all-gathers the text embeddings and the validity mask and forms only its
  [B/n, B] block. Row sums are local; column sums (the text-anchored negatives) are
  completed by a `psum` of per-column partial sums shifted by a global column max
  (`pmax`, kept out of the gradient); each device keeps the columns of its own items
  and combines row and column parts with `logaddexp`. The backward pass of the
  all-gather is a reduce-scatter, so each device gets exactly the gradient of its rows.
  Per-device logit memory is O(B²/n) instead of O(B²).

`nce_loss` needs a mesh in context (`jax.sharding.use_abstract_mesh` or `jax.set_mesh`,
as the trainer does) with the batch axis in it; without one (or when the axis has size
1) it computes the reference directly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _check(v: jax.Array, t: jax.Array, valid: jax.Array | None) -> jax.Array:
    if v.shape != t.shape or v.ndim != 2:
        raise ValueError(f"nce_loss: v {v.shape} and t {t.shape} must both be [B, D]")
    return jnp.ones(v.shape[:1], bool) if valid is None else valid.astype(bool)


def _safe_lse(m: jax.Array, z: jax.Array) -> jax.Array:
    """m + log z, -inf where z == 0 (no term), without a NaN gradient."""
    return jnp.where(z > 0, m + jnp.log(jnp.where(z > 0, z, 1.0)), -jnp.inf)


def nce_loss_reference(v: jax.Array, t: jax.Array, valid: jax.Array | None = None,
                       temperature: float = 1.0) -> jax.Array:
    """Eq. 5 from the full [B, B] logit matrix (scalar): v, t [B, D]; valid bool [B]."""
    valid = _check(v, t, valid)
    b = v.shape[0]
    v, t = v.astype(jnp.float32), t.astype(jnp.float32)
    s = (v @ t.T) / temperature
    diag = jnp.diagonal(s)
    pair = valid[:, None] & valid[None, :]
    row = jnp.where(pair, s, -jnp.inf)  # s(i, k), all valid k (the positive included)
    col = jnp.where(pair & ~jnp.eye(b, dtype=bool), s.T, -jnp.inf)  # s(k, i), k ≠ i
    lse = jax.nn.logsumexp(jnp.concatenate([row, col], 1), axis=1)
    per_item = jnp.where(valid, lse - diag, 0.0)
    return per_item.sum() / jnp.maximum(valid.sum(), 1)


def _local_sums(v: jax.Array, t: jax.Array, valid: jax.Array, temperature: float,
                axis: str) -> jax.Array:
    """One device's (loss sum over its own anchors, anchor count), psum-ed over `axis`.

    Communication per step: one all-gather of t [B, D] and of the mask, a pmax and a
    psum of [B] vectors (and, backward, a reduce-scatter of dL/dt_all and the psum's
    transpose).
    """
    b = v.shape[0]
    start = jax.lax.axis_index(axis) * b
    t_all = jax.lax.all_gather(t, axis, tiled=True)  # [B, D]
    valid_all = jax.lax.all_gather(valid, axis, tiled=True)
    s = (v @ t_all.T).astype(jnp.float32) / temperature  # [b, B]: rows = my items
    diag = jnp.sum(v.astype(jnp.float32) * t.astype(jnp.float32), -1) / temperature
    lse_row = jax.nn.logsumexp(jnp.where(valid_all[None, :], s, -jnp.inf), axis=-1)
    # Column i (text anchor i) collects s(k, i) over the valid rows k ≠ i of all devices.
    own = jnp.arange(b)[:, None] + start == jnp.arange(s.shape[1])[None, :]
    s_col = jnp.where(valid[:, None] & ~own, s, -jnp.inf)
    m = jax.lax.pmax(jax.lax.stop_gradient(s_col).max(0), axis)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    z = jax.lax.psum(jnp.exp(s_col - m).sum(0), axis)  # [B]
    lse_col = jax.lax.dynamic_slice_in_dim(_safe_lse(m, z), start, b)
    per_item = jnp.logaddexp(lse_row, lse_col) - diag
    total = jnp.where(valid, per_item, 0.0).sum()
    count = valid.sum().astype(jnp.float32)
    return jax.lax.psum(jnp.stack([total, count]), axis)


def nce_loss(v: jax.Array, t: jax.Array, valid: jax.Array | None = None,
             temperature: float = 1.0, axis: str = "data") -> jax.Array:
    """Eq. 5 over the global batch, sharded over mesh axis `axis` (scalar).

    v, t [B, D] (B divisible by the axis size); valid bool [B] (default all).
    Same value and gradients as `nce_loss_reference`. Computed in float32 whatever the
    embeddings' dtype (a bfloat16 model's logits and collectives stay float32).
    """
    valid = _check(v, t, valid)
    v, t = v.astype(jnp.float32), t.astype(jnp.float32)
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or axis not in mesh.axis_names or mesh.shape[axis] == 1:
        return nce_loss_reference(v, t, valid, temperature)
    n = mesh.shape[axis]
    if v.shape[0] % n:
        raise ValueError(f"nce_loss: batch {v.shape[0]} is not divisible by mesh axis "
                         f"{axis!r} of size {n}")

    def body(v_, t_, m_):
        return _local_sums(v_, t_, m_, temperature, axis)

    sums = jax.shard_map(body, in_specs=(P(axis), P(axis), P(axis)), out_specs=P(),
                         axis_names={axis})(v, t, valid)
    return sums[0] / jnp.maximum(sums[1], 1.0)


def similarity(v: jax.Array, t: jax.Array) -> jax.Array:
    """Dot-product similarity matrix [Nv, Nt] (the paper's retrieval score)."""
    return v @ t.T
