"""The paper's MoEE image experts for the builder (§4.3.2): DenseNet-161 / Places365 (scene)
and SENet-154 / ImageNet (object), pooled features of each keyframe's JPEG.

Each is a `tfds_builders.sc2st.MakeExpert` bound to its checkpoint file (a training config
key, `data.scene_checkpoint` / `data.object_checkpoint`: a path, or a name under
`$VNR_ENCODERS_DIR`; nothing downloads) by `embedders.builder_models`; the builder config's
`expert_encoders` names the architecture it is called with: "densenet161_places365" /
"senet154" (the paper's), "tiny" (the small networks of the smoke runs and tests:
`TINY_PLACES365`, `TINY_SENET`). The checkpoints are read by `vnr.models.encoders`:
CSAIL's `densenet161_places365.pth.tar` (`load_places365`, 365 classes: a file with another
class count stops with one line naming it) and Cadene's `senet154-c7b49a05.pth`
(`senet.from_checkpoint`, 1000 classes).

Features: the global-average `pooled` vector (DenseNet-161 2208-d, SENet-154 2048-d), as
the network gives it (not normalised; MoEE's gated units take raw features). Pixels (ours:
the paper gives no preprocessing): DenseNet-161 Places365 as CSAIL's demo
(`run_placesCNN_basic.py`: resized to 256 x 256, centre crop 224); SENet-154 as Cadene's
`TransformImage` (shorter side 256, centre crop 224); both with ImageNet's mean / std.
A keyframe without a JPEG (`features/` array input) is an error: these experts need pixels.
"""

from __future__ import annotations

import collections
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from vnr.benchmarks.sc2st.scorers import TorchvisionImageScorer

PLACES365_FILE = "densenet161_places365.pth.tar"
SENET154_FILE = "senet154-c7b49a05.pth"


def _densenet_configs() -> dict[str, Any]:
    from vnr.models.encoders import densenet

    tiny = densenet.DenseNetConfig(growth_rate=8, block_config=(1, 2, 2, 1),
                                   num_init_features=16, bn_size=4, num_classes=365)
    return {"densenet161_places365": densenet.DENSENET161_PLACES365, "tiny": tiny}


def _senet_configs() -> dict[str, Any]:
    from vnr.models.encoders import senet

    tiny = senet.SENetConfig(layers=(2, 1, 1, 1), planes=(8, 8, 16, 16), groups=8,
                             reduction=16, stem_width=8, inplanes=16, num_classes=1000)
    return {"senet154": senet.SENET154, "tiny": tiny}


def arch(kind: str, name: str) -> Any:
    """The architecture config `name` of `kind` ("scene" or "object")."""
    table = _densenet_configs() if kind == "scene" else _senet_configs()
    if name not in table:
        raise ValueError(f"{kind} expert architecture {name!r}: choose one of "
                         f"{', '.join(table)}")
    return table[name]


class ImageExpert(TorchvisionImageScorer):
    """A MoEE image expert: pooled features of the keyframes' JPEGs (module docstring)."""

    def __init__(self, model: Any, image_size: int, squash: bool, batch: int = 32):
        import jax
        from flax import nnx

        self.batch, self.image_size, self.resize_ratio = batch, image_size, 256 / 224
        self.squash = squash
        self.dim = model.config.num_features
        self.counts: collections.Counter = collections.Counter()
        graphdef, self._state = nnx.split(model)
        self._fwd = jax.jit(lambda st, px: nnx.merge(graphdef, st)(px).pooled)

    def pixels(self, jpeg: bytes) -> np.ndarray:
        if not self.squash:
            return super().pixels(jpeg)
        from PIL import Image

        from vnr.benchmarks.sc2st.scorers import IMAGENET_MEAN, IMAGENET_STD

        side = round(self.image_size * self.resize_ratio)
        img = Image.open(io.BytesIO(jpeg)).convert("RGB").resize((side, side), Image.BILINEAR)
        lo = int(round((side - self.image_size) / 2.0))
        img = img.crop((lo, lo, lo + self.image_size, lo + self.image_size))
        return (np.asarray(img, np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD

    def encode_keyframes(self, frames: Sequence[Any]) -> np.ndarray:
        bad = next((f for f in frames if f.path is None), None)
        if bad is not None:
            raise ValueError(f"the paper's image experts need keyframe images; "
                             f"{bad.frame_id} is a feature array (use frames/ input)")
        out = []
        for lo in range(0, len(frames), self.batch):
            chunk = [self.pixels(f.jpeg()) for f in frames[lo:lo + self.batch]]
            n = len(chunk)
            chunk += [np.zeros_like(chunk[0])] * (self.batch - n)
            out.append(np.asarray(self._fwd(self._state, np.stack(chunk)))[:n])
        return (np.concatenate(out).astype(np.float32) if out
                else np.zeros((0, self.dim), np.float32))


def _size(name: str) -> int:
    return 64 if name == "tiny" else 224


def places365_expert(name: str, seed: int = 0, *, checkpoint: str = PLACES365_FILE
                     ) -> ImageExpert:
    """Scene expert (MakeExpert): DenseNet `name` with CSAIL's Places365 weights."""
    from vnr.models.encoders import densenet

    del seed  # loaded weights
    model = densenet.load_places365(checkpoint, cfg=arch("scene", name))
    return ImageExpert(model, _size(name), squash=True)


def senet_expert(name: str, seed: int = 0, *, checkpoint: str = SENET154_FILE) -> ImageExpert:
    """Object expert (MakeExpert): SENet `name` with Cadene's ImageNet weights."""
    from vnr.models.encoders import senet

    del seed
    model = senet.from_checkpoint(checkpoint, cfg=arch("object", name))
    return ImageExpert(model, _size(name), squash=False)


def width(kind: str, name: str) -> int:
    """The pooled width of expert architecture `name` (2208 scene, 2048 object)."""
    return int(arch(kind, name).num_features)
