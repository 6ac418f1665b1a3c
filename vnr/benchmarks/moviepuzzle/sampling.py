"""Training-pair sampling for the HCMC heads (pure, batched, jit-able).

Order heads learn from unit pairs drawn inside the same parent (shots within a scene,
frames within a shot or clip); cluster heads from (anchor, positive, negatives) frames of
the same / another unit (Eq. 3).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _pick(weights: jax.Array, u: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Inverse-CDF draw along the last axis: index [...] and whether any weight was > 0."""
    cum = jnp.cumsum(weights, -1)
    total = cum[..., -1]
    idx = (cum <= (u * total)[..., None]).sum(-1)
    return jnp.minimum(idx, weights.shape[-1] - 1), total > 0


def _take(a: jax.Array, idx: jax.Array) -> jax.Array:
    """a [B, N, ...] rows at idx [B, P] -> [B, P, ...]."""
    return jnp.take_along_axis(a, idx.reshape(*idx.shape, *[1] * (a.ndim - 2)), axis=1)


def first_position(group: jax.Array, position: jax.Array, mask: jax.Array) -> jax.Array:
    """Per frame, the smallest true position among the real frames of its group [B, N]."""
    same = (group[:, :, None] == group[:, None, :]) & mask[:, None, :]
    return jnp.where(same, position[:, None, :], jnp.iinfo(jnp.int32).max).min(-1)


def sample_unit_pairs(key: jax.Array, unit: jax.Array, parent: jax.Array, mask: jax.Array,
                      num: int, within_frac: float):
    """Ordered pairs of frames (i, j) standing for two distinct units, [B, num] each.

    i: uniform over the clip's units (a frame of it, uniform). j: a frame of another unit,
    with probability `within_frac` of the same parent group (when it has another unit),
    else of any other unit. Returns (i, j, valid [B, num]): invalid when the clip has a
    single unit.
    """
    b, n = mask.shape
    k1, k2, k3 = jax.random.split(key, 3)
    same_unit = (unit[:, :, None] == unit[:, None, :]) & mask[:, None, :]
    size = same_unit.sum(-1)
    w = jnp.where(mask, 1.0 / jnp.maximum(size, 1), 0.0)  # uniform over units
    i, _ = _pick(jnp.broadcast_to(w[:, None], (b, num, n)), jax.random.uniform(k1, (b, num)))
    other = ~_take(same_unit, i) & mask[:, None, :]  # [B, num, N]
    within = other & (_take(parent[..., None], i) == parent[:, None, :])
    wj = w[:, None, :]
    want_within = jax.random.uniform(k2, (b, num)) < within_frac
    has_within = within.any(-1)
    cand = jnp.where((want_within & has_within)[..., None], within, other)
    j, valid = _pick(jnp.where(cand, wj, 0.0), jax.random.uniform(k3, (b, num)))
    return i, j, valid


def sample_contrastive(key: jax.Array, group: jax.Array, mask: jax.Array, num_neg: int):
    """Eq. 3 draws for every frame as an anchor (flattened over the batch, A = B * N).

    Returns (positive [A], negatives [A, n], valid [A], neg_valid [A, n]): positives are
    another frame of the anchor's group; negatives frames of the same clip outside the
    group, or of other clips when the clip has one group only.
    """
    b, n = mask.shape
    a = b * n
    clip = jnp.repeat(jnp.arange(b), n)
    g, m = group.reshape(a), mask.reshape(a)
    same_clip = clip[:, None] == clip[None, :]
    same_group = same_clip & (g[:, None] == g[None, :])
    real = m[None, :] & m[:, None]
    pos_w = (same_group & real & ~jnp.eye(a, dtype=bool)).astype(jnp.float32)
    in_clip = same_clip & ~same_group & real
    elsewhere = ~same_clip & real
    neg_w = jnp.where(in_clip.any(-1, keepdims=True), in_clip, elsewhere).astype(jnp.float32)
    kp, kn = jax.random.split(key)
    pos, has_pos = _pick(pos_w, jax.random.uniform(kp, (a,)))
    neg, has_neg = _pick(jnp.broadcast_to(neg_w[:, None], (a, num_neg, a)),
                         jax.random.uniform(kn, (a, num_neg)))
    return pos, neg, has_pos & m, has_neg & m[:, None]


# ----------------------------------------------------------------------------- losses
