"""Sc2St's task: contextual retrieval over 100 candidates per round, rounds t = 2..10.

Training: softmax cross-entropy of the context gist's dot-product scores against
the correct candidate, averaged over the 9 rounds and the real storyboards; the MoEE rows
with `paper_experts` use MoEE's max-margin hinge over the candidates (`model.loss`).
Models: the recurrent LF / GF (Eq. 1) / SA (Eq. 2-3) and their options (`model.py`,
`fusion.py`), the MoEE rows V-MoEE / C-CMoEE (`baselines.py`).
Evaluation: every round of every storyboard of a split is scored; R@1/5/10 (%),
mean rank and MRR overall and by stage (early 2-4, middle 5-7, late 8-10) from
`vnr.benchmarks.sc2st.metrics` (ties broken uniformly in expectation). The baselines
`prior` (random scores) and `similarity` (cosine to keyframe t-1) train nothing:
their configs set total_steps=0 (the loop only evaluates).
"""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import config as config_lib
from vnr import evaluation
from vnr import task as task_lib
from vnr.benchmarks.sc2st import baselines, data, words
from vnr.benchmarks.sc2st import metrics as rank_metrics
from vnr.benchmarks.sc2st.model import (
    FUSIONS,
    MOEE,
    TRAINED,
    StoryboardModel,
    prior_scores,
)
from vnr.data import pipeline
from vnr.models.compute import float32
from vnr.ops import ranking
from vnr.reports import results as results_lib

LOSSES = ("softmax", "max_margin")


def validate(config: Any) -> None:
    """Config checks that need no data or compile."""
    m, d = config.model, config.data
    if m.fusion not in FUSIONS:
        raise ValueError(f"model.fusion={m.fusion!r}: choose one of {FUSIONS}")
    trained = (*TRAINED, *MOEE)
    if m.fusion not in trained and config.total_steps:
        raise ValueError(f"model.fusion={m.fusion!r} is a baseline with nothing to train; "
                         f"set total_steps=0 (got {config.total_steps})")
    if d.max_tokens < 2:
        raise ValueError(f"data.max_tokens={d.max_tokens} must be >= 2 ([CLS] and a word)")
    config_lib.fits_positions(config, "data.max_tokens", "model.text_encoder")
    if m.fusion in MOEE and m.get("moee_text", "encoder") not in baselines.TEXTS:
        raise ValueError(f"model.moee_text={m.moee_text!r}: choose one of {baselines.TEXTS}")
    if m.fusion in MOEE and m.get("moee_text") == "netvlad":
        if not d.get("word_vectors"):
            raise ValueError("model.moee_text='netvlad' needs data.word_vectors: a GloVe text "
                             "or word2vec binary file (MoEE used 300-d word2vec)")
        if not pathlib.Path(d.word_vectors).is_file():
            raise FileNotFoundError(f"data.word_vectors={d.word_vectors}: no such file")
    if m.get("loss", "softmax") not in LOSSES:
        raise ValueError(f"model.loss={m.loss!r}: choose one of {LOSSES}")


def check_splits(config: Any) -> None:
    from tfds_builders import sc2st as builder
    from vnr.benchmarks.sc2st.embedders import builder_models

    d = config.data
    have = builder.split_names(d.config, d.data_dir, manual_dir=d.manual_dir or None,
                               **builder_models(builder_config(config), d))
    task_lib.require_splits(config, have, f"sc2st/{d.config}")
    if config.model.get("moee_text") == "netvlad":  # a bad word-vector file: one line, now
        table, want = words.corpus_table(d), config.model.word_dim
        if table.dim != want:
            raise ValueError(f"{d.word_vectors}: {table.dim}-d word vectors, but "
                             f"model.word_dim={want}")


def text_encoder(config: Any, rngs: nnx.Rngs) -> tuple[nnx.Module, int]:
    """The sentence encoder named by model.text_encoder and its width (structure only).

    `scratch:<arch>-<size>` builds a random BERT-family encoder sized for the hashed
    tokenizer (vocab data.vocab_size, >= data.max_tokens positions); any other name is a
    checkpoint whose config.json gives the architecture (`towers.build`); its weights come
    through `pretrained`.
    """
    from vnr.models.encoders import factory, towers

    name, d = config.model.text_encoder, config.data
    if name.startswith("scratch:"):
        arch, _, size = name.removeprefix("scratch:").rpartition("-")
        cfg = factory.scratch_config(arch or "bert", size, vocab_size=d.vocab_size,
                                     max_position_embeddings=max(d.max_tokens, 8),
                                     **dict(config.model.text_overrides))
        ctor, _, _ = factory.builder(cfg, pooling="pooler")
        return ctor(rngs), int(cfg.hidden_size)
    model, cfg = towers.build(name, None, rngs)
    return model, int(cfg.hidden_size)


def builder_config(config: Any) -> Any:
    """The Sc2St builder config named by data.config: it fixes the keyframe feature width
    (`feature_dim`) and the storyboard `length`, so the model takes them from there."""
    from tfds_builders import sc2st as builder

    configs = builder.CONFIGS
    if config.data.config not in configs:
        raise ValueError(f"data.config={config.data.config!r} is not an Sc2St builder config "
                         f"(choose from {', '.join(configs)})")
    return configs[config.data.config]


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The trainer's hook: a checkpoint text encoder's weights go to `text`."""
    from vnr.models.encoders import towers

    name = config.model.text_encoder
    return {"text": (name, None)} if towers.is_checkpoint(name) else {}


def make_model(config: Any, rngs: nnx.Rngs) -> StoryboardModel | baselines.MoEE:
    m, b = config.model, builder_config(config)
    if m.fusion in MOEE:
        kw = dict(context=m.fusion == "cmoee", feature_dim=b.feature_dim,
                  width=m.get("moee_width", m.width), rngs=rngs,
                  experts=dict(b.experts) or None, gate_norm=m.get("moee_gate_norm", True))
        if m.get("moee_text", "encoder") == "netvlad":
            return baselines.MoEE(text="netvlad", word_dim=m.word_dim,
                                  clusters=m.get("netvlad_clusters", 32), **kw)
        text, text_width = text_encoder(config, rngs)
        return baselines.MoEE(text="encoder", text_encoder=text, text_width=text_width, **kw)
    text, text_width = text_encoder(config, rngs)
    return StoryboardModel(
        fusion=m.fusion, text_encoder=text, text_width=text_width, feature_dim=b.feature_dim,
        width=m.width, mlp=m.mlp, length=b.length, heads=m.heads, dropout=m.dropout, rngs=rngs,
        sa_channels=m.get("sa_channels", 8), sa_unit=m.get("sa_unit", 32),
        sa_normalise=m.get("sa_normalise", "printed"))


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, config.model.text_encoder, local_batch, config.seed,
                              process_index, process_count)


def loss_fn(config: Any, model: StoryboardModel, batch: dict, rngs: nnx.Rngs):
    """Mean cross-entropy over rounds and real storyboards (`model.loss="softmax"`), or
    MoEE's max-margin ranking hinge of the correct candidate against each of the others
    (`"max_margin"`, margin `model.margin`, `vnr.ops.ranking.candidate_max_margin_loss`);
    R@1 of the training batch.

    Baselines give their own scores (no parameter is used: the gradient is zero)."""
    scores = (_prior(batch, config) if config.model.fusion == "prior"
              else model(batch, train=True, rngs=rngs))
    scores = float32(scores)  # a bfloat16 model's loss stays float32
    w = batch["mask"].astype(jnp.float32)[:, None]
    n = jnp.maximum(w.sum() * scores.shape[1], 1.0)
    hit = jnp.argmax(scores, -1) == batch["answer"]
    if config.model.get("loss", "softmax") == "max_margin":
        valid = jnp.broadcast_to(batch["mask"][:, None], batch["answer"].shape)
        loss = ranking.candidate_max_margin_loss(scores, batch["answer"],
                                                 config.model.get("margin", 0.2), valid)
        return loss, {"r1": 100 * (hit * w).sum() / n}
    ce = optax.softmax_cross_entropy_with_integer_labels(scores, batch["answer"])  # [B, R]
    return (ce * w).sum() / n, {"r1": 100 * (hit * w).sum() / n}


def _prior(batch: dict, config: Any) -> jax.Array:
    r, c = batch["answer"].shape[1], batch["cands"].shape[2]
    return prior_scores(jax.random.key(config.seed), batch["index"], (r, c))


def predict(config: Any, model: StoryboardModel, batch: dict) -> dict[str, jax.Array]:
    scores = (_prior(batch, config) if config.model.fusion == "prior"
              else model(batch, train=False))
    return {"scores": scores, "answer": batch["answer"], "valid": batch["mask"]}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every storyboard of `split` (max_examples = max storyboards)."""
    return data.eval_dataset(config.data, split, config.model.text_encoder,
                             config.eval_batch_size, max_examples)


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None) -> dict[str, float]:
    """Scores every round of every storyboard; with `report_dir`,
    `<split>_storyboard.png` (`storyboard_figure`)."""
    metrics = rank_metrics.summarise(out["scores"], out["answer"])
    metrics["storyboards"] = float(len(out))
    if report_dir is not None and out.first is not None:
        from vnr.reports import plots

        plots.report(report_dir / f"{split}_storyboard.png", storyboard_figure, config, split,
                     out)
    return metrics


REPORT_TOP = 5  # candidates drawn


def storyboard_figure(config: Any, split: str, out: evaluation.SplitOutputs) -> Any:
    """The first storyboard at its last round: history, query, top candidates
    (`figures.storyboard`). A candidate is pool index `b * length + p` (keyframe p of
    storyboard b) or, past the storyboards, an isolated keyframe."""
    from tfds_builders import sc2st as builder
    from vnr.benchmarks.sc2st import figures

    d = config.data
    src = builder.data_source(d.config, split, d.data_dir, build=False)
    iso = builder.isolated_keyframes(d.config, split, d.data_dir)
    rec = src[int(out.first["index"][0])]
    length = len(rec["frame_ids"])
    rnd = len(rec["answer"]) - 1  # the last round: keyframe `length` after length - 1
    scores, answer = np.asarray(out["scores"][0][rnd]), int(out["answer"][0][rnd])
    order = [int(i) for i in np.argsort(-scores, kind="stable")]

    def keyframe(slot: int, caption: str) -> figures.Keyframe:
        b, p = divmod(int(rec["candidates"][rnd][slot]), length)
        if b < len(src):
            other = src[b]
            name, sentence, movie = other["frame_ids"][p], other["sentences"][p], other["movie"]
        else:  # an isolated keyframe: no sentence
            k = (b - len(src)) * length + p
            name, sentence, movie = str(iso["frame_ids"][k]), "", str(iso["movies"][k])
        return _keyframe(d.manual_dir, name, movie, sentence, caption, slot == answer)

    history = [_keyframe(d.manual_dir, n, rec["movie"], t, f"#{i + 1}") for i, (n, t) in
               enumerate(zip(rec["frame_ids"][:rnd + 1], rec["sentences"][:rnd + 1]))]
    shown = order[:REPORT_TOP] + ([answer] if answer not in order[:REPORT_TOP] else [])
    candidates = [keyframe(c, f"rank {order.index(c) + 1}: {scores[c]:.2f}") for c in shown]
    pixels = "" if all(k.pixels is not None for k in history) else \
        " (no pixels: keyframes named by their ids)"
    return figures.storyboard(history, rec["sentences"][rnd + 1], candidates,
                              f"{split} storyboard {int(rec['index'])} ({rec['movie']}){pixels}")


def _keyframe(manual_dir: str, frame_id: str, movie: str, sentence: str, caption: str,
              right: bool | None = None) -> Any:
    from vnr.benchmarks.sc2st import figures

    name = f"{pathlib.PurePosixPath(frame_id).name}\n{movie}"
    return figures.Keyframe(name, sentence, _pixels(manual_dir, frame_id), caption, right)


def _pixels(manual_dir: str, frame_id: str) -> np.ndarray | None:
    """The keyframe's image when its id is an image file under `manual_dir` (LSMDC frames/
    input; 160 px at most), else None (features/ input, generated data)."""
    path = pathlib.Path(manual_dir or "") / frame_id
    if not manual_dir or path.suffix.lower() not in (".jpg", ".jpeg", ".png") or \
            not path.is_file():
        return None
    from PIL import Image

    with Image.open(path) as image:
        image.thumbnail((160, 160))
        return np.asarray(image.convert("RGB"))


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports, as the paper lays it out: R@1 R@5 R@10 MeanR MRR, overall then
    by stage; and the storyboard count."""
    return [*rank_metrics.columns(), *results_lib.unshown(("storyboards",))]
