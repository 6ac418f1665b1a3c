"""HCMC pieces: model shapes and masking, pair/negative sampling, Eq. 3 against NumPy,
the loss going down, and Algorithm 1 driven by the model's heads."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from configs.moviepuzzle.hcmc import get_config
from tests.benchmarks.moviepuzzle.hcmc_helpers import B, N
from tests.benchmarks.moviepuzzle.hcmc_helpers import batch as _batch
from tests.benchmarks.moviepuzzle.hcmc_helpers import config as _config
from tests.benchmarks.moviepuzzle.hcmc_helpers import model as _model
from tests.benchmarks.moviepuzzle.hcmc_helpers import validate_quietly as _validate_quietly
from vnr.benchmarks.moviepuzzle import hcmc as task
from vnr.benchmarks.moviepuzzle import hcmc_scores
from vnr.benchmarks.moviepuzzle.hcmc_model import contrastive_cluster_loss, group_mean


def test_shapes_and_padding_does_not_leak():
    config = _config()
    model = _model(config)
    batch = _batch()
    # changing padded frames changes no real frame's outputs, nor pooled group vectors
    noisy = dict(batch, frames=batch["frames"].copy(), tokens=batch["tokens"].copy())
    noisy["frames"][1, 6:] = 200
    noisy["tokens"][1, 6:] = 7

    @nnx.jit
    def run(model, batch, noisy):
        def encode(b):
            return model.encode(b["frames"], b["tokens"], train=False, rngs=None)

        def units(feats):
            return model.units_from_groups("shot", feats, batch["shot_id"], batch["mask"],
                                           batch["position"])

        f1, f2 = encode(batch), encode(noisy)
        return {"feats": f1, "out": task.predict(config, model, batch),
                "out2": task.predict(config, model, noisy), "u1": units(f1), "u2": units(f2)}

    got = jax.device_get(run(model, batch, noisy))
    feats, out, out2 = got["feats"], got["out"], got["out2"]
    assert feats.shape == (B, N, 3, config.model.width)
    assert out["scores"].shape == (B, N, N) and out["shot_embed"].shape == (B, N, 16)
    assert config.cl_form == "dot" and not np.allclose(  # Eq. 3 as printed: raw ψ
        np.linalg.norm(out["scene_embed"], axis=-1), 1.0, atol=1e-3)
    ours = _config("smoke,frame_shot_scene,ours")
    scene = nnx.jit(lambda m, b: task.predict(ours, m, b)["scene_embed"])(_model(ours), batch)
    np.testing.assert_allclose(np.linalg.norm(scene, axis=-1), 1.0, atol=1e-5)
    real = batch["mask"]
    np.testing.assert_allclose(out["features"][real], out2["features"][real], atol=1e-5)
    np.testing.assert_allclose(got["u1"][real], got["u2"][real], atol=1e-5)


def test_concatenated_shot_feature_follows_frame_order():
    """App. C: a shot is its frames' features concatenated in order (slots padded with
    zeros); training (true order) and Algorithm 1 (members in order) give the same vector,
    and reversing the frames changes it (the mean would not)."""
    config = _config("smoke,frame_shot")
    model = _model(config)
    batch = _batch()

    @nnx.jit
    def encode(model, b):
        feats = model.encode(b["frames"], b["tokens"], train=False, rngs=None)
        return feats, model.units_from_groups("shot", feats, b["shot_id"], b["mask"],
                                              b["position"])

    from_members = nnx.jit(lambda m, x, mm: m.units_from_members("shot", x, mm))
    feats, units = jax.device_get(encode(model, batch))
    b, sid = 0, 1  # clip 0, shot 1: three frames
    idx = np.nonzero((batch["shot_id"][b] == sid) & batch["mask"][b])[0]
    idx = idx[np.argsort(batch["position"][b, idx])]
    members = np.zeros((1, 1, 4, feats.shape[2] * feats.shape[3]), np.float32)
    members[0, 0, :3] = feats[b, idx].reshape(3, -1)
    mmask = np.zeros((1, 1, 4), bool)
    mmask[0, 0, :3] = True
    got = np.asarray(from_members(model, members, mmask))
    np.testing.assert_allclose(got[0, 0], units[b, idx[0]], atol=1e-5)
    members[0, 0, :3] = members[0, 0, 2::-1]
    rev = np.asarray(from_members(model, members, mmask))
    assert np.abs(rev - got).max() > 1e-3


def test_paper_preset_is_table7_and_overrides_warn_once():
    c = _config("frame_shot,paper")
    assert (c.lr, c.batch_size, c.b1, c.b2, c.eps, c.weight_decay) == (
        1e-4, 8, 0.9, 0.999, 1e-6, 0.01)
    assert (c.cl_lambda, c.eval.kmeans_iters, c.eval.distance) == (1.0, 1000, "euclidean")
    assert (c.model.pair_layers, c.model.width, c.model.heads) == (2, 512, 8)
    assert (c.optimizer, c.schedule, c.warmup_steps, c.grad_clip) == ("adamw", "constant", 0, 0)
    # 5 epochs: resolved from the built train split by validate (data.resolve_epochs);
    # until then the paper's 7,048 clips (§2.3)
    assert c.epochs == 5 and c.total_steps == -(-5 * 7048 // 8)
    assert c.frozen == () and (c.eval.objective, c.eval.starts) == ("path", "per_start")
    assert _config("frame_shot,paper,lambda=0.75").cl_lambda == 0.75  # Table 10 best
    exact = _config("frame_shot,exact")  # 20-frame clips fit the exact DP now
    task.validate(exact)
    exact.data.max_frames = 21
    with pytest.raises(ValueError, match="<= 20 frames but data.max_frames=21"):
        task.validate(exact)
    task._WARNED.clear()
    assert task.check_paper_preset(c) == []
    c.eps = 1e-8
    with pytest.warns(UserWarning, match=r"config\.eps=1e-08 overrides the paper preset") as w:
        assert task.check_paper_preset(c) == ["eps"]
    assert len(w) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        task.check_paper_preset(c)  # named once per process


def test_paper_rows_read_stored_frames_with_a_worker_per_spare_core():
    """Ours, for input speed (the same batches): `paper` trains the towers on pixels, so it
    reads the frame store with data.num_workers=-1; `cached` features need no pixels."""
    c = _config("frame_shot,paper")
    assert c.data.frame_store is True and c.data.num_workers == -1
    assert not _config("frame_shot,paper,freeze=image,cached").data.frame_store
    assert not _config("frame_shot").data.frame_store  # not a paper row: as the main job
    assert _config("frame_shot,paper,smoke").data.num_workers == 0  # tests read in-process


def test_group_mean_is_the_mean_over_the_group():
    x = np.random.default_rng(0).normal(size=(1, 5, 3)).astype(np.float32)
    group = np.array([[4, 9, 4, 9, 0]])
    mask = np.array([[True, True, True, True, False]])
    got = np.asarray(jax.jit(group_mean)(x, group, mask))
    np.testing.assert_allclose(got[0, 0], x[0, [0, 2]].mean(0), rtol=1e-6)
    np.testing.assert_allclose(got[0, 3], x[0, [1, 3]].mean(0), rtol=1e-6)


def test_unit_pairs_are_distinct_units_within_and_across_groups():
    batch = _batch(1)
    shot, scene, mask = (jnp.asarray(batch[k]) for k in ("shot_id", "scene_id", "mask"))
    key = jax.random.key(0)
    sample = jax.jit(task.sample_unit_pairs, static_argnums=4)  # num: a shape
    i, j, valid = sample(key, shot, scene, mask, 400, 0.5)
    i, j, valid = map(np.asarray, (i, j, valid))
    s, c = batch["shot_id"], batch["scene_id"]
    take = lambda a, idx: np.take_along_axis(a, idx, 1)  # noqa: E731
    assert valid.all() and batch["mask"][np.arange(B)[:, None], j].all()
    assert (take(s, i) != take(s, j)).all()
    same_scene = take(c, i) == take(c, j)
    assert 0.3 < same_scene.mean() < 0.95  # both within and across scenes
    i1, j1, _ = map(np.asarray, sample(key, shot, scene, mask, 200, 1.0))
    # within_frac=1: the second shot is in the same scene whenever that scene has another
    # shot (clip 0: scene 0 has shots 0, 1; scene 1 has shots 2, 3)
    assert (take(c, i1)[0] == take(c, j1)[0]).all()
    one = jnp.zeros_like(shot)  # a single unit per clip: no valid pair
    assert not np.asarray(sample(key, one, one, mask, 5, 0.5)[2]).any()


def test_contrastive_draws_respect_groups():
    batch = _batch(2)
    shot, mask = jnp.asarray(batch["shot_id"]), jnp.asarray(batch["mask"])
    sample = jax.jit(task.sample_contrastive, static_argnums=3)  # num_neg: a shape
    pos, neg, ok, neg_ok = map(np.asarray, sample(jax.random.key(3), shot, mask, 6))
    g, m = batch["shot_id"].reshape(-1), batch["mask"].reshape(-1)
    clip = np.repeat(np.arange(B), N)
    a = np.arange(B * N)
    assert (pos[ok] != a[ok]).all() and (g[pos[ok]] == g[a[ok]]).all()
    assert (clip[pos[ok]] == clip[a[ok]]).all()
    assert (ok == (m & (np.bincount(g[m] + 1, minlength=10)[g + 1] > 1))).all()
    n_ok = neg[neg_ok]
    anchors = np.broadcast_to(a[:, None], neg.shape)[neg_ok]
    assert m[n_ok].all() and (g[n_ok] != g[anchors]).all() and (clip[n_ok] == clip[anchors]).all()


def test_eq3_matches_a_direct_numpy_computation():
    rng = np.random.default_rng(0)
    A, n, D, tau = 5, 4, 3, 0.2
    z, zp, zn = rng.normal(size=(A, D)), rng.normal(size=(A, D)), rng.normal(size=(A, n, D))
    neg_mask = rng.random((A, n)) > 0.3
    neg_mask[0] = False  # no negative: anchor 0 does not count
    valid = np.array([True, True, False, True, True])
    cos = lambda a, b: (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)  # noqa
    want = []
    for a in range(A):
        if not valid[a] or not neg_mask[a].any():
            continue
        num = np.exp(cos(z[a], zp[a]) / tau)
        den = num + sum(np.exp(cos(z[a], zn[a, k]) / tau) for k in range(n) if neg_mask[a, k])
        want.append(-np.log(num / den))
    loss = jax.jit(contrastive_cluster_loss, static_argnums=(5, 6))
    got = loss(z, zp, zn, neg_mask, valid, tau, "cosine")
    np.testing.assert_allclose(float(got), np.mean(want), rtol=1e-5)
    want = []  # as printed: raw dot products, no temperature
    for a in range(A):
        if not valid[a] or not neg_mask[a].any():
            continue
        num = np.exp(z[a] @ zp[a])
        den = num + sum(np.exp(z[a] @ zn[a, k]) for k in range(n) if neg_mask[a, k])
        want.append(-np.log(num / den))
    got = loss(z, zp, zn, neg_mask, valid, tau, "dot")
    np.testing.assert_allclose(float(got), np.mean(want), rtol=1e-5)


@pytest.mark.e2e
def test_loss_is_finite_and_goes_down():
    config = _config()
    model = _model(config)
    opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
    batch = {k: jnp.asarray(v) for k, v in _batch(4).items()}

    @nnx.jit
    def step(model, opt, seed):
        def loss(m):
            return task.loss_fn(config, m, batch, nnx.Rngs(dropout=seed))
        (value, metrics), grads = nnx.value_and_grad(loss, has_aux=True)(model)
        opt.update(model, grads)
        return value, metrics

    losses = [float(step(model, opt, jax.random.key(0))[0]) for _ in range(25)]
    assert np.isfinite(losses).all()
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5]), losses
    _, metrics = step(model, opt, jax.random.key(0))
    assert {"frame_pair_acc", "shot_pair_acc", "scene_pair_acc", "shot_cl", "scene_cl"} <= set(
        metrics)


def test_algorithm1_with_the_heads_keeps_predicted_shots_contiguous():
    from vnr import sharding
    from vnr.benchmarks.moviepuzzle.hierarchical import hierarchical_order

    config = _config()
    model = _model(config, seed=1)
    batch = _batch(5)
    predict = jax.jit(lambda b: task.predict(config, model, b))
    mesh = sharding.make_mesh((-1, 1), ("data", "model"))
    out = jax.device_get(predict(batch))

    def level_fn(lv):
        pairs = jax.jit(lambda b: task.predictors(config)[f"{lv}_pairs"](config, model, b))
        return hcmc_scores.score_fn(
            lambda b: pairs({k: jnp.asarray(v) for k, v in b.items()}), mesh, 64)

    fns = {lv: level_fn(lv) for lv in ("frame", "shot", "scene")}
    order, clusters = hierarchical_order(
        out["features"], out["mask"], fns["frame"], fns["shot"], fns["scene"],
        shot_embed=out["shot_embed"], scene_embed=out["scene_embed"],
        gt_shot_ids=batch["shot_id"], gt_scene_ids=batch["scene_id"], return_clusters=True)
    order = np.asarray(order)
    for b in range(B):
        n = batch["mask"][b].sum()
        assert sorted(order[b, :n]) == list(range(n))
        for level in ("shot", "scene"):
            lab = clusters[level][b][order[b, :n]]  # cluster of each output position
            runs = lab[np.r_[True, lab[1:] != lab[:-1]]]
            assert len(runs) == len(set(lab)), (level, lab)  # each cluster is one block
        # counts as the seed code: per predicted scene, its number of distinct true shots
        for sc in set(clusters["scene"][b][:n]):
            in_sc = clusters["scene"][b][:n] == sc
            assert len(set(clusters["shot"][b][:n][in_sc])) == len(
                set(batch["shot_id"][b][:n][in_sc]))


@pytest.mark.parametrize("arg, msg", [("smoke,frame_shot,frame_scene", "one level set"),
                                      ("smoke,lambda=x", "not a number"),
                                      ("smoke,bogus", "unknown config arg")])
def test_bad_config_args_raise(arg, msg):
    with pytest.raises(ValueError, match=msg):
        get_config(arg)


@pytest.mark.parametrize("arg", ["smoke,separate_mlp", "smoke,separate_transformer,frame_scene",
                                 "smoke,clip", "smoke,no_vision,frame"])
def test_row_variants_build_train_and_predict(arg):
    config = get_config(arg)
    task.validate(config)
    model = _model(config)
    batch = {k: jnp.asarray(v) for k, v in _batch(6).items()}

    @nnx.jit
    def run(model, batch):
        loss, metrics = task.loss_fn(config, model, batch, nnx.Rngs(dropout=jax.random.key(0)))
        return loss, metrics, task.predict(config, model, batch)

    loss, metrics, out = run(model, batch)
    assert np.isfinite(float(loss))
    assert ("shot_cl" in metrics) == ("shot" in config.model.levels)
    assert out["scores"].shape == (B, N, N)
    assert out["features"].shape == (B, N, len(config.model.levels) * config.model.width)


def test_no_shot_reads_no_ground_truth_shot_ids():
    """Table 2 "w/o shot" pairs frames across the clip: its pair groups ignore shot_id,
    unlike the "frame" row (frame pairs inside shots)."""
    batch = {k: jnp.asarray(v) for k, v in _batch(5).items()}
    other = dict(batch, shot_id=jnp.where(batch["mask"], jnp.arange(N)[None] % 2, -1))
    for arg, same in (("smoke,frame_shot,no_shot", True), ("smoke,frame", False)):
        config = _config(arg)
        levels = tuple(config.model.levels)
        got = [task._parents(levels, b, config.model.frame_parent)["frame"][1]
               for b in (batch, other)]
        assert bool((got[0] == got[1]).all()) == same, arg


# The paper rows' trainings (two steps through the trainer: finite loss, Eq. 4 = order
# loss + lambda * CL, the frame head moves) and Table 3's distance rows on the frame+shot
# run: tests/reproduce/test_smoke_moviepuzzle.py::test_paper_rows_train_two_steps and
# ::test_distance_rows_evaluate_the_frame_shot_run. Here: each row's config and switch.
PAPER_ROWS = {"frame_scene,paper": (("frame", "scene"), ("vision", "text")),  # Table 1
              "frame_shot_scene,paper": (("frame", "shot", "scene"), ("vision", "text")),
              "paper,no_shot": (("frame",), ("vision", "text")),  # Table 2
              "paper,no_text": (("frame", "shot"), ("vision",)),
              "paper,no_vision": (("frame", "shot"), ("text",))}


@pytest.mark.parametrize("row", PAPER_ROWS)
def test_paper_rows_validate_with_their_own_switch(row):
    """The row's config (smoke sizes) validates without a warning; its own switch is what
    the loss reads (levels, modalities)."""
    config = get_config(f"smoke,{row}")
    _validate_quietly(config)
    assert (tuple(config.model.levels), tuple(config.model.modalities)) == PAPER_ROWS[row]


def test_frame_shot_rows_differ_only_in_lambda_or_distance():
    """Table 1's frame+shot row (paper preset), Table 10's lambda = 0.75 and Table 2's
    "w/o CL" differ only in Eq. 4's lambda ("w/o CL" switches CL off); Table 3's Cosine and
    Soft_DTW rows only in `eval.distance` (they re-evaluate the frame+shot run)."""
    from vnr.train import flatten

    base = flatten(get_config("smoke,frame_shot,paper").to_dict())

    def diff(row):
        other = flatten(get_config(f"smoke,{row}").to_dict())
        return {k for k in base if base[k] != other[k]} - {"paper_preset"}

    assert diff("frame_shot,paper,lambda=0.75") == {"cl_lambda"}
    assert diff("frame_shot,paper,no_cl") == {"use_cl"}
    for row in ("frame_shot,paper", "frame_shot,paper,lambda=0.75", "frame_shot,paper,no_cl"):
        _validate_quietly(get_config(f"smoke,{row}"))
    for distance in ("euclidean", "cosine", "softdtw"):
        assert diff(f"frame_shot,paper,{distance}") == (
            set() if distance == "euclidean" else {"eval.distance"})


def test_pretrained_clip_tower_warns_unless_it_reads_clips_own_preprocessing(tmp_path):
    """`clip=<checkpoint>` sets data.image_resize='clip'; a config feeding a pretrained CLIP
    image tower anything else is named once (a deliberate choice stays possible); a bad
    data.image_resize is one error line."""
    from vnr.models.encoders.testing import write_tiny_checkpoint

    d = tmp_path / "clip"
    write_tiny_checkpoint("clip-p32", d, "flax-safetensors")  # vision side 64
    c = get_config(f"smoke,no_text,clip={d}")
    assert c.data.image_resize == "clip"
    c.data.update(tokenizer="hash", vocab_size=4096, image_size=64)
    _validate_quietly(c)
    from vnr.benchmarks.moviepuzzle import pairwise

    pairwise._WARNED.clear()
    c.data.image_resize = "squash"
    with pytest.warns(UserWarning, match=r"its own preprocessing is data.image_resize='clip' "
                                         r"with data.image_size=64, this run has 'squash'"):
        task.validate(c)
    c.data.image_resize = "crop"
    with pytest.raises(ValueError, match="data.image_resize='crop': use one of squash, clip"):
        task.validate(c)
