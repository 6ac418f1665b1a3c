"""Table 3 of MoviePuzzle (accumulation error): clustering IoU and the shot-stage ordering score.

`matched_iou`: every ground-truth group (a shot or a scene) is matched to the predicted
cluster whose centre (mean embedding of its frames) has the highest cosine similarity with
the group's centre; the score of the group is the IoU of the two frame sets, and a clip
scores the mean over its ground-truth groups. Matching is per group (argmax, not
one-to-one): two groups matched to one merged cluster both pay through the union, and a
cluster split in two pays through the smaller intersection. Labels are arbitrary integers
compared only within a clip; no Python loops (batched, jit-able).

`unit_ordering_score`: the OS of Table 3's "shot" rows. Our reading (the paper gives no
formula): the "frame" rows are the final frame-level OS (the "frame" row of each distance
equals the HCMC frame+shot OS of Table 1 for Euclidean), and the text calls the "shot" row's
OS the "shot ordering score", correlated with the shot clustering IoU. For the frame+shot
model the shot stage is the last stage of Algorithm 1, so the OS of the frame sequence after
that stage is the final OS; it cannot be the "shot" row, whose values differ. We therefore
score the order of the *shots*: the units are the predicted shots (k-means clusters) of a
clip, each placed where Algorithm 1 puts it (its first frame in the predicted sequence: the
shots are contiguous blocks there) and ranked in truth by its earliest true frame (the rule
the shot head is trained with, `sampling.first_position`); OS_beta (Eq. 6) is then taken
over this unit sequence. A clip with fewer than beta predicted shots has no beta-subset:
it is left out (NaN) and the caller reports how many clips were scored.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vnr.benchmarks.moviepuzzle.order_metrics import ordering_score
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


def unit_ordering_score(pred_order, unit_labels, position, mask=None, beta: int = 2):
    """OS_beta of the order of predicted units (shots or scenes) per clip (Table 3 "shot").

    Args:
      pred_order: int [B, N] predicted frame order (position k holds the input index there).
      unit_labels: int [B, N] predicted unit of each input frame (any integers, per clip).
      position: int [B, N] true position of each input frame.
      mask: bool [B, N] real frames (real first) or None. beta: subset size >= 1.
    Returns:
      float64 [B]: OS_beta in [0, 1] over the clip's units, NaN for a clip with fewer than
      beta units. A unit's predicted place is its first frame in `pred_order`, its true
      place its earliest true position (module docstring).
    """
    pred = np.asarray(pred_order)
    if pred.ndim != 2:
        raise ValueError(f"pred_order must be [B, N], got shape {pred.shape}")
    B, N = pred.shape
    labels, position = np.asarray(unit_labels), np.asarray(position)
    for name, a in (("unit_labels", labels), ("position", position)):
        if a.shape != (B, N):
            raise ValueError(f"{name} must have shape {(B, N)}, got {a.shape}")
    if not isinstance(beta, int | np.integer) or beta < 1:
        raise ValueError(f"beta must be a positive int, got {beta!r}")
    mask = np.asarray(check_mask(mask, (B, N)))
    placed = np.empty((B, N), np.int64)  # predicted position of each input frame
    placed[np.arange(B)[:, None], pred] = np.arange(N)[None]
    b, i = np.nonzero(mask)
    units, uid = np.unique(np.stack([b, labels[b, i]], 1), axis=0, return_inverse=True)
    uid = uid.reshape(-1)
    n_units = np.bincount(units[:, 0], minlength=B)
    local = uid - np.searchsorted(units[:, 0], units[uid, 0])  # unit index within its clip
    U = max(int(n_units.max()), 1)
    big = np.iinfo(np.int64).max // 2
    first_pred = np.full((B, U), big)
    first_true = np.full((B, U), big)
    np.minimum.at(first_pred, (b, local), placed[b, i])
    np.minimum.at(first_true, (b, local), position[b, i])
    umask = np.arange(U)[None] < n_units[:, None]
    pad_key = big + np.arange(U)[None]  # padded units last, in increasing index order
    pred_u = np.argsort(np.where(umask, first_pred, pad_key), axis=1, kind="stable")
    gt_u = np.argsort(np.where(umask, first_true, pad_key), axis=1, kind="stable")
    out = np.full(B, np.nan)
    ok = n_units >= beta
    if ok.any():
        out[ok] = np.asarray(ordering_score(pred_u[ok].astype(np.int32),
                                            gt_u[ok].astype(np.int32), int(beta), umask[ok]))
    return out


def nested_ordering_score(pred_order, unit_labels, parent_labels, position, mask=None,
                          beta: int = 2) -> np.ndarray:
    """OS_beta of the order of units inside each parent group (frames in a shot, shots in a
    scene, scenes in the clip): one value per (clip, parent) group, NaN for a group with
    fewer than beta units. Arguments as `unit_ordering_score`, plus `parent_labels` [B, N]."""
    pred = np.asarray(pred_order)
    if pred.ndim != 2:
        raise ValueError(f"pred_order must be [B, N], got shape {pred.shape}")
    B, N = pred.shape
    mask = np.asarray(check_mask(mask, (B, N)))
    units, parents, position = (np.asarray(a) for a in (unit_labels, parent_labels, position))
    placed = np.empty((B, N), np.int64)
    placed[np.arange(B)[:, None], pred] = np.arange(N)[None]
    b, i = np.nonzero(mask)
    _, gid = np.unique(np.stack([b, parents[b, i]], 1), axis=0, return_inverse=True)
    gid = gid.reshape(-1)
    order = np.lexsort((i, gid))  # members of each group by input index
    start = np.searchsorted(gid[order], gid[order])
    slot = np.empty_like(gid)
    slot[order] = np.arange(gid.size) - start
    G, M = int(gid.max()) + 1, int(slot.max()) + 1
    big = np.iinfo(np.int64).max // 2
    labels, pos, where = (np.zeros((G, M), np.int64) for _ in range(3))
    where[:] = big
    member = np.zeros((G, M), bool)
    labels[gid, slot], pos[gid, slot] = units[b, i], position[b, i]
    where[gid, slot], member[gid, slot] = placed[b, i], True
    group_pred = np.argsort(where, axis=1, kind="stable")  # members first, by predicted place
    return unit_ordering_score(group_pred, labels, pos, member, beta)


def level_alone_scores(level: str, pred: np.ndarray, cat: Any) -> dict[str, float]:
    """`level_os2` / `level_os3`: the mean OS of `level`'s units (frames, shots, scenes)
    inside their true parents (shots, scenes, the clip) over the groups with enough units
    (`level_os<beta>_groups`), where the clip OS also counts the levels taken from the truth."""
    mask, n = cat["mask"], cat["mask"].shape[1]
    unit, parent = {"frame": (np.broadcast_to(np.arange(n), mask.shape), cat["shot_id"]),
                    "shot": (cat["shot_id"], cat["scene_id"]),
                    "scene": (cat["scene_id"], np.zeros_like(cat["scene_id"]))}[level]
    out = {}
    for beta in (2, 3):
        os_g = nested_ordering_score(pred, unit, parent, cat["position"], mask, beta)
        scored = ~np.isnan(os_g)
        out[f"level_os{beta}_groups"] = float(scored.sum())
        if scored.any():
            out[f"level_os{beta}"] = 100.0 * float(os_g[scored].mean())
    return out
