"""What the Singularity rows of MoviePuzzle (Table 1 "+fusion", Table 4) share: the checkpoint,
its architecture, the frames and the tokenizer as upstream (jayleicn/singularity) prepares them.

* Checkpoint: a released Singularity `.pth` (`config.model.checkpoint`; most likely
  `singularity_temporal_17m.pth`, see REPRODUCING.md), read by the port
  `vnr.models.encoders.singularity`; its sizes come from the file's tensor shapes
  (`config_from_tensors`, cached per file), its weights through the task's `pretrained`
  hook (port `"singularity"`). Nothing is downloaded.
* Frames: upstream's test transform (`dataset/__init__.py`): resize to image_res x image_res
  (224; bicubic, aspect ratio not kept), x / 255, Normalize(mean 0.5, std 0.5). Here the
  resize is PIL's bicubic on the decoded JPEG (upstream resizes decoded uint8 tensors with
  torchvision; not bit-equal), uint8 through the pipeline, the rest on device (`normalise`).
* Text: bert-base-uncased's WordPiece (`config.data.tokenizer`, a directory with vocab.txt,
  read by `vnr.models.encoders.tokenizers`).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import grain
import jax
import jax.numpy as jnp
import numpy as np
from PIL import Image

from vnr.data import images
from vnr.models.encoders import singularity, tokenizers, towers
from vnr.models.encoders.loading import CheckpointError

MEAN = STD = 0.5  # upstream's Normalize((0.5,) * 3, (0.5,) * 3)


@functools.lru_cache(maxsize=4)
def _read(path: str, mtime: float) -> tuple[singularity.SingularityConfig, float]:
    del mtime  # part of the cache key only: a rewritten file is read again
    tensors = singularity.read_tensors(path)
    temp = float(np.asarray(tensors.get("temp", singularity.SingularityConfig.temp)))
    return singularity.config_from_tensors(tensors, path), temp


def _file(checkpoint: str) -> tuple[singularity.SingularityConfig, float]:
    p = Path(checkpoint).expanduser()
    return _read(str(p.absolute()), p.stat().st_mtime)


def architecture(checkpoint: str) -> singularity.SingularityConfig:
    """The sizes of a Singularity checkpoint file; one-line error when it is not one."""
    p = Path(checkpoint).expanduser()
    what = ("a released Singularity checkpoint file, e.g. singularity_temporal_17m.pth "
            "(jayleicn/singularity); nothing is downloaded")
    if not checkpoint:
        raise ValueError(f"model.checkpoint is empty: give {what}")
    if not p.is_file():
        raise FileNotFoundError(f"model.checkpoint={checkpoint!r}: no such file ({what})")
    try:
        cfg = _file(checkpoint)[0]
        cfg.check()
    except (CheckpointError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"model.checkpoint={checkpoint!r}: {str(e).splitlines()[0]}") from None
    return cfg


def temperature(checkpoint: str) -> float:
    """The checkpoint's learnt ITC temperature `temp` (0.07 when it has none)."""
    architecture(checkpoint)  # the one-line errors
    return _file(checkpoint)[1]


def encoder(cfg: singularity.SingularityConfig, rngs: Any) -> singularity.Singularity:
    """Singularity without ITM head and without its scalar `temp` parameter, its stored RNG
    keys raw (restorable). `temp` is left out because the trainer's `pretrained` loader
    turns a 0-d tensor into shape (1,) (`np.ascontiguousarray` in `vnr.pretrained.load`);
    the port leaves a checkpoint tensor of a part not built, and the synopsis model keeps
    its own temperature, initialised from the file (`temperature`)."""
    model = singularity.Singularity(cfg, itm_head=False, rngs=rngs)
    del model.temp
    return towers.raw_rng_keys(model)


def check(config: Any, *, text_len: int) -> singularity.SingularityConfig:
    """One-line errors before anything compiles: the checkpoint, the frame size, the
    tokenizer (its ids inside the checkpoint's vocabulary) and `text_len` tokens within its
    position table. Returns the checkpoint's sizes."""
    m, d = config.model, config.data
    cfg = architecture(m.checkpoint)
    if d.image_size != cfg.vision.image_size:
        raise ValueError(f"data.image_size={d.image_size} but model.checkpoint="
                         f"{m.checkpoint!r} reads {cfg.vision.image_size}x"
                         f"{cfg.vision.image_size} frames: set "
                         f"data.image_size={cfg.vision.image_size}")
    if not d.get("tokenizer") or d.tokenizer == tokenizers.HASH:
        raise ValueError("data.tokenizer is empty: give a bert-base-uncased directory "
                         "(vocab.txt; Singularity's text tokenizer)")
    try:
        info = tokenizers.info(d.tokenizer)
    except (OSError, ValueError) as e:
        raise ValueError(f"data.tokenizer={d.tokenizer!r}: {str(e).splitlines()[0]}") from None
    if info["vocab"] > cfg.text.vocab_size:
        raise ValueError(f"data.tokenizer={d.tokenizer!r} has {info['vocab']} tokens, the "
                         f"checkpoint's text encoder {cfg.text.vocab_size}")
    if text_len > cfg.text.max_position_embeddings:
        raise ValueError(f"{text_len} text tokens > the checkpoint's "
                         f"{cfg.text.max_position_embeddings} positions: lower "
                         "data.max_tokens / data.synopsis_tokens")
    return cfg


def resize(raw: bytes, size: int) -> np.ndarray:
    """An encoded frame -> uint8 [size, size, 3]: RGB, bicubic resize to size x size."""
    img = images.open_rgb(raw)
    if img.size != (size, size):
        img = img.resize((size, size), Image.BICUBIC)
    return np.asarray(img)


def decode(frames: list[bytes], size: int) -> np.ndarray:
    """Encoded frames -> uint8 [n, size, size, 3]."""
    out = np.zeros((len(frames), size, size, 3), np.uint8)
    for k, raw in enumerate(frames):
        out[k] = resize(raw, size)
    return out


@dataclasses.dataclass(frozen=True)
class SingularityFrames(grain.transforms.Map):
    """A record's JPEG frames -> uint8 [n, S, S, 3] by upstream's resize."""

    image_size: int

    def map(self, rec: dict[str, Any]) -> dict[str, Any]:
        return dict(rec, frames=decode(rec["frames"], self.image_size))


# float32 per uint8 level as upstream computes it (x.float().div(255.), then Normalize): a
# table, since XLA may turn the division into a multiplication (1 ulp off)
LEVELS = ((np.arange(256, dtype=np.float32) / np.float32(255) - np.float32(MEAN))
          / np.float32(STD)).astype(np.float32)


def normalise(frames: jax.Array) -> jax.Array:
    """uint8 frames -> float32 (x / 255 - 0.5) / 0.5, as upstream's transforms."""
    return jnp.asarray(LEVELS)[frames.astype(jnp.int32)]
