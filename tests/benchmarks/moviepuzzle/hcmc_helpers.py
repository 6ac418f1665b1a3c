"""Shared by the HCMC tests: tiny sizes, a config, a fresh model and a two-clip batch."""

import warnings

import numpy as np
from flax import nnx

from configs.moviepuzzle.hcmc import get_config
from vnr.benchmarks.moviepuzzle import hcmc as task

B, N, S, L = 2, 8, 16, 6


def config(arg="smoke,frame_shot_scene"):
    return get_config(arg)


def model(config, seed=0):
    return task.make_model(config, nnx.Rngs(seed))


def batch(seed=0):
    """Two clips: 8 and 6 real frames; shots contiguous in true order; frames shuffled."""
    rng = np.random.default_rng(seed)
    shot = np.array([[0, 0, 1, 1, 1, 2, 3, 3], [5, 5, 6, 7, 7, 7, -1, -1]])
    scene = np.array([[0, 0, 0, 0, 0, 1, 1, 1], [2, 2, 2, 3, 3, 3, -1, -1]])
    mask = shot >= 0
    position = np.tile(np.arange(N), (B, 1))
    for b in range(B):  # shuffle the real frames of each clip
        n = mask[b].sum()
        perm = np.r_[rng.permutation(n), np.arange(n, N)]
        shot[b], scene[b], position[b] = shot[b][perm], scene[b][perm], position[b][perm]
    frames = rng.integers(0, 255, (B, N, S, S, 3), dtype=np.uint8)
    frames[~mask] = 0
    tokens = rng.integers(2, 100, (B, N, L), dtype=np.int32)
    tokens[~mask] = 0
    return {"frames": frames, "tokens": tokens, "mask": mask, "position": position.astype(
        np.int32), "shot_id": shot.astype(np.int32), "scene_id": scene.astype(np.int32)}


def validate_quietly(config):
    """Validates; a warning (a value contradicting Table 7) fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        task.validate(config)
