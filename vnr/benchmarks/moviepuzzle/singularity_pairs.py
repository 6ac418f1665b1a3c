"""MoviePuzzle Table 1's "Singularity +fusion" row: Singularity's early-fusion path as an
NSP-style pair classifier.

`config.task = "moviepuzzle.singularity_pairs"` (`configs/moviepuzzle/singularity_pairs.py`).
§4.1 runs its pretrained baselines as pair classifiers after BERT's NSP and ALBERT's SOP;
"fusion" is "the early-fusion mechanism" (Table 1's caption). A pair (i, j) of units (a
keyframe and its utterance each) goes through Singularity's multimodal encoder the way
upstream fuses a video and a text (`Singularity.pair_cls`, upstream's ITM path with
`eval_frame_ensemble="concat"`): the two frames, i then j, are one 2-frame video (BEiT per
frame, the temporal model's temporal embeddings and 2 temporal layers over the pair), every
token of both frames is the cross-attention memory, and the text is the pair of utterances
as BERT's pair input "[CLS] u_i [SEP] u_j [SEP]" (token type ids 0: the port's text path,
as upstream's, takes none). A linear head on the fused [CLS] gives 2 logits, class 1 = "j
follows i" (NSP labels, or SOP with `model.head="sop"`: `video_pairs.sample_pairs`).

Evaluation as every MoviePuzzle pair baseline: every ordered pair i != j of a clip scored
(`eval.pair_chunk` pairs per clip at a time), Eq. 5, the configured search; LSD, LMD, SD,
SSD, OS2, OS3, pair_acc, clips. Checkpoint, frames and tokenizer: `singularity_inputs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr.benchmarks.moviepuzzle import data
from vnr.benchmarks.moviepuzzle import pairwise as base
from vnr.benchmarks.moviepuzzle import singularity_inputs as inputs
from vnr.benchmarks.moviepuzzle.sampling import _take
from vnr.benchmarks.moviepuzzle.video_pairs import HEADS, sample_pairs
from vnr.data import pipeline
from vnr.models.compute import float32
from vnr.models.encoders import singularity, tokenizers
from vnr.models.layers import dense
from vnr.reports import results as results_lib

check_splits = data.check_splits
metric_columns: Callable[[Any], list[results_lib.Column]] = base.metric_columns


def pair_text(ids_i: jax.Array, mask_i: jax.Array, ids_j: jax.Array, mask_j: jax.Array
              ) -> tuple[jax.Array, jax.Array]:
    """Two tokenized utterances ([CLS] u [SEP], padded; [..., L]) -> the pair input
    "[CLS] u_i [SEP] u_j [SEP]" [..., 2L - 1]: j's [CLS] dropped, real tokens moved first
    (consecutive positions), padding after them."""
    ids = jnp.concatenate([ids_i, ids_j[..., 1:]], -1)
    mask = jnp.concatenate([mask_i, mask_j[..., 1:]], -1)
    order = jnp.argsort((~mask).astype(jnp.int32), axis=-1, stable=True)
    return (jnp.take_along_axis(ids, order, -1), jnp.take_along_axis(mask, order, -1))


class SingularityPairModel(nnx.Module):
    """Singularity (no ITM head, no `temp`: `singularity_inputs.encoder`; its weights through
    `pretrained`) + a 2-way linear head on the fused [CLS] of a pair (module docstring)."""

    def __init__(self, cfg: singularity.SingularityConfig, rngs: nnx.Rngs):
        self.encoder = inputs.encoder(cfg, rngs)
        self.head = dense(cfg.text.hidden_size, 2, ("embed", None), rngs)

    def pair_logits(self, first: jax.Array, second: jax.Array, ids_i: jax.Array,
                    mask_i: jax.Array, ids_j: jax.Array, mask_j: jax.Array, *, train: bool
                    ) -> jax.Array:
        """Normalised frames [..., S, S, 3] of i and j, their utterances' ids / masks
        [..., L] -> logits [..., 2] (class 1: j follows i)."""
        lead = first.shape[:-3]
        flat = lambda x, k: x.reshape(-1, *x.shape[x.ndim - k:])  # noqa: E731
        video = jnp.stack([flat(first, 3), flat(second, 3)], axis=1)  # [P, 2, S, S, 3]
        ids, mask = pair_text(flat(ids_i, 1), flat(mask_i, 1), flat(ids_j, 1),
                              flat(mask_j, 1))
        cls = self.encoder.pair_cls(video, ids, mask.astype(jnp.int32),
                                    deterministic=not train)
        return self.head(cls.astype(jnp.float32)).reshape(*lead, 2)

    def all_pair_logits(self, frames: jax.Array, ids: jax.Array, mask: jax.Array,
                        chunk: int) -> jax.Array:
        """frames [B, N, S, S, 3], ids / mask [B, N, L] -> logits [B, N, N, 2] of every
        ordered pair i != j (zeros on the diagonal), `chunk` pairs per clip at a time."""
        b, n = frames.shape[:2]
        ii, jj = np.nonzero(~np.eye(n, dtype=bool))
        steps = -(-len(ii) // chunk)
        pad = steps * chunk - len(ii)
        idx = [np.concatenate([a, np.zeros(pad, a.dtype)]).reshape(steps, chunk)
               for a in (ii, jj)]

        def one(pair: tuple[jax.Array, jax.Array]) -> jax.Array:
            i, j = pair
            return self.pair_logits(frames[:, i], frames[:, j], ids[:, i], mask[:, i],
                                    ids[:, j], mask[:, j], train=False)  # [B, chunk, 2]

        out = jax.lax.map(one, (jnp.asarray(idx[0]), jnp.asarray(idx[1])))
        out = out.transpose(1, 0, 2, 3).reshape(b, steps * chunk, 2)[:, :len(ii)]
        return jnp.zeros((b, n, n, 2), out.dtype).at[:, ii, jj].set(out)


def validate(config: Any) -> None:
    """One line per problem before anything compiles (data source, checkpoint, frame size,
    tokenizer, text length, head, search); then the epochs become steps."""
    m, d, e = config.model, config.data, config.eval
    inputs.check(config, text_len=2 * d.max_tokens - 1)
    if m.head not in HEADS:
        raise ValueError(f"model.head={m.head!r}: use one of {HEADS}")
    if config.pairs_per_clip < 1 or e.pair_chunk < 1:
        raise ValueError("pairs_per_clip and eval.pair_chunk must be >= 1")
    if e.objective not in ("path", "linear") or e.starts not in ("per_start", "shared"):
        raise ValueError(f"eval.objective={e.objective!r} / eval.starts={e.starts!r}: use "
                         "path|linear and per_start|shared")
    if e.search not in ("beam", "exact") or (e.search == "beam" and e.beam_size < 1):
        raise ValueError(f"eval.search={e.search!r}, beam_size={e.beam_size}: use 'beam' "
                         "(beam_size >= 1) or 'exact'")
    data.resolve_epochs(config)  # last: it may build the dataset


def make_model(config: Any, rngs: nnx.Rngs) -> SingularityPairModel:
    """Singularity with the checkpoint's sizes, randomly initialised (its weights come
    through `pretrained`), and the pair head."""
    return SingularityPairModel(inputs.architecture(config.model.checkpoint), rngs)


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The encoder subtree comes from the checkpoint, read by the Singularity port."""
    return {"encoder": (config.model.checkpoint, "singularity")}


def _transforms(cfg: Any, keep_text: bool) -> list:
    return [inputs.SingularityFrames(cfg.image_size),
            data.Encode(cfg.max_frames, cfg.image_size, cfg.max_tokens, cfg.vocab_size,
                        keep_text, tokenizers.resolve(cfg.tokenizer)),
            data.ShuffleFrames()]


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    d = config.data
    return pipeline.train_stream(data.source(d, d.train_split), _transforms(d, False),
                                 local_batch, config.seed, process_index, process_count,
                                 d.num_workers)


def loss_fn(config: Any, model: SingularityPairModel, batch: dict, rngs: nnx.Rngs):
    """Cross-entropy of the pair head over the sampled pairs of every clip."""
    first, second, labels, valid = sample_pairs(rngs.dropout(), batch["mask"],
                                                batch["position"], config.pairs_per_clip,
                                                config.model.head)
    frames = inputs.normalise(batch["frames"])
    ids, tmask = batch["tokens"], batch["token_mask"]
    logits = float32(model.pair_logits(
        _take(frames, first), _take(frames, second), _take(ids, first), _take(tmask, first),
        _take(ids, second), _take(tmask, second), train=True))
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    w = valid.astype(jnp.float32)
    total = jnp.maximum(w.sum(), 1.0)
    right = (logits[..., 1] > logits[..., 0]) == labels.astype(bool)
    return (ce * w).sum() / total, {"pair_acc": (right * w).sum() / total}


def predict(config: Any, model: SingularityPairModel, batch: dict) -> dict[str, jax.Array]:
    """Eq. 5 scores of every ordered pair, plus what the host metrics need."""
    from vnr.ops.permutation_search import pair_scores_to_matrix

    logits = model.all_pair_logits(inputs.normalise(batch["frames"]), batch["tokens"],
                                   batch["token_mask"], config.eval.pair_chunk)
    return {"scores": pair_scores_to_matrix(float32(logits)), "mask": batch["mask"],
            "position": batch["position"], "shot_id": batch["shot_id"],
            "scene_id": batch["scene_id"], "valid": batch["mask"].any(-1)}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every clip of `split`, frames in the main job's fixed shuffle (seed + 1)."""
    d = config.data
    return pipeline.eval_stream(data.source(d, split), _transforms(d, True),
                                config.eval_batch_size, seed=config.seed + 1,
                                max_examples=max_examples, num_workers=d.num_workers)


eval_metrics = base.eval_metrics  # clips ordered by pair scores: paper metrics, pair_acc
