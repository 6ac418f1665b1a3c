"""HCMC as the paper rows run it (§3.2, App. E): ψ and ϕ in ℝ₊, frames as token sequences
on CLIP towers and Algorithm 1 reading their scores, the Appendix E evaluation switches."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tests.benchmarks.moviepuzzle.hcmc_helpers import B, L, N
from tests.benchmarks.moviepuzzle.hcmc_helpers import batch as _batch
from tests.benchmarks.moviepuzzle.hcmc_helpers import config as _config
from tests.benchmarks.moviepuzzle.hcmc_helpers import model as _model
from tests.benchmarks.moviepuzzle.hcmc_helpers import validate_quietly as _validate_quietly
from vnr import task as task_lib
from vnr.benchmarks.moviepuzzle import frame_cache, hcmc_scores
from vnr.benchmarks.moviepuzzle import hcmc as task


def _psi_and_phi(config, model, batch):
    """ψ of the clip pass's shots, and ϕ of every frame pair (units of ground-truth shots)."""
    units = model.units_from_groups("frame", frame_cache.encode_batch(
        model, batch, False, None), batch["shot_id"], batch["mask"])
    return task.predict(config, model, batch)["shot_embed"], model.all_pair_logits("frame",
                                                                                  units)


def test_paper_psi_is_a_classifiers_probabilities():
    """§3.2: ψ is a multi-class classifier and ψ(P) ∈ ℝ₊: the paper rows cluster its class
    probabilities (positive, summing to 1); our rows keep the head's real outputs."""
    batch = {k: jnp.asarray(v) for k, v in _batch(3).items()}
    for arg, probs in (("smoke,frame_shot,paper", True), ("smoke,frame_shot", False)):
        config = _config(arg)
        assert config.model.cluster_out == ("softmax" if probs else "real")
        out, phi = nnx.jit(functools.partial(_psi_and_phi, config))(_model(config), batch)
        assert bool((out > 0).all()) == probs
        # ϕ(P) ∈ ℝ₊ too on the paper rows: positive outputs (softplus)
        assert bool((phi > 0).all()) == probs
        if probs:
            np.testing.assert_allclose(np.asarray(out).sum(-1), 1.0, rtol=1e-5)
    config = _config("smoke,frame_shot")
    config.model.cluster_out = "relu"
    with pytest.raises(ValueError, match="model.cluster_out='relu'"):
        task.validate(config)


def test_token_frames_pair_both_sequences_and_padding_does_not_leak():
    """§3.2 on CLIP towers (`paper` + clip): a frame is its image tokens then its utterance
    tokens; a frame pair is both sequences through the transformer, read at each frame's
    first token. The all-pairs pass equals pair-by-pair; padded frames change nothing."""
    config = _config("smoke,frame_shot,paper,clip")
    assert config.model.frame_repr == "tokens"
    model = _model(config)
    batch = {k: jnp.asarray(v) for k, v in _batch(4).items()}
    i, j = jnp.array([[0, 3], [1, 5]]), jnp.array([[3, 0], [2, 4]])

    @nnx.jit
    def run(model, batch):
        feats, seq, mask = model.encode_tokens(batch["frames"], batch["tokens"], train=False,
                                               rngs=None)
        pad = ~batch["mask"]
        other = dict(batch, frames=jnp.where(pad[..., None, None, None], 7, batch["frames"]),
                     tokens=jnp.where(pad[..., None], 9, batch["tokens"]))
        return {"feats": feats, "seq": seq, "mask": mask,
                "own": model.pairs["frame"].embed_frames("frame", seq, mask, train=False,
                                                         rngs=None),
                "every": model.all_frame_sequence_logits(seq, mask),
                "one": model.frame_sequence_logits(seq, mask, i, j, train=False, rngs=None),
                "scores": task.predict(config, model, batch)["scores"],
                "other": task.predict(config, model, other)["scores"]}

    got = jax.device_get(run(model, batch))
    feats, seq, mask = got["feats"], got["seq"], got["mask"]
    side = 16 // 8  # scratch clip-tiny: patch 8 at 16 px
    assert seq.shape[:3] == (B, N, 1 + side * side + L + 1) and mask.shape == seq.shape[:3]
    assert feats.shape == (B, N, 2, config.model.width)
    # a frame's vector (for ψ, shots and scenes) is the transformer's output over its own
    # sequence at its first token (§3.2: ψ reads "the output representation")
    own = got["own"]
    np.testing.assert_allclose(feats[:, :, 0], own, rtol=1e-6)
    np.testing.assert_allclose(feats[:, :, 1], own, rtol=1e-6)  # shared by frame and shot
    every, one = got["every"], got["one"]
    np.testing.assert_allclose(one, every[np.arange(B)[:, None], i, j], rtol=1e-5, atol=1e-5)
    assert not np.allclose(one[:, 0], one[:, 1])  # (u, v) and (v, u) differ: order is read
    # padded frames (pixels 7, tokens 9) change no score between real frames
    real = np.asarray(batch["mask"])
    both = real[:, :, None] & real[:, None, :]
    np.testing.assert_allclose(got["other"][both], got["scores"][both], rtol=1e-5)


def test_token_frames_need_clip_towers_a_transformer_and_no_cache():
    for arg, key, value, msg in [
            ("smoke,frame_shot", "frame_repr", "tokens", "small encoders have none"),
            ("smoke,frame_shot,paper,clip", "pair_arch", "mlp", "needs model.pair_arch"),
            ("smoke,frame_shot,paper,clip", "frame_repr", "bogus", "frame_repr='bogus'")]:
        config = _config(arg)
        config.model[key] = value
        with pytest.raises(ValueError, match=msg):
            task.validate(config)
    config = _config("smoke,frame_shot,paper,clip")
    config.data.feature_cache = "image"
    with pytest.raises(ValueError, match="the cache holds pooled tower outputs"):
        task.validate(config)
    # the MLP of Table 8 reads one vector per frame: its paper rows keep pooled frames
    assert _config("smoke,frame_shot_scene,separate_mlp,paper,clip").model.frame_repr == "pooled"
    assert _config("smoke,frame_shot_scene,separate_transformer,paper,clip"
                   ).model.frame_repr == "tokens"


def test_algorithm1_reads_token_frame_scores_by_index():
    """With token frames, Algorithm 1's frame level looks the clip pass's scores up by
    (clip, frame); the shot level gets the features without the two index columns."""
    rng = np.random.default_rng(0)
    cat = {"mask": np.ones((2, 4), bool), "features": rng.normal(size=(2, 4, 3)),
           "scores": rng.normal(size=(2, 4, 4)).astype(np.float32)}
    seen = []
    feats, fns = hcmc_scores.frame_scores_by_index(
        cat, {"frame": None, "shot": lambda m, mm: seen.append(m.shape[-1]) or m})
    members = jnp.asarray(feats)[jnp.array([[1, 1, 0]]), jnp.array([[2, 0, 3]])][:, :, None]
    got = np.asarray(fns["frame"](members, jnp.ones((1, 3, 1), bool)))
    want = [[cat["scores"][1, 2, 2], cat["scores"][1, 2, 0]], [cat["scores"][1, 0, 2],
                                                               cat["scores"][1, 0, 0]]]
    np.testing.assert_allclose(got[0, :2, :2], want)
    fns["shot"](members, None)
    assert seen == [3]


def test_appendix_e_rows_one_block_and_levels_evaluated_alone_or_fewer():
    """Tables 8 / 9: one block ("a simple transformer block" / "a simple MLP") without a
    Table 7 warning; `eval.alone` and `eval.levels` name the model's own levels."""
    for arch in ("mlp", "transformer"):
        config = _config(f"smoke,frame_shot_scene,separate_{arch},paper")
        assert config.model.pair_layers == 1 and config.model.pair_arch == arch
        _validate_quietly(config)
        config.eval.alone = "shot"
        assert "shot_iou" not in task_lib.metric_names(task, config)  # nothing is clustered
        assert {"level_os2", "level_os3"} <= set(task_lib.metric_names(task, config))
        task.validate(config)
    config = _config("smoke,frame_shot")
    config.eval.alone = "scene"
    with pytest.raises(ValueError, match="eval.alone='scene': one of the model's levels"):
        task.validate(config)
    config = _config("smoke,frame_shot_scene")
    config.eval.update(alone="scene", levels=("frame", "shot"))
    with pytest.raises(ValueError, match="must be one of eval.levels"):
        task.validate(config)
    config.eval.update(alone="", levels=("shot",))
    with pytest.raises(ValueError, match="eval.levels=\\('shot',\\): 'frame' plus"):
        task.validate(config)
    config = _config("smoke,frame_shot_scene")
    config.eval.levels = ("frame", "scene")
    assert task.inference_levels(config) == ("frame", "scene")
    names = task_lib.metric_names(task, config)
    assert "scene_iou" in names and "shot_iou" not in names
