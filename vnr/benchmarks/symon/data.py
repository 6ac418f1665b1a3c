"""Grain pipelines for the SYMON tasks: segment ordering (§6.2) and retrieval (§7.1).

Records come from `tfds_builders.symon.data_source` (one per summary video, features
[T, D] at `fps`). Items are enumerated once per split (`ItemSource`, picklable; this
reads every record of the split once, features included) and built per item in the
grain workers (each item re-reads its video record; the last one is cached):

Ordering (`task="order"`), one item per usable cut c: segment 1 = [c - S, c),
segment 2 = [c, c + S) with S = `segment_seconds` (4 s), both inside the trimmed
video and the features, no other cut strictly inside (c - S, c + S), and at least
one narration sentence overlapping [c - S, c + S) (their text, joined in order,
is the narration). The two segments are presented in a random order (training:
fresh each epoch; evaluation: fixed by the item index):

  seg_a, seg_b  float32 [B, F, D]   F = S * fps frames
  tokens        int32   [B, L]      narration tokens (vnr.data.text)
  label         int32   [B]         1 if seg_a is the earlier segment
  valid         bool    [B]         False on evaluation padding

Retrieval (`task="retrieval"`), one item per narration sentence k: the segment is
the sentence's span [start_k, end_k) of features (at least one frame; sampled
uniformly down to `max_frames`), the text is sentence k. Long-term memory
(Eq. 6): among the previous `memory_window` (10) sentences j of the same video,
the one maximising (1 + E_kj) * mean cosine(frames of k, frames of j), where
E_kj = the number of person names sentences k and j share (builder's name pass)
and the mean cosine runs over all frame pairs; its frames and sentence are
appended (item 0 of a video has no memory: empty memory masks).

  frames [B, F, D], frame_mask [B, F]; tokens [B, L]
  mem_frames [B, F, D], mem_frame_mask [B, F]; mem_tokens [B, L]
  video, movie int32 [B] (split-local ids), center float32 [B] (s), valid bool [B]
"""

from __future__ import annotations

import dataclasses
from typing import Any

import grain
import numpy as np

from vnr.data import pipeline, text


def _source(cfg: Any, split: str):
    from tfds_builders import symon

    return symon.data_source(cfg.config, split, data_dir=cfg.data_dir,
                             manual_dir=cfg.manual_dir or None, build=True)


def fps_of(cfg: Any) -> float:
    from tfds_builders import symon

    return symon.metadata(cfg.config)[1]


def _frames(feats: np.ndarray, start: float, end: float, fps: float) -> np.ndarray:
    a = int(np.floor(start * fps))
    b = max(int(np.ceil(end * fps)), a + 1)
    return feats[a:min(b, len(feats))]


def _sample(frames: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly sampled/padded to n rows -> (frames [n, D], mask [n])."""
    out = np.zeros((n, frames.shape[1]), np.float32)
    mask = np.zeros((n,), bool)
    if len(frames) > n:
        frames = frames[np.linspace(0, len(frames) - 1, n).round().astype(int)]
    out[:len(frames)] = frames
    mask[:len(frames)] = True
    return out, mask


def _unit_mean(frames: np.ndarray) -> np.ndarray:
    x = frames / np.maximum(np.linalg.norm(frames, axis=1, keepdims=True), 1e-8)
    return x.mean(0)


def memory_choice(frames: list[np.ndarray], names: list[str], k: int, window: int) -> int:
    """Eq. 6: index of the previous segment (within `window`) most similar to k, or -1."""
    if k == 0:
        return -1
    mine = set(filter(None, names[k].split("|")))
    mk = _unit_mean(frames[k])
    best, best_j = -np.inf, -1
    for j in range(max(0, k - window), k):
        shared = len(mine & set(filter(None, names[j].split("|"))))
        score = (1 + shared) * float(mk @ _unit_mean(frames[j]))
        if score > best:
            best, best_j = score, j
    return best_j


def order_items(rec: dict, fps: float, seconds: float) -> list[tuple[float, str]]:
    """(cut time, narration) of the usable cuts of one video (rules in the docstring)."""
    cuts, lo, hi = rec["cuts"], float(rec["trim"][0]), float(rec["trim"][1])
    t_max = len(rec["features"]) / fps
    out = []
    for c in cuts:
        c = float(c)
        if c - seconds < lo or c + seconds > min(hi, t_max):
            continue
        if np.any((cuts > c - seconds) & (cuts < c + seconds) & (cuts != c)):
            continue
        over = [s for s, a, b in zip(rec["sentences"], rec["starts"], rec["ends"])
                if a < c + seconds and b > c - seconds]
        if over:
            out.append((c, " ".join(over)))
    return out


class ItemSource:
    """Random access to the items of one split (enumerated once; videos read lazily)."""

    def __init__(self, cfg: Any, split: str, task: str):
        self.videos = _source(cfg, split)
        self.task, self.fps = task, fps_of(cfg)
        self.seconds = float(cfg.segment_seconds)
        self.items: list[tuple[int, int, float, str]] = []  # (video, k, cut time, narration)
        movies: dict[str, int] = {}
        self.movie_of: list[int] = []
        for v in range(len(self.videos)):
            rec = self.videos[v]
            self.movie_of.append(movies.setdefault(rec["movie_id"], len(movies)))
            if task == "order":
                self.items += [(v, i, c, s) for i, (c, s) in
                               enumerate(order_items(rec, self.fps, self.seconds))]
            else:
                self.items += [(v, k, 0.0, "") for k in range(len(rec["sentences"]))]
        self._cache: tuple[int, dict] | None = None

    def __len__(self) -> int:
        return len(self.items)

    def video(self, v: int) -> dict:
        if self._cache is None or self._cache[0] != v:
            self._cache = (v, self.videos[v])
        return self._cache[1]

    def __getitem__(self, index: int) -> dict:
        v, k, cut, narration = self.items[int(index)]
        return {"video": v, "k": k, "cut": cut, "narration": narration,
                "movie": self.movie_of[v], "index": int(index)}

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _cache=None)


@dataclasses.dataclass(frozen=True)
class EncodeOrder(grain.transforms.RandomMap):
    """Builds one ordering example; the presentation order is random (training)."""

    source: ItemSource
    max_tokens: int
    vocab_size: int
    fixed: bool = False  # evaluation: the order is fixed by the item index

    def random_map(self, item: dict, rng: np.random.Generator) -> dict:
        rec = self.source.video(item["video"])
        fps, s, c = self.source.fps, self.source.seconds, item["cut"]
        n = int(round(s * fps))
        first = rec["features"][int(round((c - s) * fps)):][:n]
        second = rec["features"][int(round(c * fps)):][:n]
        swap = (item["index"] % 2 == 1) if self.fixed else bool(rng.random() < 0.5)
        a, b = (second, first) if swap else (first, second)
        return {"seg_a": np.asarray(a, np.float32), "seg_b": np.asarray(b, np.float32),
                "tokens": text.tokenize(item["narration"], self.vocab_size, self.max_tokens),
                "label": np.int32(0 if swap else 1), "valid": np.bool_(True)}


@dataclasses.dataclass(frozen=True)
class EncodeRetrieval(grain.transforms.Map):
    """Builds one retrieval example with its long-term memory."""

    source: ItemSource
    max_frames: int
    max_tokens: int
    vocab_size: int
    window: int
    memory: bool

    def map(self, item: dict) -> dict:
        rec = self.source.video(item["video"])
        fps, k = self.source.fps, item["k"]
        lo = max(0, k - self.window)
        segs = {j: _frames(rec["features"], rec["starts"][j], rec["ends"][j], fps)
                for j in range(lo, k + 1)}
        frames, mask = _sample(segs[k], self.max_frames)
        out = {"frames": frames, "frame_mask": mask,
               "tokens": text.tokenize(rec["sentences"][k], self.vocab_size, self.max_tokens),
               "video": np.int32(item["video"]), "movie": np.int32(item["movie"]),
               "center": np.float32((rec["starts"][k] + rec["ends"][k]) / 2),
               "valid": np.bool_(True)}
        j = -1
        if self.memory:
            seg_list = [segs.get(i, segs[k][:0]) for i in range(k + 1)]
            j = memory_choice(seg_list, rec["names"], k, self.window)
        if j >= 0:
            out["mem_frames"], out["mem_frame_mask"] = _sample(segs[j], self.max_frames)
            out["mem_tokens"] = text.tokenize(rec["sentences"][j], self.vocab_size,
                                              self.max_tokens)
        else:
            out["mem_frames"] = np.zeros_like(frames)
            out["mem_frame_mask"] = np.zeros_like(mask)
            out["mem_tokens"] = np.zeros((self.max_tokens,), np.int32)
        return out


def _encoder(cfg: Any, source: ItemSource, task: str, fixed: bool):
    if task == "order":
        return EncodeOrder(source, cfg.max_tokens, cfg.vocab_size, fixed)
    return EncodeRetrieval(source, cfg.max_frames, cfg.max_tokens, cfg.vocab_size,
                           cfg.memory_window, cfg.memory)


def _apply(ds: grain.MapDataset, enc: Any) -> grain.MapDataset:
    return ds.random_map(enc) if isinstance(enc, grain.transforms.RandomMap) else ds.map(enc)


def train_dataset(cfg: Any, task: str, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """Endless, per-epoch reshuffled batches of `task` items for one process."""
    source = ItemSource(cfg, cfg.train_split, task)
    if len(source) < batch_size * process_count:
        raise ValueError(f"symon/{cfg.config} {cfg.train_split} has {len(source)} {task} items, "
                         f"fewer than one global batch ({batch_size * process_count})")
    ds = grain.MapDataset.source(source).seed(seed).shuffle().repeat(None)
    ds = _apply(ds, _encoder(cfg, source, task, fixed=False))
    ds = ds.batch(batch_size, drop_remainder=True)[process_index::process_count]  # p-th block
    return pipeline.to_iter(ds, cfg.num_workers)


def eval_dataset(cfg: Any, task: str, split: str, batch_size: int, max_examples: int = 0,
                 process_index: int = 0, process_count: int = 1):
    """One pass over `split` in item order: (dataset of per-process batches, item count)."""
    source = ItemSource(cfg, split, task)
    ds = grain.MapDataset.source(source)
    if max_examples:
        ds = ds[:max_examples]
    n = len(ds)
    ds = _apply(ds.seed(0), _encoder(cfg, source, task, fixed=True))
    ds = ds[process_index::process_count].batch(batch_size // process_count,
                                                drop_remainder=False)
    return pipeline.to_iter(ds, cfg.num_workers), n


def num_batches(n: int, process_count: int, local_batch: int) -> int:
    """Eval batches per process for n items, equal on every process."""
    return pipeline.eval_batch_count(n, process_count, local_batch)
