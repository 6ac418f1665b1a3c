"""Algorithm 1's score functions for an HCMC run: Eq. 5 scores of units through the task's
jitted `<level>_pairs` (chunked over the mesh and processes), and, for token frames, the clip
pass's frame scores looked up by index."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vnr import sharding


def level_score_fn(config: Any, level: str, predictor: Any, mesh: jax.sharding.Mesh
                   ) -> Callable | None:
    """`score_fn` of the task's `<level>_pairs` (`predictor`: `vnr.evaluation.Predictor`);
    None for the frame level of frame_repr="tokens" (`frame_scores_by_index` gives it)."""
    if level == "frame" and config.model.get("frame_repr") == "tokens":
        return None
    return score_fn(predictor.named(f"{level}_pairs"), mesh, config.eval.max_pairs)


def score_fn(pairs_fn: Callable, mesh: jax.sharding.Mesh, max_pairs: int):
    """Algorithm 1's score callable for one level: chunks of its sub-problems through
    `pairs_fn` (the task's jitted `<level>_pairs`)."""
    pc, pi = jax.process_count(), jax.process_index()
    step = mesh.shape["data"] * pc  # chunks split evenly over the data axis and processes

    def fn(members: jax.Array, member_mask: jax.Array) -> jax.Array:
        members, member_mask = np.asarray(members), np.asarray(member_mask)
        p, g, _ = member_mask.shape
        chunk = max(step, (max(max_pairs // (g * g), 1) // step) * step)
        total = -(-p // chunk) * chunk
        pad = total - p
        members = np.concatenate([members, np.zeros((pad, *members.shape[1:]), members.dtype)])
        member_mask = np.concatenate([member_mask, np.zeros((pad, *member_mask.shape[1:]),
                                                            bool)])
        member_mask[p:, 0, 0] = True
        out = []
        for s in range(0, total, chunk):
            per = chunk // pc
            lo = s + pi * per
            host = {"members": members[lo:lo + per].astype(np.float32),
                    "member_mask": member_mask[lo:lo + per]}
            out.append(np.asarray(jax.device_get(
                pairs_fn(sharding.global_batch(host, mesh))["scores"])))
        return jnp.asarray(np.concatenate(out)[:p])

    return fn


def frame_scores_by_index(cat: Any, fns: dict[str, Callable]) -> tuple[np.ndarray, dict]:
    """`frame_repr="tokens"`: Algorithm 1's frame level reads the clip pass's Eq. 5 scores
    of every frame pair (`cat["scores"]`, the same function of the same pairs) through
    (clip, frame) indices appended to the features; the other levels get the features
    without them."""
    b, n = cat["mask"].shape
    index = np.stack(np.meshgrid(np.arange(b), np.arange(n), indexing="ij"), -1)
    features = np.concatenate([np.asarray(cat["features"], np.float32),
                               index.astype(np.float32)], -1)
    scores = jnp.asarray(cat["scores"])

    def frame(members: jax.Array, member_mask: jax.Array) -> jax.Array:
        clip, i = (members[:, :, 0, k].astype(jnp.int32) for k in (-2, -1))
        return scores[clip[:, :, None], i[:, :, None], i[:, None, :]]

    def without_index(fn: Callable) -> Callable:
        return lambda members, member_mask: fn(members[..., :-2], member_mask)

    out = {lv: frame if lv == "frame" else without_index(fn) for lv, fn in fns.items()}
    return features, out
