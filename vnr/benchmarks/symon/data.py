"""Grain pipelines for the SYMON tasks: segment ordering (§6.2) and retrieval (§7.1).

Records come from `tfds_builders.symon.data_source` (one per summary video, features
[T, D] at `fps`). Items are enumerated once per split (`ItemSource`, picklable; this
reads every record of the split once, features included) and built per item in the
grain workers (each item re-reads its video record; the last one is cached):

Ordering (`task="order"`, §6.2, Appendix D), one item per usable cut c: segment 1 =
[c - S, c), segment 2 = [c, c + S) with S = `segment_seconds` (4 s), both inside the
trimmed video and the features, at least one narration sentence overlapping
[c - S, c + S) (their text, joined in order, is the narration: the span extended to
sentence boundaries, `center_tokens` trims it from both ends), and the 2S window not
overlapping the previous item's (cuts taken left to right; our choice, the paper does not
say whether windows may overlap). The two segments are presented in a random order (training:
fresh each epoch; evaluation: fixed by the item index):

  seg_a, seg_b  float32 [B, F, D]   F = S * fps frames
  tokens        int32   [B, L]      narration tokens (vnr.data.text)
  label         int32   [B]         1 if seg_a is the earlier segment
  valid         bool    [B]         False on evaluation padding

Retrieval (`task="retrieval"`, §7.1-7.2 and Appendix E), one item per clip: a video's
trimmed span is cut into scenes at its hard cuts (`rec["cuts"]`: the cuts file, or the
builder's feature-distance fallback) and consecutive scene pairs form non-overlapping
clips [b_2k, b_2k+2) (`clips_of`). The clip's video input is its first `max_frames`
(4) feature rows, zero-padded (masked) when shorter; its text is every narration
sentence overlapping the clip (the span extended to sentence boundaries), trimmed or
padded to `max_tokens` (64). Clips are counted, named and skipped when shorter than one
feature second, without narration, or a last unpaired scene (`ItemSource.skips`).
Long-term memory (Eq. 6): among the previous `memory_window` (10) clips j of the same
video, the one maximising (1 + E_kj) * mean cosine over all pairs of their feature
rows (the paper's 4 x 4 pairs; rows of padding are left out), where E_kj = the number
of person names the two clips' texts share (the builder's capitalisation heuristic, not
NER); its rows and text are appended (clip 0 of a video has no memory: empty masks).

  frames [B, F, D], frame_mask [B, F]; tokens [B, L]
  mem_frames [B, F, D], mem_frame_mask [B, F]; mem_tokens [B, L]
  (tokens: hashed words, or with `data.tokenizer` a checkpoint tokenizer's ids: UniVL's
  BERT WordPiece `[CLS] pieces [SEP]`, the memory text's `pieces [SEP]`; 0 = padding)
  video, movie int32 [B] (split-local ids; movie = the record's `movie_key`, a video of
  unknown movie is a movie of its own), center, text_center float32 [B] (s),
  valid bool [B]

Splits: the builder's, plus `setA` / `setB` (§6.2 ordering protocol): the videos of the
builder's train and test splits divided by franchise (CRC32 of the franchise key, even
-> A, odd -> B), so no movie is in both sets.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import zlib
from typing import Any

import grain
import numpy as np

from vnr.benchmarks.symon.exclusion import exclude_movies
from vnr.data import pipeline, text

SET_SPLITS = ("setA", "setB")


def set_of(franchise: str) -> str:
    """"setA" or "setB" of a franchise key (CRC32 parity: deterministic, by franchise)."""
    return SET_SPLITS[zlib.crc32(franchise.encode()) % 2]


class _SetSource:
    """The videos of the builder's train + test splits in one of Set A / Set B."""

    def __init__(self, cfg: Any, split: str):
        self.parts = [_source(cfg, s) for s in ("train", "test")]
        self.index = [(p, i) for p, src in enumerate(self.parts) for i in range(len(src))
                      if set_of(src[i]["franchise"]) == split]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> dict:
        p, j = self.index[i]
        return self.parts[p][j]


def _source(cfg: Any, split: str):
    from tfds_builders import symon

    if split in SET_SPLITS:
        return _SetSource(cfg, split)
    return symon.data_source(cfg.config, split, data_dir=cfg.data_dir,
                             manual_dir=cfg.manual_dir or None, build=True)


def fps_of(cfg: Any) -> float:
    from tfds_builders import symon

    return symon.metadata(cfg.config, cfg.data_dir, cfg.manual_dir or None)[1]


def _unit_mean(frames: np.ndarray) -> np.ndarray:
    x = frames / np.maximum(np.linalg.norm(frames, axis=1, keepdims=True), 1e-8)
    return x.mean(0)


def memory_choice(frames: list[np.ndarray], names: list[str], k: int, window: int) -> int:
    """Eq. 6: index of the previous clip (within `window`) most similar to k, or -1.

    frames[j]: the real feature rows of clip j; names[j]: "|"-joined person names of its
    text. mean_{a,b} cos(x_a, y_b) = (mean_a x̂_a) · (mean_b ŷ_b), all row pairs.
    """
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


@dataclasses.dataclass(frozen=True)
class Clip:
    """One retrieval unit: [start, end) seconds, its text span and person names."""

    start: float
    end: float
    text: str
    text_start: float
    text_end: float
    names: str


def clips_of(rec: dict, fps: float, skips: collections.Counter | None = None,
             examples: dict | None = None) -> list[Clip]:
    """Two-scene clips of one video (rules in the module docstring); skips counted/named."""
    skips = collections.Counter() if skips is None else skips
    examples = {} if examples is None else examples
    lo, hi = float(rec["trim"][0]), float(rec["trim"][1])
    hi = min(hi, len(rec["features"]) / fps)
    cuts = [float(c) for c in rec["cuts"] if lo < c < hi]
    bounds = [lo, *cuts, hi]
    vid = rec["video_id"]

    def skip(reason: str, what: str) -> None:
        skips[reason] += 1
        examples.setdefault(reason, f"{vid} {what}")

    if len(bounds) < 3:
        skip("video:no_two_scene_clip", f"({len(cuts)} cut(s) in the trimmed span)")
        return []
    out = []
    for k in range(0, len(bounds) - 1, 2):
        if k + 2 >= len(bounds):
            skip("clip:unpaired_last_scene", f"[{bounds[k]:.1f}, {bounds[k + 1]:.1f})")
            break
        a, b = bounds[k], bounds[k + 2]
        if (b - a) * fps < 1.0:
            skip("clip:shorter_than_one_feature_second", f"[{a:.2f}, {b:.2f})")
            continue
        over = [j for j, (s0, e0) in enumerate(zip(rec["starts"], rec["ends"]))
                if s0 < b and e0 > a]
        if not over:
            skip("clip:no_narration", f"[{a:.1f}, {b:.1f})")
            continue
        names = sorted({n for j in over for n in rec["names"][j].split("|") if n})
        out.append(Clip(a, b, " ".join(rec["sentences"][j] for j in over),
                        float(rec["starts"][over[0]]), float(rec["ends"][over[-1]]),
                        "|".join(names)))
    return out


def clip_rows(feats: np.ndarray, clip: Clip, fps: float, n: int) -> np.ndarray:
    """The first n feature rows of the clip (fewer when the clip is shorter)."""
    a = int(np.floor(clip.start * fps + 1e-6))
    b = min(a + n, int(np.ceil(clip.end * fps - 1e-6)), len(feats))
    return feats[a:max(b, a + 1)]


def _pad(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Zero-padded to n rows -> (frames [n, D], mask [n])."""
    out = np.zeros((n, rows.shape[1]), np.float32)
    out[:len(rows)] = rows[:n]
    mask = np.zeros((n,), bool)
    mask[:min(len(rows), n)] = True
    return out, mask


def order_items(rec: dict, fps: float, seconds: float) -> list[tuple[float, str]]:
    """(cut time, narration) of the usable cuts of one video (rules in the docstring)."""
    cuts, lo, hi = rec["cuts"], float(rec["trim"][0]), float(rec["trim"][1])
    t_max = len(rec["features"]) / fps
    out, free_from = [], -np.inf
    for c in cuts:
        c = float(c)
        if c - seconds < max(lo, free_from) or c + seconds > min(hi, t_max):
            continue
        over = [s for s, a, b in zip(rec["sentences"], rec["starts"], rec["ends"])
                if a < c + seconds and b > c - seconds]
        if over:
            out.append((c, " ".join(over)))
            free_from = c + seconds
    return out


def center_tokens(narration: str, vocab_size: int, max_len: int,
                  tokenizer: str = "hash") -> np.ndarray:
    """Tokens trimmed from both ends to `max_len` (Appendix D: extra tokens removed from
    the start and the end), zero-padded at the end. With a checkpoint tokenizer the pieces
    are trimmed and `[CLS]` / `[SEP]` kept around them."""
    if tokenizer != "hash":
        from vnr.models.encoders import tokenizers

        ids = tokenizers.encode(tokenizer, [narration], 1 << 16)[0][0]
        n = int((ids > 0).sum())
        keep = min(n - 2, max_len - 2)
        lo = 1 + max(0, (n - 2 - keep) // 2)
        out = np.zeros((max_len,), np.int32)
        out[:keep + 2] = [ids[0], *ids[lo:lo + keep], ids[n - 1]]
        return out
    ids = text.tokenize(narration, vocab_size, 1 << 16)
    n = int((ids > 0).sum())
    lo = max(0, (n - max_len) // 2)
    out = np.zeros((max_len,), np.int32)
    part = ids[lo:lo + min(n, max_len)]
    out[:len(part)] = part
    return out


class _Subset:
    def __init__(self, src: Any, index: list[int]):
        self.src, self.index = src, index

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> dict:
        return self.src[self.index[i]]


class ItemSource:
    """Random access to the items of one split (enumerated once; videos read lazily)."""

    def __init__(self, cfg: Any, split: str, task: str):
        self.videos = _source(cfg, split)
        self.task, self.fps = task, fps_of(cfg)
        self.seconds = float(cfg.segment_seconds)
        self.items: list[tuple[int, int, float, str]] = []  # (video, k, cut time, narration)
        self.clips: list[list[Clip]] = []
        self.skips: collections.Counter = collections.Counter()
        self.skip_examples: dict[str, str] = {}
        movies: dict[str, int] = {}
        self.movie_of: list[int] = []
        self.excluded: list[str] = []  # videos of excluded movies (training split only)
        self.exclusion: dict = {}
        if cfg.get("exclude_movies") and split == cfg.train_split:
            keep, self.exclusion = exclude_movies(self.videos, cfg.exclude_movies, split)
            self.excluded = self.exclusion["removed"]
            self.videos = _Subset(self.videos, keep)
        for v in range(len(self.videos)):
            rec = self.videos[v]  # a video of unknown movie is a movie of its own
            movie = rec["movie_key"] or f"video:{rec['video_id']}"
            self.movie_of.append(movies.setdefault(movie, len(movies)))
            if task == "order":
                self.clips.append([])
                self.items += [(v, i, c, s) for i, (c, s) in
                               enumerate(order_items(rec, self.fps, self.seconds))]
            else:
                clips = clips_of(rec, self.fps, self.skips, self.skip_examples)
                self.clips.append(clips)
                self.items += [(v, k, 0.0, "") for k in range(len(clips))]
        if self.skips:
            logging.info("symon %s %s: %d items; skipped %s (e.g. %s)", split, task,
                         len(self.items), dict(self.skips), self.skip_examples)
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
    tokenizer: str = "hash"  # or a checkpoint tokenizer's directory (UniVL)

    def random_map(self, item: dict, rng: np.random.Generator) -> dict:
        rec = self.source.video(item["video"])
        fps, s, c = self.source.fps, self.source.seconds, item["cut"]
        n = int(round(s * fps))
        first = rec["features"][int(round((c - s) * fps)):][:n]
        second = rec["features"][int(round(c * fps)):][:n]
        swap = (item["index"] % 2 == 1) if self.fixed else bool(rng.random() < 0.5)
        a, b = (second, first) if swap else (first, second)
        return {"seg_a": np.asarray(a, np.float32), "seg_b": np.asarray(b, np.float32),
                "tokens": center_tokens(item["narration"], self.vocab_size, self.max_tokens,
                                        self.tokenizer),
                "label": np.int32(0 if swap else 1), "valid": np.bool_(True)}


@dataclasses.dataclass(frozen=True)
class EncodeRetrieval(grain.transforms.Map):
    """Builds one retrieval example (a clip, its text) with its long-term memory."""

    source: ItemSource
    max_frames: int
    max_tokens: int
    vocab_size: int
    window: int
    memory: bool
    tokenizer: str = "hash"  # or a checkpoint tokenizer's directory (UniVL: BERT WordPiece)

    def _tokens(self, narration: str, memory: bool = False) -> np.ndarray:
        return tokens_of(narration, self.vocab_size, self.max_tokens, self.tokenizer, memory)

    def map(self, item: dict) -> dict:
        v, k = item["video"], item["k"]
        rec, clips, fps = self.source.video(v), self.source.clips[v], self.source.fps
        rows = {j: clip_rows(rec["features"], clips[j], fps, self.max_frames)
                for j in range(max(0, k - self.window) if self.memory else k, k + 1)}
        frames, mask = _pad(rows[k], self.max_frames)
        c = clips[k]
        out = {"frames": frames, "frame_mask": mask,
               "tokens": self._tokens(c.text),
               "video": np.int32(v), "movie": np.int32(item["movie"]),
               "center": np.float32((c.start + c.end) / 2),
               "text_center": np.float32((c.text_start + c.text_end) / 2),
               "valid": np.bool_(True)}
        j = -1
        if self.memory:
            j = memory_choice([rows.get(i, rows[k]) for i in range(k + 1)],
                              [x.names for x in clips[:k + 1]], k, self.window)
        if j >= 0:
            out["mem_frames"], out["mem_frame_mask"] = _pad(rows[j], self.max_frames)
            out["mem_tokens"] = self._tokens(clips[j].text, memory=True)
        else:
            out["mem_frames"] = np.zeros_like(frames)
            out["mem_frame_mask"] = np.zeros_like(mask)
            out["mem_tokens"] = np.zeros((self.max_tokens,), np.int32)
        return out


def _encoder(cfg: Any, source: ItemSource, task: str, fixed: bool):
    if task == "order":
        return EncodeOrder(source, cfg.max_tokens, cfg.vocab_size, fixed, tokenizer_of(cfg))
    return EncodeRetrieval(source, cfg.max_frames, cfg.max_tokens, cfg.vocab_size,
                           cfg.memory_window, cfg.memory, tokenizer_of(cfg))


def tokens_of(narration: str, vocab_size: int, max_tokens: int, tokenizer: str = "hash",
              memory: bool = False) -> np.ndarray:
    """`max_tokens` ids of `narration`: hashed words, or the checkpoint tokenizer's
    `[CLS] pieces [SEP]` (a memory text drops its [CLS]: it is appended after the clip's own
    `[SEP]`, so the sequence holds one [CLS])."""
    if tokenizer == "hash":
        return text.tokenize(narration, vocab_size, max_tokens)
    from vnr.models.encoders import tokenizers

    ids = tokenizers.encode(tokenizer, [narration], max_tokens + memory)[0][0]
    return ids[1:] if memory else ids


def tokenizer_of(cfg: Any) -> str:
    """`"hash"` or the absolute directory of `cfg.tokenizer` (found offline)."""
    from vnr.models.encoders import tokenizers

    return tokenizers.resolve(cfg.get("tokenizer", "hash"))


def train_dataset(cfg: Any, task: str, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """Endless, per-epoch reshuffled batches of `task` items for one process."""
    source = ItemSource(cfg, cfg.train_split, task)
    if len(source) < batch_size * process_count:
        raise ValueError(f"symon/{cfg.config} {cfg.train_split} has {len(source)} {task} items, "
                         f"fewer than one global batch ({batch_size * process_count})")
    return pipeline.train_stream(source, [_encoder(cfg, source, task, fixed=False)], batch_size,
                                 seed, process_index, process_count, cfg.num_workers)


def eval_dataset(cfg: Any, task: str, split: str, batch_size: int,
                 max_examples: int = 0) -> pipeline.EvalStream:
    """One pass over `split`'s `task` items in item order."""
    source = ItemSource(cfg, split, task)
    return pipeline.eval_stream(source, [_encoder(cfg, source, task, fixed=True)], batch_size,
                                max_examples=max_examples, num_workers=cfg.num_workers)


def resolve_epochs(config: Any, task: str) -> None:
    """`config.epochs` > 0 (the univl presets: Appendix E's 20 for retrieval, Appendix D's 30
    for ordering, with `warmup_epochs` 1 / 6): the step counts from the `task` items of the
    built train split (`pipeline.resolve_epochs`), so the rows need none."""
    pipeline.resolve_epochs(
        config, lambda: len(ItemSource(config.data, config.data.train_split, task)),
        f"{task} items", "vnr:symon_epochs")
