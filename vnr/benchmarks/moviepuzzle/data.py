"""Grain pipelines for MoviePuzzle clips.

Records come from `tfds_builders.moviepuzzle.data_source` in TRUE order with
frames as JPEG bytes. Each epoch re-shuffles the clip order and, per clip, the
frame order (seeded by the dataset seed, the epoch and the record index, so a
restored iterator replays exactly). JPEG decoding and tokenization run in the
grain workers. Batches are dicts of NumPy arrays, padded to `max_frames`:

  frames   uint8 [B, N, S, S, 3]   shuffled frames (zeros where padded)
  tokens   int32 [B, N, L]         subtitle token ids (vnr.data.text): hashed words, or
                                   with `data.tokenizer` a checkpoint's tokenizer
  token_mask bool [B, N, L]        only with a checkpoint tokenizer: True for real tokens
                                   (its pad id may be a real id, e.g. CLIP's)
  mask     bool  [B, N]            True for real frames (real frames first)
  position int32 [B, N]            true position of input frame i (pad: i)
  shot_id, scene_id int32 [B, N]   group ids of input frame i (pad: -1); categorical
                                   only: ids are numbered in true order, so a model
                                   must never read their values
  text     object [B, N]           eval only: the raw subtitle of input frame i

Frames (`vnr.data.images`): `data.image_resize="squash"` (default; the scratch towers and the
main job) resizes to S x S bilinear; "clip" (pretrained CLIP towers, `hcmc.py:clip=...`) is
CLIP's image processor exactly: shorter side to S bicubic, centre crop, uint8 here and CLIP's
normalisation on device. `data.jpeg_draft` (ours, off): DCT-scaled JPEG decoding of frames at
least twice S (tolerance in `vnr.data.images`). `data.frame_store` (ours, off): the frames
preprocessed once into `<data_dir>/frame_store/` (`vnr.data.frame_store`, built on first use
for every split of the config) and read from there: the same batches, no JPEG decoded.

With `data.feature_cache` (`vnr.feature_cache`; a frozen tower's outputs computed once)
`image_features` float32 [B, N, D] replaces `frames` (no JPEG is decoded) and/or
`text_features` [B, N, D] the text tower's input (`tokens` are then zeros).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any

import grain
import numpy as np

from vnr import feature_cache
from vnr import task as task_lib
from vnr.data import frame_store, images, pipeline, text
from vnr.models.encoders import tokenizers


def frames_of(rec: dict[str, Any], image_size: int, slots: int, resize: str = "squash",
              draft: bool = False) -> np.ndarray:
    """A record's frames -> uint8 [slots, S, S, 3] (zeros after the last): its JPEGs decoded
    by `vnr.data.images`, or the frames a frame store already holds for it."""
    frames = rec["frames"]
    if not isinstance(frames, np.ndarray):
        return images.decode_frames(frames, image_size, slots, resize, draft)
    if frames.shape[1:] != (image_size, image_size, 3):
        raise frame_store.StoreError(f"clip {rec.get('clip_id')!r}: stored frames are "
                                     f"{frames.shape[1:]}, data.image_size={image_size}")
    out = np.zeros((slots, image_size, image_size, 3), np.uint8)
    out[:len(frames)] = frames
    return out


def tokenize(subs: list[str], slots: int, max_tokens: int, vocab_size: int,
             tokenizer: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Subtitles -> (ids int32 [slots, L], token mask [slots, L] or None for hashed ids)."""
    tokens = np.zeros((slots, max_tokens), np.int32)
    if tokenizer == text.HASH:
        for k, sub in enumerate(subs):
            tokens[k] = text.tokenize(sub, vocab_size, max_tokens)
        return tokens, None
    token_mask = np.zeros((slots, max_tokens), bool)
    n = len(subs)
    tokens[:n], token_mask[:n] = tokenizers.encode(tokenizer, subs, max_tokens)
    return tokens, token_mask


def _subtitles(rec: dict[str, Any]) -> list[str]:
    return [t.decode() if isinstance(t, bytes) else t for t in rec["subtitles"]]


@dataclasses.dataclass(frozen=True)
class FrameInputs:
    """A record -> the inputs of one tower for each of its frames (the feature cache's
    `prepare`: exactly what `Encode` feeds that tower, unpadded)."""

    tower: str  # "image" or "text"
    image_size: int
    max_tokens: int
    vocab_size: int
    tokenizer: str
    resize: str = "squash"  # vnr.data.images.RESIZES
    draft: bool = False

    def __call__(self, rec: dict[str, Any]) -> dict[str, np.ndarray]:
        subs = _subtitles(rec)
        if self.tower == "image":
            return {"frames": frames_of(rec, self.image_size, len(subs), self.resize,
                                        self.draft)}
        tokens, mask = tokenize(subs, len(subs), self.max_tokens, self.vocab_size,
                                self.tokenizer)
        return {"tokens": tokens} if mask is None else {"tokens": tokens, "token_mask": mask}


@dataclasses.dataclass(frozen=True)
class Encode(grain.transforms.Map):
    """Decodes, resizes and pads one clip kept in true order. A record from the feature
    cache (`vnr.feature_cache.CachedSource`) carries `image_features` / `text_features`
    [n, D] instead: they are padded and the frames (or subtitles) are not decoded."""

    max_frames: int
    image_size: int
    max_tokens: int
    vocab_size: int
    keep_text: bool = False
    tokenizer: str = text.HASH  # or a resolved checkpoint directory (tokenizers.resolve)
    resize: str = "squash"  # vnr.data.images.RESIZES
    draft: bool = False

    def map(self, rec: dict[str, Any]) -> dict[str, np.ndarray]:
        subs = _subtitles(rec)
        n, nf = len(subs), self.max_frames
        if n > self.max_frames:
            raise ValueError(
                f"clip {rec.get('clip_id')!r} has {n} frames > data.max_frames={self.max_frames}"
            )
        out: dict[str, np.ndarray] = {}
        if "image_features" in rec:
            out["image_features"] = _pad(rec["image_features"], nf)
        else:
            out["frames"] = frames_of(rec, self.image_size, nf, self.resize, self.draft)
        if "text_features" in rec:
            out["text_features"] = _pad(rec["text_features"], nf)
            tokens, token_mask = np.zeros((nf, self.max_tokens), np.int32), None
        else:
            tokens, token_mask = tokenize(subs, nf, self.max_tokens, self.vocab_size,
                                          self.tokenizer)
        pad_ids = np.full((nf,), -1, np.int32)
        shot, scene = pad_ids.copy(), pad_ids.copy()
        shot[:n], scene[:n] = rec["shot_id"], rec["scene_id"]
        out.update({
            "tokens": tokens,
            "mask": np.arange(nf) < n,
            "position": np.arange(nf, dtype=np.int32),
            "shot_id": shot,
            "scene_id": scene,
        })
        if token_mask is not None:
            out["token_mask"] = token_mask
        if self.keep_text:
            out["text"] = np.array(subs + [""] * (nf - n), dtype=object)
        return out


def _pad(rows: np.ndarray, slots: int) -> np.ndarray:
    out = np.zeros((slots, rows.shape[-1]), np.float32)
    out[:len(rows)] = rows
    return out


@dataclasses.dataclass(frozen=True)
class ShuffleFrames(grain.transforms.RandomMap):
    """Permutes the real frames of a clip (padding stays last)."""

    def random_map(self, ex: dict[str, np.ndarray], rng: np.random.Generator) -> dict:
        n = int(ex["mask"].sum())
        perm = np.arange(len(ex["mask"]))
        perm[:n] = rng.permutation(n)
        return {k: v[perm] if k != "mask" else v for k, v in ex.items()}


@dataclasses.dataclass(frozen=True)
class AugmentClip(grain.transforms.RandomMap):
    """Training augmentation applied identically to every frame of a clip: a
    horizontal flip (p=0.5) and a random permutation of the colour channels.
    Relative cues between frames (who is nearer the door, how many items) are
    unchanged; absolute palettes and left/right layouts stop being shortcuts."""

    def random_map(self, ex: dict[str, np.ndarray], rng: np.random.Generator) -> dict:
        if "frames" not in ex:
            raise ValueError("data.augment changes the frames, so it cannot be combined with "
                             "cached image features (data.feature_cache)")
        perm, flip = rng.permutation(3), rng.random() < 0.5
        src = ex["frames"][:, :, ::-1] if flip else ex["frames"]
        frames = np.empty_like(src)  # one strided copy per channel: ~2x faster than
        for c in range(3):  # fancy indexing on the channel axis, same values
            frames[..., c] = src[..., perm[c]]
        return dict(ex, frames=frames)


def source(cfg: Any, split: str):
    from tfds_builders import moviepuzzle as builder

    return builder.data_source(
        cfg.config, split, data_dir=cfg.data_dir, manual_dir=cfg.manual_dir, build=True
    )


def check_splits(config: Any) -> None:
    """Every configured split exists in the built moviepuzzle dataset (the `check_splits`
    hook of the home's tasks, called once it is built)."""
    from tfds_builders import moviepuzzle as builder

    d = config.data
    have = builder.split_names(d.config, d.data_dir, manual_dir=d.manual_dir or None)
    task_lib.require_splits(config, have, f"moviepuzzle/{d.config}")


def preprocessing(cfg: Any) -> dict[str, Any]:
    """How frames become pixels under `cfg` (config.data), as JSON values (cache keys)."""
    return images.describe(cfg.get("image_resize", "squash"), cfg.image_size,
                           cfg.get("jpeg_draft", False))


def store_directory(cfg: Any):
    """The frame store of `cfg` (config.data), built on first use for every split it reads.
    Its key: the dataset's name, config and version, the digests of the built dataset's
    `dataset_info.json` and `build_summary.json` (a rebuild with other content gets a new
    store), and the preprocessing."""
    from tfds_builders import moviepuzzle as builder

    splits = (cfg.train_split, cfg.val_split, *cfg.test_splits)
    sources = {s: source(cfg, s) for s in dict.fromkeys(splits)}  # builds the dataset first
    dataset = builder.dataset_name(cfg.config)
    built = pathlib.Path(cfg.data_dir).absolute() / dataset
    ident = {"dataset": dataset, "preprocessing": preprocessing(cfg),
             "built": {f: feature_cache.digest(built / f) for f in
                       ("dataset_info.json", "build_summary.json") if (built / f).is_file()}}
    directory = frame_store.location(cfg.data_dir, dataset, ident)
    if not (directory / "meta.json").is_file():
        prep = preprocessing(cfg)
        # a process per 256 records, at most one per core: spawning one takes seconds, so a
        # small store is quicker decoded here (68 generated clips: 11 s in 2 processes)
        n_records = sum(len(v) for v in sources.values())
        frame_store.build(directory, sources,
                          _StorePrepare(cfg.image_size, prep["resize"], prep["jpeg_draft"]),
                          ident, workers=min(pipeline.host_cores(), -(-n_records // 256)))
    return directory


@dataclasses.dataclass(frozen=True)
class _StorePrepare:
    image_size: int
    resize: str
    draft: bool

    def __call__(self, rec: dict[str, Any]) -> np.ndarray:
        n = len(rec["frames"])
        return images.decode_frames(rec["frames"], self.image_size, n, self.resize, self.draft)


def resolve_epochs(config: Any) -> int | None:
    """`config.epochs` > 0 (the `paper` preset's 5, Table 7): total_steps from the clips of
    the built train split (`pipeline.resolve_epochs`); None when `epochs` is 0."""
    return pipeline.resolve_epochs(
        config, lambda: len(source(config.data, config.data.train_split)), "train clips",
        "vnr:moviepuzzle_epochs")


def _records(cfg: Any, split: str, cached: Mapping[str, Any] | None):
    """The records of `split`; with `cached` ({tower: cache directory}, from
    `vnr.feature_cache.check`) they carry the cached features and no frame bytes; with
    `data.frame_store` their frames are the stored uint8 pixels."""
    records = source(cfg, split)
    if cfg.get("frame_store", False):
        if "image" in (cached or {}):
            raise ValueError("data.frame_store with data.feature_cache='image': the cached "
                             "features replace the frames; drop one of the two")
        records = frame_store.StoredFrames(records, frame_store.Reader(store_directory(cfg),
                                                                       split))
    return feature_cache.wrap(records, cached or {}, split, drop={"image": "frames"})


def _encode(cfg: Any, keep_text: bool = False) -> Encode:
    return Encode(cfg.max_frames, cfg.image_size, cfg.max_tokens, cfg.vocab_size, keep_text,
                  tokenizers.resolve(cfg.get("tokenizer", text.HASH)),
                  images.check(cfg.get("image_resize", "squash")), cfg.get("jpeg_draft", False))


def train_dataset(cfg: Any, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1,
                  cached: Mapping[str, Any] | None = None) -> grain.IterDataset:
    """Endless, per-epoch reshuffled (clips and frames) batches for one process."""
    augment = [AugmentClip()] if cfg.get("augment", False) else []
    return pipeline.train_stream(_records(cfg, cfg.train_split, cached),
                                 [_encode(cfg), ShuffleFrames(), *augment], batch_size, seed,
                                 process_index, process_count, cfg.num_workers)


def eval_dataset(cfg: Any, split: str, batch_size: int, seed: int, max_examples: int = 0,
                 cached: Mapping[str, Any] | None = None) -> pipeline.EvalStream:
    """One pass over `split` with a fixed per-clip frame shuffle (seeded by `seed` + 1)."""
    return pipeline.eval_stream(_records(cfg, split, cached),
                                [_encode(cfg, keep_text=True), ShuffleFrames()], batch_size,
                                seed=seed + 1, max_examples=max_examples,
                                num_workers=cfg.num_workers)
