"""Clip/sentence alignment (M-SyMoN §5, Appendix E; SYMON §7.3 on YMS, `configs/msymon/yms.py`).

Training (Eq. 2): clips and sentences are embedded by `model.Aligner` (per-second features
and a text encoder) or, with `model.encoder="cclm"`, §5.1's `model.FrameAligner` (frames
through CCLM's Swin, sentences through its XLM-R layers, both loaded from CCLM's checkpoint
by the `pretrained` hook; `frames.py`), as unit vectors, so a dot product is a cosine. For
every clip c annotated with sentence s, an InfoNCE term in each direction with temperature
tau and K hard negatives from the SAME video (its training window, `data.max_clips` clips),
sampled uniformly without replacement each step:

    clip->text: -log e^{cos(v_c,t_s)/tau} / (e^{cos(v_c,t_s)/tau} + sum_k e^{cos(v_c,t_k)/tau})
                t_k: K of the video's other sentences (matched or not);
    text->clip: the same with t_s as anchor and K of the video's clips not annotated with s
                (unannotated clips included, so footage that matches nothing is pushed away).

With fewer than K candidates all of them are used. Each direction is averaged over all
annotated clips of the global batch; `loss.directions="sum"` adds the two, as Eq. 2 is
printed ("mean", ours, halves that). Eq. 2's denominators run over "j = 1..K"; we include
the positive in them (InfoNCE as Oord et al. define it; our reading).

Inference (Appendix E.1; `inference.py`): similarity s = cosine [C, S]; distance d = 1 - s; Drop-DTW
(`vnr.ops.drop_dtw`, two-sided: clips and sentences may be dropped, `eval.contiguous`) with
clip drop cost d_v and sentence drop cost d_t. The paper calls d_v and d_t hyperparameters
and gives neither their values nor how they were chosen. `eval.drop`: "tune" (ours, the
default: the (d_v, d_t) pair of `eval.drop_grid`^2 with the best F1 on the val split,
reported as `d_v`, `d_t`, `tuned_on_videos`; warned when the val split has fewer than
`MIN_VAL_VIDEOS` videos, as the release's carved ones do), "fixed" (`eval.d_v`, `eval.d_t`)
or "percentile" (ours: both from the Drop-DTW authors' per-video percentile rule,
`eval.keep_percentile`). `eval.method="argmax"` instead
gives each clip its most similar sentence when that similarity exceeds a threshold, else "no
sentence" (SYMON §7.3 zero-shot; the threshold is tuned on the val split for F1 unless
`eval.threshold` is set). The timestamp-window constraint (M-SyMoN §6.5, `eval.window` = W >
0 seconds, 1 s in the paper): a sentence may only take clips within W seconds of its
narration interval (cost +1e4 outside, so Drop-DTW drops rather than matches there). Where
the narration times are estimates (no subtitle times: `data.narration_times`), the model's
metrics are reported as `estimated_*` and a warning says so once.

Transcript-only baseline (`transcript_alignment`, no video, §6.5): each clip takes the
sentence whose subtitle timestamp falls in the clip's duration (largest overlap), else "no
sentence". Reported next to the model as `transcript_*` when every sentence has a subtitle
time; otherwise the missing times come from the constant-rate estimate of
`data.narration_times` and the columns are `estimated_transcript_*` (a diagnostic, not the
paper's baseline).

Weights from another run (`init_from`: two-stage and supervision fine-tuning, zero-shot
transfer, evaluation) enter through the `pretrained` hook as a run source
(`run_source(init_from, init_step)`: by default the step the run's results.json reports) for
the whole model; `validate` checks names and shapes first (one-line error).

Metrics (`metrics`): duration-weighted clip accuracy, sentence IoU over annotated
sentences, and F1 of the two dataset means; text-to-video retrieval R@1/5/10 and mean rank
(`retrieval_metrics`, Tables 10-13) from the same embeddings, every sentence of the split against
every clip of the split (Appendix D; `pool_clips` is the pool size), and the same within
each sentence's own video as `video_pool_*` (ours). Command-line tools (transcript baseline,
cross-lingual matrix, zero-shot evaluation): `python -m vnr.benchmarks.msymon.tools`.
"""

from __future__ import annotations

import logging
import math
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr import config as config_lib
from vnr import contamination, evaluation
from vnr import task as task_lib
from vnr.benchmarks.msymon import data, frames, retrieval_metrics
from vnr.benchmarks.msymon import metrics as am
from vnr.benchmarks.msymon.inference import (
    SCORES,
    TRANSCRIPTS,
    argmax_alignment,
    drop_dtw_alignment,
    per_video,
    score,
    transcript_alignment,
    transcript_prefix,
    tune_drop_costs,
    tune_threshold,
)
from vnr.benchmarks.msymon.model import Aligner, FrameAligner
from vnr.data import pipeline
from vnr.models import rng
from vnr.models.compute import float32
from vnr.reports import results as results_lib

METRICS = am.SUMMARY  # clip_accuracy, sentence_iou, f1: the paper's
ENCODERS = ("features", "cclm")  # per-second features + a text encoder; §5.1's CCLM towers
DROP_RULES = ("tune", "fixed", "percentile")


def validate(config: Any) -> None:
    d, e = config.data, config.eval
    if d.builder == "msymon" and d.config == "synthetic" and d.manual_dir:
        raise ValueError(f"data.manual_dir={d.manual_dir!r} would not be read: data.config="
                         "'synthetic' (set by `smoke` / `synthetic`) trains on the generated "
                         "corpus; set data.config='features' (or 'videos', 'text_only') to "
                         "train on the release")
    if d.builder == "msymon" and d.dim:  # a named config's width is fixed (synthetic: 32)
        from tfds_builders import msymon

        stored = msymon.resolve_config(d.config, d.dim, d.fps)
        if stored.features and stored.dim != d.dim:
            raise ValueError(f"data.dim={d.dim}: msymon/{d.config} stores {stored.dim}-d "
                             f"features (set data.dim={stored.dim})")
    cclm = _encoder(config) == "cclm"
    if _encoder(config) not in ENCODERS:
        raise ValueError(f"model.encoder={_encoder(config)!r}: one of {ENCODERS}")
    if cclm:
        frames.check_model(config)
    elif frames.per_clip(d) or config.model.text_encoder == "cclm":
        raise ValueError("data.frames.per_clip > 0 and model.text_encoder='cclm' are the "
                         "CCLM towers': set model.encoder='cclm' (the `cclm` config arg)")
    elif not d.features:
        raise ValueError("data.features=False (text_only) cannot train an aligner; it serves the "
                         "transcript baseline: "
                         "python -m vnr.benchmarks.msymon.tools baseline --data_dir ...")
    if config.loss.get("directions", "sum") not in ("sum", "mean"):
        raise ValueError(f"loss.directions={config.loss.directions!r}: 'sum' (Eq. 2) or 'mean'")
    if config.loss.temperature <= 0 or config.loss.num_negatives < 1:
        raise ValueError(f"loss.temperature={config.loss.temperature} must be > 0 and "
                         f"loss.num_negatives={config.loss.num_negatives} >= 1")
    if e.method not in ("drop_dtw", "argmax"):
        raise ValueError(f"eval.method={e.method!r}: use 'drop_dtw' or 'argmax'")
    if e.method == "drop_dtw" and e.drop not in DROP_RULES:
        raise ValueError(f"eval.drop={e.drop!r}: use one of {DROP_RULES}")
    if e.method == "drop_dtw" and e.drop == "fixed" and not (
            _is_number(e.d_v) and _is_number(e.d_t)):
        raise ValueError(f"eval.d_v={e.d_v!r} and eval.d_t={e.d_t!r} must be numbers")
    if e.method == "drop_dtw" and e.drop == "tune" and not all(map(_is_number, e.drop_grid)):
        raise ValueError(f"eval.drop_grid={e.drop_grid!r} must be numbers")
    if not _is_number(e.window) or float(e.window) < 0:
        raise ValueError(f"eval.window={e.window!r} must be a number of seconds >= 0")
    te, tok = config.model.text_encoder, d.get("tokenizer", "hash")
    if cclm:
        pass  # the text tower is CCLM's (frames.check_model)
    elif te == "hash" or te.startswith("scratch:"):
        if tok != "hash":
            raise ValueError(f"data.tokenizer={tok!r}: model.text_encoder={te!r} reads hashed "
                             "words: set data.tokenizer='hash'")
    elif tok != te:
        raise ValueError(f"model.text_encoder={te!r} (a checkpoint) needs its own tokenizer: "
                         f"set data.tokenizer={te!r} (it is {tok!r})")
    if not cclm:
        config_lib.fits_positions(config, "data.max_tokens", "model.text_encoder")
    if not 0 <= e.keep_percentile <= 1:
        raise ValueError(f"eval.keep_percentile={e.keep_percentile} must be in [0, 1]")
    if config.get("require_init_from") and not config.get("init_from"):
        raise ValueError("two_stage: stage 2 starts from the multilingual run: pass "
                         "--config.init_from=<its workdir>")
    if config.total_steps == 0 and not config.get("init_from"):
        raise ValueError("total_steps=0 (zero-shot evaluation) needs init_from=<workdir of a "
                         "trained alignment run>")
    if config.get("init_from"):
        _check_init_from(config)
    check_splits(config)  # builds the dataset if needed; a missing split is one line here
    resolve_epochs(config)


def resolve_epochs(config: Any) -> None:
    """`epochs` > 0 (`paper`: §6.1's 20): total_steps = ceil(epochs x draws / batch), the
    draws in which the built training split's clips are seen once in expectation
    (`data.train_draws`: each draw is one random window of a video, the videos in turn);
    validation at least once an epoch (the annotated splits are a few hundred steps long;
    the lowered `eval_every` is logged)."""
    if not config.get("epochs"):
        return

    def count() -> float:
        n = data.train_draws(config.data)
        epoch = max(1, math.ceil(n / config.batch_size))
        if config.eval_every > epoch:
            logging.info("eval_every %d -> %d: validation once an epoch (%d steps of %g "
                         "draws at batch %d)", config.eval_every, epoch, epoch, n,
                         config.batch_size)
            config.eval_every = epoch
        return n

    pipeline.resolve_epochs(config, count, "training draws", "vnr:msymon_epochs")


def _is_number(x: Any) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def check_splits(config: Any) -> None:
    d = config.data
    needed = {x for s in (d.train_split, d.val_split, *d.test_splits) for x in s.split("+")}
    weak = sorted(x for x in needed if x.endswith("_weak"))
    if weak and d.builder == "msymon":
        have = set(split_names(d))
        if missing := [x for x in weak if x not in have]:
            raise ValueError(
                f"no weak data for {missing} (data.train_split={d.train_split!r}): the §4.4 "
                "regimes train on subtitles/<lang>/<id>.json of unannotated videos (convert "
                "yt-dlp subtitles with python -m vnr.benchmarks.msymon.subtitles), or add "
                "`annotated` to the config args to train on the annotated train splits")
    task_lib.require_splits(config, sorted(set(split_names(d))), f"{d.builder}/{d.config}",
                            joined=True)
    if d.builder == "yms":  # the public sample annotates train only (the release: all)
        trained = {d.train_split} if config.total_steps else set()
        if same := sorted({d.val_split, *d.test_splits} & trained):
            logging.warning("YMS split %s is also the training split: its results are on "
                            "trained videos", same[0])
        if d.val_split in d.test_splits:
            logging.warning("YMS split %s both tunes (validation) and reports (test)",
                            d.val_split)
    if d.builder == "yms" and config.get("init_from"):  # a model trained elsewhere
        logging.info("%s", contamination.check_source_run(config.init_from, config))


def split_names(d: Any) -> list[str]:
    if d.builder == "yms":
        from tfds_builders.msymon import yms

        return yms.split_names(d.config, d.data_dir, d.manual_dir or None, dim=d.dim, fps=d.fps)
    from tfds_builders import msymon

    return msymon.split_names(msymon.resolve_config(d.config, d.dim, d.fps), d.data_dir,
                              d.manual_dir or None)


def _encoder(config: Any) -> str:
    return config.model.get("encoder", "features")


def _new_model(config: Any, rngs: nnx.Rngs) -> Aligner | FrameAligner:
    if _encoder(config) == "cclm":
        return frames.make_model(config, rngs)
    m, d = config.model, config.data
    return Aligner(feature_dim=d.dim, vocab_size=d.vocab_size, max_tokens=d.max_tokens,
                   width=m.width, embed=m.embed, text_layers=m.text_layers,
                   clip_layers=m.clip_layers, sentence_layers=m.sentence_layers,
                   heads=m.heads, dropout=m.dropout, rngs=rngs, text_encoder=m.text_encoder)


def _check_init_from(config: Any) -> None:
    """A one-line error before training when `init_from` is not a run of this model."""
    from vnr import pretrained as pretrained_lib

    if not pathlib.Path(config.init_from).is_dir():
        raise ValueError(f"init_from={config.init_from!r} is not a directory (the workdir of a "
                         "trained alignment run)")
    abstract = nnx.state(nnx.eval_shape(lambda: _new_model(config, rng.rngs(0))))
    try:
        pretrained_lib.check(abstract, pretrained(config), root=())
    except (ValueError, FileNotFoundError) as err:
        raise ValueError(f"init_from={config.init_from!r}: {err}") from err


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The trainer's hook: the whole model from the run `init_from` (two-stage and
    supervision fine-tuning, zero-shot transfer, evaluation of a run), else a checkpoint
    text encoder's weights for `text` (the paper's XLM-R; `data.tokenizer` names the same
    checkpoint so the pipeline tokenizes with it)."""
    from vnr import pretrained as pretrained_lib
    from vnr.models.encoders import towers

    if config.get("init_from"):
        return {"": pretrained_lib.run_source(config.init_from,
                                              config.get("init_step", "selected"))}
    if _encoder(config) == "cclm":  # both towers from CCLM's .th (§5.1)
        return frames.sources(config)
    name = config.model.text_encoder
    return {"text": (name, None)} if towers.is_checkpoint(name) else {}


def make_model(config: Any, rngs: nnx.Rngs) -> Aligner | FrameAligner:
    return _new_model(config, rngs)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def _sample_mask(key: jax.Array, valid: jax.Array, k: int) -> jax.Array:
    """Uniformly k of the True entries of `valid` along the last axis (all if fewer)."""
    score = jnp.where(valid, jax.random.uniform(key, valid.shape), -1.0)
    k = min(k, valid.shape[-1])
    kth = jax.lax.top_k(score, k)[0][..., -1:]
    return valid & (score >= kth)


def info_nce(v: jax.Array, t: jax.Array, batch: dict, key: jax.Array, tau: float,
             num_negatives: int, directions: str = "sum") -> tuple[jax.Array, dict]:
    """Eq. 2 in both directions with K same-video negatives; see the module docstring."""
    labels, clip_mask, sent_mask = batch["labels"], batch["clip_mask"], batch["sent_mask"]
    s_count = t.shape[1]
    v, t = float32(v), float32(t)
    sim = jnp.einsum("bce,bse->bcs", v, t) / tau  # [B, C, S]
    pos = (labels >= 0) & clip_mask  # [B, C]
    lab = jnp.clip(labels, 0, s_count - 1)
    onehot = jax.nn.one_hot(lab, s_count, dtype=bool)  # [B, C, S]
    k1, k2 = jax.random.split(key)
    # clip -> text: the positive sentence and K other sentences of the video.
    neg_t = _sample_mask(k1, sent_mask[:, None, :] & ~onehot, num_negatives)
    pos_logit = jnp.take_along_axis(sim, lab[..., None], -1)[..., 0]  # [B, C]
    lse_c = jax.nn.logsumexp(jnp.where(neg_t | onehot, sim, -jnp.inf), -1)
    l_c2t = lse_c - pos_logit
    # text -> clip, for each positive pair (c, s): clip c and K clips not annotated with s.
    sim_t = jnp.einsum("bse,bke->bsk", t, v) / tau  # [B, S, C]
    rows = jnp.take_along_axis(sim_t, lab[..., None], 1)  # [B, C(anchor pair), C']
    other = (clip_mask & (labels != -2))[:, None, :] & (labels[:, None, :] != lab[:, :, None])
    neg_v = _sample_mask(k2, other, num_negatives)
    self_ = jnp.eye(v.shape[1], dtype=bool)[None]
    lse_t = jax.nn.logsumexp(jnp.where(neg_v | self_, rows, -jnp.inf), -1)
    l_t2c = lse_t - pos_logit
    n = jnp.maximum(pos.sum(), 1)
    c2t = jnp.where(pos, l_c2t, 0.0).sum() / n
    t2c = jnp.where(pos, l_t2c, 0.0).sum() / n
    acc = jnp.where(pos, jnp.argmax(jnp.where(sent_mask[:, None], sim, -jnp.inf), -1) == lab,
                    False).sum() / n
    total = c2t + t2c if directions == "sum" else (c2t + t2c) / 2
    return total, {"loss_c2t": c2t, "loss_t2c": t2c, "clip_top1": acc}


def loss_fn(config: Any, model: Aligner | FrameAligner, batch: dict, rngs: nnx.Rngs):
    v, t = model(batch, train=True, rngs=rngs)
    return info_nce(v, t, batch, rngs.dropout(), config.loss.temperature,
                    config.loss.num_negatives, config.loss.get("directions", "sum"))


_HOST_KEYS = ("clip_mask", "sent_mask", "labels", "clip_begin", "clip_end", "narr_begin",
              "narr_end", "narr_known", "matched", "language")


def predict(config: Any, model: Aligner | FrameAligner, batch: dict) -> dict[str, jax.Array]:
    """Cosine similarities [B, C, S] plus what the host needs for alignment and metrics."""
    v, t = model(batch, train=False, rngs=None)
    return {"sim": jnp.einsum("bce,bse->bcs", v, t), "v": v, "t": t,
            "valid": batch["clip_mask"].any(-1), **{k: batch[k] for k in _HOST_KEYS}}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """A split's videos, one row each (the trainer's loop predicts them)."""
    return data.eval_dataset(config.data, split, config.eval_batch_size, max_examples)


MIN_VAL_VIDEOS = 10  # tuned on fewer validation videos than this: a warning (ours)
_WARNED: set[str] = set()


def _warn_once(key: str, msg: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        logging.warning(msg)


def _selection_note(config: Any) -> str:
    """What the window warning adds when model selection ranks by an estimated_ metric."""
    metric = (config.get("select") or {}).get("metric") or ""
    used = [m for m in metric.split("|") if "/estimated_" in m]
    return f"; model selection ranks by {used[0]} (select.metric={metric!r})" if used else ""


def estimated_fraction(out: dict) -> float:
    """Share of the real sentences whose narration time is an estimate (no subtitle time)."""
    known = np.asarray(out["narr_known"])[np.asarray(out["sent_mask"], bool)]
    return float(1.0 - known.mean()) if known.size else 0.0


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None = None) -> dict[str, float]:
    """Aligns every video of `split`; the model's metrics and the transcript baseline's.

    Tuned values (`eval.drop="tune"`, the argmax threshold) come from the val split, with
    `tuned_on_videos` reported and a warning when that is under `MIN_VAL_VIDEOS`. With the
    §6.5 window (`eval.window` > 0) on narration times that are estimates (no subtitle
    times), the model's metrics are reported as `estimated_*` (warned once), with
    `estimated_narration_fraction`.
    """
    ev = config.eval
    other, mesh, out = out.other, out.mesh, out.outputs
    window = float(ev.window)
    extra: dict[str, float] = {}
    val: dict | None = None

    def val_outputs() -> dict:  # capped as the validation evaluator caps it
        nonlocal val
        if val is None:
            cap = ((config.get("evals") or {}).get("val") or {}).get("max_examples", 0)
            val = out if split == config.data.val_split else other(
                config.data.val_split, cap).outputs
        return val

    if ev.method == "argmax":
        thr = ev.threshold
        if thr is None or thr == "tune":
            thr = tune_threshold(val_outputs(), window)
        pred = argmax_alignment(out, float(thr), window)
        extra["threshold"] = float(thr)
    else:
        d_v, d_t = float(ev.d_v), float(ev.d_t)
        if ev.drop == "tune":
            d_v, d_t = tune_drop_costs(val_outputs(), ev)
        pred = drop_dtw_alignment(out, ev, d_v, d_t)
        if ev.drop != "percentile":
            extra.update(d_v=d_v, d_t=d_t)
    if val is not None:
        n_val = len(val["labels"])
        extra["tuned_on_videos"] = float(n_val)
        if n_val < MIN_VAL_VIDEOS:
            what = "threshold" if ev.method == "argmax" else "(d_v, d_t)"
            _warn_once(f"tune:{config.data.val_split}", f"msymon: {what} tuned for F1 on "
                       f"{n_val} validation video(s) of {config.data.val_split} (fewer than "
                       f"{MIN_VAL_VIDEOS}): expect them to fit those videos, not the split")
    prefix = ""
    if window > 0:
        est = max(estimated_fraction(out), estimated_fraction(val) if val is not None else 0)
        extra["estimated_narration_fraction"] = estimated_fraction(out)
        if est > 0:
            prefix = "estimated_"
            _warn_once(f"window:{split}", f"msymon {split}: the eval.window={window:g} s "
                       "constraint uses estimated narration times (no subtitle times for "
                       f"{100 * est:.0f}% of the sentences): its metrics are reported as "
                       "estimated_*, not the paper's §6.5 setting"
                       + (_selection_note(config) if split == config.data.val_split else ""))
    if report_dir is not None:
        alignment_report(split, out, pred, "argmax" if ev.method == "argmax" else "Drop-DTW",
                         report_dir)
    metrics = score(out, pred, prefix)
    metrics.update(score(out, transcript_alignment(out), transcript_prefix(out)))
    metrics["videos"] = float(len(pred))
    metrics.update(extra)
    metrics.update(retrieval_metrics.pooled_retrieval_metrics(  # one process: queries over the mesh
        out["v"], out["t"], out["labels"], out["clip_mask"], out["sent_mask"],
        mesh if jax.process_count() == 1 else None))
    per_video = retrieval_metrics.retrieval_metrics(out["sim"], out["labels"], out["clip_mask"],
                                            out["sent_mask"])
    metrics.update({f"video_pool_{k}": v for k, v in per_video.items() if k != "queries"})
    return metrics


def metric_columns(config: Any) -> list[results_lib.Column]:
    """Every metric `eval_metrics` may report under `config.eval`; the model's `estimated_*`
    scores only with a §6.5 window. The table: the model's `METRICS` (on estimated narration
    times where that is what ran), then the transcript baseline's, in percent."""
    ev = config.eval
    window = _is_number(ev.window) and float(ev.window) > 0
    argmax = ev.method == "argmax"
    costs = not argmax and ev.drop != "percentile"  # d_v, d_t: tuned or fixed
    tuned = ev.threshold in (None, "tune") if argmax else ev.drop == "tune"
    extra = {"threshold": argmax, "d_v": costs, "d_t": costs,
             "tuned_on_videos": tuned, "estimated_narration_fraction": window}
    prefixes = (*(("estimated_",) if window else ()), "", *TRANSCRIPTS)
    shown = [p + k for p in prefixes for k in METRICS]
    return [*results_lib.cols(shown, "{:.1f}", 100.0), *results_lib.unshown((
        *(p + k for p in prefixes for k in SCORES if p + k not in shown), "videos",
        *(k for k, on in extra.items() if on), *retrieval_metrics.POOLED,
        *(f"video_pool_{k}" for k in retrieval_metrics.SUMMARY if k != "queries")))]


def alignment_report(split: str, out: dict, pred: np.ndarray, how: str,
                     report_dir: pathlib.Path) -> None:
    """`<split>_alignment.png`: the first videos' similarity, alignments and drops."""
    from vnr.benchmarks.msymon import figures
    from vnr.reports import plots

    plots.report(report_dir / f"{split}_alignment.png", figures.alignment, out, pred,
                 title=split, how=how, scores=per_video(pred, out))


