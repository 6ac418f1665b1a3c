"""Algorithm 1 (cluster top-down, order bottom-up) on synthetic clips with known structure."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vnr.benchmarks.moviepuzzle import order_metrics as om
from vnr.benchmarks.moviepuzzle.hierarchical import hierarchical_order
from vnr.ops.permutation_search import beam_search_order

N = 16
LENS = np.array([16, 13, 10, 6])


def _clips(seed=0, scenes=(3, 2, 2, 1), shots_per_scene=2, noise=0.05):
    """Shuffled clips: feature 0 = true time; embeddings = noisy one-hots of scene / shot."""
    rng = np.random.default_rng(seed)
    B = len(LENS)
    feat = np.zeros((B, N, 2), np.float32)
    scene_emb = np.zeros((B, N, 8), np.float32)
    shot_emb = np.zeros((B, N, 16), np.float32)
    scene_id = np.zeros((B, N), int)
    shot_id = np.zeros((B, N), int)
    gt = np.tile(np.arange(N), (B, 1))
    for b, n in enumerate(LENS):
        t = rng.permutation(n)  # true position of input frame k
        sc = t * scenes[b] // n  # contiguous scenes in true time
        sh = sc * shots_per_scene + (t * scenes[b] * shots_per_scene // n) % shots_per_scene
        feat[b, :n, 0] = t / n
        scene_emb[b, :n] = np.eye(8)[sc] + noise * rng.normal(size=(n, 8))
        shot_emb[b, :n] = np.eye(16)[sh] + noise * rng.normal(size=(n, 16))
        scene_id[b, :n], shot_id[b, :n] = sc, sh
        gt[b, :n] = np.argsort(t)
    return feat, np.arange(N)[None] < LENS[:, None], scene_emb, shot_emb, scene_id, shot_id, gt


@jax.jit
def before_scores(members, member_mask):
    """Oracle: unit g before unit h by how much earlier its mean time is (tanh)."""
    w = member_mask.astype(jnp.float32)
    t = (members[..., 0] * w).sum(-1) / jnp.maximum(w.sum(-1), 1)
    return jnp.tanh(10.0 * (t[:, None, :] - t[:, :, None]))


def _counting(fn, calls):
    def wrapped(members, member_mask):
        calls.append(members.shape)
        return fn(members, member_mask)

    return wrapped


def test_without_clustering_equals_flat_search():
    feat, mask, *_ = _clips(1)
    order = hierarchical_order(feat, mask, before_scores, objective="linear", beam_size=4)
    flat = before_scores(jnp.asarray(feat)[:, :, None], jnp.asarray(mask)[:, :, None])
    want, _ = beam_search_order(flat, mask, beam_size=4, objective="linear")
    np.testing.assert_array_equal(np.asarray(order), np.asarray(want))


def test_recovers_order_with_ground_truth_counts():
    feat, mask, scene_emb, shot_emb, scene_id, shot_id, gt = _clips(2)
    order = hierarchical_order(
        feat, mask, before_scores, before_scores, before_scores,
        shot_embed=shot_emb, scene_embed=scene_emb,
        gt_shot_ids=shot_id, gt_scene_ids=scene_id,
        objective="linear", search="exact",
    )  # fmt: skip
    s = om.summary(order, gt, mask)
    assert s["lsd"] == 0 and s["os2"] == 100


def test_recovers_order_with_estimated_counts():
    feat, mask, scene_emb, shot_emb, _, _, gt = _clips(3)
    order = hierarchical_order(
        feat, mask, before_scores, before_scores, before_scores,
        shot_embed=shot_emb, scene_embed=scene_emb, objective="linear", beam_size=4,
    )  # fmt: skip
    assert om.summary(order, gt, mask)["lsd"] == 0


def test_single_unit_levels_skip_work():
    # one scene per clip and one shot per scene: only frames are ordered
    feat, mask, scene_emb, shot_emb, _, _, gt = _clips(4, scenes=(1, 1, 1, 1), shots_per_scene=1)
    calls = []
    order = hierarchical_order(
        feat, mask, _counting(before_scores, calls), shot_score_fn=None, scene_score_fn=None,
        shot_embed=shot_emb, scene_embed=scene_emb,
        gt_shot_ids=np.zeros_like(gt), gt_scene_ids=np.zeros_like(gt), objective="linear",
        beam_size=4,
    )  # fmt: skip
    assert len(calls) == 1 and calls[0][2] == 1  # one batched frame-level call, M = 1
    assert om.summary(order, gt, mask)["lsd"] == 0
    # several shots but no shot score function: a clear error
    feat, mask, scene_emb, shot_emb, scene_id, shot_id, gt = _clips(5)
    with pytest.raises(ValueError, match="shot_score_fn"):
        hierarchical_order(
            feat, mask, before_scores, shot_embed=shot_emb, gt_shot_ids=shot_id,
            objective="linear",
        )  # fmt: skip



@pytest.mark.parametrize("alone", ["frame", "shot", "scene"])
def test_one_level_ordered_alone_the_others_from_the_truth(alone):
    """Ground-truth partitions, one level scored (here: backwards), every other level in
    its true order: the result reverses exactly that level's units inside their parents."""
    feat, mask, _, _, scene_id, shot_id, gt = _clips(7)
    truth = np.argsort(gt, 1)  # true position of each input frame
    every = hierarchical_order(feat, mask, None, shot_labels=shot_id, scene_labels=scene_id,
                               truth=truth)
    np.testing.assert_array_equal(np.asarray(every), gt)
    backwards = jax.jit(lambda m, mm: -before_scores(m, mm))
    fns = {f"{lv}_score_fn": backwards if lv == alone else None
           for lv in ("frame", "shot", "scene")}
    order = np.asarray(hierarchical_order(feat, mask, shot_labels=shot_id, scene_labels=scene_id,
                                          truth=truth, objective="linear", search="exact",
                                          **fns))
    for b, n in enumerate(LENS):
        t, sc, sh = truth[b, :n], scene_id[b, :n], shot_id[b, :n]
        key = {"frame": (-t, sh, sc), "shot": (t, -sh, sc), "scene": (t, sh, -sc)}[alone]
        np.testing.assert_array_equal(order[b, :n], np.lexsort(key))

def test_bad_input():
    feat, mask, scene_emb, *_ = _clips(6)
    with pytest.raises(ValueError, match="features"):
        hierarchical_order(feat[0], mask, before_scores)
    with pytest.raises(ValueError, match="scene_embed"):
        hierarchical_order(feat, mask, before_scores, scene_embed=scene_emb[:, :8])
    with pytest.raises(ValueError, match="mask"):
        hierarchical_order(feat, np.zeros_like(mask), before_scores)
    with pytest.raises(ValueError, match="search"):
        hierarchical_order(feat, mask, before_scores, search="greedy")
    with pytest.raises(ValueError, match="frame_score_fn"):
        hierarchical_order(feat, mask, lambda m, mm: jnp.zeros((1, 1, 1)))
