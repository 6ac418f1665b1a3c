"""Clustering quality against ground-truth groups (MoviePuzzle Table 3's intermediate measure).

`matched_iou`: every ground-truth group (a shot or a scene) is matched to the predicted
cluster whose centre (mean embedding of its frames) has the highest cosine similarity with
the group's centre; the score of the group is the IoU of the two frame sets, and a clip
scores the mean over its ground-truth groups. Matching is per group (argmax, not
one-to-one): two groups matched to one merged cluster both pay through the union, and a
cluster split in two pays through the smaller intersection. Labels are arbitrary integers
compared only within a clip; no Python loops (batched, jit-able).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vnr.ops.permutation_search import check_mask

Array = jax.Array


@jax.jit
def _matched_iou(emb, pred, gt, mask):
    real = mask[:, :, None] & mask[:, None, :]
    same_p = ((pred[:, :, None] == pred[:, None, :]) & real).astype(jnp.float32)  # [B, N, N]
    same_g = ((gt[:, :, None] == gt[:, None, :]) & real).astype(jnp.float32)
    size_p, size_g = same_p.sum(-1), same_g.sum(-1)  # [B, N] size of each frame's set

    def centres(same, size):
        c = jnp.einsum("bij,bjd->bid", same, emb) / jnp.maximum(size, 1.0)[..., None]
        return c / jnp.maximum(jnp.linalg.norm(c, axis=-1, keepdims=True), 1e-12)

    cos = jnp.einsum("bid,bjd->bij", centres(same_g, size_g), centres(same_p, size_p))
    best = jnp.argmax(jnp.where(mask[:, None, :], cos, -jnp.inf), -1)  # [B, N] frame of a cluster
    inter = jnp.einsum("bik,bjk->bij", same_g, same_p)  # |group(i) ∩ cluster(j)|
    take = lambda a: jnp.take_along_axis(a, best[..., None], -1)[..., 0]  # noqa: E731
    i_best = take(inter)
    union = size_g + jnp.take_along_axis(size_p, best, -1) - i_best
    iou = i_best / jnp.maximum(union, 1.0)
    w = jnp.where(mask, 1.0 / jnp.maximum(size_g, 1.0), 0.0)  # each group counts once
    return (iou * w).sum(-1) / jnp.maximum(w.sum(-1), 1e-12)


def matched_iou(emb, pred_labels, gt_labels, mask=None) -> Array:
    """Mean IoU per clip of ground-truth groups with their cosine-matched predicted clusters.

    Args:
      emb: [B, N, D] embeddings the clusters were built from (centres are their means).
      pred_labels, gt_labels: int [B, N] cluster / group ids (any integers, per clip).
      mask: bool [B, N] real frames (real first) or None.
    Returns:
      float32 [B] in [0, 1]; 1 when the clusters equal the groups.
    """
    emb = jnp.asarray(emb, jnp.float32)
    if emb.ndim != 3:
        raise ValueError(f"emb must be [B, N, D], got shape {emb.shape}")
    pred, gt = jnp.asarray(pred_labels), jnp.asarray(gt_labels)
    for name, a in (("pred_labels", pred), ("gt_labels", gt)):
        if a.shape != emb.shape[:2]:
            raise ValueError(f"{name} must have shape {emb.shape[:2]}, got {a.shape}")
    mask = check_mask(mask, emb.shape[:2])
    return _matched_iou(emb, pred, gt, mask)
