"""Table 4's CNCLIP (§5.2): Chinese-CLIP fine-tuned on shot frames for global shot retrieval.

§5.2: "the shot frames are separately encoded as image features by the visual encoder of
CNCLIP, and the final video feature is obtained by performing mean pooling over the CLS
tokens of all frames. We then perform contrastive learning between the video and text
features on Movie101-GSR(temp)"; §5.3: CNCLIP-huge; Appendix C: batch 16, lr 2e-6, <= 1
epoch. yuezih/Movie101 (`baseline/CNCLIP+RNL/README.md`): "we use CNCLIP's image encoder to
independently encode 10 video frames and mean pool the frame features to a video feature,
to replace the original image feature in CNCLIP", the rest as the official Chinese-CLIP code.

Model (`CNCLIPRetrieval`): `ChineseCLIPModel` (vnr/models/encoders/chinese_clip.py) built from
the checkpoint directory's config.json, its weights through the trainer's `pretrained` hook
(port `chinese_clip`: `sources`; with `model.cnclip_weights`, a Chinese-CLIP training
checkpoint such as upstream's fine-tuned cnclip-huge-movie101.pt, port `cn_clip`).
A shot = `data.frames.per_shot` (10) frames, each through
the vision tower and `visual_projection` (the image feature), mean-pooled, L2-normalised; a
narration = the projected [CLS] of the text tower, L2-normalised; logits = cosine x
exp(logit_scale), logit_scale learned and clamped to [0, ln 100] (Chinese-CLIP's training
clamps it after each step; here the forward pass clips it). Loss: Chinese-CLIP's, the mean
of the image->text and text->image cross-entropies over the batch (`tng._clip_loss`).

Frames (`ShotStore`): for every movie of a split, its candidate shots (data.shot_source =
"rtemp": the split's Movie101-R-temp shots of that movie; "cut": every shot_len-second shot)
and per shot the frames shown at the centres of `per_shot` equal parts of it (ours: the
README says 10 frames, not which), decoded once from `<data.videos>/<movie_id>.mp4`
(default `<manual_dir>/videos`: the release's videos come with its access form;
`vnr.data.video.decode_at`), squashed to the checkpoint's square size with bicubic
interpolation (Chinese-CLIP's processor: resize, no crop) and kept in a frame store
(`vnr.data.frame_store`, 147 KiB per 224-px frame: ~1.5 MB per shot). The batch carries
uint8 frames; the model normalises them with the checkpoint's mean / std.

Text: the checkpoint's own tokenizer (BERT WordPiece from its vocab.txt; BERT's basic
tokenizer puts every CJK character on its own, as bert-base-chinese does), [CLS] ... [SEP],
at most `model.context_length` (52: Chinese-CLIP's `--context-length` default).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import pathlib
import shutil
from typing import Any

import grain
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import records
from vnr.benchmarks.movie101 import tng_data as data
from vnr.data import frame_store, video

PORT = "chinese_clip"
LN100 = math.log(100.0)


def enabled(config: Any) -> bool:
    return config.get("stage", "local") == "global" and config.model.get("arch") == "cnclip"


def checkpoint(config: Any) -> pathlib.Path:
    return pathlib.Path(str(config.model.cnclip)).expanduser().absolute()


def videos_dir(d: Any) -> pathlib.Path:
    v = d.get("videos", "") or (pathlib.Path(d.manual_dir) / "videos" if d.manual_dir else "")
    return pathlib.Path(str(v)).expanduser().absolute()


def check(config: Any) -> None:
    """One-line ValueError before anything is built or compiled: no checkpoint directory
    (config, tokenizer, preprocessor; its weights unless model.cnclip_weights names a
    training checkpoint), sizes that disagree with it, no videos directory."""
    from vnr.models.encoders import chinese_clip

    d, m = config.data, config.model
    if not m.get("cnclip"):
        raise ValueError("model.arch='cnclip' needs model.cnclip=<the Chinese-CLIP checkpoint "
                         "directory, OFA-Sys/chinese-clip-vit-huge-patch14 for the paper>")
    ck = checkpoint(config)
    if not ck.is_dir():
        raise ValueError(f"model.cnclip={str(m.cnclip)!r}: no such directory (a Hugging Face "
                         "Chinese-CLIP checkpoint: config.json, weights, vocab.txt)")
    cfg = chinese_clip.read_config(ck)  # CheckpointError (a ValueError): one line
    if not (ck / "vocab.txt").is_file():
        raise ValueError(f"{ck}: no vocab.txt (Chinese-CLIP's BERT WordPiece vocabulary)")
    size = chinese_clip.preprocessing(ck).size
    if size != cfg.vision_config.image_size:
        raise ValueError(f"{ck}: preprocessor size {size} but the vision tower takes "
                         f"{cfg.vision_config.image_size} px")
    if m.context_length > cfg.text_config.max_position_embeddings:
        raise ValueError(f"model.context_length={m.context_length} exceeds the "
                         f"{cfg.text_config.max_position_embeddings} positions of {ck}")
    weights = pathlib.Path(str(m.get("cnclip_weights", "") or "")).expanduser()
    if str(weights) not in ("", ".") and not weights.is_file():
        raise ValueError(f"model.cnclip_weights={str(weights)!r}: " + (
            "a directory; a Hugging Face Chinese-CLIP directory goes in model.cnclip"
            if weights.is_dir() else "no such file") + " (a Chinese-CLIP training "
            "checkpoint, e.g. upstream's cnclip-huge-movie101.pt)")
    if d.frames.per_shot < 1:
        raise ValueError(f"data.frames.per_shot={d.frames.per_shot} must be >= 1")
    if not videos_dir(d).is_dir():
        raise ValueError(f"data.videos={str(videos_dir(d))!r}: no such directory (the "
                         "release's videos as <movie_id>.mp4; default <manual_dir>/videos)")


def check_videos(d: Any, splits: list[str]) -> None:
    """Every movie the run reads has `<videos>/<movie_id>.mp4` (one line naming the first
    missing file and the count)."""
    missing = []
    for split in splits:
        for mid in dict.fromkeys(records.usable_source(d, split)[i]["movie_id"] for i in
                                 range(len(records.usable_source(d, split)))):
            if not (videos_dir(d) / f"{mid}.mp4").is_file():
                missing.append(videos_dir(d) / f"{mid}.mp4")
    if missing:
        raise ValueError(f"{missing[0]}: no such video ({len(missing)} movies of the run "
                         "have none; CNCLIP reads frames from the release's videos)")


def sources(config: Any) -> dict[str, tuple[str, str]]:
    """The trainer's `pretrained` sources: the whole Chinese-CLIP from its directory, or from
    `model.cnclip_weights`, a Chinese-CLIP training checkpoint (upstream's Movie101-fine-tuned
    `cnclip-huge-movie101.pt`: the `cn_clip` port) read into the directory's architecture."""
    weights = str(config.model.get("cnclip_weights", "") or "")
    if weights:
        w = str(pathlib.Path(weights).expanduser().absolute())
        return {"text": (w, "cn_clip"), "vision": (w, "cn_clip")}
    ck = str(checkpoint(config))
    return {"text": (ck, PORT), "vision": (ck, PORT)}


class CNCLIPRetrieval(nnx.Module):
    """Chinese-CLIP over shots of frames (module docstring): `text` and `vision` are the
    checkpoint's towers with their projections (loaded by the `pretrained` hook);
    `logit_scale` is set from the checkpoint's value when the model is built
    (`checkpoint_logit_scale`; from `weights`, a training checkpoint, when given)."""

    def __init__(self, ckpt: str, *, rngs: nnx.Rngs, weights: str = ""):
        from vnr.models.encoders import chinese_clip

        cfg = chinese_clip.read_config(ckpt)
        self.text = chinese_clip.ChineseCLIPTextModel(cfg, rngs=rngs)
        self.vision = chinese_clip.ChineseCLIPVisionModel(cfg, rngs=rngs)
        self.logit_scale = nnx.Param(jnp.asarray(checkpoint_logit_scale(weights or ckpt),
                                                 jnp.float32))
        pre = chinese_clip.preprocessing(ckpt)
        self.mean = np.asarray(pre.mean, np.float32) * 255.0
        self.std = np.asarray(pre.std, np.float32) * 255.0

    def shots(self, frames: jax.Array, frame_mask: jax.Array) -> jax.Array:
        """uint8 frames [B, F, S, S, 3], mask [B, F] -> unit shot features [B, P]."""
        b, f = frames.shape[:2]
        x = (frames.reshape(b * f, *frames.shape[2:]).astype(jnp.float32) - self.mean) / self.std
        img = self.vision(x).pooled.reshape(b, f, -1).astype(jnp.float32)
        m = frame_mask[..., None].astype(img.dtype)
        return _unit((img * m).sum(1) / jnp.maximum(m.sum(1), 1.0))

    def text_features(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        return _unit(self.text(ids, mask.astype(jnp.int32)).pooled.astype(jnp.float32))

    def scale(self) -> jax.Array:
        return jnp.exp(jnp.clip(self.logit_scale[...].astype(jnp.float32), 0.0, LN100))


@functools.lru_cache(maxsize=2)
def checkpoint_logit_scale(ckpt: str) -> float:
    """The checkpoint's `logit_scale`, the model's initial value. The `pretrained` hook loads
    the two towers (port subtrees); this top-level scalar belongs to neither, so it is read
    here (a second read of the file, once per process)."""
    from vnr.models.encoders import cn_clip, videomae

    path = pathlib.Path(ckpt)
    tensors, where = (cn_clip.read_tensors(path) if path.is_file() else
                      videomae.read_tensors(path))
    if "logit_scale" not in tensors:
        raise ValueError(f"{where}: no 'logit_scale' tensor (not a ChineseCLIPModel file?)")
    return float(np.asarray(tensors["logit_scale"]).reshape(()))


def _unit(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), 1e-12))


def make_model(config: Any, rngs: nnx.Rngs) -> CNCLIPRetrieval:
    weights = str(config.model.get("cnclip_weights", "") or "")
    return CNCLIPRetrieval(str(checkpoint(config)), rngs=rngs,
                           weights=str(pathlib.Path(weights).expanduser().absolute())
                           if weights else "")


# ----------------------------------------------------------------------------- frames


@functools.lru_cache(maxsize=8)
def _spans(cfg_key: str, split: str) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, int]]]:
    from ml_collections import ConfigDict

    d = ConfigDict(json.loads(cfg_key))
    src = records.usable_source(d, split)
    movies: dict[str, list[dict]] = {}
    for i in range(len(src)):
        rec = src[i]
        movies.setdefault(rec["movie_id"], []).append(rec)
    where = {r["id"]: (mid, k) for mid, recs in movies.items() for k, r in enumerate(recs)}
    return movie_spans(d, movies), (where if data.given_shots(d) else {})


def movie_spans(d: Any, movies: dict[str, list[dict]],
                offsets: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """movie -> its candidate shots [S, 2] in seconds: with data.shot_source = "rtemp" the
    records' own shots, else the movie cut every shot_len seconds from its offset."""
    if data.given_shots(d):
        return {m: np.array([[float(r["start"]), float(r["end"])] for r in recs])
                for m, recs in movies.items()}
    table, offsets = records.MovieTable(d), offsets or {}
    return {m: gm.cut_shots(float(data.movie_seconds(table[m], m)), float(d.shot_len),
                            offsets.get(m, 0.0)) for m in movies}


def _key(d: Any) -> str:
    keep = ("config", "movies_config", "data_dir", "manual_dir", "shot_len", "shot_source")
    return json.dumps({k: (str(pathlib.Path(d[k]).absolute()) if k == "data_dir" else d[k])
                       for k in keep if k in d}, sort_keys=True)


def shot_spans(d: Any, split: str) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, int]]]:
    """The training shots of `split`: (movie -> its candidate shots [S, 2] in seconds, in
    the split's movie order; record id -> (movie, shot) for data.shot_source = "rtemp")."""
    return _spans(_key(d), split)


def resize(d: Any) -> video.Resize:
    s = int(d.frames.image_size)
    return video.Resize("squash", width=s, height=s, interpolation="bicubic")


SPLIT = "shots"  # the store's one split


def store_directory(d: Any, spans: dict[str, np.ndarray]) -> pathlib.Path:
    """The frame store of these shots (built now if missing; keyed by the shots): one
    record per movie, its shots' frames in shot order, `per_shot` each."""
    f = int(d.frames.per_shot)
    size = resize(d)
    digest = hashlib.sha256(json.dumps({m: np.round(s, 3).tolist() for m, s in spans.items()},
                                       sort_keys=True).encode())
    ident = {"dataset": f"movie101/{d.movies_config}", "per_shot": f,
             "shots": digest.hexdigest()[:16], "videos": str(videos_dir(d)),
             **video.describe_store(size, "shown", "centres of per_shot equal parts")}
    directory = frame_store.location(d.data_dir, f"movie101/{d.movies_config}", ident)
    if not (directory / "meta.json").is_file():
        recs = [{"movie_id": m, "video": str(videos_dir(d) / f"{m}.mp4"),
                 "times": np.concatenate([video.uniform(a, b, f) for a, b in s])}
                for m, s in spans.items()]
        prep = functools.partial(video.store_frames, resize=size, pick="shown")
        frame_store.build(directory, {SPLIT: recs}, prep, ident, id_key="movie_id",
                          workers=int(d.frames.get("workers", 0)))
    return directory


class ShotStore:
    """Shots' frames: `frames(movie, k)` uint8 [per_shot, S, S, 3]; picklable."""

    def __init__(self, d: Any, spans: dict[str, np.ndarray],
                 where: dict[str, tuple[str, int]] | None = None):
        self.spans, self.where = spans, where or {}
        self.per_shot = int(d.frames.per_shot)
        self.reader = frame_store.Reader(store_directory(d, spans), SPLIT)
        self.index = {m: i for i, m in enumerate(spans)}

    def movie(self, mid: str) -> np.ndarray:
        """All shots of a movie [S, per_shot, S, S, 3] (a view of the map)."""
        rows = self.reader.rows(self.index[mid], mid)
        return rows.reshape(-1, self.per_shot, *rows.shape[1:])

    def frames(self, mid: str, k: int) -> np.ndarray:
        return np.asarray(self.movie(mid)[k])


def tokenize(ckpt: str, texts: list[str], max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    from vnr.models.encoders import tokenizers

    return tokenizers.encode(ckpt, texts, max_tokens)


@dataclasses.dataclass(frozen=True)
class ShotFrames(grain.transforms.RandomMap):
    """A training (shot frames, narration) pair: the record's own shot (rtemp) or an aligned
    shot of its movie's cut (as `tng_data.ShotPair`)."""

    store: ShotStore
    ckpt: str
    max_tokens: int
    given: bool

    def random_map(self, rec: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        mid = rec["movie_id"]
        if self.given:
            k = self.store.where[rec["id"]][1]
        else:
            spans = self.store.spans[mid]
            q = np.array([float(rec["start"]), float(rec["end"])])
            pos = np.flatnonzero(gm.shot_alignment(spans, q))
            k = int(rng.choice(pos)) if len(pos) else int(np.argmax(
                np.minimum(spans[:, 1], q[1]) - np.maximum(spans[:, 0], q[0])))
        frames = self.store.frames(mid, k)
        ids, mask = tokenize(self.ckpt, [rec["text"]], self.max_tokens)
        return {"frames": frames, "frame_mask": np.ones(len(frames), bool), "ids": ids[0],
                "id_mask": mask[0], "movie": np.int32(data.movie_code(mid)),
                "shot_index": np.int32(k)}


def train_dataset(config: Any, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    from vnr.data import pipeline

    d = config.data
    data.prepare(d)
    pair = ShotFrames(ShotStore(d, *shot_spans(d, d.train_split)), str(checkpoint(config)),
                      int(config.model.context_length), data.given_shots(d))
    return pipeline.train_stream(records.usable_source(d, d.train_split), [pair], batch_size,
                                 seed, process_index, process_count)


class _Rows:
    """Lazy rows for `evaluation.global_rows`: row i < n is `get(i)`, later rows zeros."""

    def __init__(self, n: int, total: int, get: Any, shape: tuple, dtype: Any):
        self.n, self.total, self.get, self.shape, self.dtype = n, total, get, shape, dtype

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, sl: slice) -> np.ndarray:
        lo, hi, _ = sl.indices(self.total)
        out = np.zeros((max(hi - lo, 0), *self.shape), self.dtype)
        for i in range(lo, min(hi, self.n)):
            out[i - lo] = self.get(i)
        return out


def movie_rows(config: Any, movies: dict[str, list[dict]],
               offsets: dict[str, float] | None = None) -> Any:
    """`tng_global.movie_rows` on frames: row i holds shot i's frames (`movie_spans`, read
    from the store as the batches are cut, never all in memory) and narration i's ids; `info`
    is their `tng_data.MovieRows` (durations: the movies' feature seconds)."""
    from vnr import evaluation

    d = config.data
    spans = movie_spans(d, movies, offsets)
    store = ShotStore(d, spans)
    table = records.MovieTable(d)
    shot_of = [(m, k) for m, sp in spans.items() for k in range(len(sp))]
    texts = [r["text"] for recs in movies.values() for r in recs]
    ids, mask = tokenize(str(checkpoint(config)), texts, int(config.model.context_length))
    n = max(len(shot_of), len(texts))
    f = store.per_shot
    shape = (f, d.frames.image_size, d.frames.image_size, 3)

    def pad(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x, np.zeros((n - len(x), *x.shape[1:]), x.dtype)])

    cols = {"frames": _Rows(len(shot_of), n, lambda i: store.frames(*shot_of[i]), shape,
                            np.uint8),
            "frame_mask": pad(np.ones((len(shot_of), f), bool)), "ids": pad(ids),
            "id_mask": pad(mask)}
    stream = evaluation.global_rows(cols, config.eval_batch_size)
    durations = [data.movie_seconds(table[m], m) for m in movies]
    return dataclasses.replace(stream, info=data.MovieRows(movies, list(spans.values()),
                                                           durations))


# ----------------------------------------------------------------------------- smoke inputs


def smoke_checkpoint(path: pathlib.Path | str) -> str:
    """The golden tiny Chinese-CLIP (tests/golden/chinese_clip/tiny) with a WordPiece
    vocab.txt of its 100 ids (special tokens, Latin letters, a few CJK characters): the
    `--scale smoke` stand-in for chinese-clip-vit-huge-patch14."""
    src = pathlib.Path(__file__).resolve().parents[3] / "tests/golden/chinese_clip/tiny"
    path = pathlib.Path(path)
    shutil.copytree(src, path, dirs_exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "，", "。"]
    vocab += list("abcdefghijklmnopqrstuvwxyz0123456789")
    vocab += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
    vocab += list("老李小猫走进房间看着他她说")
    vocab = vocab[:100]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "do_lower_case": True,
         "model_max_length": 512}))
    return str(path)


def smoke_videos(path: pathlib.Path | str, seed: int = 0, sizes: str = "tiny",
                 fps: float = 1.0, side: int = 32) -> str:
    """`<path>/<movie_id>.mp4` for every movie of the generated corpus (`synthetic_tiny`:
    the same seed and sizes as the builder), as long as its features, `fps` frames a second
    spelling their index (`vnr.data.synthetic_video`)."""
    import tempfile

    from tfds_builders.movie101 import synthetic
    from vnr.data import synthetic_video

    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        synthetic.write_corpus(tmp, seed=seed, sizes=sizes)
        for f in sorted(pathlib.Path(tmp, "features", "clip").glob("*.mp4.npy.npz")):
            seconds = len(np.load(f)["features"])
            times = np.arange(max(1, round(seconds * fps))) / fps
            synthetic_video.write(path / f.name.removesuffix(".npy.npz"), times, width=side,
                                  height=side, gop=int(8 * fps))
    return str(path)
