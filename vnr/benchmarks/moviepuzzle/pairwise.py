"""MoviePuzzle glue: pairwise-order loss, all-pairs prediction, ordering eval.

Training: for each clip, `pairs_per_clip` ordered pairs (i, j), i != j, both
real frames, are drawn uniformly (fresh each step); the 2-way head is trained
with cross-entropy on "i comes before j" (class 1). Sampling pairs rather than
scoring all N^2 keeps the step cheap; every pair is scored at evaluation.

Evaluation: every ordered pair is scored, the logits turned into
S[i, j] = (e^{l1} - e^{l0}) / (e^{l1} + e^{l0}) (Eq. 5), and an order is found by
`beam_search_order` (objective and beam width from `config.eval`). Metrics:
LSD, LMD, SD, SSD, OS2, OS3 (vnr.benchmarks.moviepuzzle.order_metrics) plus the pairwise order
accuracy of the head on real pairs.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr.benchmarks.moviepuzzle import data
from vnr.benchmarks.moviepuzzle.order_metrics import METRICS, summary
from vnr.benchmarks.moviepuzzle.pairwise_model import PairOrderModel
from vnr.data import images, pipeline, text
from vnr.models.compute import float32
from vnr.models.encoders import tokenizers, towers
from vnr.reports import results as results_lib


def validate(config: Any) -> None:
    """Config checks that need no data or compile."""
    d = config.data
    check_tokenizer(config)
    check_pixels(config)
    if not 2 <= config.pairs_per_clip:
        raise ValueError(f"pairs_per_clip={config.pairs_per_clip} must be >= 2")
    if config.eval.objective not in ("path", "linear"):
        raise ValueError(f"eval.objective={config.eval.objective!r}: use 'path' or 'linear'")
    if config.eval.get("starts") not in ("per_start", "shared"):
        raise ValueError(f"eval.starts={config.eval.get('starts')!r}: use 'per_start' "
                         "(Algorithm 3) or 'shared' (ours)")
    if config.eval.search not in ("beam", "exact"):
        raise ValueError(f"eval.search={config.eval.search!r}: use 'beam' or 'exact'")
    if config.eval.search == "beam" and config.eval.beam_size < 1:
        raise ValueError(f"eval.beam_size={config.eval.beam_size} must be >= 1")
    from vnr.ops.permutation_search import MAX_EXACT_N

    if config.eval.search == "exact" and d.max_frames > MAX_EXACT_N:
        raise ValueError(f"eval.search='exact' handles clips of <= {MAX_EXACT_N} frames but "
                         f"data.max_frames={d.max_frames}; use eval.search='beam'")
    data.resolve_epochs(config)  # last: it may build the dataset


_WARNED: set[str] = set()


def check_pixels(config: Any) -> None:
    """`data.image_resize` is known (one error line); a pretrained CLIP image tower reads what
    CLIP's processor makes: warns once per tower when `data.image_resize` / `data.image_size`
    say otherwise (a deliberate choice stays possible, a silent one does not)."""
    d, m = config.data, config.model
    resize = images.check(d.get("image_resize", "squash"))
    encoder = m.get("image_encoder", "small")
    if "vision" not in m.get("modalities", ()) or not towers.is_checkpoint(encoder):
        return
    cfg = towers.config_of(encoder, "vision", "model.image_encoder")
    side = int(getattr(cfg, "vision_config", cfg).image_size)
    if (resize, d.image_size) != ("clip", side) and encoder not in _WARNED:
        _WARNED.add(encoder)
        warnings.warn(f"model.image_encoder={encoder!r} is a pretrained CLIP tower of side "
                      f"{side}: its own preprocessing is data.image_resize='clip' with "
                      f"data.image_size={side}, this run has {resize!r} at {d.image_size}",
                      stacklevel=3)


def check_tokenizer(config: Any) -> dict | None:
    """`data.tokenizer` ("hash" or a checkpoint's tokenizer) and `data.vocab_size` agree;
    returns the tokenizer's ids (`tokenizers.info`) or None for hashed words."""
    d = config.data
    name = d.get("tokenizer", text.HASH)
    if name == text.HASH:
        if d.vocab_size < 3:
            raise ValueError(f"data.vocab_size={d.vocab_size}: hashed words need >= 3 ids "
                             "(0 = pad, 1 = no dialogue); 0 only goes with a checkpoint "
                             "data.tokenizer")
        return None
    try:
        got = tokenizers.info(name)
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(f"data.tokenizer={name!r}: {str(e).splitlines()[0]}") from e
    if d.vocab_size not in (0, got["vocab"]):
        raise ValueError(f"data.vocab_size={d.vocab_size} but data.tokenizer={name!r} has "
                         f"{got['vocab']} tokens; set data.vocab_size=0 (taken from the "
                         f"tokenizer) or {got['vocab']}")
    return got


def text_vocab(config: Any) -> tuple[int, dict | None]:
    """(id count the text towers embed, the tokenizer's ids or None for hashed words)."""
    d = config.data
    if d.get("tokenizer", text.HASH) == text.HASH:
        return d.vocab_size, None
    got = tokenizers.info(d.tokenizer)
    return got["vocab"], got


check_splits = data.check_splits


def make_model(config: Any, rngs: nnx.Rngs) -> PairOrderModel:
    m, d = config.model, config.data
    return PairOrderModel(
        modalities=tuple(m.modalities), image_size=d.image_size, stem=m.stem, conv=m.conv,
        channels=tuple(m.channels),
        vocab_size=text_vocab(config)[0], max_tokens=d.max_tokens, width=m.width,
        text_layers=m.text_layers, pair_layers=m.pair_layers, heads=m.heads, mlp=m.mlp,
        dropout=m.dropout, rngs=rngs)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def sample_pairs(key: jax.Array, mask: jax.Array, num: int) -> tuple[jax.Array, jax.Array]:
    """Uniform ordered pairs (i, j), i != j, among each clip's real frames: [B, num] each."""
    n = mask.sum(-1, keepdims=True)
    ki, kj = jax.random.split(key)
    i = jnp.floor(jax.random.uniform(ki, (mask.shape[0], num)) * n).astype(jnp.int32)
    shift = 1 + jnp.floor(jax.random.uniform(kj, i.shape) * (n - 1)).astype(jnp.int32)
    return i, (i + shift) % n


def loss_fn(config: Any, model: PairOrderModel, batch: dict, rngs: nnx.Rngs):
    """Mean cross-entropy of the order head over sampled pairs."""
    feats = model.encode_frames(batch["frames"], batch["tokens"], train=True, rngs=rngs,
                                token_mask=batch.get("token_mask"))
    i, j = sample_pairs(rngs.dropout(), batch["mask"], config.pairs_per_clip)
    take = lambda a, idx: jnp.take_along_axis(a, idx[..., None], axis=1)  # noqa: E731
    logits = float32(model.pair_logits(take(feats, i), take(feats, j), train=True, rngs=rngs))
    pos = batch["position"]
    labels = (jnp.take_along_axis(pos, i, 1) < jnp.take_along_axis(pos, j, 1)).astype(jnp.int32)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    acc = ((logits[..., 1] > logits[..., 0]) == labels.astype(bool)).mean()
    return loss, {"pair_acc": acc}


def predict(config: Any, model: PairOrderModel, batch: dict) -> dict[str, jax.Array]:
    """Eq. 5 scores for every ordered pair, plus what the host metrics need."""
    from vnr.ops.permutation_search import pair_scores_to_matrix

    feats = model.encode_frames(batch["frames"], batch["tokens"], train=False, rngs=None,
                                token_mask=batch.get("token_mask"))
    scores = pair_scores_to_matrix(model.all_pair_logits(feats))
    return {"scores": scores, "mask": batch["mask"], "position": batch["position"],
            "shot_id": batch["shot_id"], "scene_id": batch["scene_id"],
            "valid": batch["mask"].any(-1)}


def gt_order(position: np.ndarray) -> np.ndarray:
    """order[b, k] = input index at true position k (padding keeps its own index)."""
    return np.argsort(position, axis=-1, kind="stable").astype(np.int32)


def pair_accuracy(scores: np.ndarray, position: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per clip: fraction of real ordered pairs i != j where sign(S[i, j]) is right."""
    before = position[:, :, None] < position[:, None, :]
    real = mask[:, :, None] & mask[:, None, :] & ~np.eye(mask.shape[1], dtype=bool)
    right = ((scores > 0) == before) & real
    return right.sum((1, 2)) / np.maximum(real.sum((1, 2)), 1)


def eval_data(config: Any, split: str, max_examples: int,
              cached: dict | None = None) -> pipeline.EvalStream:
    """Every clip of `split`, frames in a fixed shuffle; `cached`: {tower: feature cache
    directory} (HCMC with `data.feature_cache`)."""
    return data.eval_dataset(config.data, split, config.eval_batch_size, config.seed,
                             max_examples, cached=cached)


def eval_metrics(config: Any, split: str, out: Any,
                 report_dir: pathlib.Path | None = None) -> dict[str, float]:
    """A split's predicted pair scores (`out`: scores, mask, position, ...) -> each clip
    ordered (`order_clips`), the paper's metrics and pair_acc; the reports when asked.
    Every pairwise task's evaluation ends here."""
    pred = np.asarray(order_clips(config, out["scores"], out["mask"]))
    gt = gt_order(out["position"])
    metrics = order_metrics(pred, gt, out)
    if report_dir is not None:
        clip_report(split, pred, gt, out, report_dir)
        if out.first is not None:
            order_report(config, split, out.first, pred, gt, report_dir)
    return metrics


def clip_report(split: str, pred: np.ndarray, gt: np.ndarray, out: Any,
                report_dir: pathlib.Path) -> None:
    """Per-clip lengths and OS next to the figure (`length_report`: Figures 9-11)."""
    from vnr.benchmarks.moviepuzzle import length_report

    rows = length_report.clip_rows(pred, gt, out["mask"], out["shot_id"], out["scene_id"])
    length_report.write_clips(report_dir / f"{split}_clips.jsonl", rows)


def order_clips(config: Any, scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Predicted orders [B, N] by the configured search over the pair scores."""
    from vnr.ops.permutation_search import beam_search_order, exact_order

    e = config.eval
    if e.search == "exact":
        return exact_order(scores, mask, objective=e.objective)[0]
    return beam_search_order(scores, mask, e.beam_size, e.objective, e.starts)[0]


def order_metrics(pred: np.ndarray, gt: np.ndarray, out: Any) -> dict[str, float]:
    """LSD/LMD/SD/SSD/OS2/OS3, the pair accuracy of the scores and the clip count."""
    metrics = {k: float(v) for k, v in summary(pred, gt, out["mask"]).items()}
    metrics["pair_acc"] = float(pair_accuracy(out["scores"], out["position"],
                                              out["mask"]).mean())
    metrics["clips"] = float(len(pred))
    return metrics


def order_report(config: Any, split: str, first: dict, pred: np.ndarray, gt: np.ndarray,
                 report_dir: pathlib.Path) -> None:
    """`<split>_orders.png`: this process's first clips, true vs predicted order, with
    subtitles."""
    from vnr.benchmarks.moviepuzzle import figures
    from vnr.reports import plots

    k = min(config.eval.report_clips, int(first["mask"].any(-1).sum()))
    plots.report(report_dir / f"{split}_orders.png", figures.order_examples, first, pred[:k],
                 gt[:k], title=split, subtitles=[list(t) for t in first["text"][:k]])


# The results table: the paper's metrics, then the pair accuracy.
COLUMNS = [*results_lib.cols(METRICS, upper=True),
           results_lib.Column("pair_acc", "PAIR_ACC", "{:.3f}")]


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports: `COLUMNS`, and the clip count."""
    return [*COLUMNS, *results_lib.unshown(("clips",))]
