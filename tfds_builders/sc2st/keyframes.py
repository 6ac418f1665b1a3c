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
import inspect
import pathlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from tfds_builders import common


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


class EmbedderError(ValueError):
    """An embedder or expert the build cannot use (one line naming it and what is wrong)."""


def _name(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def made(factory: Callable[[str, int], Any], role: str, encoder: str, seed: int,
         methods: Sequence[str]) -> Any:
    """`factory(encoder, seed)` (a `MakeEmbedder` or `MakeExpert` the caller passed as
    `role`), checked before any frame is read: it takes those two arguments, returns an
    object with an int `dim` and the `methods`, each of whose results is then checked to
    be a finite [n, dim] array (`_Checked`). Anything else is an `EmbedderError`."""
    where = f"{role} {_name(factory)}"
    try:
        inspect.signature(factory).bind(encoder, seed)
    except TypeError:
        raise EmbedderError(f"{where}{inspect.signature(factory)} cannot be called as "
                            f"({role} of encoder {encoder!r}, seed {seed}): it must take "
                            f"(encoder: str, seed: int)") from None
    except ValueError:  # no signature to read (a builtin): calling it tells
        pass
    try:
        made_ = factory(encoder, seed)
    except Exception as e:  # noqa: BLE001 - the caller's code: one line naming it
        raise EmbedderError(f"{where}({encoder!r}, {seed}) failed: {type(e).__name__}: "
                            f"{' '.join(str(e).split())}") from None
    dim = getattr(made_, "dim", None)
    what = [f"no method {m}" for m in methods if not callable(getattr(made_, m, None))]
    if not (isinstance(dim, int | np.integer) and dim > 0):
        what.append(f"dim={dim!r}")
    if what:
        raise EmbedderError(f"{where}({encoder!r}, {seed}) returned a "
                            f"{type(made_).__name__} with {', '.join(what)} (it needs an int "
                            f"dim > 0 and {', '.join(methods)})")
    return _Checked(made_, where, int(dim), methods)


class _Checked:
    """An embedder or expert whose outputs are checked ([len(inputs), dim], finite)."""

    def __init__(self, inner: Any, where: str, dim: int, methods: Sequence[str]):
        self.inner, self.where, self.dim = inner, where, dim
        for m in methods:
            setattr(self, m, lambda items, m=m: self._call(m, items))

    def _call(self, method: str, items: Sequence[Any]) -> np.ndarray:
        try:
            out = np.asarray(getattr(self.inner, method)(items))
        except Exception as e:  # noqa: BLE001 - the caller's code: one line naming it
            raise EmbedderError(f"{self.where}: {method} of {len(items)} input(s) failed: "
                                f"{type(e).__name__}: {' '.join(str(e).split())}") from None
        if out.shape != (len(items), self.dim) or out.dtype.kind not in "fiu":
            raise EmbedderError(f"{self.where}: {method} of {len(items)} input(s) returned "
                                f"{out.dtype} {out.shape}, not [{len(items)}, {self.dim}] "
                                f"(its dim) floats")
        if not np.isfinite(out).all():
            raise EmbedderError(f"{self.where}: {method} returned non-finite values")
        return out.astype(np.float32)


def encode_frames(scorer: Embedder, paths: Sequence[pathlib.Path]
                  ) -> tuple[np.ndarray | None, tuple[pathlib.Path, str] | None]:
    """`scorer`'s image features [len(paths), dim] of the JPEG files `paths`, or
    (None, (path, problem)) when the embedder failed on them and one of them does not
    decode (a bad frame, skipped by the caller); the embedder failing on decodable frames
    is its own error (`EmbedderError`)."""
    data = [p.read_bytes() for p in paths]
    try:
        return scorer.encode_images(data), None
    except EmbedderError:
        for p, d in zip(paths, data, strict=True):
            if problem := common.jpeg_problem(d):
                return None, (p, problem)
        raise


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
