"""Algorithm 1 of MoviePuzzle: top-down clustering, bottom-up reordering, batched over clips.

Frames are clustered into scenes, each scene's frames into shots (k-means, counts from
the ground truth as in the seed code, or estimated by silhouette); then frames are ordered
inside each shot, shots inside each scene and scenes inside each clip, each by a pairwise
score function and `beam_search_order` / `exact_order`. Every level is one batched call
over all its sub-problems of all clips (sub-problems with a single unit are skipped).

Score functions are plain callables, one per level, all with one signature:
`fn(members [P, G, M, F], member_mask [P, G, M]) -> scores [P, G, G]` where P counts
sub-problems (a shot, a scene or a clip), G the units to order in each (frames, shots or
scenes; unit g is real iff member_mask[p, g, 0]), M the frames of each unit in their
already-decided order (M = 1 at the frame level), F the feature size of `features`, and
scores[p, g, h] is the weight of unit g before unit h (see `vnr.ops.permutation_search`).
Shapes are rounded up to powers of two to limit recompilation; padded entries are masked.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from vnr.ops.kmeans import estimate_num_clusters, kmeans
from vnr.ops.permutation_search import beam_search_order, check_mask, exact_order

Array = jax.Array
ScoreFn = Callable[[Array, Array], Array]


def _pow2(v: int) -> int:
    return 1 << max(0, int(v - 1).bit_length())


def _dense(*keys: np.ndarray) -> np.ndarray:
    """Dense id (0..) of each row of the key tuple, ids in lexicographic key order."""
    stacked = np.stack([np.asarray(k, np.int64) for k in keys], 1)
    return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1)


def _rank_within(group: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Rank (0..) of each element by `key` among the elements of its `group` (stable)."""
    idx = np.lexsort((np.arange(group.size), key, group))
    first = np.r_[True, group[idx][1:] != group[idx][:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(group.size), 0))
    rank = np.empty(group.size, np.int64)
    rank[idx] = np.arange(group.size) - start
    return rank


def count_distinct(ids: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Number of distinct `ids` inside each group 0..G-1 (the seed's ground-truth counts)."""
    pairs = np.unique(np.stack([group, ids], 1), axis=0)
    return np.bincount(pairs[:, 0], minlength=int(group.max()) + 1)


def _cluster(
    emb: np.ndarray,
    frames: np.ndarray,
    parent: np.ndarray,
    gt_ids: np.ndarray | None,
    key: Array,
    opts: dict,
) -> np.ndarray:
    """Clusters the frames of every parent group at once; returns a label per frame.

    emb: [B, N, D]; frames: (clip, index) arrays of real frames; parent: dense group id per
    frame. Counts: distinct gt ids per group when given, else silhouette estimate.
    """
    b, i = frames
    P = int(parent.max()) + 1
    slot = _rank_within(parent, i)
    M = _pow2(int(slot.max()) + 1)
    x = np.zeros((P, M, emb.shape[-1]), np.float32)
    x[parent, slot] = emb[b, i]
    mask = np.zeros((P, M), bool)
    mask[parent, slot] = True
    if gt_ids is not None:
        k = count_distinct(gt_ids[b, i], parent)
    else:
        k = estimate_num_clusters(
            x, mask, key, opts["max_clusters"], opts["min_silhouette"], opts["distance"],
            opts["max_iters"], init=opts["init"], **opts["dtw"],
        )  # fmt: skip
    work = np.nonzero(k >= 2)[0]  # single-cluster groups skip k-means
    labels = np.zeros((P, M), np.int64)
    if work.size:
        pad = _pow2(work.size) - work.size
        sel = np.r_[work, np.full(pad, work[0])]
        out = kmeans(
            x[sel], k[sel], mask[sel], key, opts["distance"], opts["max_iters"],
            init=opts["init"], **opts["dtw"],
        )
        labels[work] = np.asarray(out)[: work.size]
    return labels[parent, slot]


def _order_level(
    features: Array,
    frames: tuple[np.ndarray, np.ndarray],
    parent: np.ndarray,
    unit: np.ndarray,
    member_rank: np.ndarray,
    score_fn: ScoreFn | None,
    opts: dict,
    level: str,
    truth: np.ndarray | None = None,
) -> np.ndarray:
    """Orders the units of every parent group at once; returns each frame's unit rank.
    Without `score_fn`, units are ranked by their first true position (`truth`, one per
    frame), when given."""
    b, i = frames
    upar = _dense(parent, unit)  # unit id over all parents, ordered by (parent, unit)
    unit_parent = parent[np.unique(upar, return_index=True)[1]]
    unit_slot = _rank_within(unit_parent, np.arange(unit_parent.size))
    n_units = np.bincount(unit_parent)
    work = np.nonzero(n_units >= 2)[0]  # parents with a single unit skip the search
    rank = np.zeros(parent.size, np.int64)
    if work.size == 0:
        return rank
    if score_fn is None and truth is not None:
        first = np.full(unit_parent.size, np.iinfo(np.int64).max)
        np.minimum.at(first, upar, truth)
        return _rank_within(unit_parent, first)[upar]
    if score_fn is None:
        raise ValueError(f"{level}_score_fn is needed: some {level} level has several units")
    pos = np.full(n_units.size, -1)
    pos[work] = np.arange(work.size)
    on = pos[parent] >= 0
    p, g = pos[parent[on]], unit_slot[upar[on]]
    m = member_rank[on]
    P, G, M = _pow2(work.size), _pow2(int(g.max()) + 1), _pow2(int(m.max()) + 1)
    member = np.zeros((P, G, M, 2), np.int64)  # (clip, frame) of each member
    member[p, g, m] = np.stack([b[on], i[on]], 1)
    mmask = np.zeros((P, G, M), bool)
    mmask[p, g, m] = True
    mmask[work.size :, 0, 0] = True  # padding sub-problems: one dummy unit
    feats = jnp.asarray(features)[member[..., 0], member[..., 1]]
    scores = score_fn(feats, jnp.asarray(mmask))
    if scores.shape != (P, G, G):
        raise ValueError(f"{level}_score_fn must return shape {(P, G, G)}, got {scores.shape}")
    umask = mmask[:, :, 0]
    if opts["search"] == "exact":
        order, _ = exact_order(scores, umask, opts["objective"])
    else:
        order, _ = beam_search_order(
            scores, umask, opts["beam_size"], opts["objective"], opts["starts"]
        )
    unit_rank = np.argsort(np.asarray(order), axis=1)  # [P, G] position of each unit
    rank[on] = unit_rank[p, g]
    return rank


def hierarchical_order(
    features,
    mask,
    frame_score_fn: ScoreFn | None,
    shot_score_fn: ScoreFn | None = None,
    scene_score_fn: ScoreFn | None = None,
    shot_embed=None,
    scene_embed=None,
    gt_shot_ids=None,
    gt_scene_ids=None,
    shot_labels=None,
    scene_labels=None,
    truth=None,
    key: Array | None = None,
    search: str = "beam",
    beam_size: int = 10,
    objective: str = "path",
    starts: str = "per_start",
    distance: str = "cosine",
    max_iters: int = 100,
    init: str = "kmeans++",
    max_clusters: int = 8,
    min_silhouette: float = 0.5,
    dtw_segments: int = 4,
    dtw_gamma: float = 0.1,
    return_clusters: bool = False,
) -> Array | tuple[Array, dict[str, np.ndarray]]:
    """Algorithm 1: cluster frames into scenes then shots, order bottom-up, one order per clip.

    A level is used when its clustering embedding is given: `scene_embed` and `shot_embed`
    (frame_shot_scene), only `shot_embed` (frame_shot: one scene per clip), only
    `scene_embed` (frame_scene: frames ordered directly inside scenes), or neither (plain
    frame ordering). `shot_labels` / `scene_labels` give a level's partition instead (e.g.
    the ground truth: no k-means). A level without a score function (None) orders its units
    by their first position in `truth` (the oracle of every level but one). Cluster counts:
    with `gt_scene_ids`, the number of distinct ids in
    the clip; with `gt_shot_ids`, the number of distinct ids among the frames of each
    predicted scene (both as the seed code does); without them, estimated per group by
    the best silhouette over k = 2..max_clusters (k = 1 below `min_silhouette`).

    Args:
      features: [B, N, F] frame features handed to the score functions.
      mask: bool [B, N] (real frames first) or None.
      frame_score_fn, shot_score_fn, scene_score_fn: see the module docstring.
      shot_embed, scene_embed: [B, N, D] clustering embeddings or None (level unused).
      gt_shot_ids, gt_scene_ids: int [B, N] ground-truth ids for the counts, or None.
      shot_labels, scene_labels: int [B, N] partitions used as they are, or None.
      truth: int [B, N] true positions for the levels without a score function, or None.
      key: PRNG key for k-means (default key 0).
      search: "beam" or "exact". beam_size, objective, starts: passed to the search
        (`beam_search_order`; starts "per_start" is Algorithm 3, "shared" is ours).
      distance, max_iters, init, dtw_segments, dtw_gamma: k-means options
        (`vnr.ops.kmeans`; init "random" is the paper's Algorithm 2, "kmeans++" ours).
      max_clusters, min_silhouette: count estimate.
      return_clusters: also return {"scene": labels, "shot": labels}, int [B, N] cluster
        labels per frame (-1 on padding; shot labels are unique within a clip).
    Returns:
      int32 [B, N] orders (padded indices last, increasing) [, cluster labels].
    """
    features = jnp.asarray(features)
    if features.ndim != 3:
        raise ValueError(f"features must be [B, N, F], got shape {features.shape}")
    B, N = features.shape[:2]
    mask = np.asarray(check_mask(mask, (B, N)))
    if search not in ("beam", "exact"):
        raise ValueError(f"search must be 'beam' or 'exact', got {search!r}")
    opts = dict(
        search=search, beam_size=beam_size, objective=objective, starts=starts,
        distance=distance,
        max_iters=max_iters, init=init, max_clusters=max_clusters, min_silhouette=min_silhouette,
        dtw=dict(dtw_segments=dtw_segments, dtw_gamma=dtw_gamma),
    )  # fmt: skip
    arrays = {}
    for name, a in (("shot_embed", shot_embed), ("scene_embed", scene_embed)):
        if a is not None:
            a = np.asarray(a, np.float32)
            if a.ndim != 3 or a.shape[:2] != (B, N):
                raise ValueError(f"{name} must be [{B}, {N}, D], got shape {a.shape}")
            arrays[name] = a
    for name, a in (("gt_shot_ids", gt_shot_ids), ("gt_scene_ids", gt_scene_ids),
                    ("shot_labels", shot_labels), ("scene_labels", scene_labels),
                    ("truth", truth)):
        if a is not None:
            a = np.asarray(a)
            if a.shape != (B, N):
                raise ValueError(f"{name} must have shape {(B, N)}, got {a.shape}")
            arrays[name] = a
    key = jax.random.key(0) if key is None else key
    b, i = np.nonzero(mask)
    frames = (b, i)
    zero = np.zeros(b.size, np.int64)

    def clusters(level: str, parent: np.ndarray, salt: int) -> np.ndarray:
        """Frames' ``level`` clusters within their ``parent`` group (0 without embeddings)."""
        if f"{level}_labels" in arrays:
            return _dense(parent, arrays[f"{level}_labels"][b, i])
        if f"{level}_embed" not in arrays:
            return zero
        return _cluster(arrays[f"{level}_embed"], frames, parent, arrays.get(f"gt_{level}_ids"),
                        jax.random.fold_in(key, salt), opts)

    scene = clusters("scene", b, 0)
    scene_id = _dense(b, scene)
    shot = clusters("shot", scene_id, 1)
    shot_id = _dense(b, scene, shot)

    # bottom-up: frames in shots, shots in scenes, scenes in clips
    true = arrays["truth"][b, i] if "truth" in arrays else None
    r_frame = _order_level(features, frames, shot_id, i, zero, frame_score_fn, opts, "frame",
                           true)
    r_shot = _order_level(features, frames, scene_id, shot_id, r_frame, shot_score_fn, opts,
                          "shot", true)
    in_scene = _rank_within(scene_id, r_shot * N + r_frame)
    r_scene = _order_level(features, frames, b, scene_id, in_scene, scene_score_fn, opts,
                           "scene", true)

    pos = _rank_within(b, (r_scene * N + r_shot) * N + r_frame)
    order = np.tile(np.arange(N, dtype=np.int32), (B, 1))
    order[b, pos] = i
    if not return_clusters:
        return jnp.asarray(order)
    labels = {}
    for name, ids in (("scene", scene), ("shot", _dense(b, scene, shot))):
        lab = np.full((B, N), -1, np.int64)
        lab[b, i] = ids
        labels[name] = lab
    return jnp.asarray(order), labels
