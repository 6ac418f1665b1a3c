"""Grain pipelines for Movie101 TNG local grounding (RNL): a window around each narration.

A window of `window` seconds containing the narration is cut from its movie's per-second
features (training: a random offset per epoch; evaluation: a fixed offset from a hash of
the narration id, i.e. the oracle anchor of the paper's local-grounding protocol) and
average-pooled into `n_clips` clips. Batches:

  clips     float32 [B,n,Dc+Ds]   faces float32 [B,n,F,Df] (clip means)
  tokens    int32 [B,L]           hashed words of the narration (`vnr.data.text.tokenize`);
                                  with data.text_encoder its BERT ids, and token_mask bool
                                  [B,L] (`tng_bert`, Table 5's RNL rows)
  words     float32 [B,L,Dw], word_mask bool [B,L]   with data.word_vectors only: the
                                  narration's word vectors (`tng_glove`, Table 5's 2D-TAN)
  portraits float32 [B,R,Df], portrait_mask bool [B,R]   the named roles' portrait features
  gt        float32 [B,2]         the narration span in clip units (0..n)
  gt_index  int32 [B,2]           with data.index_gt only (`rnl.py`, upstream's RNL): the
                                  first and last clip it touches as upstream's loader
                                  labels it, int(t) of each end, clipped to 0..n-1
  valid     bool [B]              False for eval padding

With data.s3d_only the clips are the S3D part alone (the last data.s3d_dim values of each
second; upstream's RNL reads S3D only, its CLIP load commented out).

Global shot retrieval (§5.2): `shot_train_dataset` pairs each narration with one of the
`shot_len`-second shots of its movie aligned with it (`grounding_metrics.shot_alignment`;
a random one when several are; the most-overlapping shot when none passes the rule, e.g. a
short narration split evenly by a shot boundary); with data.shot_source = "rtemp" the
records are the release's Movie101-R-temp shots (builder config v1_shots) and each is
paired with its own caption, on its movie's own offset grid. Batches: shot float32 [B,L,Dc+Ds],
shot_mask bool [B,L], tokens int32 [B,T], movie int32 [B] (crc32 of the id), shot_index
int32 [B] (to mask in-batch duplicates of the same shot). `movie_frames` / `split_movies`
give the evaluation's per-movie seconds and narrations.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any, NamedTuple

import grain
import numpy as np

from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import records, tng_bert, tng_glove
from vnr.benchmarks.movie101.records import MovieTable
from vnr.data import pipeline, text


@dataclasses.dataclass(frozen=True)
class Query:
    """A narration's query inputs, one recipe for training, evaluation and Table 6's
    two-stage windows: `tokens` (hashed words; with `text_encoder`, a BERT checkpoint, its
    first `text_tokens` ids and `token_mask`), plus `words` / `word_mask` when `words`
    holds word vectors (a 2D-TAN GloVe run)."""

    vocab_size: int
    max_tokens: int
    text_encoder: str = ""
    text_tokens: int = 0
    words: Any = None  # tng_glove's WordVectors (data.word_vectors), else None
    max_word_chars: int = 4

    @classmethod
    def from_config(cls, cfg: Any) -> Query:
        """The query recipe of a run's `data` config (loads its word vectors if asked)."""
        return cls(int(cfg.vocab_size), int(cfg.max_tokens), str(cfg.get("text_encoder", "")),
                   int(cfg.get("text_encoder_tokens", 512) or 512),
                   tng_glove.load(cfg) if tng_glove.requested(cfg) else None,
                   int(cfg.get("max_word_chars", 4)))

    def __call__(self, narration: str) -> dict[str, np.ndarray]:
        out = query_tokens(narration, self.text_encoder, self.vocab_size, self.max_tokens,
                           self.text_tokens)
        if self.words is not None:
            out["words"], out["word_mask"] = tng_glove.embed(
                self.words, narration, self.max_tokens, self.max_word_chars)
        return out


@dataclasses.dataclass(frozen=True)
class Window(grain.transforms.RandomMap):
    table: MovieTable
    window: int
    n_clips: int
    max_roles: int
    face_dim: int
    faces: int
    train: bool
    query: Query
    s3d_dim: int = 0  # > 0: clips are the last s3d_dim values (S3D) only
    index_gt: bool = False  # add gt_index (upstream RNL's clip labels)

    def random_map(self, rec: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        movie = self.table[rec["movie_id"]]
        T, W = movie_seconds(movie, rec["movie_id"]), self.window
        s, e = float(rec["start"]), float(min(rec["end"], T))
        lo, hi = max(0.0, e - W), max(0.0, min(s, T - W))
        if self.train:
            u = rng.random()
        else:
            u = (zlib.crc32(rec["id"].encode()) % 1000) / 999.0
        ws = int(np.floor(lo + u * max(hi - lo, 0.0))) if hi >= lo else int(max(0.0, T - W))
        clips, faces = window_features(movie, ws, W, self.n_clips, self.faces, self.face_dim)
        if self.s3d_dim:
            if movie["s3d"].shape[-1] != self.s3d_dim:
                raise ValueError(f"movie {rec['movie_id']}: S3D features of width "
                                 f"{movie['s3d'].shape[-1]}, data.s3d_dim={self.s3d_dim}")
            clips = np.ascontiguousarray(clips[:, -self.s3d_dim:])
        n = self.n_clips
        scale = n / W
        gt = np.array([np.clip((s - ws) * scale, 0, n), np.clip((e - ws) * scale, 0, n)],
                      np.float32)
        if gt[1] <= gt[0]:
            gt[1] = min(n, gt[0] + scale)
        portraits, pmask = portrait_features(movie, rec["roles"], self.max_roles, self.face_dim)
        out = {"clips": clips, "faces": faces, **self.query(rec["text"]),
               "portraits": portraits, "portrait_mask": pmask, "gt": gt,
               "window_start": np.float32(ws), "valid": np.array(True)}
        if self.index_gt:  # ClipDataset1: int(fps * (t - window start)), fps = clips / s
            first = min(int((s - ws) * scale), n - 1)
            out["gt_index"] = np.array([max(first, 0), min(max(int((e - ws) * scale), first),
                                                          n - 1)], np.int32)
        return out


def query_tokens(narration: str, text_encoder: str, vocab_size: int, max_tokens: int,
                 text_tokens: int = 0) -> dict[str, np.ndarray]:
    """A narration's `tokens`: `max_tokens` hashed words, or with `text_encoder` (a BERT
    checkpoint, `tng_bert`) its first `text_tokens` ids and their `token_mask`."""
    if text_encoder:
        ids, mask = tng_bert.encode(text_encoder, narration, text_tokens or max_tokens)
        return {"tokens": ids, "token_mask": mask}
    return {"tokens": text.tokenize(narration, vocab_size, max_tokens)}


def portrait_features(movie: dict, roles: Any, max_roles: int, face_dim: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The named roles' portrait face features [R, Df] and mask [R] (first `max_roles`)."""
    portraits = np.zeros((max_roles, face_dim), np.float32)
    pmask = np.zeros((max_roles,), bool)
    pf, pm = movie["portrait_face"], movie["portrait_face_mask"]
    for j, k in enumerate(dict.fromkeys(int(r) for r in roles)):
        if j < max_roles and k < len(pf) and pm[k]:
            portraits[j], pmask[j] = pf[k], True
    return portraits, pmask


def window_features(movie: dict, ws: int, W: int, n: int, faces: int, face_dim: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Seconds ws..ws+W (zeros past the end) pooled into n clips: (clips, faces)."""
    clip, s3d, face = movie["clip"], movie["s3d"], movie["face"]
    T = min(len(clip), len(s3d))
    secs = np.arange(ws, ws + W)
    ok = secs < T
    idx = np.minimum(secs, T - 1)
    feats = np.concatenate([clip[idx], s3d[idx]], -1).astype(np.float32) * ok[:, None]
    fc = np.zeros((W, faces, face_dim), np.float32)
    if len(face):
        f = face[np.minimum(idx, len(face) - 1), :faces].astype(np.float32)
        fc[:, : f.shape[1]] = f * ok[:, None, None]
    return (feats.reshape(n, W // n, -1).mean(1),
            fc.reshape(n, W // n, faces, face_dim).mean(1))


def _window(cfg: Any, train: bool) -> Window:
    if cfg.window % cfg.n_clips:
        raise ValueError(f"data.window={cfg.window} must be a multiple of data.n_clips="
                         f"{cfg.n_clips}")
    return Window(MovieTable(cfg), cfg.window, cfg.n_clips, cfg.max_roles, cfg.face_dim,
                  cfg.faces, train, Query.from_config(cfg),
                  int(cfg.s3d_dim) if cfg.get("s3d_only", False) else 0,
                  bool(cfg.get("index_gt", False)))


def prepare(cfg: Any) -> None:
    from tfds_builders import movie101

    movie101.prepare(cfg.config, cfg.data_dir, cfg.manual_dir or None)
    movie101.prepare(cfg.movies_config, cfg.data_dir, cfg.manual_dir or None)


def check(cfg: Any, faces: bool = True) -> None:
    """Logs each split's counts (`records.coverage`: narrations left out by the rule of
    `records`, without cast / faces / portraits); no usable training narration, or frame
    faces requested (`faces` and data.faces) where there are none, stop the run with one
    line."""
    from tfds_builders import movie101

    cov = records.coverage(cfg, movie101.split_names(cfg.config, cfg.data_dir,
                                                     cfg.manual_dir or None))
    records.log_coverage(cfg, cov)
    train = cov.get(cfg.train_split, {})
    where = f"movie101/{cfg.movies_config} (features under data.manual_dir={cfg.manual_dir!r})"
    if not train.get("used"):
        raise ValueError(f"no {cfg.train_split} narration of movie101/{cfg.config} has a movie "
                         f"with CLIP/S3D features in {where}")
    if faces and cfg.faces and not train.get("with_faces"):
        raise ValueError(f"data.faces={cfg.faces} but no {cfg.train_split} narration has frame "
                         f"face features in {where} (data.faces=0: the w/o f_v model)")


def train_dataset(cfg: Any, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    prepare(cfg)
    return pipeline.train_stream(records.usable_source(cfg, cfg.train_split),
                                 [_window(cfg, True)], batch_size, seed, process_index,
                                 process_count)


def eval_dataset(cfg: Any, split: str, batch_size: int,
                 max_examples: int = 0) -> pipeline.EvalStream:
    """The split's usable narrations (`records.usable`)."""
    return pipeline.eval_stream(records.usable_source(cfg, split), [_window(cfg, False)],
                                batch_size, max_examples=max_examples)


def movie_seconds(movie: dict, movie_id: str) -> int:
    """Seconds with both CLIP and S3D features (a clear error when there are none)."""
    clip, s3d = movie["clip"], movie["s3d"]
    if not len(clip) or not len(s3d):
        raise ValueError(f"movie {movie_id} has no clip/s3d features: TNG needs features/ "
                         "in manual_dir")
    return min(len(clip), len(s3d))


def movie_frames(movie: dict, movie_id: str) -> np.ndarray:
    """Per-second CLIP ⊕ S3D features [T, Dc+Ds] of a movie record."""
    T = movie_seconds(movie, movie_id)
    clip, s3d = movie["clip"], movie["s3d"]
    return np.concatenate([clip[:T], s3d[:T]], -1).astype(np.float32)


def shot_features(frames: np.ndarray, spans: np.ndarray, shot_len: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """frames [T, D], shot spans [S, 2] in seconds -> (shots [S, shot_len, D] zero-padded,
    mask [S, shot_len]): seconds floor(start) .. ceil(end) - 1 of each shot, at most
    shot_len of them, those past the movie's end left out."""
    T = len(frames)
    out = np.zeros((len(spans), shot_len, frames.shape[1]), np.float32)
    mask = np.zeros((len(spans), shot_len), bool)
    for i, (a, b) in enumerate(np.asarray(spans, np.float64)):
        lo = int(np.floor(a))
        hi = min(int(np.ceil(b)), lo + shot_len, T)
        if hi > lo:
            out[i, : hi - lo] = frames[lo:hi]
            mask[i, : hi - lo] = True
    return out, mask


def given_shots(cfg: Any) -> bool:
    """True when the split's records are the shots themselves (data.shot_source = "rtemp":
    the release's Movie101-R-temp files, builder config v1_shots), False when movies are
    cut every shot_len seconds and the records are narrations ("cut")."""
    src = cfg.get("shot_source", "cut")
    if src not in ("cut", "rtemp"):
        raise ValueError(f"data.shot_source={src!r}: choose 'cut' or 'rtemp'")
    return src == "rtemp"


def shot_offsets(cfg: Any, split: str) -> dict[str, float]:
    """movie -> its Movie101-R-temp grid offset (start of its first listed shot in `split`
    of the v1_shots config); {} unless data.shot_source = "rtemp"."""
    if not given_shots(cfg):
        return {}
    src = records.source(cfg, cfg.config, split)
    out: dict[str, float] = {}
    for i in range(len(src)):
        r = src[i]
        out[r["movie_id"]] = min(float(r["start"]), out.get(r["movie_id"], np.inf))
    return out


def movie_code(movie_id: str) -> int:
    return zlib.crc32(movie_id.encode()) % 2**31


@dataclasses.dataclass(frozen=True)
class ShotPair(grain.transforms.RandomMap):
    """A (shot, text) pair: the record's own span when `given` (a Movie101-R-temp shot and
    its caption), else an aligned shot of the movie cut every shot_len seconds."""

    table: MovieTable
    shot_len: int
    max_tokens: int
    vocab_size: int
    given: bool = False

    def random_map(self, rec: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        movie = self.table[rec["movie_id"]]
        T = movie_seconds(movie, rec["movie_id"])
        q = np.array([float(rec["start"]), float(rec["end"])])
        if self.given:
            span, k = q, int(np.floor(q[0]))  # one record per shot: its start names it
        else:
            spans = gm.cut_shots(float(T), float(self.shot_len))
            pos = np.flatnonzero(gm.shot_alignment(spans, q))
            if len(pos):
                k = int(rng.choice(pos))
            else:
                k = int(np.argmax(np.minimum(spans[:, 1], q[1])
                                  - np.maximum(spans[:, 0], q[0])))
            span = spans[k]
        lo = min(int(np.floor(span[0])), T)
        hi = min(lo + self.shot_len, T)
        part = np.concatenate([movie["clip"][lo:hi], movie["s3d"][lo:hi]], -1)
        shot, mask = shot_features(part, np.array([[0.0, span[1] - lo]]), self.shot_len)
        return {"shot": shot[0], "shot_mask": mask[0],
                "tokens": text.tokenize(rec["text"], self.vocab_size, self.max_tokens),
                "movie": np.int32(movie_code(rec["movie_id"])), "shot_index": np.int32(k)}


def shot_train_dataset(cfg: Any, batch_size: int, seed: int, process_index: int = 0,
                       process_count: int = 1) -> grain.IterDataset:
    prepare(cfg)
    pair = ShotPair(MovieTable(cfg), cfg.shot_len, cfg.max_tokens, cfg.vocab_size,
                    given_shots(cfg))
    return pipeline.train_stream(records.usable_source(cfg, cfg.train_split), [pair],
                                 batch_size, seed, process_index, process_count)


class MovieRows(NamedTuple):
    """The movies a packed shot / narration stream holds (`tng_global.movie_rows`), in order:
    movie id -> its narration records, per movie its candidate shots [S, 2] in seconds and
    its feature seconds. The same on every process (every process packs every movie)."""

    movies: dict[str, list[dict]]
    spans: list[Any]
    durations: list[int]


def split_movies(cfg: Any, split: str, max_examples: int = 0) -> dict[str, list[dict]]:
    """movie_id -> its narration records (the first `max_examples` usable ones of the split,
    `records.usable`, in order)."""
    src = records.usable_source(cfg, split)
    n = min(len(src), max_examples) if max_examples else len(src)
    out: dict[str, list[dict]] = {}
    for i in range(n):
        rec = src[i]
        out.setdefault(rec["movie_id"], []).append(rec)
    return out
