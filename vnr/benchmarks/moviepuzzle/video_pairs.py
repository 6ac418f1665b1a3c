"""MoviePuzzle Table 1's video-model baselines (VideoMAE, TimeSformer): NSP-style pair heads.

`config.task = "moviepuzzle.video_pairs"` (`configs/moviepuzzle/video_pairs.py`). §4.1 runs
its pretrained temporal models as pair classifiers after BERT's next-sentence prediction
(NSP) and ALBERT's sentence-order prediction (SOP): a pair of units goes in, a binary head
says whether they are in temporal order, and the pair probabilities order the clip. Here
the pair is one clip of the checkpoint's frame count, half frame i and half frame j
(`video_pairs_model`), the checkpoint is a user's Hugging Face directory
(`config.model.checkpoint`; architecture from its config.json, weights through the
`pretrained` hook and the `videomae` / `timesformer` ports; nothing is downloaded).

Training, per clip `pairs_per_clip` pairs (as the BERT / ALBERT rows, `hcmc.text_pair_loss`):
  * `model.head="nsp"`: i uniform among the frames that have a successor; j its true
    successor with probability 1/2, else a uniform other frame; label 1 when j directly
    follows i.
  * `model.head="sop"`: a consecutive pair, swapped with probability 1/2; label 1 in order.
Cross-entropy over the valid pairs (clips too short for a pair contribute none).

Evaluation: every ordered pair i != j of every clip is scored (`eval.pair_chunk` pairs per
clip at a time), Eq. 5 turns the logits into S[i, j], and the configured search orders the
clip (Algorithm 3 on "directly before" scores for the paper rows); metrics as every
MoviePuzzle pair model: LSD, LMD, SD, SSD, OS2, OS3, pair_acc, clips.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from vnr.benchmarks.moviepuzzle import data, video_pairs_data
from vnr.benchmarks.moviepuzzle import pairwise as base
from vnr.benchmarks.moviepuzzle.sampling import _pick, _take
from vnr.benchmarks.moviepuzzle.video_pairs_model import (
    VideoPairModel,
    architecture,
    check_architecture,
    preprocessing,
)
from vnr.data import pipeline
from vnr.models.compute import float32
from vnr.reports import results as results_lib

HEADS = ("nsp", "sop")
check_splits = data.check_splits
metric_columns: Callable[[Any], list[results_lib.Column]] = base.metric_columns


def validate(config: Any) -> None:
    """Config checks before anything compiles: the checkpoint directory (config.json and
    weights present, frame count and size usable), the head, the search; one line each."""
    m, d, e = config.model, config.data, config.eval
    if not m.checkpoint:
        raise ValueError(f"model.checkpoint is empty: give a Hugging Face {m.encoder} "
                         "checkpoint directory (nothing is downloaded)")
    cfg = architecture(m.encoder, m.checkpoint)
    check_architecture(m.encoder, cfg, d.image_size, m.checkpoint)
    preprocessing(m.checkpoint, d.image_size)  # a malformed preprocessor_config.json
    if m.head not in HEADS:
        raise ValueError(f"model.head={m.head!r}: use one of {HEADS}")
    if config.pairs_per_clip < 1:
        raise ValueError(f"pairs_per_clip={config.pairs_per_clip} must be >= 1")
    if e.pair_chunk < 1:
        raise ValueError(f"eval.pair_chunk={e.pair_chunk} must be >= 1")
    if e.objective not in ("path", "linear"):
        raise ValueError(f"eval.objective={e.objective!r}: use 'path' or 'linear'")
    if e.starts not in ("per_start", "shared"):
        raise ValueError(f"eval.starts={e.starts!r}: use 'per_start' (Algorithm 3) or "
                         "'shared' (ours)")
    if e.search not in ("beam", "exact"):
        raise ValueError(f"eval.search={e.search!r}: use 'beam' or 'exact'")
    if e.search == "beam" and e.beam_size < 1:
        raise ValueError(f"eval.beam_size={e.beam_size} must be >= 1")
    from vnr.ops.permutation_search import MAX_EXACT_N

    if e.search == "exact" and d.max_frames > MAX_EXACT_N:
        raise ValueError(f"eval.search='exact' handles clips of <= {MAX_EXACT_N} frames but "
                         f"data.max_frames={d.max_frames}; use eval.search='beam'")
    data.resolve_epochs(config)  # last: it may build the dataset


def make_model(config: Any, rngs: nnx.Rngs) -> VideoPairModel:
    """The encoder from the checkpoint's config.json, randomly initialised (its weights come
    through `pretrained`), and the pair head."""
    m = config.model
    cfg = architecture(m.encoder, m.checkpoint)
    return VideoPairModel(m.encoder, cfg, preprocessing(m.checkpoint), rngs)


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The encoder subtree comes from the checkpoint, read by its port."""
    return {"encoder": (config.model.checkpoint, config.model.encoder)}


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return video_pairs_data.train_dataset(config.data, local_batch, config.seed, process_index,
                                          process_count)


def sample_pairs(key: jax.Array, mask: jax.Array, position: jax.Array, num: int, head: str
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(first, second, labels, valid), each [B, num]: NSP or SOP pairs (module docstring)."""
    b, n = mask.shape
    k1, k2, k3 = jax.random.split(key, 3)
    length = mask.sum(-1, keepdims=True)
    has_next = mask & (position < length - 1)
    i, valid = _pick(jnp.broadcast_to(has_next[:, None].astype(jnp.float32), (b, num, n)),
                     jax.random.uniform(k1, (b, num)))
    nxt = (position[:, None, :] == _take(position, i)[..., None] + 1) & mask[:, None, :]
    j_next = jnp.argmax(nxt, -1)
    coin = jax.random.uniform(k2, (b, num)) < 0.5
    if head == "nsp":
        others = mask[:, None, :] & (jnp.arange(n) != i[..., None])
        j_rand, _ = _pick(others.astype(jnp.float32), jax.random.uniform(k3, (b, num)))
        j = jnp.where(coin, j_next, j_rand)
        labels = (_take(position, j) == _take(position, i) + 1).astype(jnp.int32)
        return i, j, labels, valid
    first, second = jnp.where(coin, i, j_next), jnp.where(coin, j_next, i)
    return first, second, coin.astype(jnp.int32), valid


def loss_fn(config: Any, model: VideoPairModel, batch: dict, rngs: nnx.Rngs):
    """Cross-entropy of the pair head over the sampled pairs of every clip."""
    first, second, labels, valid = sample_pairs(rngs.dropout(), batch["mask"],
                                                batch["position"], config.pairs_per_clip,
                                                config.model.head)
    frames = model.normalise(batch["frames"])
    logits = float32(model.pair_logits(_take(frames, first), _take(frames, second),
                                       train=True))
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    w = valid.astype(jnp.float32)
    total = jnp.maximum(w.sum(), 1.0)
    right = (logits[..., 1] > logits[..., 0]) == labels.astype(bool)
    return (ce * w).sum() / total, {"pair_acc": (right * w).sum() / total}


def predict(config: Any, model: VideoPairModel, batch: dict) -> dict[str, jax.Array]:
    """Eq. 5 scores of every ordered pair, plus what the host metrics need."""
    from vnr.ops.permutation_search import pair_scores_to_matrix

    logits = model.all_pair_logits(model.normalise(batch["frames"]), config.eval.pair_chunk)
    return {"scores": pair_scores_to_matrix(float32(logits)), "mask": batch["mask"],
            "position": batch["position"], "shot_id": batch["shot_id"],
            "scene_id": batch["scene_id"], "valid": batch["mask"].any(-1)}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every clip of `split`, frames in the main job's fixed shuffle."""
    return video_pairs_data.eval_dataset(config.data, split, config.eval_batch_size,
                                         config.seed, max_examples)


eval_metrics = base.eval_metrics  # clips ordered by pair scores: paper metrics, pair_acc
