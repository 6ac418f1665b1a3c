"""EMScore (Shi et al., CVPR 2022) of generated narrations, as Movie101 scores them.

A clip's frames come from one of two sources (`eval.em_source`):
  * "videos" (the paper's, Appendix C and yuezih/Movie101 `evaluation/`): `eval.em_frames`
    (10) frames shown at the centres of equal parts of the clip, decoded from
    `<data.videos>/<movie_id>.mp4` (default `<manual_dir>/videos`), squashed to the
    checkpoint's square size with bicubic interpolation (Chinese-CLIP's processor), kept in
    a frame store and embedded by the image tower of `eval.clip_model` (a Chinese-CLIP
    directory: architecture, tokenizer, preprocessor) with the weights of `eval.clip_weights`
    when set (a Chinese-CLIP training checkpoint: upstream scores with its Movie101-fine-tuned
    cnclip-huge-movie101.pt, read by the `cn_clip` port);
  * "features": the release's CLIP frame feature rows of the clip (`clip_frames` of the
    batch), `eval.em_frames` of them sampled (0 = all), against OpenAI CLIP's text tower
    (a projection width other than the features' is a one-line error before decoding).
Text: every token's last-layer state through the text projection (Chinese-CLIP: the [CLS]
state is the sentence embedding; CLIP: the EOS state). Both sides are L2-normalised before
the greedy match (`caption_metrics.emscore`); upstream's `emscore.py` reports the fine F1
over every real token, [CLS] and [SEP] included, and 10 frames (`em_fine_f`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.benchmarks.movie101 import caption_metrics as cm
from vnr.benchmarks.movie101 import mcn_data as data
from vnr.models.encoders import loading

SOURCES = ("features", "videos")

EM_KINDS = {"fine": "em_fine_f", "full": "emscore"}  # eval.mnscore_em -> reported metric
CLIP_TYPES = ("clip", "clip_text_model", "chinese_clip")
_CHUNK = 64  # sentences per jitted text-tower call (the last chunk is padded: one trace)


def clip_config(name: str) -> tuple[pathlib.Path, dict]:
    """(checkpoint directory, config.json) of eval.clip_model; one-line errors otherwise."""
    path = loading.resolve(name, key="eval.clip_model")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"eval.clip_model={name!r}: no config.json in {path}")
    conf = json.loads((path / "config.json").read_text())
    if conf.get("model_type") not in CLIP_TYPES:
        raise ValueError(f"eval.clip_model={name!r}: model_type={conf.get('model_type')!r} in "
                         f"{path / 'config.json'} is not a CLIP text tower (supported: "
                         f"{', '.join(CLIP_TYPES)})")
    return path, conf


@functools.lru_cache(maxsize=1)
def _both_towers(path: str, weights: str) -> Any:
    """The whole Chinese-CLIP from one read of a training checkpoint (both towers come from
    the file: reading it once per tower would read ~4 GB twice)."""
    from vnr.models.encoders import chinese_clip

    return chinese_clip.from_pretrained(path, weights=weights)


def _load_chinese_clip(path: pathlib.Path, tower: str, weights: str = "") -> Any:
    """Chinese-CLIP's `tower` ("text" / "vision") with its projection from the directory
    (the other tower and `logit_scale` left unread), or the whole model from `weights`, a
    training checkpoint (`vnr.models.encoders.chinese_clip`)."""
    from vnr.models.encoders import chinese_clip

    try:
        if weights:
            return _both_towers(str(path), weights)
        return chinese_clip.from_pretrained(path, tower=tower)
    except loading.CheckpointError as err:
        key = f"eval.clip_weights={weights!r}" if weights else f"eval.clip_model={str(path)!r}"
        raise loading.CheckpointError(f"{key}: {err}") from None


@functools.lru_cache(maxsize=2)
def _clip(name: str, weights: str = ""):
    """(jitted ids, mask -> (token [C,L,P], global [C,P]) embeddings, tokenizer, L, P)."""
    from vnr.models.encoders import load_pretrained
    from vnr.models.encoders.tokenizers import saved_tokenizer

    path, conf = clip_config(name)
    kind = conf["model_type"]
    if kind == "chinese_clip":
        model, tok = _load_chinese_clip(path, "text", weights), saved_tokenizer(path)
        tower, proj = model.text_model, model.text_projection
        max_len = model.text_model.embeddings.position_embeddings.embedding.shape[0]
    else:
        model, tok, cfg = load_pretrained(path, tower="text" if kind == "clip" else None)
        if model.text_projection is None:
            raise ValueError(f"eval.clip_model={name!r}: {path} has no text_projection, so its "
                             "token embeddings are not in the joint image-text space")
        tower, proj = model, model.text_projection
        tc = cfg.text_config if kind == "clip" else cfg
        max_len = tc.max_position_embeddings
    if tok is None:
        raise FileNotFoundError(f"eval.clip_model={name!r}: no tokenizer files in {path} "
                                "(vocab.json + merges.txt for CLIP, vocab.txt for Chinese-CLIP)")
    graph, state = nnx.split((tower, proj))

    @jax.jit
    def embed(state, ids, mask):
        tw, pj = nnx.merge(graph, state)
        h = tw(ids, mask, deterministic=True).last_hidden_state  # CLIP: final-LN'd states
        tokens = pj(h)
        if kind == "chinese_clip":  # [CLS] pooled
            return tokens, tokens[:, 0]
        eos = jnp.maximum(mask.sum(-1) - 1, 0)  # the tokenizer's last real token is EOS
        return tokens, tokens[jnp.arange(len(ids)), eos]

    return functools.partial(embed, state), tok, int(max_len), int(proj.kernel.shape[1])


def clip_text_embeddings(name: str, texts: list[str], weights: str = ""
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-token projected embeddings [N,L,P], their mask [N,L] (every real token with the
    start/end tokens, as Shi et al. keep [SOS]/[EOS]), global embeddings [N,P] and the
    token ids [N,L]."""
    embed, tok, max_len, _ = _clip(name, weights)
    enc = tok(list(texts) or [""], padding="max_length", truncation=True, max_length=max_len,
              return_tensors="np")
    ids, mask = enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)
    n = len(texts)
    pad = -n % _CHUNK
    ids, mask = (np.concatenate([a, np.repeat(a[:1], pad, 0)]) for a in (ids, mask))
    toks, glob = [], []
    for i in range(0, len(ids), _CHUNK):
        t, g = jax.device_get(embed(ids[i:i + _CHUNK], mask[i:i + _CHUNK]))
        toks.append(t)
        glob.append(g)
    return (np.concatenate(toks)[:n], mask[:n].astype(bool), np.concatenate(glob)[:n],
            ids[:n])


@functools.lru_cache(maxsize=4)
def _clip_width(movies_config: str, data_dir: str, manual_dir: str) -> int:
    """`data.clip_width`, once per dataset (it opens the movies table)."""
    import types

    return data.clip_width(types.SimpleNamespace(movies_config=movies_config,
                                                 data_dir=data_dir, manual_dir=manual_dir))


def check_clip_width(config: Any) -> int:
    """The release's CLIP feature width, checked against eval.clip_model's projection."""
    d = config.data
    width = _clip_width(d.movies_config, os.path.abspath(d.data_dir), d.manual_dir)
    _, _, _, proj = _clip(config.eval.clip_model, weights_file(config.eval))
    if width != proj:
        raise ValueError(f"eval.clip_model={config.eval.clip_model!r} projects text to {proj}-d "
                         f"but the CLIP frame features are {width}-d (column `clip` of "
                         f"movie101/{d.movies_config}, read from features/clip/"
                         "<movie>.mp4.npy.npz): EMScore needs the CLIP that made the features")
    return width


def em_scores(name: str, hyps: list[str], frames: np.ndarray, frame_mask: np.ndarray,
              idf: bool = False, weights: str = "") -> dict[str, float]:
    """Corpus means (x100) of EMScore(X, V) and its parts for hypotheses against frames
    (fine P idf-weighted over the hypotheses when `idf`)."""
    tok, tok_mask, glob, ids = clip_text_embeddings(name, hyps, weights)
    weight = cm.idf_weights(ids, tok_mask) if idf else None
    em = cm.emscore(frames, frame_mask, glob, tok, tok_mask, weight)
    return {k: 100 * float(np.mean(v)) for k, v in em.items()}


# ----------------------------------------------------------------------------- checks


def source(e: Any) -> str:
    return str(e.get("em_source", "features"))


def weights_file(e: Any) -> str:
    w = str(e.get("clip_weights", "") or "")
    return str(pathlib.Path(w).expanduser().absolute()) if w else ""


def check(config: Any) -> None:
    """One-line errors before anything compiles: the EMScore keys and checkpoints."""
    e = config.eval
    if e.mnscore_em not in EM_KINDS:
        raise ValueError(f"eval.mnscore_em={e.mnscore_em!r} must be one of {sorted(EM_KINDS)}")
    if e.em_frames < 0:
        raise ValueError(f"eval.em_frames={e.em_frames} must be >= 0 (0 = all frames)")
    if source(e) not in SOURCES:
        raise ValueError(f"eval.em_source={source(e)!r}: choose one of {', '.join(SOURCES)}")
    w = weights_file(e)
    if w and not pathlib.Path(w).is_file():
        raise ValueError(f"eval.clip_weights={e.clip_weights!r}: no such file (a Chinese-CLIP "
                         "training checkpoint, e.g. upstream's cnclip-huge-movie101.pt)")
    if not e.clip_model:
        return
    path, conf = clip_config(e.clip_model)
    if w and conf["model_type"] != "chinese_clip":
        raise ValueError(f"eval.clip_weights is a Chinese-CLIP training checkpoint but "
                         f"eval.clip_model={e.clip_model!r} is {conf['model_type']!r}")
    videos = source(e) == "videos"
    if videos and conf["model_type"] != "chinese_clip":
        raise ValueError(f"eval.em_source='videos' embeds frames with a Chinese-CLIP image "
                         f"tower; eval.clip_model={e.clip_model!r} is {conf['model_type']!r}")
    if conf["model_type"] == "chinese_clip":
        _check_chinese_clip(path, w, videos)
    if not videos:
        return
    from vnr.benchmarks.movie101 import tng_cnclip

    if e.em_frames < 1:
        raise ValueError("eval.em_frames=0 (all feature rows) has no meaning for "
                         "eval.em_source='videos': give the frames a clip (10, Appendix C)")
    d = config.data
    if not d.get("videos") and not d.manual_dir:
        raise ValueError("data.videos is empty and data.manual_dir unset: EMScore reads 10 "
                         "frames a clip from <data.videos>/<movie_id>.mp4")
    if not w and d.config.startswith(("v1_", "v2_")):
        logging.warning("eval.clip_weights is empty: EMScore embeds frames with %s's own "
                        "weights, not upstream's Movie101-fine-tuned cnclip-huge-movie101.pt "
                        "(the paper's)", e.clip_model)
    if not tng_cnclip.videos_dir(config.data).is_dir():
        raise ValueError(f"data.videos={str(tng_cnclip.videos_dir(config.data))!r}: no such "
                         "directory (the release's videos as <movie_id>.mp4; default "
                         "<manual_dir>/videos); EMScore reads 10 frames a clip from them")


def _check_chinese_clip(path: pathlib.Path, weights: str, videos: bool) -> None:
    """A Chinese-CLIP directory (and training checkpoint) EMScore can use: its vocab.txt, a
    processor of the vision tower's size, and every tensor the towers need in `weights`
    with its shape (from the file's pickle alone: its storages are not read)."""
    from vnr.models.encoders import chinese_clip, cn_clip

    cfg = chinese_clip.read_config(path)
    if not (path / "vocab.txt").is_file():
        raise ValueError(f"eval.clip_model={str(path)!r}: no vocab.txt (Chinese-CLIP's "
                         "WordPiece vocabulary)")
    size = chinese_clip.preprocessing(path).size
    if videos and size != cfg.vision_config.image_size:
        raise ValueError(f"eval.clip_model={str(path)!r}: preprocessor size {size} but the "
                         f"vision tower takes {cfg.vision_config.image_size} px")
    if not weights:
        return
    try:
        views, where = cn_clip.read_shapes(weights)
        for tower in ("text", "vision") if videos else ("text",):
            cls = chinese_clip.TOWERS[tower]
            chinese_clip.match(views, loading.param_shapes(lambda r, c=cls: c(cfg, rngs=r)),
                               where)
    except loading.CheckpointError as err:
        raise ValueError(f"eval.clip_weights={weights!r}: {err}") from None


def check_videos(config: Any, splits: list[str]) -> None:
    """Every movie the evaluation scores has its video (one line naming the first missing)."""
    if config.eval.clip_model and source(config.eval) == "videos":
        from vnr.benchmarks.movie101 import tng_cnclip

        tng_cnclip.check_videos(config.data, splits)


# ----------------------------------------------------------------------------- frames

_FRAME_CHUNK = 8  # clips per jitted image-tower call (the last chunk is padded: one trace)


@functools.lru_cache(maxsize=2)
def _vision(name: str, weights: str = ""):
    """(jitted uint8 frames [n,S,S,3] -> projected image features [n,P], image size S)."""
    from vnr.models.encoders import chinese_clip

    path, _ = clip_config(name)
    tower = _load_chinese_clip(path, "vision", weights)
    pre = chinese_clip.preprocessing(path)
    mean = np.asarray(pre.mean, np.float32) * 255.0
    std = np.asarray(pre.std, np.float32) * 255.0
    graph, state = nnx.split(tower)

    @jax.jit
    def embed(state, frames):
        x = (frames.astype(jnp.float32) - mean) / std
        model = nnx.merge(graph, state)
        run = model.encode_image if isinstance(model, chinese_clip.ChineseCLIPModel) else model
        return run(x).pooled.astype(jnp.float32)

    return functools.partial(embed, state), int(pre.size)


def parse_spans(column: np.ndarray) -> list[tuple[str, float, float]]:
    """The batch's `span` column ("movie_id<TAB>start<TAB>end") -> (movie, start, end)."""
    out = []
    for text in column:
        mid, start, end = str(text).split("\t")
        out.append((mid, float(start), float(end)))
    return out


def frame_features(config: Any, spans: list[tuple[str, float, float]]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """[N, em_frames, P] image features of each clip's frames (see the module docstring)
    and their mask [N, em_frames] (every frame real: a time past a video's end shows its
    last frame, as the frame store decodes it)."""
    return _frame_features(_store_key(config), str(config.eval.clip_model),
                           weights_file(config.eval), tuple(spans))


def _store_key(config: Any) -> str:
    d, e = config.data, config.eval
    from vnr.benchmarks.movie101 import tng_cnclip
    from vnr.models.encoders import chinese_clip

    size = chinese_clip.preprocessing(clip_config(e.clip_model)[0]).size
    return json.dumps({"movies_config": d.movies_config, "data_dir": os.path.abspath(
        d.data_dir), "manual_dir": d.manual_dir, "videos": str(tng_cnclip.videos_dir(d)),
        "frames": {"per_shot": int(e.em_frames), "image_size": int(size), "workers": 0}})


@functools.lru_cache(maxsize=2)
def _frame_features(store_key: str, name: str, weights: str,
                    spans: tuple[tuple[str, float, float], ...]
                    ) -> tuple[np.ndarray, np.ndarray]:
    from ml_collections import ConfigDict

    from vnr.benchmarks.movie101 import tng_cnclip

    d = ConfigDict(json.loads(store_key))
    movies: dict[str, list[tuple[float, float]]] = {}
    where = []
    for mid, start, end in spans:
        movies.setdefault(mid, []).append((start, end))
        where.append((mid, len(movies[mid]) - 1))
    store = tng_cnclip.ShotStore(d, {m: np.array(s, np.float64) for m, s in movies.items()})
    embed, _ = _vision(name, weights)
    f = int(d.frames.per_shot)
    out = []
    for i in range(0, len(where), _FRAME_CHUNK):
        part = where[i:i + _FRAME_CHUNK]
        part = part + [part[0]] * (_FRAME_CHUNK - len(part))
        frames = np.concatenate([store.frames(m, k) for m, k in part])
        feats = np.asarray(jax.device_get(embed(frames)))
        out.append(feats.reshape(_FRAME_CHUNK, f, -1)[: len(where) - i])
    feats = np.concatenate(out) if out else np.zeros((0, f, 1), np.float32)
    return feats, np.ones(feats.shape[:2], bool)


def scores(config: Any, hyps: list[str], out: Any) -> dict[str, float]:
    """EMScore and its parts (x100) of `hyps` against their clips' frames from
    `eval.em_source` (`out`: the split's predictions with the `span` column, or the
    release's `frames` / `frame_mask` features)."""
    e = config.eval
    if source(e) == "videos":
        frames, masks = frame_features(config, parse_spans(out["span"]))
    else:  # the release's CLIP frame features: the first clip_dim columns
        clip_dim = check_clip_width(config)
        frames, masks = cm.sample_frames(out["frames"][:, :, :clip_dim], out["frame_mask"],
                                         e.em_frames or config.data.max_frames)
    return em_scores(e.clip_model, hyps, frames, masks, e.em_idf, weights_file(e))


def smoke_checkpoint(path: pathlib.Path | str) -> str:
    """`--scale smoke`'s EMScore checkpoint: the golden tiny Chinese-CLIP training checkpoint
    (tests/golden/cn_clip, upstream's file layout) as `<path>/epoch_latest.pt` beside its
    architecture (config.json), a WordPiece vocab.txt and a 16-px processor; returns the
    directory (eval.clip_model; eval.clip_weights is its epoch_latest.pt)."""
    import shutil

    from vnr.benchmarks.movie101 import tng_cnclip

    path = pathlib.Path(tng_cnclip.smoke_checkpoint(path))
    golden = pathlib.Path(__file__).resolve().parents[3] / "tests/golden/cn_clip"
    shutil.copyfile(golden / "hf" / "config.json", path / "config.json")
    shutil.copyfile(golden / "epoch_latest.pt", path / "epoch_latest.pt")
    (path / "pytorch_model.bin").unlink(missing_ok=True)  # the weights are the .pt's
    return str(path)
