"""Grain pipelines for Movie101 narration (MCN): narrations joined with their movie's features.

Records: `tfds_builders.movie101` narration configs (text, `@k` pointer text, cast) joined by
`movie_id` with the matching `*_movies` config (per-second CLIP / S3D / face features,
portrait face features). Tokens: `vnr.data.text.words` (Chinese one token per character,
Latin words, `?!.,`), a vocabulary of the `vocab_size - 4` most frequent training tokens
(ties by token) after PAD=0, BOS=1, EOS=2, UNK=3 (padded with unused entries to exactly
`vocab_size`), cached as JSON under `data_dir`. With the
pointer, a role mention `@k` (k < max_roles, cast member with a portrait feature) is the
output id `vocab_size + k`; without it (or for `no_pointer` models) the name is plain text.

Which narrations are used (a movie without features: left out, counted; without a cast,
faces or portraits: zeros) is `records.usable`; `check` logs the per-split counts and stops
a run that cannot mean what its config says (before training starts).

Batches (B examples, T = max_frames seconds, S = max_tokens + 1 positions: BOS + at most
max_tokens text tokens in, those tokens + EOS out, as upstream's `pad_sent`):
  frames     float32 [B,T,Dc+Ds]  CLIP ⊕ S3D rows of the seconds covered; a longer clip
                                  keeps its first T seconds (frame_sampling="first", as
                                  upstream's max_v_l = 40) or T seconds sampled uniformly
                                  over it ("uniform", ours); frame_mask bool [B,T]
  faces      float32 [B,T,F,Df]   face features per second, confidence order
  (with `l2_frames`, default, as upstream: each second's CLIP ⊕ S3D ⊕ faces row has unit norm)
  genre      int32 [B,G]          the movie's first G genres as indices into `genre_vocab`
                                  (every genre of every split, sorted: no two share an
                                  embedding), -1 = pad
  portraits  float32 [B,R,Df], role_mask bool [B,R]
  tokens_in, targets int32 [B,S], target_mask bool [B,S]
  (eval only) ref, cast: object [B] reference text and the cast names joined by "\\t";
             clip_frames float32 [B,T,Dc], clip_mask [B,T]: CLIP rows spread uniformly over
             the whole clip (EMScore scores the clip, whatever frame_sampling gives the model)
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
from typing import Any

import grain
import numpy as np

from vnr.benchmarks.movie101 import records
from vnr.benchmarks.movie101.records import MovieTable
from vnr.data import pipeline
from vnr.data.text import words

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
FRAME_SAMPLING = ("first", "uniform")
_POINTER = re.compile(r"(@\d+)")
_NAMES: dict[tuple, list[str]] = {}
_GENRES: dict[tuple, tuple[str, ...]] = {}


def segments(pointer_text: str) -> list[str]:
    """Tokens of a pointer text: `@k` kept whole, the rest through `vnr.data.text.words`."""
    out: list[str] = []
    for part in _POINTER.split(pointer_text):
        if _POINTER.fullmatch(part):
            out.append(part)
        elif part:
            out.extend(words(part))
    return out


def build_vocab(texts: list[str], size: int) -> list[str]:
    counts = collections.Counter(t for s in texts for t in segments(s) if not t.startswith("@"))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = list(SPECIALS) + [w for w, _ in ranked[: size - len(SPECIALS)]]
    return out + [f"<unused{i}>" for i in range(size - len(out))]  # len == size: V is fixed


def detokenize(toks: list[str]) -> str:
    """Joins tokens: a space only between two Latin/digit tokens."""
    out = ""
    for t in toks:
        if out and out[-1].isascii() and out[-1].isalnum() and t[:1].isascii() and \
                t[:1].isalnum():
            out += " "
        out += t
    return out


def _source(cfg: Any, config: str, split: str):
    return records.source(cfg, config, split)


def vocab(cfg: Any) -> list[str]:
    """The training vocabulary (built once from the train split, cached as JSON)."""
    path = os.path.join(os.path.abspath(cfg.data_dir), "movie101_vocab",
                        f"{cfg.config}_{cfg.vocab_size}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    src = _source(cfg, cfg.config, cfg.train_split)
    v = build_vocab([src[i]["pointer_text"] for i in range(len(src))], cfg.vocab_size)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(v, f, ensure_ascii=False)
    os.replace(tmp, path)
    return v


@dataclasses.dataclass(frozen=True)
class Encode(grain.transforms.Map):
    """Narration record -> fixed-size arrays (see the module docstring)."""

    table: MovieTable
    words: tuple[str, ...]
    max_frames: int
    max_tokens: int
    max_roles: int
    max_genres: int
    genres: tuple[str, ...]
    frame_dim: int
    face_dim: int
    faces: int
    pointer: bool
    keep_text: bool = False
    l2_frames: bool = True
    frame_sampling: str = "first"

    def map(self, rec: dict) -> dict[str, np.ndarray]:
        movie = self.table[rec["movie_id"]]
        clip, s3d, face = movie["clip"], movie["s3d"], movie["face"]
        if not len(clip) or not len(s3d):
            raise ValueError(f"movie {rec['movie_id']} has no clip/s3d features in "
                             f"movie101/{self.table.config}: MCN needs features/ in manual_dir")
        if clip.shape[1] + s3d.shape[1] != self.frame_dim:
            raise ValueError(f"movie {rec['movie_id']}: clip+s3d dim {clip.shape[1]}+"
                             f"{s3d.shape[1]} != model.frame_dim={self.frame_dim}")
        n = min(len(clip), len(s3d))
        lo = int(np.clip(np.floor(rec["start"]), 0, n - 1))
        hi = int(np.clip(np.ceil(rec["end"]), lo + 1, n))
        idx = frame_seconds(lo, hi, self.max_frames, self.frame_sampling)
        T = self.max_frames
        frames = np.zeros((T, self.frame_dim), np.float32)
        frames[: len(idx)] = np.concatenate([clip[idx], s3d[idx]], -1)
        faces = np.zeros((T, self.faces, self.face_dim), np.float32)
        if len(face):
            f = face[np.minimum(idx, len(face) - 1), : self.faces]
            faces[: len(idx), : f.shape[1]] = f
        if self.l2_frames:  # upstream: F.normalize(cat(clip, s3d, faces), dim=1) per second
            norm = np.sqrt((frames**2).sum(-1) + (faces**2).sum((-2, -1)))[:, None]
            norm = np.where(norm > 0, norm, 1.0)
            frames, faces = frames / norm, faces / norm[..., None]
        genre = np.full((self.max_genres,), -1, np.int32)
        index = {g: i for i, g in enumerate(self.genres)}
        for j, g in enumerate(rec["genre"][: self.max_genres]):
            genre[j] = index[g]
        R = self.max_roles
        portraits = np.zeros((R, self.face_dim), np.float32)
        role_mask = np.zeros((R,), bool)
        pf, pm = movie["portrait_face"], movie["portrait_face_mask"]
        if len(pf):
            k = min(R, len(pf))
            portraits[:k], role_mask[:k] = pf[:k], pm[:k]
        ids = self.token_ids(rec["pointer_text"], rec["cast_names"], role_mask)
        S = self.max_tokens + 1  # BOS + tokens in, tokens + EOS out
        ids = ids[: self.max_tokens]
        tokens_in = np.zeros((S,), np.int32)
        targets = np.zeros((S,), np.int32)
        tokens_in[0], tokens_in[1: len(ids) + 1] = BOS, ids
        targets[: len(ids)], targets[len(ids)] = ids, EOS
        out = {"frames": frames, "frame_mask": np.arange(T) < len(idx), "faces": faces,
               "genre": genre, "portraits": portraits, "role_mask": role_mask,
               "tokens_in": tokens_in, "targets": targets,
               "target_mask": np.arange(S) <= len(ids)}
        if self.keep_text:  # EMScore's frames: CLIP rows over the whole clip, not the window
            em = frame_seconds(lo, hi, T, "uniform")
            out["clip_frames"] = np.zeros((T, clip.shape[1]), np.float32)
            out["clip_frames"][: len(em)] = clip[em]
            out["clip_mask"] = np.arange(T) < len(em)
            out["ref"] = np.array(rec["text"], dtype=object)
            out["cast"] = np.array("\t".join(rec["cast_names"]), dtype=object)
            out["clip"] = np.array(f"{rec['movie_id']} {float(rec['start']):.0f}-"
                                   f"{float(rec['end']):.0f} s", dtype=object)
            out["span"] = np.array(f"{rec['movie_id']}\t{float(rec['start'])!r}\t"
                                   f"{float(rec['end'])!r}", dtype=object)  # EMScore's frames
        return out

    def token_ids(self, pointer_text: str, cast: list[str], role_mask: np.ndarray) -> list[int]:
        lookup = {w: i for i, w in enumerate(self.words)}
        V = len(self.words)
        ids: list[int] = []
        for t in segments(pointer_text):
            if t.startswith("@"):
                k = int(t[1:])
                if self.pointer and k < self.max_roles and role_mask[k]:
                    ids.append(V + k)
                    continue
                ids.extend(lookup.get(w, UNK) for w in words(cast[k] if k < len(cast) else ""))
            else:
                ids.append(lookup.get(t, UNK))
        return ids


def frame_seconds(lo: int, hi: int, max_frames: int, sampling: str) -> np.ndarray:
    """Feature seconds lo..hi-1 of a clip, at most `max_frames` of them: the first ones
    ("first": upstream's reader keeps the first max_v_l = 40) or spread uniformly over the
    clip ("uniform")."""
    idx = np.arange(lo, hi)
    if len(idx) <= max_frames:
        return idx
    if sampling == "first":
        return idx[:max_frames]
    if sampling == "uniform":
        return idx[np.linspace(0, len(idx) - 1, max_frames).round().astype(int)]
    raise ValueError(f"data.frame_sampling={sampling!r}: choose one of {FRAME_SAMPLING}")


def _encode(cfg: Any, keep_text: bool) -> Encode:
    return Encode(MovieTable(cfg), tuple(vocab(cfg)), cfg.max_frames, cfg.max_tokens,
                  cfg.max_roles, cfg.max_genres, genre_vocab(cfg), cfg.frame_dim, cfg.face_dim,
                  cfg.faces, cfg.pointer, keep_text, cfg.get("l2_frames", True),
                  cfg.get("frame_sampling", "first"))


def clip_width(cfg: Any) -> int:
    """Width of the `clip` feature column (the release's CLIP frame features) of the movies
    config: the first movie that has them; ValueError when no movie has any."""
    table = MovieTable(cfg)
    table._open()
    for split, i in table._index.values():
        clip = table._sources[split][i]["clip"]
        if len(clip):
            return int(clip.shape[1])
    raise ValueError(f"no movie of movie101/{cfg.movies_config} has CLIP features: EMScore "
                     "needs features/clip/<movie>.mp4.npy.npz in data.manual_dir")


def genre_vocab(cfg: Any) -> tuple[str, ...]:
    """Every genre named by a narration of any split, sorted: genre g is embedding row
    `index(g)`, so no two genres share a row (upstream embeds 42 tags). ValueError naming
    `data.genres` when the embedding table has fewer rows than there are genres."""
    from tfds_builders import movie101

    key = (cfg.config, os.path.abspath(cfg.data_dir))
    if key not in _GENRES:
        seen: set[str] = set()
        for split in movie101.split_names(cfg.config, cfg.data_dir, cfg.manual_dir or None):
            src = _source(cfg, cfg.config, split)
            for i in range(len(src)):
                seen.update(src[i]["genre"])
        _GENRES[key] = tuple(sorted(seen))
    if len(_GENRES[key]) > cfg.genres:
        raise ValueError(f"movie101/{cfg.config} names {len(_GENRES[key])} genres but "
                         f"data.genres={cfg.genres} embedding rows: raise data.genres")
    return _GENRES[key]


def all_cast_names(cfg: Any) -> list[str]:
    """Role names of every movie's cast over all splits of the narration config (rolef1.py
    looks for the names of all movies, so a name from another movie counts as predicted)."""
    from tfds_builders import movie101

    key = (cfg.config, os.path.abspath(cfg.data_dir))
    if key not in _NAMES:
        names: dict[str, None] = {}
        for split in movie101.split_names(cfg.config, cfg.data_dir, cfg.manual_dir or None):
            src = _source(cfg, cfg.config, split)
            for i in range(len(src)):
                names.update(dict.fromkeys(src[i]["cast_names"]))
        _NAMES[key] = list(names)
    return _NAMES[key]


def check(cfg: Any) -> dict[str, dict[str, int]]:
    """Logs each split's counts (`records.coverage`) and stops, with one line, a run that
    cannot mean what its config says: no usable training narration; the role pointer on
    without any training narration that has a pointer target (naming where they were looked
    for: the role file, or the portrait features); frame faces requested but none there."""
    from tfds_builders import movie101

    splits = movie101.split_names(cfg.config, cfg.data_dir, cfg.manual_dir or None)
    wanted = [s for s in dict.fromkeys([*cfg.train_split.split("+"), *splits])]
    cov = records.coverage(cfg, wanted)
    records.log_coverage(cfg, cov)
    train = collections.Counter()
    for part in cfg.train_split.split("+"):
        train.update(cov[part])
    where = (f"movie101/{cfg.movies_config} (features under data.manual_dir="
             f"{cfg.manual_dir!r}; layout in tfds_builders/movie101/features.py)")
    if not train["used"]:
        raise ValueError(f"no {cfg.train_split} narration of movie101/{cfg.config} has a movie "
                         f"with CLIP/S3D features in {where}")
    if cfg.pointer and not train["with_portraits"]:
        raise ValueError(f"data.pointer=True but no {cfg.train_split} narration has a portrait "
                         f"feature in {where}: the role pointer could never point (set "
                         "data.pointer=False for a model without it)")
    if cfg.pointer and not train["with_role_targets"]:
        raise ValueError(f"data.pointer=True but no {cfg.train_split} narration of "
                         f"movie101/{cfg.config} has a role-pointer target: "
                         f"{pointer_source(cfg)}")
    if cfg.faces and not train["with_faces"]:
        raise ValueError(f"data.faces={cfg.faces} but no {cfg.train_split} narration has frame "
                         f"face features in {where} (data.faces=0: the w/o f_v model)")
    return cov


def pointer_source(cfg: Any) -> str:
    """Where a config's `@k` pointer targets come from, for error messages."""
    from tfds_builders import movie101

    where = movie101.pointer_targets(cfg.config, cfg.manual_dir or None)
    if where is None:
        return (f"movie101/{cfg.config} has none (only v1_narration reads the release's "
                "narration_role/ files): set data.pointer=False")
    return f"they come from {where}"


def prepare(cfg: Any) -> None:
    """Builds the narration and movies datasets and the vocabulary (before any workers)."""
    from tfds_builders import movie101

    movie101.prepare(cfg.movies_config, cfg.data_dir, cfg.manual_dir or None)
    vocab(cfg)
    genre_vocab(cfg)


def train_dataset(cfg: Any, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """Endless, per-epoch reshuffled batches for one process."""
    prepare(cfg)
    return pipeline.train_stream(records.usable_source(cfg, cfg.train_split),
                                 [_encode(cfg, False)], batch_size, seed, process_index,
                                 process_count, cfg.num_workers)


def eval_dataset(cfg: Any, split: str, batch_size: int,
                 max_examples: int = 0) -> pipeline.EvalStream:
    """The split's usable narrations (`records.usable`), with `ref`/`cast` text columns."""
    return pipeline.eval_stream(records.usable_source(cfg, split), [_encode(cfg, True)],
                                batch_size, max_examples=max_examples)
