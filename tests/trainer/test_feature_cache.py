"""Frozen towers as cached features (`vnr/feature_cache.py`, `python -m vnr.cache_features`):
a cached run equals the uncached one, a build resumes, and a stale, missing or unfreezable
cache is one error line before anything compiles."""

import dataclasses
import json
import re

import jax.numpy as jnp
import numpy as np
import pytest

from configs.moviepuzzle import hcmc
from vnr import cache_features, feature_cache, progress, sharding, train
from vnr.benchmarks.moviepuzzle import data
from vnr.benchmarks.moviepuzzle import hcmc as task
from vnr.data import pipeline


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tfds"))


def _config(data_dir: str, **over):
    c = hcmc.get_config("smoke,frame_shot")
    c.data.update(data_dir=data_dir, augment=False, test_splits=("test_out_domain",))
    c.frozen = (r"encoders\.frame\.image\.",)
    c.evals.val.max_examples, c.evals.test.max_examples = 4, 6
    for k, v in over.items():
        c.data[k] = v
    return c


def _steps(config, steps: int = 2):
    """(losses of `steps` train steps, clip-pass outputs on the first eval batch)."""
    s = train.setup(config)
    it = iter(task.train_data(config, s.local_batch, 0, 1))
    state, losses = s.state, []
    for step in range(1, steps + 1):
        state, m = s.step_fn(state, sharding.global_batch(next(it), s.mesh),
                             jnp.asarray(step, jnp.int32))
        losses.append(float(m["loss"]))
    ds = data.eval_dataset(config.data, "val", config.eval_batch_size, config.seed, 4,
                           cached=task._cached(config))
    batch = {k: v for k, v in next(iter(ds)).items() if k != "text"}
    out = s.predict_fn(state, sharding.global_batch(pipeline.pad_batch(
        batch, config.eval_batch_size), s.mesh))
    m = np.asarray(out["mask"])  # padded frames are never read (zeros when cached)
    return losses, {"scores": np.asarray(out["scores"])[m[:, :, None] & m[:, None, :]],
                    **{k: np.asarray(out[k])[m] for k in ("features", "shot_embed")}}


@pytest.mark.e2e
def test_cached_image_features_give_the_uncached_run(data_dir, monkeypatch):
    plain_losses, plain_out = _steps(_config(data_dir))
    cached_cfg = _config(data_dir, feature_cache="image")
    with pytest.raises(train.ConfigError, match="no image feature cache.*cache_features"):
        train.setup(cached_cfg)
    # An interrupted build (a failure in the third chunk) resumes from its finished chunks.
    calls, orig = [0], task.feature_towers
    tower = orig(cached_cfg)["image"]

    def failing(config):
        def prepare(rec):
            calls[0] += 1
            if calls[0] == 9:
                raise KeyboardInterrupt
            return tower.prepare(rec)

        return {k: dataclasses.replace(v, prepare=prepare) for k, v in orig(config).items()}

    task.feature_towers = failing
    try:
        with pytest.raises(KeyboardInterrupt):
            cache_features.build(cached_cfg, chunk=4, say=lambda _: None)
    finally:
        task.feature_towers = orig
    said = []
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)  # a progress line per chunk
    dirs = cache_features.build(cached_cfg, chunk=4, say=said.append)
    assert any("resumed, 2 of 10 chunks" in s for s in said), said
    assert any(re.fullmatch(r"  train: 1 of 8 chunks embedded \(.* s\)", s) for s in said), said
    assert any(re.fullmatch(r"  val: \d+ records, \d+ frames, width \d+, in .*", s)
               for s in said), said
    meta = json.loads((dirs["image"] / "meta.json").read_text())
    assert set(meta["splits"]) == {"train", "val", "test_out_domain"}
    src = tower.source("train")
    offsets = np.load(dirs["image"] / "train.offsets.npy")
    assert offsets[-1] == meta["splits"]["train"]["frames"] == sum(
        len(src[i]["frames"]) for i in range(len(src)))

    # Same training losses and the same clip-pass outputs (scores, features, cluster
    # embeddings: everything Algorithm 1 and the metrics read) as the uncached run.
    cached_losses, cached_out = _steps(cached_cfg)
    np.testing.assert_allclose(cached_losses, plain_losses, rtol=1e-5)
    for k, v in plain_out.items():
        np.testing.assert_allclose(cached_out[k], v, rtol=1e-4, atol=1e-5, err_msg=k)

    # A cache of other weights (here another random init: seed) is never read.
    other = _config(data_dir, feature_cache="image")
    other.seed = 1
    with pytest.raises(train.ConfigError, match=r"stale.*weights\.random_init\.seed"):
        train.setup(other)


def test_unfreezable_towers_and_bad_keys_are_one_line(data_dir):
    c = _config(data_dir, feature_cache="image")
    c.frozen = ()
    with pytest.raises(train.ConfigError, match=r"image tower \(encoders\.frame\.image\) is "
                                                r"not frozen"):
        train.setup(c)
    c = _config(data_dir, feature_cache="audio")
    with pytest.raises(train.ConfigError, match="tower 'audio'.*offer: image, text"):
        train.setup(c)
    c = _config(data_dir, feature_cache="image", augment=True)
    with pytest.raises(train.ConfigError, match="augment"):
        train.setup(c)
    # A small text tower with a transformer layer has dropout: its cached features could
    # not equal training's.
    c = _config(data_dir)
    c.model.text_layers = 1
    c.frozen = (r"encoders\.frame\.text\.",)
    with pytest.raises(feature_cache.CacheError, match="dropout"):
        cache_features.build(c, towers=["text"], splits=["val"], say=lambda _: None)


def test_run_sources_are_keyed_by_their_checkpoint_files(data_dir, tmp_path):
    class Task:
        @staticmethod
        def pretrained(config):
            return {"encoders.frame": (str(tmp_path / "run"), "run")}

    c = _config(data_dir, feature_cache="image")
    step = tmp_path / "run" / "checkpoints" / "7"
    step.mkdir(parents=True)
    (step / "weights").write_bytes(b"a" * 100)
    tower = task.feature_towers(c)["image"]
    first = feature_cache.identity(c, Task, "image", tower)
    assert first["weights"]["step"] == 7
    (step / "weights").write_bytes(b"b" * 101)
    second = feature_cache.identity(c, Task, "image", tower)
    assert feature_cache.key_of(first) != feature_cache.key_of(second)


def test_scratch_clip_text_tower_has_a_position_for_the_appended_eos():
    """Hashed ids fill all `max_tokens` slots, then `embed_text` appends an EOS: the scratch
    tower needs max_tokens + 1 positions (with 16 of 16 every output was NaN)."""
    from flax import nnx

    from vnr.benchmarks.moviepuzzle.frame_encoder import FrameEncoder

    enc = FrameEncoder(modalities=("text",), image_encoder="small",
                       text_encoder="scratch:clip-tiny", image_size=16, stem=1, conv="patch",
                       channels=(8,), vocab_size=64, max_tokens=16, width=8, text_layers=0,
                       heads=2, dropout=0.0, rngs=nnx.Rngs(0))
    tokens = np.random.default_rng(0).integers(1, 63, (3, 16)).astype(np.int32)
    tokens[1, 5:] = 0
    out = enc.embed_text(jnp.asarray(tokens), None, False, None)
    assert np.isfinite(np.asarray(out)).all()


def test_image_cache_key_follows_the_frame_preprocessing(data_dir):
    """The square resize, CLIP's preprocessing and the draft option are three caches: a run
    never reads image features computed from pixels prepared another way."""
    keys = set()
    for over in ({}, {"image_resize": "clip"}, {"image_resize": "clip", "jpeg_draft": True}):
        c = _config(data_dir, feature_cache="image", **over)
        tower = task.feature_towers(c)["image"]
        assert (tower.prepare.resize, tower.prepare.draft) == (c.data.image_resize,
                                                               c.data.jpeg_draft)
        ident = feature_cache.identity(c, task, "image", tower)
        assert ident["preprocessing"]["decode"]["resize"] == c.data.image_resize
        keys.add(feature_cache.key_of(ident))
    assert len(keys) == 3
