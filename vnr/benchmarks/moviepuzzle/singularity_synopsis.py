"""MoviePuzzle Table 4's Singularity rows: Movie Synopsis Association with Singularity.

`config.task = "moviepuzzle.singularity_synopsis"`
(`configs/moviepuzzle/singularity_synopsis.py`). A segment (a clip's frames in true order)
is a video, its synopsis paragraph the text, scored as upstream's retrieval
(`SingularityRetrievalBase.get_sim`): the mean over frames of the cosine similarity of each
frame's projection with the text's [CLS] projection (`Singularity.video_embed` @
`text_embed`; evaluation at temperature 1, training divided by the learnt temperature).

Frames: `data.num_frames` per segment in training, `data.num_frames_test` at evaluation,
sampled as upstream's "middle" sampling (`middle_indices`: the middle frame of each of that
many equal intervals; a segment shorter than that repeats its last frame). Text:
bert-base-uncased WordPiece, `data.synopsis_tokens` tokens (upstream's paragraph retrieval:
150).

Loss (`model.loss="itc"`): upstream's ITC, symmetric in-batch cross-entropy of the
similarities divided by the temperature (a parameter initialised from the checkpoint's
`temp`, clamped to [0.001, 0.5] as upstream's forward does). Upstream's ITM loss (hard
negatives) and ITM re-ranking of the top k at evaluation are not implemented.

Rows: Singularity = this fine-tuned from the checkpoint; "+reordering" = the same with the
encoder initialised from a finished Table 1 Singularity run (`config.init_from`, its
`encoder` subtree at `config.init_step`; the reordering task "added upstream"). With
`total_steps=0` a run only evaluates (a zero-shot score). Metrics as `synopsis`: R@1/5/10,
MedR (expected ranks under ties), the reverse direction as `syn2seg_*`.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import pretrained as pretrained_lib
from vnr.benchmarks.moviepuzzle import singularity_inputs as inputs
from vnr.benchmarks.moviepuzzle import synopsis
from vnr.benchmarks.moviepuzzle.data import check_splits  # noqa: F401 (task hook)
from vnr.data import pipeline
from vnr.models import rng
from vnr.models.compute import float32
from vnr.models.encoders import singularity, tokenizers
from vnr.models.encoders.layers import param

TEMP_RANGE = (0.001, 0.5)  # upstream: `self.temp.clamp_(0.001, 0.5)` in forward
metric_columns = synopsis.metric_columns


def middle_indices(n: int, k: int) -> np.ndarray:
    """Upstream's `get_frame_indices(k, n, sample="middle")`: min(k, n) intervals of the n
    frames (integer edges), the middle of each, then the last index repeated up to k."""
    edges = np.linspace(0, n, min(k, n) + 1).astype(int)
    idx = [(a + b - 1) // 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return np.asarray(idx + [idx[-1]] * (k - len(idx)))


@dataclasses.dataclass(frozen=True)
class EncodeSegment(grain.transforms.Map):
    """One (segment, synopsis) record -> frames uint8 [T, S, S, 3] (true order), synopsis ids
    and mask [Ls], valid."""

    num_frames: int
    image_size: int
    synopsis_tokens: int
    tokenizer: str  # a resolved directory

    def map(self, rec: dict[str, Any]) -> dict[str, np.ndarray]:
        keep = middle_indices(len(rec["frames"]), self.num_frames)
        frames = inputs.decode([rec["frames"][i] for i in keep], self.image_size)
        text = rec["synopsis"]
        text = text.decode() if isinstance(text, bytes) else text
        ids, mask = tokenizers.encode(self.tokenizer, [text], self.synopsis_tokens)
        return {"frames": frames, "synopsis": ids[0], "synopsis_mask": mask[0],
                "valid": np.asarray(True)}


def _source(cfg: Any, split: str):
    from tfds_builders import moviepuzzle as builder

    return builder.synopsis_source(cfg.config, split, data_dir=cfg.data_dir,
                                   manual_dir=cfg.manual_dir or None, build=True)


def _encode(cfg: Any, frames: int) -> EncodeSegment:
    return EncodeSegment(frames, cfg.image_size, cfg.synopsis_tokens,
                         tokenizers.resolve(cfg.tokenizer))


class SingularitySynopsisModel(nnx.Module):
    """Singularity's towers and projections (`singularity_inputs.encoder`) and the learnt
    ITC temperature (initialised from the checkpoint's)."""

    def __init__(self, cfg: singularity.SingularityConfig, temp: float, rngs: nnx.Rngs):
        self.encoder = inputs.encoder(cfg, rngs)
        self.temp = param(jnp.full((), temp, jnp.float32), ())

    def temperature(self) -> jax.Array:
        return jnp.clip(self.temp[...], *TEMP_RANGE)

    def embed(self, frames: jax.Array, ids: jax.Array, mask: jax.Array, *, train: bool
              ) -> tuple[jax.Array, jax.Array]:
        """uint8 frames [B, T, S, S, 3], synopsis ids / mask [B, L] -> (video [B, E], text
        [B, E]): upstream's retrieval embeddings."""
        det = not train
        video = self.encoder.video_embed(inputs.normalise(frames), deterministic=det)
        text = self.encoder.text_embed(ids, mask.astype(jnp.int32), deterministic=det)
        return video, text


def validate(config: Any) -> None:
    """One line per problem before anything compiles; with init_from, the run's encoder is
    checked against this model."""
    d, m = config.data, config.model
    if "synopsis" not in d.config:
        raise ValueError(f"data.config={d.config!r}: use a synopsis config (synthetic_synopsis*, "
                         "movienet_synopsis)")
    if config.batch_size < 2:
        raise ValueError(f"batch_size={config.batch_size}: the in-batch loss needs >= 2 pairs")
    if min(d.num_frames, d.num_frames_test) < 1:
        raise ValueError("data.num_frames and data.num_frames_test must be >= 1")
    if m.loss != "itc":
        raise ValueError(f"model.loss={m.loss!r}: only 'itc' (upstream's ITM loss is not "
                         "implemented)")
    inputs.check(config, text_len=d.synopsis_tokens)
    if config.init_from:
        model = nnx.eval_shape(lambda: make_model(config, rng.rngs(0)))
        try:
            pretrained_lib.check(nnx.state(model), pretrained(config), root=())
        except ValueError as e:
            raise ValueError(f"init_from={config.init_from}: {e}") from None
    pipeline.resolve_epochs(config, lambda: len(_source(d, d.train_split)), "train pairs",
                            "vnr:moviepuzzle_singularity_epochs")  # last: may build the data


def make_model(config: Any, rngs: nnx.Rngs) -> SingularitySynopsisModel:
    """Singularity with the checkpoint's sizes (weights through `pretrained`)."""
    ckpt = config.model.checkpoint
    return SingularitySynopsisModel(inputs.architecture(ckpt), inputs.temperature(ckpt), rngs)


def pretrained(config: Any) -> dict[str, tuple]:
    """The encoder from the Singularity checkpoint, or (`init_from`) from a finished Table 1
    Singularity run (its `encoder` subtree: the "+reordering" rows)."""
    if config.init_from:
        workdir = str(pathlib.Path(config.init_from).absolute())
        return {"encoder": pretrained_lib.run_source(workdir, config.get("init_step",
                                                                         "selected"))}
    return {"encoder": (config.model.checkpoint, "singularity")}


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    d = config.data
    src = _source(d, d.train_split)
    if len(src) < local_batch * process_count:
        raise ValueError(f"split {d.train_split!r} of moviepuzzle/{d.config} has {len(src)} "
                         f"pairs < batch_size {local_batch * process_count}")
    return pipeline.train_stream(src, [_encode(d, d.num_frames)], local_batch, config.seed,
                                 process_index, process_count, d.num_workers)


def loss_fn(config: Any, model: SingularitySynopsisModel, batch: dict, rngs: nnx.Rngs):
    """Upstream's ITC: symmetric in-batch cross-entropy of similarity / temperature."""
    del rngs  # dropout keys live in the encoder's streams
    video, text = model.embed(batch["frames"], batch["synopsis"], batch["synopsis_mask"],
                              train=True)
    t = model.temperature()
    logits = float32(video) @ float32(text).T / t
    labels = jnp.arange(logits.shape[0])
    ce = optax.softmax_cross_entropy_with_integer_labels
    loss = 0.5 * (ce(logits, labels).mean() + ce(logits.T, labels).mean())
    return loss, {"batch_r1": (jnp.argmax(logits, 1) == labels).mean(), "temp": t}


def predict(config: Any, model: SingularitySynopsisModel, batch: dict) -> dict[str, jax.Array]:
    video, text = model.embed(batch["frames"], batch["synopsis"], batch["synopsis_mask"],
                              train=False)
    return {"segment": float32(video), "synopsis": float32(text), "valid": batch["valid"]}


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every (segment, synopsis) pair of `split`, `data.num_frames_test` frames a segment."""
    d = config.data
    return pipeline.eval_stream(_source(d, split), [_encode(d, d.num_frames_test)],
                                config.eval_batch_size, max_examples=max_examples,
                                num_workers=d.num_workers)


eval_metrics = synopsis.eval_metrics  # both directions (upstream's score is `predict`'s)
