"""Clips from video frames (M-SyMoN §5.1, `model.encoder="cclm"`): which frames a clip is
seen through, stored once per split, and the checks of the frame path's config.

**Which frames.** A clip [b, e) (a shot, or a cell of the `data.clip_seconds` grid) keeps a pool
of `data.frames.pool` frames, the frames shown at the centres of `pool` equal parts of the
clip (`clip_times`). §5.1 represents a clip by "randomly selecting three frames from it";
training draws `data.frames.per_clip` (3) distinct frames of the pool at random per clip and
epoch (`train_picks`: ours, the paper draws from every frame of the clip, which would mean
decoding the videos at every step). The paper does not say which frames it evaluates with;
ours (`eval_picks`): the frames at the centres of the clip's three equal thirds, which are
in the pool when `pool` is 3 times an odd number (9 by default). A clip shorter than
`per_clip` frames of its video (a shot of 1 or 2 frames: TransNetV2 can cut one) has fewer
distinct frames than it is seen through, so its frames repeat (ours: kept, not dropped, so
that every sentence keeps its footage); building the store counts them in one line.

**Stored once.** `store_directory` decodes the pools of every video of a split from the
release's `videos/<file>` (`vnr.data.video.decode_at`, frames resized in the worker to
`image_size` x `image_size`, aspect not kept, bicubic: CCLM's test transform
`Resize((res, res), BICUBIC)`, here swscale's bicubic instead of PIL's) into a frame store
(`vnr.data.frame_store`) keyed by the built dataset, the split and the preprocessing: one
store per split, shared by every regime that reads it. Size: 147 KiB per 224 px frame, so
`pool` 9 over 3-s clips is 1.6 GB per hour of video (pool 3: 0.5 GB).

`write_videos` writes a generated release's videos (tests, smoke runs, `bench/msymon.py`):
frames whose pixels spell their own index (`vnr.data.synthetic_video`), so a test can check
which ones a clip got; `write_tokenizer` a word-level stand-in for XLM-R's tokenizer.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vnr.data import frame_store, video

CCLM_PORTS = ("cclm_vision", "cclm_text")


def clip_times(cb: np.ndarray, ce: np.ndarray, pool: int) -> np.ndarray:
    """float64 [C, pool]: the centres of `pool` equal parts of each clip [cb, ce)."""
    return np.stack([video.uniform(float(b), float(e), pool) for b, e in zip(cb, ce, strict=True)]
                    ) if len(cb) else np.zeros((0, pool))


def eval_picks(pool: int, per_clip: int) -> np.ndarray:
    """int [per_clip]: the pool indices of the centres of the clip's `per_clip` equal parts
    (`pool` = per_clip x an odd number: those centres are pool times)."""
    q = pool // per_clip
    return np.arange(per_clip) * q + (q - 1) // 2


def train_picks(rng: np.random.Generator, clips: int, pool: int, per_clip: int) -> np.ndarray:
    """int [clips, per_clip]: `per_clip` distinct pool indices per clip, uniformly, sorted."""
    order = rng.permuted(np.tile(np.arange(pool), (clips, 1)), axis=1)
    return np.sort(order[:, :per_clip], axis=1)


def per_clip(d: Any) -> int:
    """Frames per clip of a data config (0: the clips are per-second features)."""
    return int((d.get("frames") or {}).get("per_clip", 0))


def check_config(d: Any) -> None:
    """One-line ValueError for a frame path config that cannot run (`data.frames`)."""
    f = d.frames
    if f.per_clip < 1 or f.pool < f.per_clip or f.pool % f.per_clip or not (
            f.pool // f.per_clip) % 2:
        raise ValueError(f"data.frames.pool={f.pool} must be data.frames.per_clip="
                         f"{f.per_clip} times an odd number (the evaluation frames, the "
                         "centres of the clip's equal parts, are then stored)")
    if f.get("augment", "none") not in ("none", "cclm"):
        raise ValueError(f"data.frames.augment={f.augment!r}: 'cclm' (CCLM's training "
                         "transform of each frame, §6.1's random augmentation) or 'none'")
    if f.pick not in video.PICKS:
        raise ValueError(f"data.frames.pick={f.pick!r}: one of {video.PICKS}")
    if not reads_videos(d):
        raise ValueError(f"clips from frames read the release's videos: set data.builder="
                         f"'msymon' and data.config='videos', or data.builder='yms' and "
                         f"data.config='sentences_videos' / 'phrases_videos' (they are "
                         f"{d.builder!r} / {d.config!r})")
    if not d.manual_dir:
        raise ValueError("clips from frames read RELEASE/videos/: set data.manual_dir")


def reads_videos(d: Any) -> bool:
    """Whether the data config's builder config serves each video's file (`video_file`)."""
    return ((d.builder == "msymon" and d.config == "videos")
            or (d.builder == "yms" and str(d.config).endswith("_videos")))


def _built(d: Any) -> tuple[pathlib.Path, str]:
    """(the built dataset's directory, its name for the frame store's key)."""
    if d.builder == "yms":
        from tfds_builders.msymon import yms as builder

        bc = builder.resolve_config(d.config)
        ds = builder.prepare(bc, d.data_dir, d.manual_dir or None)
    else:
        from tfds_builders import msymon as builder

        bc = builder.resolve_config(d.config, d.dim, d.fps)
        ds = builder.prepare(bc, d.data_dir, d.manual_dir or None)
    built = pathlib.Path(ds.data_dir)
    return built, f"{d.builder}/{bc.name}/{built.name}"


def check_model(config: Any) -> None:
    """One-line ValueError, before anything compiles, for a `model.encoder="cclm"` config
    that cannot run: no checkpoint file (nothing is downloaded), no XLM-R tokenizer, sizes
    that disagree (the checkpoint's own shapes are checked when the trainer loads it)."""
    m, d = config.model, config.data
    ckpt = str(m.get("cclm_checkpoint") or "")
    if not ckpt:
        raise ValueError("model.encoder='cclm' needs model.cclm_checkpoint=<CCLM's released "
                         "checkpoint (.th), e.g. cclm_3m_epoch_29.th of zengyan-97/CCLM>")
    if not pathlib.Path(ckpt).expanduser().is_file():
        raise ValueError(f"model.cclm_checkpoint={ckpt!r}: no such file (CCLM's released "
                         "checkpoint, .th; nothing is downloaded)")
    if d.get("tokenizer", "hash") == "hash":
        raise ValueError("model.encoder='cclm' reads XLM-R token ids: set data.tokenizer=<the "
                         "xlm-roberta-large tokenizer directory CCLM uses>")
    if d.frames.image_size != m.swin.image_size:
        raise ValueError(f"data.frames.image_size={d.frames.image_size} must equal "
                         f"model.swin.image_size={m.swin.image_size}")
    if d.max_tokens > m.cclm_text.max_positions:
        raise ValueError(f"data.max_tokens={d.max_tokens} exceeds the "
                         f"{m.cclm_text.max_positions} positions of the CCLM text tower")
    from vnr.models.encoders import tokenizers

    vocab = tokenizers.info(d.tokenizer)["vocab"]
    if vocab > m.cclm_text.vocab_size:
        raise ValueError(f"data.tokenizer={d.tokenizer!r} has {vocab} tokens, the CCLM text "
                         f"tower {m.cclm_text.vocab_size} (model.cclm_text.vocab_size)")
    check_config(d)


def sources(config: Any) -> dict[str, tuple[str, str]]:
    """The trainer's `pretrained` sources of `FrameAligner`: both towers from the one file."""
    ckpt = str(pathlib.Path(config.model.cclm_checkpoint).expanduser())
    return {"swin": (ckpt, CCLM_PORTS[0]), "text": (ckpt, CCLM_PORTS[1])}


def tower_configs(config: Any) -> tuple[Any, Any]:
    """(SwinConfig, cclm.TextConfig) of `model.swin` / `model.cclm_text` (defaults: CCLM-base,
    Swin-B 224 and the 6 XLM-R-large text layers before fusion)."""
    from vnr.models.encoders import cclm, swin

    s, t = config.model.swin, config.model.cclm_text
    sw = swin.SwinConfig(image_size=s.image_size, embed_dim=s.embed_dim,
                         depths=tuple(s.depths), num_heads=tuple(s.num_heads),
                         window_size=s.window_size)
    tc = cclm.TextConfig(vocab_size=t.vocab_size, hidden_size=t.hidden_size,
                         num_hidden_layers=t.layers, num_attention_heads=t.heads,
                         intermediate_size=t.intermediate_size,
                         max_position_embeddings=t.max_positions)
    return sw, tc


def make_model(config: Any, rngs: Any) -> Any:
    """`model.FrameAligner` at the config's sizes, randomly initialised (the weights come
    through the `pretrained` hook)."""
    from vnr.benchmarks.msymon.model import FrameAligner

    m = config.model
    return FrameAligner(*tower_configs(config), head=m.cclm_head, embed=m.embed,
                        chunk=m.image_chunk, remat=config.get("remat", "none") != "none",
                        rngs=rngs, augment=config.data.frames.get("augment", "none"))


def resize(d: Any) -> video.Resize:
    """The frames' preprocessing in the decoding worker (see the module docstring)."""
    s = int(d.frames.image_size)
    return video.Resize("squash", width=s, height=s, interpolation=d.frames.interpolation)


Clips = Callable[[dict, float], tuple[np.ndarray, np.ndarray]]  # (record, clip_seconds)


@dataclasses.dataclass(frozen=True)
class _Prepare:
    """A record's clip pools decoded from its video: uint8 [clips * pool, S, S, 3]."""

    videos: str
    clips: Clips  # the pipeline's clip rule (`data.cut_clips`)
    clip_seconds: float
    pool: int
    resize: video.Resize
    pick: str

    def __call__(self, rec: dict) -> np.ndarray:
        cb, ce = self.clips(rec, self.clip_seconds)
        times = clip_times(cb, ce, self.pool).reshape(-1)
        path = pathlib.Path(self.videos) / rec["video_file"]
        return video.decode_at(path, times, resize=self.resize, pick=self.pick).frames


def store_directory(d: Any, split: str, records: Sequence[dict], clips: Clips
                    ) -> pathlib.Path:
    """The frame store of one split (built now if missing); `records` are its builder
    records (`video_file`), `clips` the pipeline's clip rule."""
    from vnr import feature_cache
    from vnr.data import pipeline

    built, dataset = _built(d)
    size = resize(d)
    ident = {"dataset": dataset, "split": split, "clip_seconds": float(d.clip_seconds),
             "clips": d.get("clips", "grid"), "pool": int(d.frames.pool),
             "built": {f: feature_cache.digest(built / f) for f in
                       ("dataset_info.json", "build_summary.json") if (built / f).is_file()},
             **video.describe_store(size, d.frames.pick, "pool: centres of equal parts")}
    directory = frame_store.location(d.data_dir, dataset, ident)
    if not (directory / "meta.json").is_file():
        workers = int(d.frames.get("workers", -1))
        if workers < 0:  # a process per 8 videos, at most one per core
            workers = min(pipeline.host_cores(), math.ceil(len(records) / 8))
        prep = _Prepare(str(pathlib.Path(d.manual_dir).absolute() / "videos"), clips,
                        float(d.clip_seconds), int(d.frames.pool), size, d.frames.pick)
        if line := short_clips(records, prep, int(d.frames.per_clip)):
            print(f"frame store {directory.name}: {split}: {line}", flush=True)
        frame_store.build(directory, {split: records}, prep, ident, id_key="video_id",
                          workers=workers)
    return directory


def short_clips(records: Sequence[dict], prep: _Prepare, per_clip: int) -> str:
    """One line counting the clips shorter than `per_clip` frames at their video's frame
    rate (`video.probe`), naming the first; "" when there are none. A video that cannot be
    probed is left to the decoder, which names it."""
    n = total = 0
    first = ""
    for rec in records:
        cb, ce = prep.clips(rec, prep.clip_seconds)
        total += len(cb)
        try:
            fps = video.probe(pathlib.Path(prep.videos) / rec["video_file"]).fps
        except (ValueError, OSError):
            continue
        short = np.flatnonzero((ce - cb) * fps < per_clip)
        n += len(short)
        if len(short) and not first:
            c = int(short[0])
            first = (f"; the first: {rec['video_id']} clip {c} [{cb[c]:.3f}, {ce[c]:.3f}) s "
                     f"at {fps:.3g} fps")
    if not n:
        return ""
    return (f"{n} of {total} clips are shorter than {per_clip} frames, so their {per_clip} "
            f"frames repeat (kept){first}")


class StoredPools:
    """A split's records with `frames`: uint8 [clips * pool, S, S, 3] from its store."""

    def __init__(self, d: Any, split: str, records: Sequence[dict], clips: Clips):
        self.records = records
        self.reader = frame_store.Reader(store_directory(d, split, records, clips), split)
        self.stored = frame_store.StoredFrames(records, self.reader, "frames", "video_id")

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> dict:
        return self.stored[index]


def write_videos(root: str | pathlib.Path, fps: float = 4.0, width: int = 96,
                 height: int = 64, shot_seconds: float = 2.5) -> pathlib.Path:
    """`root/videos/<id>.mp4` for every `root/features/<id>.npy` of a generated release, as
    long as its features (one row a second), `fps` frames a second spelling their index,
    and `root/cuts/<id>.txt`: hard cuts every `shot_seconds` x 0.6, 1.4, 0.6, ... (shots of
    two lengths, as TransNetV2 would write them; 0: no cuts files)."""
    from vnr.data import synthetic_video

    root = pathlib.Path(root)
    (root / "videos").mkdir(parents=True, exist_ok=True)
    for path in sorted((root / "features").glob("*.npy")):
        seconds = len(np.load(path, mmap_mode="r"))
        times = np.arange(max(1, round(seconds * fps))) / fps
        synthetic_video.write(root / "videos" / f"{path.stem}.mp4", times, width=width,
                              height=height, gop=int(2 * fps))
        if shot_seconds > 0:
            steps = np.resize([0.6, 1.4], int(seconds / shot_seconds) * 2 + 2) * shot_seconds
            cuts = np.cumsum(steps)
            (root / "cuts").mkdir(exist_ok=True)
            (root / "cuts" / f"{path.stem}.txt").write_text(
                "".join(f"{c:.3f}\n" for c in cuts[cuts < seconds]))
    return root


def write_tokenizer(directory: str | pathlib.Path, words: Sequence[str], bert: bool = False
                    ) -> pathlib.Path:
    """A word-level tokenizer of `words` saved as a Hugging Face tokenizer directory, the
    stand-in for a checkpoint's own (tests, benchmarks): XLM-R's specials (<s>=0, <pad>=1,
    </s>=2, <unk>=3) or, with `bert`, BERT's ([PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3); then the
    words."""
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    pad, unk, cls, sep = ("[PAD]", "[UNK]", "[CLS]", "[SEP]") if bert else (
        "<pad>", "<unk>", "<s>", "</s>")
    order = (pad, unk, cls, sep) if bert else (cls, pad, sep, unk)
    vocab = {t: i for i, t in enumerate([*order, *words])}
    core = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    tf.PreTrainedTokenizerFast(tokenizer_object=core, cls_token=cls, sep_token=sep,
                               pad_token=pad, unk_token=unk).save_pretrained(directory)
    return pathlib.Path(directory)
