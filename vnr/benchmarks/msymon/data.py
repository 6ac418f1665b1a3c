"""Grain pipelines for clip/sentence alignment (M-SyMoN and YMS records).

A video is cut into clips: YMS records carry their own clip boundaries
(`clip_segmentation.txt`); M-SyMoN records are cut into their shots (`data.clips="shots"`:
the builder's `shot_begin` / `shot_end` from `cuts/<id>.txt`, Appendix A) or into
consecutive clips of `clip_seconds` (`"grid"`, the last one shorter). A clip's feature is
the mean of the feature rows (`fps` per second) it covers. Its ground-truth sentence is the
matched sentence whose annotated span holds the clip's midpoint
(`tfds_builders.msymon.gt_clip_labels`), else -1. Batches (padded to `max_clips` /
`max_sentences`; eval pads to the split's largest video):

  features     float32 [B, C, D]   mean feature per clip (zeros in text_only)
  clip_mask    bool    [B, C]
  clip_begin, clip_end float32 [B, C] seconds
  labels       int32   [B, C]      sentence index per clip, -1 none, -2 ignore (crop edge)
  tokens       int32   [B, S, L]   sentence tokens: hashed words (vnr.data.text) or, with
                                   `data.tokenizer` a checkpoint, its tokenizer's ids
  token_mask   bool    [B, S, L]   real tokens
  sent_mask    bool    [B, S]
  matched      bool    [B, S]      annotated as matched
  narr_begin, narr_end float32 [B, S] narration times (`narration_times` fills unknowns)
  narr_known   bool    [B, S]      the narration time came from subtitles
  language     int32   [B]         index in `LANGUAGES` (-1 unknown)
  frames       uint8   [B, C, F, S, S, 3]  clips from frames (`data.frames.per_clip` = F > 0,
                                   `frames.py`): F frames of each clip's stored pool, at
                                   random in training, the fixed `eval_picks` otherwise

Training takes a random window of at most `max_clips` clips and the sentences around it
(at most `max_sentences`); clips whose sentence falls outside get label -2 (ignored).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import grain
import numpy as np

from vnr.benchmarks.msymon import frames
from vnr.data import pipeline, text

LANGUAGES = ("en", "ch", "es", "fr", "pt", "hi", "ru")


def _weight(s: str) -> int:
    return max(1, len("".join(s.split())))


def narration_times(sentences: list[str], begin: np.ndarray, end: np.ndarray,
                    duration: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Narration intervals with unknown (NaN) ones estimated; returns (begin, end, known).

    Without subtitle times the narration is assumed to run continuously over the whole video
    at a constant rate: sentence i gets the share of [0, duration] proportional to its
    character count (spaces excluded), in order. Known times are kept as they are.
    """
    w = np.array([_weight(s) for s in sentences], np.float64)
    cum = np.concatenate([[0.0], np.cumsum(w)]) / max(w.sum(), 1.0) * duration
    known = np.isfinite(begin) & np.isfinite(end)
    nb = np.where(known, begin, cum[:-1]).astype(np.float32)
    ne = np.where(known, end, cum[1:]).astype(np.float32)
    return nb, ne, known


CLIPS = ("grid", "shots")


def cut_clips(rec: dict, clip_seconds: float, shots: bool = False
              ) -> tuple[np.ndarray, np.ndarray]:
    """The record's clip boundaries (YMS), its shots (`shots`), or fixed-length clips over
    its duration. A video without shots under `shots` is a one-line error naming its
    missing cuts file."""
    if len(rec.get("clip_begin", ())):
        return rec["clip_begin"].astype(np.float32), rec["clip_end"].astype(np.float32)
    if shots:
        if "shot_begin" not in rec or not len(rec["shot_begin"]):
            raise ValueError(f"video {rec.get('video_id', '?')!r} has no shots: its "
                             "cuts/<id>.txt was absent when the dataset was built (write it "
                             "with `python -m vnr.extract --model transnetv2`, then rebuild; or "
                             "cut a 3-s grid with data.clips=grid)")
        return rec["shot_begin"].astype(np.float32), rec["shot_end"].astype(np.float32)
    from tfds_builders.msymon import fixed_clips

    return fixed_clips(float(rec["duration"]), clip_seconds)


def pool_features(feats: np.ndarray | None, cb: np.ndarray, ce: np.ndarray, fps: float,
                  dim: int) -> np.ndarray:
    """Mean feature row over each clip's seconds: [C, dim] (zeros without features)."""
    out = np.zeros((len(cb), dim), np.float32)
    if feats is None or not len(feats):
        return out
    t = len(feats)
    for c, (b, e) in enumerate(zip(cb, ce, strict=True)):
        lo = min(int(math.floor(b * fps)), t - 1)
        hi = min(max(int(math.ceil(e * fps)), lo + 1), t)
        out[c] = feats[lo:hi].mean(0)
    return out


def video_arrays(rec: dict, clip_seconds: float, fps: float, dim: int,
                 pool: int = 0, shots: bool = False) -> dict[str, Any]:
    """Unpadded per-video arrays (clips, labels, narration) of one record; with `pool` > 0
    its stored frames as `frames` [C, pool, S, S, 3] (`frames.py`)."""
    from tfds_builders.msymon import gt_clip_labels

    cb, ce = cut_clips(rec, clip_seconds, shots)
    labels = gt_clip_labels(rec["begin"], rec["end"], rec["matched"], cb, ce)
    nb, ne, known = narration_times(rec["sentences"], rec["narr_begin"], rec["narr_end"],
                                    float(rec["duration"]))
    out = {"clip_begin": cb, "clip_end": ce, "labels": labels,
           "features": pool_features(rec.get("features"), cb, ce, fps, dim),
           "narr_begin": nb, "narr_end": ne, "narr_known": known,
           "matched": rec["matched"].astype(bool), "sentences": rec["sentences"]}
    if pool:
        f = rec["frames"]
        if len(f) != len(cb) * pool:
            raise ValueError(f"video {rec['video_id']!r}: its frame store holds {len(f)} frames, "
                             f"{len(cb)} clips x {pool} expected (delete the store to rebuild)")
        out["frames"] = f.reshape(len(cb), pool, *f.shape[1:])
    return out


def _pad(x: np.ndarray, n: int, fill: Any = 0) -> np.ndarray:
    out = np.full((n, *x.shape[1:]), fill, x.dtype)
    out[: len(x)] = x
    return out


def crop(v: dict, max_clips: int, max_sentences: int, rng: np.random.Generator) -> dict:
    """A random window of <= max_clips clips and the sentences it needs (<= max_sentences)."""
    c = len(v["labels"])
    s = len(v["sentences"])
    start = int(rng.integers(0, c - max_clips + 1)) if c > max_clips else 0
    cs = slice(start, start + max_clips)
    labels = v["labels"][cs].copy()
    seen = labels[labels >= 0]
    if len(seen):
        lo, hi = int(seen.min()), int(seen.max()) + 1
        while lo > 0 and not v["matched"][lo - 1]:  # unmatched neighbours: hard negatives
            lo -= 1
        while hi < s and not v["matched"][hi]:
            hi += 1
    else:
        lo, hi = 0, s
    if hi - lo > max_sentences:
        lo = int(rng.integers(lo, hi - max_sentences + 1))
        hi = lo + max_sentences
    labels = np.where(labels >= 0, np.where((labels >= lo) & (labels < hi), labels - lo, -2),
                      labels)
    out = {k: v[k][cs] for k in ("clip_begin", "clip_end", "features", "frames") if k in v}
    out.update({k: v[k][lo:hi] for k in ("narr_begin", "narr_end", "narr_known", "matched")})
    out.update(labels=labels.astype(np.int32), sentences=v["sentences"][lo:hi])
    return out


@dataclasses.dataclass(frozen=True)
class Encode(grain.transforms.RandomMap):
    """Record -> padded arrays (random crop when `train`; eval needs sizes that fit)."""

    max_clips: int
    max_sentences: int
    clip_seconds: float
    fps: float
    dim: int
    max_tokens: int
    vocab_size: int
    train: bool = False
    tokenizer: str = "hash"  # or a checkpoint tokenizer (`vnr.models.encoders.tokenizers`)
    per_clip: int = 0  # frames per clip from the stored pools (0: features only)
    pool: int = 0
    shots: bool = False  # clips are the record's shots (else the clip_seconds grid)

    def random_map(self, rec: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        v = video_arrays(rec, self.clip_seconds, self.fps, self.dim,
                         self.pool if self.per_clip else 0, self.shots)
        c, s = len(v["labels"]), len(v["sentences"])
        if self.train:
            v = crop(v, self.max_clips, self.max_sentences, rng)
        elif c > self.max_clips or s > self.max_sentences:
            raise ValueError(f"video {rec['video_id']!r} has {c} clips / {s} sentences, more than "
                             f"the eval sizes {self.max_clips} / {self.max_sentences}")
        c, s = len(v["labels"]), len(v["sentences"])
        tokens = np.zeros((self.max_sentences, self.max_tokens), np.int32)
        token_mask = np.zeros((self.max_sentences, self.max_tokens), bool)
        if self.tokenizer == text.HASH:
            for i, sent in enumerate(v["sentences"]):
                tokens[i] = text.tokenize(sent, self.vocab_size, self.max_tokens)
            token_mask = tokens > 0
        elif s:
            from vnr.models.encoders import tokenizers

            ids, mask = tokenizers.encode(tokenizers.resolve(self.tokenizer),
                                          list(v["sentences"]), self.max_tokens)
            tokens[:s], token_mask[:s] = ids, mask
        lang = rec.get("language", "")
        out = {
            "features": _pad(v["features"], self.max_clips),
            "clip_mask": np.arange(self.max_clips) < c,
            "clip_begin": _pad(v["clip_begin"], self.max_clips),
            "clip_end": _pad(v["clip_end"], self.max_clips),
            "labels": _pad(v["labels"], self.max_clips, -1),
            "tokens": tokens,
            "token_mask": token_mask,
            "sent_mask": np.arange(self.max_sentences) < s,
            "matched": _pad(v["matched"], self.max_sentences, False),
            "narr_begin": _pad(v["narr_begin"], self.max_sentences),
            "narr_end": _pad(v["narr_end"], self.max_sentences),
            "narr_known": _pad(v["narr_known"], self.max_sentences, False),
            "language": np.int32(LANGUAGES.index(lang) if lang in LANGUAGES else -1),
        }
        if self.per_clip:
            out["frames"] = self._frames(v["frames"], rng)
        return out

    def _frames(self, pools: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """uint8 [max_clips, per_clip, S, S, 3]: each clip's frames (`frames.py`)."""
        c = len(pools)
        idx = (frames.train_picks(rng, c, self.pool, self.per_clip) if self.train else
               np.tile(frames.eval_picks(self.pool, self.per_clip), (c, 1)))
        out = np.zeros((self.max_clips, self.per_clip, *pools.shape[2:]), np.uint8)
        out[:c] = pools[np.arange(c)[:, None], idx]
        return out


class Concat:
    """Random access over several sources in sequence (picklable if they are)."""

    def __init__(self, sources: list):
        self.sources = list(sources)
        self.offsets = np.cumsum([0] + [len(s) for s in self.sources])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        k = int(np.searchsorted(self.offsets, index, side="right") - 1)
        if not 0 <= index < len(self) or k >= len(self.sources):
            raise IndexError(f"index {index} out of range for {len(self)} records")
        return self.sources[k][index - int(self.offsets[k])]


def source(cfg: Any, split: str):
    """The records of `split` ("a+b" concatenates splits) of the configured builder."""
    names = [s for s in split.split("+") if s]
    if cfg.builder == "yms":
        from tfds_builders.msymon import yms as builder

        srcs = [builder.data_source(cfg.config, s, cfg.data_dir, cfg.manual_dir or None,
                                    dim=cfg.dim, fps=cfg.fps) for s in names]
    else:
        from tfds_builders import msymon as builder

        bc = builder.resolve_config(cfg.config, cfg.dim, cfg.fps)
        srcs = [builder.data_source(bc, s, cfg.data_dir, cfg.manual_dir or None) for s in names]
    if frames.per_clip(cfg):  # clips from frames: each split's stored pools
        cut = functools.partial(_cut, shots=shots(cfg))
        srcs = [frames.StoredPools(cfg, s, src, cut) for s, src in zip(names, srcs, strict=True)]
    return srcs[0] if len(srcs) == 1 else Concat(srcs)


def records_only(cfg: Any) -> Any:
    """A copy of the data config whose `source` gives the builder's records (no frames)."""
    plain = cfg.copy_and_resolve_references()
    plain.frames.per_clip = 0
    return plain


def train_draws(cfg: Any, sample: int = 512) -> float:
    """Training draws (one random `max_clips` window of a video each, the videos in turn) in
    which the built training split's clips are seen once in expectation: videos x mean clips
    / mean min(clips, max_clips), from up to `sample` evenly spaced videos (their records
    only: no frame store is read)."""
    src = source(records_only(cfg), cfg.train_split)
    picks = np.unique(np.linspace(0, len(src) - 1, min(len(src), sample)).round().astype(int))
    clips = np.array([len(cut_clips(src[int(i)], cfg.clip_seconds, shots(cfg))[0])
                      for i in picks], float)
    seen = np.minimum(clips, cfg.max_clips).mean()
    return len(src) * float(clips.mean()) / max(float(seen), 1.0)


def shots(cfg: Any) -> bool:
    """Whether `cfg` cuts M-SyMoN videos into their shots (`data.clips`)."""
    clips = cfg.get("clips", "grid")
    if clips not in CLIPS:
        raise ValueError(f"data.clips={clips!r}: one of {CLIPS}")
    return clips == "shots"


def _cut(rec: dict, clip_seconds: float, shots: bool) -> tuple[np.ndarray, np.ndarray]:
    return cut_clips(rec, clip_seconds, shots)


def _supervised(cfg: Any, rec: dict) -> bool:
    """Whether some clip of `rec` has a ground-truth sentence (`video_arrays`' labels)."""
    from tfds_builders.msymon import gt_clip_labels

    cb, ce = cut_clips(rec, cfg.clip_seconds, shots(cfg))
    return bool((gt_clip_labels(rec["begin"], rec["end"], rec["matched"], cb, ce) >= 0).any())


def _encode(cfg: Any, max_clips: int, max_sentences: int, train: bool) -> Encode:
    per_clip = frames.per_clip(cfg)
    return Encode(max_clips, max_sentences, cfg.clip_seconds, cfg.fps,
                  cfg.dim if cfg.features else 1, cfg.max_tokens, cfg.vocab_size, train,
                  cfg.get("tokenizer", text.HASH), per_clip,
                  int(cfg.frames.pool) if per_clip else 0, shots(cfg))


def train_dataset(cfg: Any, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """Endless, per-epoch reshuffled batches of random crops for one process (a split with
    no clip inside a matched sentence's span is refused: `pipeline.require_supervision`)."""
    src = source(cfg, cfg.train_split)
    pipeline.require_supervision(
        src, functools.partial(_supervised, cfg), f"training split {cfg.train_split!r} of "
        f"{cfg.builder}/{cfg.config}", "has a clip inside a sentence annotated as matched")
    return pipeline.train_stream(src,
                                 [_encode(cfg, cfg.max_clips, cfg.max_sentences, True)],
                                 batch_size, seed, process_index, process_count, cfg.num_workers)


def eval_sizes(src: Any, cfg: Any, max_examples: int = 0) -> tuple[int, int]:
    """(clips, sentences) of the split's largest video, rounded up to a multiple of 16."""
    n = min(len(src), max_examples) if max_examples else len(src)
    c = s = 1
    for i in range(n):
        rec = src[i]
        c = max(c, len(cut_clips(rec, cfg.clip_seconds, shots(cfg))[0]))
        s = max(s, len(rec["sentences"]))
    up = lambda x: -(-x // 16) * 16  # noqa: E731
    return up(c), up(s)


def eval_dataset(cfg: Any, split: str, batch_size: int,
                 max_examples: int = 0) -> pipeline.EvalStream:
    """One pass over `split`'s videos, padded to its largest (`eval_sizes`)."""
    src = source(cfg, split)
    mc, ms = eval_sizes(src, cfg, max_examples)
    return pipeline.eval_stream(src, [_encode(cfg, mc, ms, False)], batch_size,
                                max_examples=max_examples)
