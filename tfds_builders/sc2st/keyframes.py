"""Sc2St keyframe selection (paper §3.1.3).

A clip's keyframe for a (sub-)sentence is its frame with the highest cosine
between the CLIP text embedding of the sentence and the CLIP image embedding of
the frame. When a clip has several sub-sentences (§3.1.2), they take keyframes
in their own order: the frames maximise the summed cosine subject to strictly
increasing frame indices (`align_monotone`, an O(S·F) dynamic programme); a clip
with fewer frames than sub-sentences has its trailing sub-sentences merged into
the last one that gets a frame (choice made here).

The embeddings come from an `Embedder` that the caller passes in (the builder holds and
names no model code): a `MakeEmbedder`, called as `make_embedder(config.encoder,
config.seed)`, is given to the builder (`embedder=`) or named on the command line
(`python -m tfds_builders build sc2st --embedder module:function`). Without one a build
stops with a one-line error. The paper ranks frames with a universal pre-trained
image-text model and then screens them by hand (three annotators, voting); the hand
screening cannot be reproduced, so the top-ranked frame is the keyframe.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    """L2-normalised text and image embeddings in one `dim`-wide space (numpy)."""

    dim: int

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), dim] float32."""

    def encode_images(self, jpegs: Sequence[bytes]) -> np.ndarray:
        """[len(jpegs), dim] float32, from JPEG bytes."""


# (builder config's encoder name, seed) -> Embedder
MakeEmbedder = Callable[[str, int], Embedder]


@dataclasses.dataclass(frozen=True, eq=False)
class Keyframe:
    """What an expert may read of one keyframe: its JPEG (None for `features/` array
    input), the keyframe embedder's feature, its sub-sentence and the character names the
    release attaches to it (§4.3.2's character expert reads the names in the text)."""

    frame_id: str
    movie: str
    sentence: str
    names: tuple[str, ...]
    feature: np.ndarray
    path: pathlib.Path | None = None

    def jpeg(self) -> bytes | None:
        return self.path.read_bytes() if self.path is not None else None


class Expert(Protocol):
    """One MoEE expert (§4.3.2): a `dim`-wide feature per keyframe (numpy float32). An
    all-zero row means the expert has nothing for that keyframe (missing, as MoEE's
    absent modalities): the model masks it and renormalises its mixture weights."""

    dim: int

    def encode_keyframes(self, frames: Sequence[Keyframe]) -> np.ndarray:
        """[len(frames), dim] float32; called once with every keyframe of the corpus."""


# (builder config's encoder name, seed) -> Expert; one per name in the config's `experts`
MakeExpert = Callable[[str, int], Expert]


def align_monotone(sim: np.ndarray) -> np.ndarray:
    """Strictly increasing frame indices [S] maximising sum_i sim[i, f_i]; needs F >= S."""
    s_n, f_n = sim.shape
    if s_n > f_n:
        raise ValueError(f"{s_n} sentences cannot take distinct frames among {f_n}")
    best = np.full((s_n, f_n), -np.inf)
    arg = np.zeros((s_n, f_n), np.int64)
    best[0] = sim[0]
    for i in range(1, s_n):
        cur = -1  # argmax of best[i - 1][:f], updated as f grows
        for f in range(1, f_n):
            if cur < 0 or best[i - 1][f - 1] > best[i - 1][cur]:
                cur = f - 1
            if np.isfinite(best[i - 1][cur]):
                best[i, f] = best[i - 1][cur] + sim[i, f]
                arg[i, f] = cur
    out = np.zeros(s_n, np.int64)
    out[-1] = int(np.argmax(best[-1]))
    for i in range(s_n - 1, 0, -1):
        out[i - 1] = arg[i, out[i]]
    return out


def normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
