"""SYMON bidirectional retrieval (§7.1, Eq. 5-6) with long-term memory.

Training: dual encoders embed each two-scene clip (+ its memory clip) and each clip's
text (+ the memory clip's text); the loss is Eq. 5 over in-batch negatives of the
WHOLE global batch, computed sharded (`vnr.ops.contrastive.nce_loss`: shard_map over
"data", the other modality all-gathered). Masking (Appendix E, memory model only):
each video row and text token is hidden with probability `memory_mask_rate` (0.6) in
training; `memory_mask_scope` "all" (our reading of "60% of the video and text tokens":
the whole encoder input, current clip and memory) or "memory" (the memory part only,
our option). Evaluation embeds every clip and text of the split and scores all pairs by
dot product, block by block over the candidates (`retrieval_metrics.embedding_retrieval_
metrics`: no N x N matrix, so the paper's ~60k-clip test split fits; queries sharded over
the mesh's "data" axis); metrics (§7.2) plus `chance_v2t_r@1` / `chance_v2t_r@10` (the
exact expectation of random scores on the same items) and `items`.
"""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr import evaluation
from vnr import task as task_lib
from vnr.benchmarks.symon import data, exclusion, videoclip_model
from vnr.benchmarks.symon.model import RetrievalModel, UniVLRetrievalModel
from vnr.data import pipeline
from vnr.ops import contrastive, retrieval_metrics
from vnr.reports import results as results_lib

TASK = "retrieval"
CHANCE_KS = (1, 10)  # R@k whose chance level (random scores) is reported


def validate_data(d: Any) -> None:
    """Checks `config.data` shared by both SYMON tasks (features config, manual_dir)."""
    from tfds_builders import symon

    if d.config not in symon.CONFIGS:
        raise ValueError(f"data.config={d.config!r}: choose one of {list(symon.CONFIGS)}")
    if not symon.CONFIGS[d.config].with_features:
        raise ValueError(f"data.config={d.config!r} has no video features; the SYMON "
                         "tasks need a features config (features, synthetic, synthetic_tiny)")


def validate(config: Any) -> None:
    validate_data(config.data)
    if not 0.0 <= config.memory_mask_rate < 1.0:
        raise ValueError(f"memory_mask_rate={config.memory_mask_rate} must be in [0, 1)")
    em = config.data.get("exclude_movies")
    if em and not pathlib.Path(em).is_file():
        raise ValueError(f"data.exclude_movies={em!r} is not a file (exclude_yms needs "
                         "--config.data.exclude_movies=YMS_DIR/movie_list.txt)")
    if em:
        exclusion.yms_video_ids(em)  # YMS's url_list.txt beside it, readable: one line if not
    if config.memory_mask_scope not in ("all", "memory"):
        raise ValueError(f"memory_mask_scope={config.memory_mask_scope!r}: 'all' or 'memory'")
    if config.temperature <= 0:
        raise ValueError(f"temperature={config.temperature} must be > 0")
    encoder = config.model.get("encoder", "scratch")
    if encoder not in ENCODERS:
        raise ValueError(f"model.encoder={encoder!r}: one of {ENCODERS}")
    if encoder == "univl":
        univl_config(config)  # the checkpoint is there and fits the inputs: one line if not
    if encoder == "videoclip":
        videoclip_model.videoclip_config(config)  # checkpoint, tokenizer, no memory, sizes
    data.resolve_epochs(config, TASK)  # last: it may build the dataset


# our from-scratch dual encoder, UniVL's towers (§7.1), or VideoCLIP's (the zero-shot rows)
ENCODERS = ("scratch", "univl", "videoclip")


def univl_config(config: Any, halves: int | None = None) -> Any:
    """The sizes of `model.univl_checkpoint` (read from its tensor shapes, not its weights),
    checked against the data: a WordPiece tokenizer, and room in the position tables for
    the clip and memory inputs. One-line ValueError naming the key otherwise."""
    from vnr.models.encoders import torch_checkpoint, univl

    path = config.model.get("univl_checkpoint", "")
    if not path:
        raise ValueError("model.encoder='univl' needs --config.model.univl_checkpoint="
                         "PATH/univl.pretrained.bin (microsoft/UniVL's released weights)")
    cfg = univl.infer_config(torch_checkpoint.read_torch_shapes(path), path,
                             num_attention_heads=config.model.get("univl_heads", 12))
    d = config.data
    if d.get("tokenizer", "hash") == "hash":
        raise ValueError("model.encoder='univl' reads BERT WordPiece ids: set "
                         "--config.data.tokenizer=DIR (a directory with UniVL's "
                         "bert-base-uncased vocab.txt)")
    halves = halves or (2 if d.get("memory") else 1)
    for what, n, have in (("data.max_tokens", d.max_tokens, cfg.text_positions),
                          ("data.max_frames", d.get("max_frames", 0), cfg.visual_positions)):
        if n * halves > have:
            raise ValueError(f"{what}={n}{' (x2 with the memory)' if halves > 1 else ''} "
                             f"exceeds the {have} positions of {path}")
    return cfg


def check_splits(config: Any) -> None:
    from tfds_builders import symon

    d = config.data
    have = symon.split_names(d.config, d.data_dir, manual_dir=d.manual_dir or None)
    if {"train", "test"} <= set(have):
        have = [*have, *data.SET_SPLITS]  # Set A / Set B are drawn from train + test
    task_lib.require_splits(config, have, f"symon/{d.config}")


def make_model(config: Any, rngs: nnx.Rngs) -> RetrievalModel | UniVLRetrievalModel:
    from tfds_builders import symon

    m, d = config.model, config.data
    dim = symon.metadata(d.config, d.data_dir, d.manual_dir or None)[0]
    if m.get("encoder", "scratch") == "videoclip":
        return videoclip_model.make(config, dim, rngs)
    if m.get("encoder", "scratch") == "univl":
        cfg = univl_config(config)
        if cfg.video_dim != dim:
            raise ValueError(f"symon/{d.config} features are {dim}-d, "
                             f"{m.univl_checkpoint} reads {cfg.video_dim}-d (S3D mixed_5c: "
                             "1024; extract with `vnr.extract --model s3d_howto100m`)")
        return UniVLRetrievalModel(cfg, rngs=rngs)
    return RetrievalModel(feature_dim=dim, vocab_size=d.vocab_size,
                          max_len=max(d.max_frames, d.max_tokens), width=m.width,
                          embed_dim=m.embed_dim, layers=m.layers, heads=m.heads, mlp=m.mlp,
                          dropout=m.dropout, rngs=rngs)


def pretrained(config: Any) -> dict[str, tuple[str, str]]:
    """UniVL's text and video towers from `univl.pretrained.bin` (its cross encoder,
    decoder and pre-training heads are left unread), or VideoCLIP's from its
    `checkpoint_best.pt`, for a fresh run."""
    if config.model.get("encoder", "scratch") == "videoclip":
        return videoclip_model.pretrained(config)
    if config.model.get("encoder", "scratch") != "univl":
        return {}
    return {"univl": (config.model.univl_checkpoint, "univl")}


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, TASK, local_batch, config.seed, process_index,
                              process_count)


def _embed(model: RetrievalModel, batch: dict, train: bool, rngs: nnx.Rngs | None,
           mask_rate: float = 0.0, scope: str = "all") -> tuple[jax.Array, jax.Array]:
    masks = {"frame_mask": batch["frame_mask"], "tokens": batch["tokens"] > 0,
             "mem_frame_mask": batch["mem_frame_mask"], "mem_tokens": batch["mem_tokens"] > 0}
    if train and mask_rate > 0:
        names = list(masks) if scope == "all" else ["mem_frame_mask", "mem_tokens"]
        for key, name in zip(jax.random.split(rngs.dropout(), len(names)), names):
            masks[name] &= jax.random.uniform(key, masks[name].shape) >= mask_rate
    v = model.encode_video(batch["frames"], masks["frame_mask"], batch["mem_frames"],
                           masks["mem_frame_mask"], train=train, rngs=rngs)
    t = model.encode_text(batch["tokens"], batch["mem_tokens"], masks["mem_tokens"],
                          train=train, rngs=rngs, token_mask=masks["tokens"])
    return v, t


def loss_fn(config: Any, model: RetrievalModel, batch: dict, rngs: nnx.Rngs):
    """Bidirectional NCE (Eq. 5) over the global batch, sharded over "data"."""
    rate = config.memory_mask_rate if config.data.memory else 0.0  # memory model only
    v, t = _embed(model, batch, True, rngs, rate, config.memory_mask_scope)
    loss = contrastive.nce_loss(v, t, batch["valid"], config.temperature)
    return loss, {"embed_norm": jnp.linalg.norm(v, axis=-1).mean()}


def predict(config: Any, model: RetrievalModel, batch: dict) -> dict[str, jax.Array]:
    v, t = _embed(model, batch, False, None)
    return {"v": v, "t": t, "video": batch["video"], "movie": batch["movie"],
            "center": batch["center"], "text_center": batch["text_center"],
            "valid": batch["valid"]}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every retrieval item (clip, sentence) of `split`."""
    return data.eval_dataset(config.data, TASK, split, config.eval_batch_size, max_examples)


def ranking_mesh(mesh: jax.sharding.Mesh) -> jax.sharding.Mesh | None:
    """The mesh to shard the ranking's queries over: the trainer's in a single-process run;
    with several processes each ranks on its own devices (same inputs, same result)."""
    return mesh if jax.process_count() == 1 else None


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None) -> dict[str, float]:
    """R@1/5/10 and median rank in both directions over the items, the ranking sharded over
    the evaluation's mesh (`ranking_mesh`); with `report_dir`, `<split>_retrieval.png`
    (`retrieval_figure`)."""
    if not len(out):
        raise ValueError(f"symon {split}: no retrieval items")
    metrics = retrieval_metrics.embedding_retrieval_metrics(
        out["v"], out["t"], out["video"], out["movie"], out["center"],
        text_center=out["text_center"], mesh=ranking_mesh(out.mesh))
    for k in CHANCE_KS:  # chance levels of these very items (random scores)
        metrics[f"chance_v2t_r@{k}"] = retrieval_metrics.chance_recall(out["video"],
                                                                       out["movie"], k=k)
    metrics["items"] = float(len(out))
    if report_dir is not None:
        from vnr.reports import plots

        plots.report(report_dir / f"{split}_retrieval.png", retrieval_figure, config, split,
                     out)
    return metrics


REPORT_QUERIES, REPORT_TOP = 4, 5  # text queries drawn, clips per query


def retrieval_figure(config: Any, split: str, cat: evaluation.SplitOutputs) -> Any:
    """The first text queries' top clips in their pool (another video of the query's movie
    is out of it), correct = one of the query's `nearest_positives` (the metrics' rule)."""
    from vnr.benchmarks.symon import figures

    src = data.ItemSource(config.data, split, TASK)
    clip_of = {(v, float(np.float32((c.start + c.end) / 2))): c  # as EncodeRetrieval's center
               for v, clips in enumerate(src.clips) for c in clips}
    video, movie, center = (np.asarray(cat[k]) for k in ("video", "movie", "center"))
    positives = retrieval_metrics.nearest_positives(video, cat["text_center"], 3, center)

    def where(i: int) -> tuple[str, str]:
        c = clip_of.get((int(video[i]), float(center[i])))
        name = src.video(int(video[i]))["video_id"]
        return (f"video {name} {c.start:.0f}-{c.end:.0f} s", c.text) if c else \
            (f"video {name} at {center[i]:.0f} s", "")

    queries = []
    for q in range(min(REPORT_QUERIES, len(cat))):
        scores = np.asarray(cat["v"], np.float32) @ np.asarray(cat["t"][q], np.float32)
        scores[(movie == movie[q]) & (video != video[q])] = -np.inf  # out of the pool
        order = np.argsort(-scores, kind="stable")
        good = set(positives[q][positives[q] >= 0].tolist())
        first = next((r + 1 for r, i in enumerate(order) if i in good), 0)
        top = [figures.Candidate(*where(int(i)), float(scores[i]), int(i) in good)
               for i in order[:REPORT_TOP]]
        name, text = where(q)
        queries.append(figures.Query(text, name, top, first))
    return figures.retrieval_queries(queries, split)


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports: R@k and median rank both ways, the chance levels, the count."""
    chance = [f"chance_v2t_r@{k}" for k in CHANCE_KS]
    return [*results_lib.cols((*retrieval_metrics.NAMES, chance[-1]), "{:.1f}"),
            *results_lib.unshown((*chance[:-1], "items"))]
