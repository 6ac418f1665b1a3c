"""Zero-shot transfer of a SYMON retrieval run to YMS alignment (SYMON §7.3, Table 9).

The model is the SYMON retrieval model (`model.RetrievalModel`, with `univl`
`model.UniVLRetrievalModel`, with `videoclip` `videoclip_model.VideoCLIPRetrievalModel`),
copied whole from a finished SYMON retrieval run (`transfer.source_run`; for Table 9's UniVL
and VideoCLIP rows, none: `univl.pretrained.bin`'s or `checkpoint_best.pt`'s towers, with
nothing fine-tuned) through the trainer's `pretrained` hook
(`vnr/pretrained.py:run_source`) at `transfer.source_step` (default `selected`: the step the
run's results.json reports, its model selected by validation; or best, last, a number);
nothing is trained (`total_steps` 0). Each YMS clip is embedded like a SYMON clip (its first
`max_frames` feature rows, zero-padded) and each YMS sentence (or sub-sentence phrase) like
a SYMON text; the score is the dot product. Every clip takes its highest-scoring sentence of
the same video when that score exceeds a threshold tuned on the validation split (F1 of clip
accuracy and sentence IoU), else "no sentence" (§7.3 Evaluation). Metrics (Dogan et al., as
§7.3 states them): clip accuracy = the duration-weighted share of clips given their
annotated sentence ("no sentence" included), sentence IoU = per annotated sentence the
duration IoU of its predicted and annotated clips, averaged; per video, then the mean over
videos, and F1 of the two means. (The same definitions as `vnr.benchmarks.msymon.metrics`,
re-stated here because benchmarks do not import each other.)

Memory (a run trained with memory): the video side takes, among the previous
`memory_window` clips, the one of Eq. 6 with E = 0 (a YMS clip has no text at inference);
the text side takes, among the previous `memory_window` sentences, the one sharing the
most person names (ties: the most recent; our reading: Eq. 6 has no visual term for a
sentence). Without memory the memory inputs are empty, as in SYMON.

Test settings: `original` = YMS `test` with the release's clip segmentation, threshold
tuned on `val`; `new` = all annotated videos split 70 % test / 30 % val by CRC32 of the
video id (`new_test` / `new_val`) with our segmentation (`data.segmentation="scenes"`,
`scene_clips`): two-scene clips as in SYMON, the cuts found by the builder's
feature-distance fallback (`tfds_builders.symon.scene_cuts`) because YMS has no
TransNetV2 cuts file (REPRODUCING.md). SYMON training without the 94 YMS movies: the source
run's config sets `data.exclude_movies` to YMS `movie_list.txt` (`configs/symon/
retrieval.py:exclude_yms`), which `data.ItemSource` counts and names: the videos of those
movies by title, and the YMS videos themselves by the ids of the `url_list.txt` beside it
(most YMS videos are SYMON videos whose narration names no movie).
"""

from __future__ import annotations

import dataclasses
import pathlib
import zlib
from collections.abc import Callable
from typing import Any

import grain
import jax
import numpy as np
from absl import logging
from flax import nnx

from vnr import contamination, evaluation
from vnr import pretrained as pretrained_lib
from vnr import task as task_lib
from vnr.benchmarks.symon import data as symon_data
from vnr.benchmarks.symon import exclusion, retrieval, videoclip_model
from vnr.benchmarks.symon.model import RetrievalModel, UniVLRetrievalModel
from vnr.data import pipeline
from vnr.reports import results as results_lib

NEW_SPLITS = ("new_test", "new_val")
ALIGNMENT = ("clip_accuracy", "sentence_iou", "f1")  # what `align` reports


def _univl(config: Any) -> bool:
    return config.model.get("encoder", "scratch") == "univl"


def validate(config: Any) -> None:
    d = config.data
    encoder = config.model.get("encoder", "scratch")
    if _univl(config):
        retrieval.univl_config(config)  # checkpoint, tokenizer, positions: one line each
    elif encoder == "videoclip":
        videoclip_model.videoclip_config(config)  # checkpoint, tokenizer, no memory, sizes
    elif encoder != "scratch":
        raise ValueError(f"model.encoder={config.model.encoder!r}: one of "
                         f"{retrieval.ENCODERS}")
    zero_shot = encoder in ("univl", "videoclip") and not config.transfer.source_run
    if not (config.transfer.source_run or zero_shot or config.get("allow_random_init")):
        raise ValueError("transfer.source_run is required: the workdir of a finished SYMON "
                         "retrieval run (configs/symon/retrieval.py); only the univl and "
                         "videoclip presets run without one (the checkpoint itself, zero-shot)")
    if config.transfer.source_run and not pathlib.Path(config.transfer.source_run).is_dir():
        raise ValueError(f"transfer.source_run={config.transfer.source_run!r} does not exist")
    if config.total_steps:
        raise ValueError("symon.yms_transfer is zero-shot: total_steps must be 0")
    if d.segmentation not in ("release", "scenes"):
        raise ValueError(f"data.segmentation={d.segmentation!r}: 'release' or 'scenes'")


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The whole model from the SYMON retrieval run; without one, the univl preset's towers
    from `univl.pretrained.bin` or the videoclip preset's from `checkpoint_best.pt` (the
    UniVL and VideoCLIP rows: no fine-tuning at all)."""
    run = config.transfer.source_run
    step = config.transfer.get("source_step", "selected")
    if run:
        return {"": pretrained_lib.run_source(str(pathlib.Path(run).absolute()), step)}
    if config.model.get("encoder", "scratch") == "videoclip":
        return videoclip_model.pretrained(config)
    return {"univl": (config.model.univl_checkpoint, "univl")} if _univl(config) else {}


def make_model(config: Any, rngs: nnx.Rngs) -> RetrievalModel | UniVLRetrievalModel:
    m, d = config.model, config.data
    if m.get("encoder", "scratch") == "videoclip":
        return videoclip_model.make(config, d.dim, rngs)
    if _univl(config):
        cfg = retrieval.univl_config(config)
        if cfg.video_dim != d.dim:
            raise ValueError(f"data.dim={d.dim}, but {m.univl_checkpoint} reads "
                             f"{cfg.video_dim}-d features")
        return UniVLRetrievalModel(cfg, rngs=rngs)
    return RetrievalModel(feature_dim=d.dim, vocab_size=d.vocab_size,
                          max_len=max(d.max_frames, d.max_tokens), width=m.width,
                          embed_dim=m.embed_dim, layers=m.layers, heads=m.heads, mlp=m.mlp,
                          dropout=m.dropout, rngs=rngs)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    """Zero-shot: never consumed (total_steps 0); one empty batch keeps the loop's contract."""
    ds = grain.MapDataset.source([0]).map(lambda _: {"valid": np.zeros((), bool)})
    return pipeline.to_iter(ds.batch(local_batch, drop_remainder=False), 0)


def loss_fn(config: Any, model: RetrievalModel, batch: dict, rngs: nnx.Rngs):
    raise ValueError("symon.yms_transfer does not train (total_steps must be 0)")


def predict(config: Any, model: RetrievalModel, batch: dict) -> dict[str, jax.Array]:
    v, t = retrieval._embed(model, batch, False, None)  # noqa: SLF001
    return {"v": v, "t": t, "valid": batch["valid"]}


def _source(d: Any, split: str):
    from tfds_builders.msymon import yms

    return yms.data_source(d.config, split, d.data_dir, d.manual_dir or None, dim=d.dim,
                           fps=d.fps)


def _records(config: Any, split: str) -> list[dict]:
    d = config.data
    if split not in NEW_SPLITS:
        src = _source(d, split)
        return [src[i] for i in range(len(src))]
    from tfds_builders.msymon import yms

    out = []
    for s in yms.split_names(d.config, d.data_dir, d.manual_dir or None, dim=d.dim, fps=d.fps):
        src = _source(d, s)
        for i in range(len(src)):
            rec = src[i]
            in_test = zlib.crc32(str(rec["video_id"]).encode()) % 10 < 7
            if in_test == (split == "new_test"):
                out.append(rec)
    return out


def scene_clips(feats: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-scene clips over the whole video from feature-distance cuts (`new` setting);
    a video with no cut is one clip, a last unpaired scene is its own clip."""
    from tfds_builders import symon

    t = len(feats) / fps
    bounds = [0.0, *[float(c) for c in symon.scene_cuts(feats, fps)], t]
    edges = bounds[::2] if len(bounds) % 2 else [*bounds[::2], t]
    edges = sorted(set(edges))
    return (np.asarray(edges[:-1], np.float32), np.asarray(edges[1:], np.float32))


def _rows(config: Any, recs: list[dict]) -> tuple[list[dict], list[dict]]:
    """Per video the host arrays (labels, clip times) and the model's input rows."""
    d = config.data
    tok = symon_data.tokenizer_of(d)
    videos, rows = [], []
    for vi, rec in enumerate(recs):
        from tfds_builders.msymon import fixed_clips, gt_clip_labels

        feats = np.asarray(rec["features"], np.float32)
        cb, ce = rec["clip_begin"], rec["clip_end"]
        if d.segmentation == "scenes":
            cb, ce = scene_clips(feats, d.fps)
        elif not len(cb):  # no clip segmentation for this video: fixed-length clips
            cb, ce = fixed_clips(float(rec["duration"]), d.clip_seconds)
        labels = gt_clip_labels(rec["begin"], rec["end"], rec["matched"], cb, ce)
        clips = [symon_data.Clip(float(b), float(e), "", 0.0, 0.0, "") for b, e in zip(cb, ce)]
        frames = [symon_data.clip_rows(feats, c, d.fps, d.max_frames) for c in clips]
        sents = [str(s) for s in rec["sentences"]]
        from tfds_builders.symon import person_names

        names = [set(n) for n in person_names(sents)]
        n = max(len(clips), len(sents))
        for k in range(n):
            row = {"video": vi, "clip": k if k < len(clips) else -1,
                   "sent": k if k < len(sents) else -1}
            if k < len(clips):
                row["frames"], row["frame_mask"] = symon_data._pad(frames[k], d.max_frames)  # noqa: SLF001
                j = symon_data.memory_choice(frames, [""] * len(frames), k,
                                             d.memory_window) if d.memory else -1
                mem = frames[j] if j >= 0 else frames[k][:0]
            else:
                row["frames"] = np.zeros((d.max_frames, d.dim), np.float32)
                row["frame_mask"] = np.zeros((d.max_frames,), bool)
                mem = np.zeros((0, d.dim), np.float32)
            row["mem_frames"], row["mem_frame_mask"] = symon_data._pad(mem, d.max_frames)  # noqa: SLF001
            row["tokens"] = symon_data.tokens_of(sents[k] if k < len(sents) else "",
                                                 d.vocab_size, d.max_tokens, tok)
            js = range(max(0, k - d.memory_window), min(k, len(sents)))
            jm = max(js, key=lambda j: (len(names[k] & names[j]), j)) if (
                d.memory and k < len(sents) and len(js)) else -1
            row["mem_tokens"] = (symon_data.tokens_of(sents[jm], d.vocab_size, d.max_tokens,
                                                      tok, memory=True)
                                 if jm >= 0 else np.zeros((d.max_tokens,), np.int32))
            row["valid"] = np.bool_(True)
            rows.append(row)
        gt = np.where(labels == -2, -1, labels).astype(np.int32)
        videos.append({"gt": gt, "dur": np.maximum(np.asarray(ce) - np.asarray(cb), 0.0),
                       "clips": len(clips), "sents": len(sents)})
    return videos, rows


MODEL_KEYS = ("frames", "frame_mask", "mem_frames", "mem_frame_mask", "tokens", "mem_tokens",
              "valid")
# Per row, gathered beside the outputs: which video, clip and sentence it holds (-1: none),
# the clip's annotated sentence and its seconds (what `eval_metrics` regroups per video).
HOST_COLUMNS = ("video", "clip", "sent", "gt", "dur")


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """The first `max_examples` videos of `split` (0: all) as rows: row k of a video holds
    its clip k and sentence k (`_rows`)."""
    recs = _records(config, split)
    if max_examples:
        recs = recs[:max_examples]
    if not recs:
        raise ValueError(f"yms {split}: no annotated video (the public sample annotates only "
                         "the training split: evaluate on what exists)")
    videos, rows = _rows(config, recs)
    table = []
    for r in rows:
        vid, k = videos[r["video"]], r["clip"]
        table.append({**{key: r[key] for key in MODEL_KEYS}, "video": np.int32(r["video"]),
                      "clip": np.int32(k), "sent": np.int32(r["sent"]),
                      "gt": np.int32(vid["gt"][k] if k >= 0 else -1),
                      "dur": np.float32(vid["dur"][k] if k >= 0 else 0.0)})
    stream = pipeline.eval_stream(table, [], config.eval_batch_size)
    return dataclasses.replace(stream, host_columns=HOST_COLUMNS)


def _videos(out: evaluation.SplitOutputs) -> list[dict]:
    """Per video (in split order): its clips' annotated sentences and seconds, and the clip x
    sentence similarities of the model's embeddings."""
    videos = []
    for vi in np.unique(out["video"]):
        clips = np.nonzero((out["video"] == vi) & (out["clip"] >= 0))[0]
        sents = np.nonzero((out["video"] == vi) & (out["sent"] >= 0))[0]
        clips, sents = clips[np.argsort(out["clip"][clips])], sents[np.argsort(out["sent"][sents])]
        videos.append({"gt": out["gt"][clips], "dur": out["dur"][clips], "clips": len(clips),
                       "sents": len(sents), "sim": out["v"][clips] @ out["t"][sents].T})
    return videos


def clip_accuracy(pred: np.ndarray, gt: np.ndarray, dur: np.ndarray) -> float:
    """Duration-weighted share of clips whose prediction equals the annotation (-1 = none)."""
    total = float(dur.sum())
    return float(dur[pred == gt].sum() / total) if total > 0 else float("nan")


def sentence_iou(pred: np.ndarray, gt: np.ndarray, dur: np.ndarray) -> float:
    """Mean over annotated sentences of the duration IoU of predicted vs annotated clips."""
    ious = []
    for s in np.unique(gt[gt >= 0]):
        inter = dur[(pred == s) & (gt == s)].sum()
        union = dur[(pred == s) | (gt == s)].sum()
        if dur[gt == s].sum() > 0:
            ious.append(inter / union)
    return float(np.mean(ious)) if ious else float("nan")


def align(videos: list[dict], threshold: float) -> dict[str, float]:
    """Argmax alignment with `threshold`: clip accuracy, sentence IoU (percent, mean over
    videos) and F1 of the two means."""
    accs, ious = [], []
    for vid in videos:
        sim = vid["sim"]
        pred = (np.where(sim.max(1) > threshold, sim.argmax(1), -1) if sim.size
                else np.full(len(sim), -1))
        accs.append(clip_accuracy(pred, vid["gt"], vid["dur"]))
        ious.append(sentence_iou(pred, vid["gt"], vid["dur"]))
    a, u = 100 * float(np.nanmean(accs)), 100 * float(np.nanmean(ious))
    return dict(zip(ALIGNMENT, (a, u, 2 * a * u / (a + u) if a + u else 0.0), strict=True))


def tune_threshold(videos: list[dict]) -> float:
    """The threshold with the best F1 on `videos` (a grid over quantiles of the scores)."""
    best = np.concatenate([v["sim"].max(1) for v in videos if v["sim"].size] or [np.zeros(1)])
    grid = np.unique(np.quantile(best, np.linspace(0.0, 1.0, 41))) - 1e-6
    return float(max(grid, key=lambda thr: align(videos, float(thr))["f1"]))


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None = None) -> dict[str, float]:
    """Clip accuracy and sentence IoU on `split`, threshold tuned on `data.val_split` (all
    its videos); with `report_dir`, `<split>_alignment.png` (`alignment_figure`)."""
    videos = _videos(out)
    val = videos if split == config.data.val_split else _videos(
        out.other(config.data.val_split, 0))
    thr = tune_threshold(val)
    metrics = align(videos, thr)
    metrics.update(threshold=thr, videos=float(len(videos)))
    if report_dir is not None:
        from vnr.reports import plots

        plots.report(report_dir / f"{split}_alignment.png", alignment_figure, split, videos,
                     thr)
    return metrics


REPORT_VIDEOS = 2


def alignment_figure(split: str, videos: list[dict], threshold: float) -> Any:
    """The first videos' clip x sentence scores with the thresholded argmax alignment and
    the annotation (`vnr.reports.figures.alignment`)."""
    from vnr.reports import figures

    drawn = []
    for i, vid in enumerate(videos[:REPORT_VIDEOS]):
        sim = vid["sim"]
        pred = (np.where(sim.max(1) > threshold, sim.argmax(1), -1) if sim.size
                else np.full(len(sim), -1))
        drawn.append(figures.AlignedVideo(sim, vid["gt"], pred, (
            f"video {i}: clip accuracy {100 * clip_accuracy(pred, vid['gt'], vid['dur']):.0f} %,"
            f" sentence IoU {100 * sentence_iou(pred, vid['gt'], vid['dur']):.0f} %")))
    return figures.alignment(drawn, f"{split} (threshold {threshold:.2f})", "argmax")


def check_splits(config: Any) -> None:
    """Every split evaluated (`data.val_split`, `data.test_splits`, every evaluator's) is one
    of the built YMS dataset or of `NEW_SPLITS`; zero-shot, so `data.train_split` is unread."""
    from tfds_builders.msymon import yms

    d = config.data
    have = yms.split_names(d.config, d.data_dir, d.manual_dir or None, dim=d.dim, fps=d.fps)
    task_lib.require_splits(config, [*have, *NEW_SPLITS], f"yms/{d.config}", train=False)
    check_source(config)


def check_source(config: Any) -> None:
    """A source run whose training data (its SYMON training split after its
    `data.exclude_movies`, and that of any run it started from) shares a video or movie with
    the YMS videos evaluated is refused in one line with the counts
    (`vnr.contamination.check_transfer`); what was checked is logged."""
    run = config.transfer.source_run
    if not run:
        return
    logging.info("%s", contamination.check_source_run(run, config, _exclusion))


def _exclusion(config: Any) -> Callable[[list[Any]], list[Any]] | None:
    """The YMS exclusion a SYMON run applied to its training split (`data.exclude_movies`)."""
    path = config.data.get("exclude_movies")
    return exclusion.excluded_held(path) if path else None


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports: the alignment scores (the table), its threshold and count."""
    return [*results_lib.cols(ALIGNMENT, "{:.1f}"), *results_lib.unshown(("threshold", "videos"))]


__all__ = ["eval_data", "eval_metrics", "make_model", "pretrained", "predict", "retrieval",
           "validate"]
