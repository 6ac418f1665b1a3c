"""The video-model pair baselines of MoviePuzzle Table 1 (VideoMAE, TimeSformer), NSP-style.

A MoviePuzzle unit is one still frame (a keyframe with its utterance; a clip is 10-20 of
them), while VideoMAE and TimeSformer read a clip of `num_frames` frames. A pair (i, j) is
therefore one clip of the checkpoint's length: frame i repeated for the first half of the
frames, frame j for the second half (16 = 8 + 8 for VideoMAE-base, whose tubelets of 2 never
straddle the two; 8 = 4 + 4 for TimeSformer-base). The video model encodes the pair jointly,
as BERT encodes "[CLS] A [SEP] B" for next-sentence prediction, and a linear head reads its
pooled output (VideoMAE: the mean of the final tokens; TimeSformer: the final CLS token) as
two logits, class 1 = "j follows i" (the task's NSP or SOP labels; Eq. 5 at evaluation).

Pixels: uint8 frames from the data pipeline (shorter side to the checkpoint's size, PIL
bilinear, centre crop: `video_pairs_data`) are normalised here, on device, the way
`VideoMAEImageProcessor` does it (x * rescale_factor in float64, then float32, then
(x - mean) / std in float32: one 256-level table per channel), with the mean / std of the
checkpoint's `preprocessor_config.json`, ImageNet's when it has none (`preprocessing`).

The encoder's architecture comes from the checkpoint's `config.json`; it is initialised
randomly here and its weights come through the task's `pretrained` hook (the `videomae` /
`timesformer` ports of `vnr.models.encoders.ports`).
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models.encoders import timesformer, towers, videomae
from vnr.models.encoders.loading import CheckpointError
from vnr.models.layers import dense

FAMILIES = {"videomae": (videomae.VideoMAEConfig, "VideoMAE"),
            "timesformer": (timesformer.TimesformerConfig, "TimeSformer")}
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
PIL_BILINEAR = 2  # PILImageResampling.BILINEAR: VideoMAEImageProcessor's default resample


@dataclasses.dataclass(frozen=True)
class Pixels:
    """How uint8 pixels become the encoder's input, and where the constants come from."""

    mean: tuple[float, float, float] = videomae.IMAGENET_MEAN
    std: tuple[float, float, float] = videomae.IMAGENET_STD
    rescale: float = 1 / 255
    source: str = "ImageNet mean / std (no preprocessor_config.json)"

    def table(self) -> np.ndarray:
        """float32 [256, 3]: the normalised value of each uint8 level per channel, with the
        processor's dtypes (rescale in float64 then float32; mean / std in float32)."""
        levels = (np.arange(256, dtype=np.float64) * self.rescale).astype(np.float32)
        mean, std = np.asarray(self.mean, np.float32), np.asarray(self.std, np.float32)
        return ((levels[:, None] - mean) / std).astype(np.float32)


def architecture(family: str, checkpoint: str) -> Any:
    """The encoder config (`VideoMAEConfig` / `TimesformerConfig`) of a checkpoint directory's
    config.json; one-line ValueError naming the directory when it is absent or malformed."""
    if family not in FAMILIES:
        raise ValueError(f"model.encoder={family!r}: use one of {tuple(FAMILIES)}")
    cls, name = FAMILIES[family]
    d = Path(checkpoint).expanduser()
    what = (f"a Hugging Face {name} checkpoint directory: config.json and model.safetensors "
            "or pytorch_model.bin; nothing is downloaded")
    if not d.is_dir():
        raise FileNotFoundError(f"model.checkpoint={checkpoint!r}: no such directory ({what})")
    if not any((d / w).is_file() for w in WEIGHTS):
        raise FileNotFoundError(f"model.checkpoint={checkpoint!r}: no weights in it "
                                f"(found {sorted(p.name for p in d.iterdir())}; {what})")
    try:
        cfg = videomae.read_config(d, cls, family)
        cfg.check()
    except (CheckpointError, ValueError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"model.checkpoint={checkpoint!r}: {str(e).splitlines()[0]}") from None
    return cfg


def check_architecture(family: str, cfg: Any, image_size: int, checkpoint: str) -> None:
    """One-line ValueError unless the pair clip and the frames fit the checkpoint."""
    where = f"model.checkpoint={checkpoint!r}"
    half = cfg.num_frames // 2
    if cfg.num_frames % 2:
        raise ValueError(f"{where}: num_frames={cfg.num_frames} is odd; a pair clip gives each "
                         "frame half of the frames")
    if family == "videomae" and half % cfg.tubelet_size:
        raise ValueError(f"{where}: half of num_frames={cfg.num_frames} is not a multiple of "
                         f"tubelet_size={cfg.tubelet_size} (a tubelet would mix the two frames)")
    if family == "videomae" and cfg.use_mean_pooling:
        raise ValueError(f"{where}: a VideoMAE classification checkpoint (use_mean_pooling, "
                         "fc_norm); the rows read a pre-training checkpoint's encoder, e.g. "
                         "MCG-NJU/videomae-base")
    if cfg.num_channels != 3:
        raise ValueError(f"{where}: num_channels={cfg.num_channels}, frames are RGB")
    if image_size != cfg.image_size:
        raise ValueError(f"data.image_size={image_size} but {where} reads "
                         f"{cfg.image_size}x{cfg.image_size} frames: set "
                         f"data.image_size={cfg.image_size}")


_WARNED: set[str] = set()


def preprocessing(checkpoint: str, image_size: int | None = None) -> Pixels:
    """The checkpoint's pixel constants: image_mean / image_std / rescale_factor of its
    `preprocessor_config.json` when present, else ImageNet's (the VideoMAE authors'
    constants). Warns once per checkpoint where the file asks for a resize the pipeline does
    not do (another resample filter or size); one-line ValueError for a malformed file."""
    path = Path(checkpoint).expanduser() / "preprocessor_config.json"
    if not path.is_file():
        return Pixels()
    try:
        raw = json.loads(path.read_text())
        mean = tuple(float(v) for v in raw.get("image_mean", videomae.IMAGENET_MEAN))
        std = tuple(float(v) for v in raw.get("image_std", videomae.IMAGENET_STD))
        rescale = float(raw.get("rescale_factor", 1 / 255)) if raw.get("do_rescale", True) \
            else 1.0
        if not raw.get("do_normalize", True):
            mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: not a readable preprocessor config ({e})") from None
    if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
        raise ValueError(f"{path}: image_mean {list(mean)} / image_std {list(std)} must be 3 "
                         "values per channel, std > 0")
    size = raw.get("size", image_size)
    size = size.get("shortest_edge", image_size) if isinstance(size, dict) else size
    other = []
    if raw.get("resample", PIL_BILINEAR) != PIL_BILINEAR:
        other.append(f"resample={raw['resample']} (the pipeline resizes bilinearly, 2)")
    if image_size is not None and size != image_size:
        other.append(f"size={raw['size']} (the pipeline's shorter side is {image_size})")
    if other and str(path) not in _WARNED:
        _WARNED.add(str(path))
        warnings.warn(f"{path}: {', '.join(other)}", stacklevel=2)
    return Pixels(mean, std, rescale, f"{path.name}: image_mean {list(mean)}, image_std "
                                      f"{list(std)}, rescale_factor {rescale:.8g}")


class VideoPairModel(nnx.Module):
    """VideoMAE or TimeSformer on pair clips + a 2-way linear head (module docstring).

    Args:
      family: "videomae" or "timesformer".
      cfg: its config (`architecture`).
      pixels: the normalisation constants (`preprocessing`).
      rngs: `params` (and the encoder's dropout streams).
    """

    def __init__(self, family: str, cfg: Any, pixels: Pixels, rngs: nnx.Rngs):
        self.family = family
        self.num_frames = int(cfg.num_frames)
        self.pixels = pixels
        if family == "videomae":
            encoder = videomae.VideoMAEModel(cfg, rngs=rngs)
        else:
            encoder = timesformer.TimesformerModel(cfg, rngs=rngs)
        self.encoder = towers.raw_rng_keys(encoder)  # restorable dropout streams
        self.head = dense(cfg.hidden_size, 2, ("embed", None), rngs)

    def normalise(self, frames: jax.Array) -> jax.Array:
        """uint8 frames [..., S, S, 3] -> the processor's float32 values."""
        table = jnp.asarray(self.pixels.table())
        return table[frames.astype(jnp.int32), jnp.arange(3)]

    def pair_clips(self, first: jax.Array, second: jax.Array) -> jax.Array:
        """Normalised frames [P, S, S, 3] of i and j -> pair clips [P, T, S, S, 3]."""
        half = self.num_frames // 2
        rep = lambda x: jnp.broadcast_to(x[:, None], (x.shape[0], half, *x.shape[1:]))  # noqa: E731
        return jnp.concatenate([rep(first), rep(second)], axis=1)

    def pair_logits(self, first: jax.Array, second: jax.Array, *, train: bool) -> jax.Array:
        """Normalised frames [..., S, S, 3] of i and j -> logits [..., 2] (class 1: j follows
        i)."""
        lead = first.shape[:-3]
        flat = lambda x: x.reshape(-1, *x.shape[-3:])  # noqa: E731
        out = self.encoder(self.pair_clips(flat(first), flat(second)), deterministic=not train)
        return self.head(out.pooled.astype(jnp.float32)).reshape(*lead, 2)

    def all_pair_logits(self, frames: jax.Array, chunk: int) -> jax.Array:
        """Normalised frames [B, N, S, S, 3] -> logits [B, N, N, 2] of every ordered pair
        i != j (zeros on the diagonal), `chunk` pairs per clip at a time (`lax.map`), so at
        most B x chunk pair clips are in flight."""
        b, n = frames.shape[:2]
        ii, jj = np.nonzero(~np.eye(n, dtype=bool))
        steps = -(-len(ii) // chunk)
        pad = steps * chunk - len(ii)
        idx = [np.concatenate([a, np.zeros(pad, a.dtype)]).reshape(steps, chunk)
               for a in (ii, jj)]

        def one(pair: tuple[jax.Array, jax.Array]) -> jax.Array:
            i, j = pair
            return self.pair_logits(frames[:, i], frames[:, j], train=False)  # [B, chunk, 2]

        out = jax.lax.map(one, (jnp.asarray(idx[0]), jnp.asarray(idx[1])))
        out = out.transpose(1, 0, 2, 3).reshape(b, steps * chunk, 2)[:, :len(ii)]
        return jnp.zeros((b, n, n, 2), out.dtype).at[:, ii, jj].set(out)
