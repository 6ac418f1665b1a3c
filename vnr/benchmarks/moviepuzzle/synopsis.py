"""Movie Synopsis Association (MoviePuzzle Table 4): retrieve a segment's synopsis paragraph.

Dual encoder.
  Segment: the reordering model's frame encoder, built from `pairwise_model`
  (`ImageEncoder` + `TextEncoder` + the `fuse` layer, under the same parameter names as
  `PairOrderModel`, so a reordering checkpoint loads by name), then a learned temporal
  position embedding, `segment_layers` transformer blocks over the frames (true order),
  a masked mean pool and a projection to `embed` dims.
  Synopsis: a `TextEncoder` over the paragraph's hashed tokens and a projection.
Score: cosine similarity times a learned temperature (CLIP's init 1/0.07, capped at 100).
Loss: symmetric in-batch InfoNCE over the global batch (segment -> synopsis and
synopsis -> segment cross-entropy, averaged); the other pairs of the batch are negatives.
Eval: every segment of a split against every synopsis of the split: R@1/5/10 and median rank
(`synopsis_metrics`, expected value under random tie-breaking), plus the reverse direction
as `syn2seg_*`.

"With reordering pre-training" (Table 4's second row): `config.init_from=<workdir>` of a
finished `moviepuzzle.pairwise` (PairOrderModel, late fusion) run, or, with
`model.frame_encoder="hcmc"`, of an HCMC run (small encoders; its frame encoder
`encoders.frame`); the parameters named in `config.init_params` (image, text, fuse, or
encoders.frame) come from that run at `config.init_step` (default: the step its results.json
reports) through the trainer's `pretrained` hook (`run_source`, `vnr/pretrained.py`)
and replace the fresh ones in a new run; everything is then fine-tuned. A mismatch (missing
run, other model, other sizes) is one clear error line from `validate` before training.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import evaluation
from vnr import pretrained as pretrained_lib
from vnr.benchmarks.moviepuzzle import synopsis_data as data
from vnr.benchmarks.moviepuzzle.data import check_splits  # noqa: F401 (task hook)
from vnr.benchmarks.moviepuzzle.pairwise_model import ImageEncoder, TextEncoder
from vnr.benchmarks.moviepuzzle.synopsis_metrics import NAMES, retrieval_metrics
from vnr.data import pipeline
from vnr.models import rng
from vnr.models.compute import float32
from vnr.models.layers import Block, annotate, dense, layer_norm
from vnr.reports import results as results_lib

METRICS = ("r1", "r5", "r10", "medr")  # also reported the other way round, as syn2seg_*
# Keys of the reordering run's config.json that fix the shapes of the frame encoder.
ENCODER_KEYS = ("model.modalities", "model.stem", "model.conv", "model.channels", "model.width",
                "model.text_layers", "model.heads", "data.image_size", "data.max_tokens",
                "data.vocab_size")


class SynopsisModel(nnx.Module):
    """Segment encoder (reordering frame encoder + temporal transformer) and synopsis encoder."""

    def __init__(self, *, modalities: tuple[str, ...], image_size: int, stem: int, conv: str,
                 channels: tuple[int, ...], vocab_size: int, max_tokens: int, max_frames: int,
                 synopsis_tokens: int, width: int, text_layers: int, segment_layers: int,
                 synopsis_layers: int, heads: int, mlp: int, embed: int, dropout: float,
                 rngs: nnx.Rngs, frame_encoder: str = "pair"):
        unknown = set(modalities) - {"vision", "text"}
        if unknown or not modalities:
            raise ValueError(f"model.modalities={modalities}: use 'vision' and/or 'text'")
        if frame_encoder not in ("pair", "hcmc"):
            raise ValueError(f"model.frame_encoder={frame_encoder!r}: use 'pair' or 'hcmc'")
        image = text = fuse = encoders = None
        if frame_encoder == "hcmc":  # HCMC's frame encoder, under HCMC's path encoders.frame
            from vnr.benchmarks.moviepuzzle.frame_encoder import FrameEncoder

            encoders = nnx.Dict({"frame": FrameEncoder(
                modalities=tuple(modalities), image_encoder="small", text_encoder="small",
                image_size=image_size, stem=stem, conv=conv, channels=tuple(channels),
                vocab_size=vocab_size, max_tokens=max_tokens, width=width,
                text_layers=text_layers, heads=heads, dropout=dropout, rngs=rngs)})
        else:  # same attribute names and shapes as pairwise_model.PairOrderModel
            image = ImageEncoder(image_size, channels, width, rngs, stem, conv) \
                if "vision" in modalities else None
            text = TextEncoder(vocab_size, max_tokens, width, text_layers, heads, dropout,
                               rngs) if "text" in modalities else None
            fuse = dense(width * len(modalities), width, ("mlp", "embed"), rngs)
        self.image, self.text = nnx.data(image), nnx.data(text)
        self.fuse, self.encoders = nnx.data(fuse), nnx.data(encoders)
        self.frame_pos = nnx.Param(annotate(nnx.initializers.normal(0.02), (None, "embed"))(
            rngs.params(), (max_frames, width)))
        self.segment_blocks = nnx.List([Block(width, heads, mlp, dropout, rngs)
                                        for _ in range(segment_layers)])
        self.segment_ln = layer_norm(width, rngs)
        self.segment_proj = dense(width, embed, ("embed", None), rngs)
        self.synopsis = TextEncoder(vocab_size, synopsis_tokens, width, synopsis_layers, heads,
                                    dropout, rngs)
        self.synopsis_proj = dense(width, embed, ("embed", None), rngs)
        self.log_scale = nnx.Param(jnp.asarray(np.log(1 / 0.07), jnp.float32))

    def encode_segments(self, frames: jax.Array, tokens: jax.Array, mask: jax.Array, *,
                        train: bool, rngs: nnx.Rngs | None) -> jax.Array:
        """frames [B, N, S, S, 3], tokens [B, N, L], mask [B, N] -> unit vectors [B, E]."""
        if self.encoders is not None:
            x = self.encoders["frame"](frames, tokens, train=train, rngs=rngs)
        else:
            parts = []
            if self.image is not None:
                parts.append(self.image(frames))
            if self.text is not None:
                parts.append(self.text(tokens, train=train, rngs=rngs))
            x = jax.nn.gelu(self.fuse(jnp.concatenate(parts, -1)))
        x = x + self.frame_pos.value[: x.shape[1]]
        for block in self.segment_blocks:
            x = block(x, mask, train=train, rngs=rngs)
        m = mask[..., None].astype(x.dtype)
        x = (self.segment_ln(x) * m).sum(1) / jnp.maximum(m.sum(1), 1.0)
        return _unit(self.segment_proj(x))

    def encode_synopses(self, tokens: jax.Array, *, train: bool,
                        rngs: nnx.Rngs | None) -> jax.Array:
        """tokens [B, Ls] -> unit vectors [B, E]."""
        return _unit(self.synopsis_proj(self.synopsis(tokens, train=train, rngs=rngs)))

    def scale(self) -> jax.Array:
        return jnp.minimum(jnp.exp(self.log_scale.value), 100.0)


def _unit(x: jax.Array) -> jax.Array:
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-6)


# ----------------------------------------------------------------------------- init_from


def _check_run_config(config: Any) -> None:
    """The reordering run's config.json (if present) agrees on the encoder-shaping keys."""
    path = pathlib.Path(config.init_from) / "config.json"
    if not path.is_file():
        return
    run = json.loads(path.read_text())
    for key in ENCODER_KEYS:
        section, name = key.split(".")
        have = run.get(section, {}).get(name)
        want = config[section][name]
        want = list(want) if isinstance(want, tuple | list) else want
        if have is not None and have != want:
            raise ValueError(f"init_from={config.init_from}: the reordering run has {key}="
                             f"{have!r} but this config has {want!r}; set --config.{key} to match")
    ours = config.model.get("frame_encoder", "pair")
    if run.get("model", {}).get("kind") == "hcmc" and ours != "hcmc":
        raise ValueError(f"init_from={config.init_from} is an HCMC run: set "
                         "model.frame_encoder='hcmc' (config flag `hcmc`)")
    if run.get("model", {}).get("fusion", "late") != "late":
        raise ValueError(f"init_from={config.init_from}: the reordering run uses model.fusion="
                         f"{run['model']['fusion']!r}; only late fusion has a `fuse` layer")


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The trainer's hook: `init_params` subtrees copied from the `init_from` run."""
    if not config.init_from:
        return {}
    workdir = str(pathlib.Path(config.init_from).absolute())
    source = pretrained_lib.run_source(workdir, config.get("init_step", "selected"))
    return {name: source for name in config.init_params}


# ----------------------------------------------------------------------------- task API


def validate(config: Any) -> None:
    """Config checks before any compile; with init_from, the checkpoint is checked too."""
    d = config.data
    if "synopsis" not in d.config:
        raise ValueError(f"data.config={d.config!r}: use a synopsis config (synthetic_synopsis*, "
                         "movienet_synopsis)")
    if config.batch_size < 2:
        raise ValueError(f"batch_size={config.batch_size}: the in-batch loss needs >= 2 pairs")
    if config.init_from:
        _check_run_config(config)
        model = nnx.eval_shape(lambda: make_model(config, rng.rngs(0)))
        missing = [n for n in config.init_params
                   if getattr(model, str(n).split(".")[0], None) is None]
        if missing:
            raise ValueError(f"init_params names {missing[0]!r}, which this model does not "
                             "have (model.modalities?)")
        try:
            pretrained_lib.check(nnx.state(model), pretrained(config), root=())
        except ValueError as e:
            raise ValueError(f"init_from={config.init_from}: {e}") from None


def make_model(config: Any, rngs: nnx.Rngs) -> SynopsisModel:
    """A fresh model; `init_from` weights come through the `pretrained` hook."""
    m, d = config.model, config.data
    model = SynopsisModel(
        modalities=tuple(m.modalities), image_size=d.image_size, stem=m.stem, conv=m.conv,
        channels=tuple(m.channels), vocab_size=d.vocab_size, max_tokens=d.max_tokens,
        max_frames=d.max_frames, synopsis_tokens=d.synopsis_tokens, width=m.width,
        text_layers=m.text_layers, segment_layers=m.segment_layers,
        synopsis_layers=m.synopsis_layers, heads=m.heads, mlp=m.mlp, embed=m.embed,
        dropout=m.dropout, rngs=rngs, frame_encoder=m.get("frame_encoder", "pair"))
    return model


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def loss_fn(config: Any, model: SynopsisModel, batch: dict, rngs: nnx.Rngs):
    """Symmetric in-batch InfoNCE over the global batch."""
    seg = model.encode_segments(batch["frames"], batch["tokens"], batch["mask"], train=True,
                                rngs=rngs)
    syn = model.encode_synopses(batch["synopsis"], train=True, rngs=rngs)
    logits = float32(model.scale()) * float32(seg) @ float32(syn).T
    labels = jnp.arange(logits.shape[0])
    ce = optax.softmax_cross_entropy_with_integer_labels
    loss = 0.5 * (ce(logits, labels).mean() + ce(logits.T, labels).mean())
    acc = (jnp.argmax(logits, 1) == labels).mean()
    return loss, {"batch_r1": acc, "scale": model.scale()}


def predict(config: Any, model: SynopsisModel, batch: dict) -> dict[str, jax.Array]:
    seg = model.encode_segments(batch["frames"], batch["tokens"], batch["mask"], train=False,
                                rngs=None)
    syn = model.encode_synopses(batch["synopsis"], train=False, rngs=None)
    return {"segment": seg, "synopsis": syn, "valid": batch["valid"]}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every (segment, synopsis) pair of `split`, in stored order."""
    return data.eval_dataset(config.data, split, config.eval_batch_size, max_examples)


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None) -> dict[str, float]:
    """Ranks every synopsis of the split for every segment of it (and the reverse)."""
    del report_dir  # no figure for retrieval
    sim = out["segment"] @ out["synopsis"].T
    result = {k: float(v) for k, v in retrieval_metrics(sim).items() if k in NAMES}
    back = retrieval_metrics(sim.T)
    result.update({f"syn2seg_{k}": float(back[k]) for k in METRICS})
    result["clips"] = float(len(sim))
    return result


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports; Table 4's columns: pairs, R@k in percent, median rank."""
    return [*COLUMNS, *results_lib.unshown(
        (*(k for k in NAMES if k not in METRICS), *(f"syn2seg_{k}" for k in METRICS)))]


COLUMNS = [results_lib.Column("clips", "pairs", "{:.0f}"),
           *results_lib.cols(("r1", "r5", "r10"), "{:.1f}", 100.0),
           results_lib.Column("medr", "MedR", "{:.1f}")]
