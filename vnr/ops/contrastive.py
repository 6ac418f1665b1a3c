"""Bidirectional NCE over in-batch negatives (SYMON §7.1, Eq. 5), whole global batch.

For video embeddings v [B, D] and text embeddings t [B, D] of B paired items
(item i: segment i and its narration i), with similarity s(i, j) = v_i · t_j / tau:

    L = 1/N Σ_i valid_i · ( -log softmax_j s(i, j) [j = i]      (video -> text)
                            -log softmax_j s(j, i) [j = i] )    (text -> video)

where the softmax runs over the valid items j of the WHOLE global batch and
N = Σ_i valid_i. Eq. 5 of the paper is this sum over both directions with
dot-product similarity (tau = 1); we average over items instead of summing so
the learning rate does not depend on the batch size (our choice), and padded
items (valid = False) are neither anchors nor negatives.

Two implementations with the same value and gradients:

* `nce_loss_reference` — the naive full-matrix version: [B, B] logits
  (under jit on a mesh, XLA materialises them on every device).
* `nce_loss` — the sharded version: inside `jax.shard_map` over the batch
  axis ("data"), each device all-gathers the text embeddings (the other
  modality of its video rows) and the validity mask and computes only its
  [B/n, B] block of logits; the video->text rows are local, the text->video
  columns are completed by a `psum` of per-column partial sums (see
  `_local_sums`), and the per-device loss sums are `psum`-ed. The backward pass
  of the all-gather is a reduce-scatter, so each device gets exactly the
  gradient of its own rows. Per-device memory for the logits is O(B²/n)
  instead of O(B²).

`nce_loss` needs a mesh in context (`jax.sharding.use_abstract_mesh` or
`jax.set_mesh`, as the trainer does) with the batch axis in it; without one
(or when the axis has size 1) it computes the reference directly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _row_nce(logits: jax.Array, diag: jax.Array, col_valid: jax.Array) -> jax.Array:
    """Per-row -log softmax at the positive: logits [r, B], diag [r] (positive logits)."""
    masked = jnp.where(col_valid[None, :], logits, -jnp.inf)
    return jax.nn.logsumexp(masked, axis=-1) - diag


def nce_loss_reference(v: jax.Array, t: jax.Array, valid: jax.Array | None = None,
                       temperature: float = 1.0) -> jax.Array:
    """The full-matrix bidirectional NCE (scalar): v, t [B, D]; valid bool [B]."""
    if v.shape != t.shape or v.ndim != 2:
        raise ValueError(f"nce_loss: v {v.shape} and t {t.shape} must both be [B, D]")
    valid = jnp.ones(v.shape[:1], bool) if valid is None else valid.astype(bool)
    logits = (v @ t.T).astype(jnp.float32) / temperature
    diag = jnp.diagonal(logits)
    per_item = _row_nce(logits, diag, valid) + _row_nce(logits.T, diag, valid)
    n = jnp.maximum(valid.sum(), 1)
    return jnp.where(valid, per_item, 0.0).sum() / n


def _local_sums(v: jax.Array, t: jax.Array, valid: jax.Array, temperature: float,
                axis: str) -> jax.Array:
    """One device's share: loss sum over its own anchors, both directions, psum-ed.

    Only the block S_loc = v_loc · t_allᵀ [b, B] is formed. Video->text rows are
    complete locally. Text->video needs column log-sum-exps over ALL rows: each
    device reduces its rows (shifted by the global column max, a `pmax` kept out
    of the gradient), the [B] partial sums are `psum`-ed, and each device keeps
    the columns of its own text anchors. Communication per step: one all-gather
    of t [B, D] plus an all-reduce of two [B] vectors (and, backward, a
    reduce-scatter of dL/dt_all and the psum's transpose).
    """
    b = v.shape[0]
    t_all = jax.lax.all_gather(t, axis, tiled=True)  # [B, D]
    valid_all = jax.lax.all_gather(valid, axis, tiled=True)
    s = (v @ t_all.T).astype(jnp.float32) / temperature  # [b, B]
    diag = jnp.sum(v.astype(jnp.float32) * t.astype(jnp.float32), -1) / temperature
    v2t = _row_nce(s, diag, valid_all)
    s_col = jnp.where(valid[:, None], s, -jnp.inf)  # only valid rows are negatives
    m = jax.lax.pmax(jax.lax.stop_gradient(s_col).max(0), axis)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    z = jax.lax.psum(jnp.exp(s_col - m).sum(0), axis)  # [B]
    lse_col = m + jnp.log(jnp.where(valid_all, z, 1.0))
    mine = jax.lax.dynamic_slice_in_dim(lse_col, jax.lax.axis_index(axis) * b, b)
    t2v = mine - diag
    total = jnp.where(valid, v2t + t2v, 0.0).sum()
    count = valid.sum().astype(jnp.float32)
    return jax.lax.psum(jnp.stack([total, count]), axis)


def nce_loss(v: jax.Array, t: jax.Array, valid: jax.Array | None = None,
             temperature: float = 1.0, axis: str = "data") -> jax.Array:
    """Bidirectional NCE over the global batch, sharded over mesh axis `axis` (scalar).

    v, t [B, D] (B divisible by the axis size); valid bool [B] (default all).
    Same value and gradients as `nce_loss_reference`.
    """
    if v.shape != t.shape or v.ndim != 2:
        raise ValueError(f"nce_loss: v {v.shape} and t {t.shape} must both be [B, D]")
    valid = jnp.ones(v.shape[:1], bool) if valid is None else valid.astype(bool)
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
