"""MoviePuzzle with HCMC (§3.2, Algorithm 1) and the Table 1 baselines, one task.

`config.model.kind` selects the model (modules of `vnr.benchmarks.moviepuzzle`):

  hcmc       `hcmc_model.HCMC`: order heads per level (frame, shot, scene) and cluster heads
             (shot, scene), loss Eq. 4, evaluation through Algorithm 1 (`hierarchical`).
  pair       `pairwise_model.PairOrderModel` (vision-only, late- or early-fusion pair
             models), trained and evaluated as the main job (`pairwise`).
  text_pair  `pairwise_model.TextPairModel` on BERT/ALBERT with an NSP-style head
             (`model.head="nsp"`: does utt_j directly follow utt_i; random negatives) or
             a SOP-style head (`"sop"`: is a consecutive pair in its true order; swapped
             negatives).
  random     nothing to learn: the exact expected metrics of uniformly random orders of the
             split's clips (`order_metrics.random_expectation`); its config runs no step
             (total_steps=0: the loop only evaluates). A placeholder parameter gives the
             optimizer something to hold.

Pretrained encoders (`pretrained(config)`, the trainer's hook, see `vnr/pretrained.py`):
`model.image_encoder` / `model.text_encoder` (hcmc) and `model.encoder` (text_pair) may name
a checkpoint directory (or a `$VNR_ENCODERS_DIR` / Hugging Face cache name, never
downloaded): CLIP towers for HCMC, BERT/ALBERT for the text pairs. Their subtitles must then
come from the checkpoint's tokenizer (`data.tokenizer`, `data.vocab_size=0` or its size);
`config.frozen` keeps parameters fixed (the paper trains the CLIP towers end to end, §3.2:
the `paper` preset freezes nothing; frozen towers are an option).

HCMC training (per step, all clips and pairs in one jitted pass):
  * pairs per level: `pairs_per_clip` ordered pairs of distinct units (frames, shots or
    scenes; a unit is drawn uniformly among the clip's units, not its frames); with
    probability `within_frac` the second unit is drawn inside the first one's parent group
    (frames within a shot, shots within a scene; scenes have the clip as parent), otherwise
    anywhere in the clip, so pairs both within and across groups are seen (§3.2, against
    exposure error). Label: unit u before v by their first true positions.
  * Eq. 3 per cluster level: every real frame is an anchor, its positive a uniform other
    frame of its group (shot or scene); `cl_negatives` negatives drawn uniformly (with
    replacement) among the clip's frames outside the group, or among other clips' frames
    when the clip has a single group; `cl_form="dot"` is Eq. 3 as printed (raw dot
    products of the head outputs), `"cosine"` ours (cosine / `cl_tau`).
  * Eq. 4: L = Σ_levels CE_level + λ Σ_cluster-levels L_CL (`cl_lambda`; `use_cl=False`
    drops the second term, the "w/o CL" row).

HCMC evaluation: the clip pass returns frame features, cluster embeddings and the
frame-level Eq. 5 scores of every pair; Algorithm 1 then clusters (k-means, counts from the
ground-truth ids as the seed code does with `eval.cluster_count="gt"`, or the silhouette
estimate), and asks `predict` again for the Eq. 5 scores of every pair of units of each
level (the same jitted function, called with member tensors). Metrics: LSD, LMD, SD, SSD,
OS2, OS3, pair_acc (frame head on all real pairs), the matched IoU of predicted shots
and scenes with the ground truth and the OS of the predicted shots' / scenes' order
(`shot_os2`, `shot_os3`, ...: Table 3's "shot" rows, `cluster_metrics.unit_ordering_score`;
`shot_os3_clips` counts the clips with enough shots to be scored).
"""

from __future__ import annotations

import functools
import pathlib
import sys
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import config as config_lib
from vnr import evaluation, feature_cache
from vnr.benchmarks.moviepuzzle import (
    data,
    encoder_checks,
    frame_cache,
    hcmc_model,
    hcmc_scores,
)
from vnr.benchmarks.moviepuzzle import pairwise as base
from vnr.benchmarks.moviepuzzle.frame_cache import feature_towers  # noqa: F401 (task hook)
from vnr.benchmarks.moviepuzzle.pairwise_model import PairOrderModel, TextPairModel
from vnr.benchmarks.moviepuzzle.sampling import (
    _pick,
    _take,
    first_position,
    sample_contrastive,
    sample_unit_pairs,
)
from vnr.models.compute import float32
from vnr.models.encoders import towers
from vnr.reports import results as results_lib

METRICS = base.METRICS
KINDS = ("hcmc", "pair", "text_pair", "random")
check_splits = data.check_splits


def validate(config: Any) -> None:
    """Config checks that need no data or compile."""
    base.validate(config)
    m = config.model
    if m.kind not in KINDS:
        raise ValueError(f"model.kind={m.kind!r}: use one of {KINDS}")
    if m.kind == "hcmc":
        levels = tuple(m.levels)
        if "frame" not in levels or set(levels) - set(hcmc_model.LEVELS):
            raise ValueError(f"model.levels={levels}: 'frame' plus any of 'shot', 'scene'")
        if config.cl_lambda < 0:
            raise ValueError(f"cl_lambda={config.cl_lambda} must be >= 0")
        if config.cl_negatives < 1 or config.cl_tau <= 0:
            raise ValueError("cl_negatives must be >= 1 and cl_tau > 0")
        if config.cl_form not in ("dot", "cosine"):
            raise ValueError(f"cl_form={config.cl_form!r}: use 'dot' (Eq. 3 as printed) or "
                             "'cosine' (ours: cosine / cl_tau)")
        if m.get("frame_repr", "pooled") not in hcmc_model.FRAME_REPRS:
            raise ValueError(f"model.frame_repr={m.frame_repr!r}: use one of "
                             f"{hcmc_model.FRAME_REPRS}")
        if m.get("frame_repr") == "tokens" and m.pair_arch != "transformer":
            raise ValueError("model.frame_repr='tokens' needs model.pair_arch='transformer' "
                             "(an MLP reads one vector per unit)")
        if m.get("frame_repr") == "tokens" and "small" in (m.image_encoder, m.text_encoder):
            raise ValueError("model.frame_repr='tokens' reads CLIP towers' token sequences: "
                             "use clip or clip=<checkpoint> (the small encoders have none)")
        if m.get("phi_out", "real") not in hcmc_model.PHI_OUTS:
            raise ValueError(f"model.phi_out={m.phi_out!r}: use one of {hcmc_model.PHI_OUTS}")
        if m.get("cluster_out", "real") not in hcmc_model.CLUSTER_OUTS:
            raise ValueError(f"model.cluster_out={m.cluster_out!r}: use one of "
                             f"{hcmc_model.CLUSTER_OUTS}")
        if m.shot_pool not in ("concat", "mean"):
            raise ValueError(f"model.shot_pool={m.shot_pool!r}: use 'concat' or 'mean'")
        if not 0.0 <= config.within_frac <= 1.0:
            raise ValueError(f"within_frac={config.within_frac} must be in [0, 1]")
        e = config.eval
        if e.cluster_count not in ("gt", "silhouette"):
            raise ValueError(f"eval.cluster_count={e.cluster_count!r}: use 'gt' or 'silhouette'")
        if e.distance not in ("euclidean", "cosine", "softdtw"):
            raise ValueError(f"eval.distance={e.distance!r}: euclidean, cosine or softdtw")
        if e.kmeans_init not in ("random", "kmeans++"):
            raise ValueError(f"eval.kmeans_init={e.kmeans_init!r}: use 'random' or 'kmeans++'")
        used = inference_levels(config)
        if "frame" not in used or set(used) - set(levels):
            raise ValueError(f"eval.levels={tuple(e.levels)}: 'frame' plus any of the model's "
                             f"other levels {levels}")
        if e.get("alone") and e.alone not in levels:
            raise ValueError(f"eval.alone={e.alone!r}: one of the model's levels {levels} "
                             "(ordered by its model, every other level from the ground truth)")
        if e.get("alone") and e.alone not in used:
            raise ValueError(f"eval.alone={e.alone!r} with eval.levels={tuple(e.levels)}: the "
                             "level evaluated alone must be one of eval.levels")
        if e.kmeans_iters < 1:
            raise ValueError(f"eval.kmeans_iters={e.kmeans_iters} must be >= 1")
        if e.distance == "softdtw" and m.cluster_dim % e.dtw_segments:
            raise ValueError(f"eval.dtw_segments={e.dtw_segments} must divide "
                             f"model.cluster_dim={m.cluster_dim}")
        encoder_checks.clip_towers(config)
        check_paper_preset(config)
    if cache := feature_cache.requested(config):
        if m.kind != "hcmc" or m.separate:
            raise ValueError(f"data.feature_cache={config.data.feature_cache!r}: only the "
                             "shared HCMC frame encoder's towers are cached (model.kind='hcmc', "
                             "model.separate=False)")
        if m.get("frame_repr") == "tokens":
            raise ValueError(f"data.feature_cache={config.data.feature_cache!r}: the cache holds "
                             "pooled tower outputs, model.frame_repr='tokens' reads the towers' "
                             "token sequences")
        if "image" in cache and config.data.get("augment", False):
            raise ValueError("data.feature_cache='image' with data.augment=True: augmentation "
                             "changes the frames, cached features cannot follow")
    if m.kind == "text_pair":
        if m.head not in ("nsp", "sop"):
            raise ValueError(f"model.head={m.head!r}: use 'nsp' or 'sop'")
        encoder_checks.text_pair(config)


_WARNED: set[str] = set()


def check_paper_preset(config: Any) -> list[str]:
    """Warns once per key (per process) where the config overrides the `paper` preset
    (Table 7, `configs/moviepuzzle/hcmc.py:paper_preset`); returns the keys it named."""
    named = []
    for key, want in config.get("paper_preset") or ():
        node = config_lib.find(config, key)[1]
        have = tuple(node) if isinstance(node, list | tuple) else node
        want = tuple(want) if isinstance(want, list | tuple) else want
        if have != want:
            named.append(key)
            if key not in _WARNED:
                _WARNED.add(key)
                warnings.warn(f"config.{key}={have!r} overrides the paper preset "
                              f"(Table 7 / §4.1: {want!r})", stacklevel=2)
    return named


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The model's subtrees that come from checkpoints (the trainer's hook)."""
    m, out = config.model, {}
    if m.kind == "hcmc":
        levels = [lv for lv in hcmc_model.LEVELS if lv in m.levels]
        for owner in levels if m.separate else ["frame"]:
            for name, part, attr in (("image_encoder", "vision", "image"),
                                     ("text_encoder", "text", "text")):
                if part in m.modalities and towers.is_checkpoint(m[name]):
                    out[f"encoders.{owner}.{attr}"] = (m[name], part)
    elif m.kind == "text_pair" and towers.is_checkpoint(m.encoder):
        out["encoder"] = (m.encoder, None)
    return out


class _NoModel(nnx.Module):
    """The random baseline's placeholder (the trainer needs a module to checkpoint)."""

    def __init__(self, rngs: nnx.Rngs):
        self.unused = nnx.Param(jnp.zeros((1,)))


def make_model(config: Any, rngs: nnx.Rngs) -> nnx.Module:
    m, d = config.model, config.data
    if m.kind == "random":
        return _NoModel(rngs)
    vocab, tok = base.text_vocab(config)
    if m.kind == "text_pair":
        pad = None if tok is None else tok["pad"] if tok["pad"] is not None else 0
        return TextPairModel(encoder=m.encoder, vocab_size=vocab, max_tokens=d.max_tokens,
                             dropout=m.dropout, rngs=rngs, pad_id=pad)
    common = dict(
        modalities=tuple(m.modalities), image_size=d.image_size, stem=m.stem, conv=m.conv,
        channels=tuple(m.channels), vocab_size=vocab, max_tokens=d.max_tokens,
        width=m.width, text_layers=m.text_layers, pair_layers=m.pair_layers, heads=m.heads,
        mlp=m.mlp, dropout=m.dropout, rngs=rngs)
    if m.kind == "pair":
        return PairOrderModel(fusion=m.fusion, **common)
    return hcmc_model.HCMC(levels=tuple(m.levels), image_encoder=m.image_encoder,
                           text_encoder=m.text_encoder, cluster_dim=m.cluster_dim,
                           pair_arch=m.pair_arch, separate=m.separate,
                           shot_pool=m.shot_pool, max_shot_frames=d.max_frames,
                           cluster_norm=config.cl_form == "cosine",
                           cluster_out=m.get("cluster_out", "real"),
                           frame_repr=m.get("frame_repr", "pooled"),
                           phi_out=m.get("phi_out", "real"),
                           eos_id=None if tok is None else
                           tok["eos"] if tok["eos"] is not None else tok["sep"], **common)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count, cached=_cached(config))


def _cached(config: Any) -> dict[str, pathlib.Path]:
    """{tower: cache directory} this run reads (checked by the trainer before compiling)."""
    return frame_cache.directories(config, sys.modules[__name__])


# ----------------------------------------------------------------------------- sampling


def _parents(levels: tuple[str, ...], batch: dict,
             frame_parent: str = "") -> dict[str, tuple[jax.Array, jax.Array]]:
    """(unit id, parent id) per level: frames in `frame_parent` ("shot", "scene" or "clip";
    default: shots, or scenes when only scenes are modelled), shots in scenes, scenes in the
    clip. The `no_shot` ablation uses "scene"/"clip": no ground-truth shot id is read."""
    n = batch["mask"].shape[1]
    frame = jnp.broadcast_to(jnp.arange(n), batch["mask"].shape)
    shot, scene = batch["shot_id"], batch["scene_id"]
    if not frame_parent:
        frame_parent = "shot" if "shot" in levels or "scene" not in levels else "scene"
    if frame_parent not in ("shot", "scene", "clip"):
        raise ValueError(f"model.frame_parent={frame_parent!r}: use 'shot', 'scene' or 'clip'")
    frame_parent = {"shot": shot, "scene": scene, "clip": jnp.zeros_like(shot)}[frame_parent]
    return {"frame": (frame, frame_parent), "shot": (shot, scene),
            "scene": (scene, jnp.zeros_like(scene))}


def hcmc_loss(config: Any, model: hcmc_model.HCMC, batch: dict, rngs: nnx.Rngs):
    """Eq. 4 over the batch; metrics per level."""
    mask, pos = batch["mask"], batch["position"]
    if model.frame_tokens:  # the frame level pairs token sequences (§3.2)
        feats, seq, seq_mask = frame_cache.encode_batch(model, batch, True, rngs, tokens=True)
    else:
        feats = frame_cache.encode_batch(model, batch, True, rngs)
    groups = _parents(model.levels, batch, config.model.get("frame_parent", ""))
    key = rngs.dropout()
    order_loss, metrics = 0.0, {}
    for k, level in enumerate(model.levels):
        unit, parent = groups[level]
        vecs = model.units_from_groups(level, feats, unit, mask, pos)
        i, j, valid = sample_unit_pairs(jax.random.fold_in(key, k), unit, parent, mask,
                                        config.pairs_per_clip, config.within_frac)
        if level == "frame" and model.frame_tokens:
            logits = float32(model.frame_sequence_logits(seq, seq_mask, i, j, train=True,
                                                         rngs=rngs))
        else:
            logits = float32(model.pair_logits(level, _take(vecs, i), _take(vecs, j),
                                               train=True, rngs=rngs))
        first = first_position(unit, pos, mask)
        labels = (_take(first, i) < _take(first, j)).astype(jnp.int32)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
        w = valid.astype(jnp.float32)
        order_loss = order_loss + (ce * w).sum() / jnp.maximum(w.sum(), 1.0)
        right = (logits[..., 1] > logits[..., 0]) == labels.astype(bool)
        metrics[f"{level}_pair_acc"] = (right * w).sum() / jnp.maximum(w.sum(), 1.0)
    cl_loss = 0.0
    for k, level in enumerate(model.cluster_levels):
        z = model.cluster_embed(level, feats).reshape(-1, config.model.cluster_dim)
        p, neg, ok, neg_ok = sample_contrastive(jax.random.fold_in(key, 100 + k),
                                                groups[level][0], mask, config.cl_negatives)
        cl = hcmc_model.contrastive_cluster_loss(z, z[p], z[neg], neg_ok, ok, config.cl_tau,
                                                 config.cl_form)
        metrics[f"{level}_cl"] = cl
        cl_loss = cl_loss + cl
    metrics["order_loss"] = order_loss
    lam = config.cl_lambda if config.use_cl else 0.0
    return order_loss + lam * cl_loss, metrics


def text_pair_loss(config: Any, model: TextPairModel, batch: dict, rngs: nnx.Rngs):
    """NSP-style: (i, next(i)) positives, (i, random) negatives. SOP-style: consecutive
    pairs, half of them swapped. Cross-entropy over `pairs_per_clip` pairs per clip."""
    mask, pos, tokens = batch["mask"], batch["position"], batch["tokens"]
    b, n = mask.shape
    k1, k2, k3 = jax.random.split(rngs.dropout(), 3)
    num = config.pairs_per_clip
    length = mask.sum(-1, keepdims=True)
    has_next = mask & (pos < length - 1)
    i, valid = _pick(jnp.broadcast_to(has_next[:, None].astype(jnp.float32), (b, num, n)),
                     jax.random.uniform(k1, (b, num)))
    nxt = (pos[:, None, :] == _take(pos, i)[..., None] + 1) & mask[:, None, :]
    j_next = jnp.argmax(nxt, -1)
    coin = jax.random.uniform(k2, (b, num)) < 0.5
    if config.model.head == "nsp":
        others = mask[:, None, :] & (jnp.arange(n) != i[..., None])
        j_rand, _ = _pick(others.astype(jnp.float32), jax.random.uniform(k3, (b, num)))
        j = jnp.where(coin, j_next, j_rand)
        first, second = i, j
        labels = (_take(pos, j) == _take(pos, i) + 1).astype(jnp.int32)
    else:
        first, second = jnp.where(coin, i, j_next), jnp.where(coin, j_next, i)
        labels = coin.astype(jnp.int32)
    logits = float32(model.pair_logits(_take(tokens, first), _take(tokens, second), train=True,
                                       rngs=rngs))
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    w = valid.astype(jnp.float32)
    acc = (((logits[..., 1] > logits[..., 0]) == labels.astype(bool)) * w).sum()
    return (ce * w).sum() / jnp.maximum(w.sum(), 1.0), {"pair_acc": acc / jnp.maximum(w.sum(), 1)}


def loss_fn(config: Any, model: nnx.Module, batch: dict, rngs: nnx.Rngs):
    kind = config.model.kind
    if kind == "hcmc":
        return hcmc_loss(config, model, batch, rngs)
    if kind == "text_pair":
        return text_pair_loss(config, model, batch, rngs)
    if kind == "pair":
        return base.loss_fn(config, model, batch, rngs)
    return 0.0 * model.unused.value.sum(), {}  # random: never stepped (total_steps=0)


# ----------------------------------------------------------------------------- prediction


def predictors(config: Any) -> dict[str, Any]:
    """HCMC's `<level>_pairs` for each of its levels: Algorithm 1's requests
    (`predict_pairs`); `frame_pairs` not with frame_repr="tokens", whose frame scores come
    from the clip pass (`hcmc_scores.frame_scores_by_index`)."""
    m = config.model
    if m.kind != "hcmc":
        return {}
    tokens = m.get("frame_repr") == "tokens"
    return {f"{lv}_pairs": functools.partial(predict_pairs, level=lv) for lv in m.levels
            if not (lv == "frame" and tokens)}


def predict_pairs(config: Any, model: nnx.Module, batch: dict, *,
                  level: str) -> dict[str, jax.Array]:
    """The Eq. 5 scores [P, G, G] of every pair of the `level` units that `batch` holds as
    `members` [P, G, M, F] (their frames' features) and `member_mask` [P, G, M]."""
    from vnr.ops.permutation_search import pair_scores_to_matrix

    units = model.units_from_members(level, batch["members"], batch["member_mask"])
    return {"scores": pair_scores_to_matrix(model.all_pair_logits(level, units))}


def predict(config: Any, model: nnx.Module, batch: dict) -> dict[str, jax.Array]:
    """The clip pass: Eq. 5 frame scores and, for HCMC, features and cluster embeddings
    (Algorithm 1's unit pairs: `predict_pairs`)."""
    from vnr.ops.permutation_search import pair_scores_to_matrix

    if config.model.kind != "hcmc":
        return base.predict(config, model, batch)
    if model.frame_tokens:
        feats, seq, seq_mask = frame_cache.encode_batch(model, batch, False, None, tokens=True)
        logits = model.all_frame_sequence_logits(seq, seq_mask)
    else:
        feats = frame_cache.encode_batch(model, batch, False, None)
        logits = model.all_pair_logits("frame", model.level_features(feats, "frame"))
    out = {"scores": pair_scores_to_matrix(logits),
           "features": feats.reshape(*feats.shape[:2], -1)}
    for level in model.cluster_levels:
        out[f"{level}_embed"] = model.cluster_embed(level, feats)
    for k in ("mask", "position", "shot_id", "scene_id"):
        out[k] = batch[k]
    out["valid"] = batch["mask"].any(-1)
    return out


def _random_metrics(config: Any, split: str, max_examples: int) -> dict[str, float]:
    from vnr.benchmarks.moviepuzzle.order_metrics import random_expectation

    src = data.source(config.data, split)
    n = min(len(src), max_examples) if max_examples else len(src)
    lengths = [len(src[k]["frames"]) for k in range(n)]
    out = random_expectation(lengths)
    out.update(pair_acc=0.5, clips=float(n))
    return out


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_examples: int = 0, report_dir: pathlib.Path | None = None) -> dict[str, float]:
    """The paper's metrics on `split` (HCMC through Algorithm 1; baselines as the main job)."""
    kind = config.model.kind
    if kind == "random":
        return _random_metrics(config, split, max_examples)
    if kind != "hcmc":
        return evaluation.evaluate(base, config, split, predict_fn, mesh,
                                   max_examples=max_examples, report_dir=report_dir)
    from vnr.benchmarks.moviepuzzle import cluster_metrics
    from vnr.benchmarks.moviepuzzle.cluster_metrics import matched_iou, unit_ordering_score
    from vnr.benchmarks.moviepuzzle.hierarchical import hierarchical_order

    cat = evaluation.predict_split(base.eval_data(config, split, max_examples, _cached(config)),
                                   predict_fn, mesh, name=f"moviepuzzle.hcmc {split}")
    e = config.eval
    levels, alone = inference_levels(config), e.get("alone", "")
    fns = {lv: hcmc_scores.level_score_fn(config, lv, predict_fn, mesh) for lv in levels
           if not alone or lv == alone}
    gt = e.cluster_count == "gt"
    embed = {f"{lv}_embed": None if alone or lv not in levels else cat.get(f"{lv}_embed")
             for lv in ("shot", "scene")}
    oracle = dict(shot_labels=cat["shot_id"], scene_labels=cat["scene_id"],
                  truth=cat["position"]) if alone else {}
    features = cat["features"]
    if config.model.get("frame_repr") == "tokens":  # token sequences are not in `features`
        features, fns = hcmc_scores.frame_scores_by_index(cat, fns)
    pred, clusters = hierarchical_order(
        features, cat["mask"], fns.get("frame"), fns.get("shot"), fns.get("scene"),
        **embed, **oracle,
        gt_shot_ids=cat["shot_id"] if gt and "shot" in levels else None,
        gt_scene_ids=cat["scene_id"] if gt and "scene" in levels else None,
        key=jax.random.key(config.seed), search=e.search, beam_size=e.beam_size,
        objective=e.objective, starts=e.starts, distance=e.distance,
        max_iters=e.kmeans_iters, init=e.kmeans_init, max_clusters=e.max_clusters,
        min_silhouette=e.min_silhouette, dtw_segments=e.dtw_segments, dtw_gamma=e.dtw_gamma,
        return_clusters=True)
    pred = np.asarray(pred)
    order = base.gt_order(cat["position"])
    metrics = base.order_metrics(pred, order, cat)
    if alone:  # Tables 8 / 9: the OS of the level's units inside each true parent group
        metrics.update(cluster_metrics.level_alone_scores(alone, pred, cat))
    for level in ("shot", "scene"):
        if embed[f"{level}_embed"] is not None:
            iou = matched_iou(cat[f"{level}_embed"], clusters[level], cat[f"{level}_id"],
                              cat["mask"])
            metrics[f"{level}_iou"] = float(np.mean(iou))
            for beta in (2, 3):  # Table 3 "shot" rows: OS of the predicted units' order
                os_u = unit_ordering_score(pred, clusters[level], cat["position"],
                                           cat["mask"], beta)
                scored = ~np.isnan(os_u)
                metrics[f"{level}_os{beta}_clips"] = float(scored.sum())
                if scored.any():
                    metrics[f"{level}_os{beta}"] = 100.0 * float(os_u[scored].mean())
    if report_dir is not None:
        base.clip_report(split, pred, order, cat, report_dir)
        if cat.first is not None:
            base.order_report(config, split, cat.first, pred, order, report_dir)
    return metrics


def inference_levels(config: Any) -> tuple[str, ...]:
    """The levels Algorithm 1 runs: `eval.levels` (a subset of the model's, with "frame"),
    else the model's own."""
    return tuple(config.eval.get("levels") or config.model.get("levels", ()))


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `evaluate` reports: the paper's metrics, pair accuracy, and the unit clustering
    metrics only where a level is clustered (not with `eval.alone`, which reports the
    per-level scores instead)."""
    alone = config.eval.get("alone")
    clustered = () if alone else inference_levels(config)
    levels = [lv for lv in ("shot", "scene") if lv in clustered]
    return [*base.COLUMNS,
            *results_lib.cols([f"{lv}_iou" for lv in levels], "{:.3f}", upper=True),
            *results_lib.cols([f"{lv}_{m}" for lv in levels for m in ("os2", "os3")],
                              upper=True),
            *results_lib.unshown(("clips", *(f"{lv}_{m}" for lv in levels
                                             for m in ("os2_clips", "os3_clips")))),
            *results_lib.unshown(("level_os2", "level_os3", "level_os2_groups",
                                  "level_os3_groups") if alone else ())]
