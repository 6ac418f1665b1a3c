"""Sc2St keyframe embedder and MoEE experts for the builder (`vnr.models.encoders` models).

`tfds_builders.sc2st` picks keyframes by CLIP text-image cosine but holds no model code; it
takes `clip_embedder` (or any `keyframes.MakeEmbedder`) as an argument. `ClipScorer` wraps
any encoder `vnr.models.encoders.create` accepts: a local pretrained CLIP checkpoint by name
or directory (offline: `$VNR_ENCODERS_DIR`), or `scratch:<size>` (random weights: plumbing
and tests only). Pretrained names use the checkpoint's tokenizer; scratch encoders use the
hashed word tokenizer `vnr.data.text`. Images go through CLIP's image processor exactly
(`vnr.data.images`, resize="clip": shorter side to the encoder's size, bicubic, centre crop,
CLIP's mean/std): keyframes are not square, and a squashed frame shifts every feature.

MoEE experts (`DEFAULT_EXPERTS`, for the `*_experts` builder configs, §4.3.2; the paper's
networks, DenseNet-161 Places365 and SENet-154, are `experts.py`, bound by `paper_experts`
for the configs naming `expert_encoders`). What the CLIP stand-ins stand in for, honestly:

* `scene`: the paper's scene expert is DenseNet-161 trained on Places365; no such weights are
  here, so the CLIP image embedding of the whole keyframe stands in (a general image
  feature, not a scene classifier's).
* `object`: the paper's is SENet-154 trained on ImageNet; the CLIP image embedding of the
  keyframe's centre crop (half its width and height) stands in: a second, object-centred
  view from the same model, so it overlaps the scene stand-in far more than the paper's
  two networks do.
* `character`: as the paper: a multi-hot vector over the 100 characters named most often
  (counted over every keyframe the builder embeds: all splits, storyboards and isolated;
  the paper does not say over which set), set for the names attached to the keyframe's
  sub-sentence. A keyframe naming none of them has the expert missing (all zero).

Image features (Appendix A.1, Inception-v3's 2048-d pooled features in the paper):
`inception_embedder` is torchvision's Inception-v3 (`vnr.models.encoders.inception`) with
the weights of `$VNR_ENCODERS_DIR/inception_v3/model.safetensors` (none here), images
resized to 342 and centre-cropped to 299 (torchvision's Inception transform). It is an
image-only embedder: the builder takes it as `feature_embedder` for a config naming a
`feature_encoder` (`lsmdc_paper`), whose stored `features` column it then fills, while the
keyframes are still chosen by the image-text `embedder`.

`builder_models(config)` gives the builder the functions a config needs: `clip_embedder`,
`DEFAULT_EXPERTS`, and `image_embedder` (dispatching on the name: Inception-v3 or
DenseNet) for the config's `candidate_encoder` / `feature_encoder`.

Candidate similarity (§4.1.3, DenseNet-121's 1024-d pooled features in the paper):
`densenet_embedder` is torchvision's DenseNet-121 (`vnr.models.encoders.densenet`) with the
weights of `$VNR_ENCODERS_DIR/densenet121/model.safetensors` (a torchvision state dict; none
ships with vnr and none can be downloaded here), images resized to 256 and centre-cropped
to 224 with ImageNet's mean/std as torchvision's eval transform; pass it as the builder's
`candidate_embedder` (needs JPEG frames). `scratch:densenet121` / `scratch:tiny` are random
weights (plumbing only).

With `features/` array input (no JPEG; the generated corpus) the two image experts fall
back to the stored keyframe feature (the same CLIP's image embedding), counted per build
as `expert_<name>_from_stored_feature`: on the generated corpus scene and object are then
the same column.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from tfds_builders.sc2st import Keyframe, normalise
from vnr.benchmarks.sc2st.scorers import (  # noqa: F401 (names read from here too)
    IMAGENET_MEAN,
    IMAGENET_STD,
    TorchvisionImageScorer,
    _encode_images,
)
from vnr.data import images


def clip_embedder(encoder: str, seed: int = 0) -> ClipScorer:
    """The builder's `MakeEmbedder`: the builder config's encoder name and seed."""
    return ClipScorer(encoder, seed=seed)


class ClipScorer:
    """Text and image embeddings (L2-normalised, numpy) from a CLIP dual encoder."""

    def __init__(self, name: str, seed: int = 0, batch: int = 64):
        import jax
        from flax import nnx

        from vnr.models.encoders import create

        self.name, self.batch = name, batch
        model, tokenizer, cfg = create(name, rngs=nnx.Rngs(seed))
        if getattr(cfg, "model_type", None) != "clip":
            raise ValueError(f"keyframe encoder {name!r} must be a CLIP dual encoder "
                             f"(model_type 'clip'), got {getattr(cfg, 'model_type', None)!r}")
        self.tokenizer = tokenizer
        self.image_size = int(cfg.vision_config.image_size)
        self.max_tokens = int(cfg.text_config.max_position_embeddings)
        self.vocab = int(cfg.text_config.vocab_size)
        self.dim = int(cfg.projection_dim)
        graphdef, state = nnx.split(model)
        self._img = jax.jit(lambda st, px: nnx.merge(graphdef, st).encode_image(
            px, deterministic=True).pooled)
        self._txt = jax.jit(lambda st, ids, m: nnx.merge(graphdef, st).encode_text(
            ids, m, deterministic=True).pooled)
        self._state = state

    def _tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if self.tokenizer is not None:
            enc = self.tokenizer(list(texts), padding="max_length", truncation=True,
                                 max_length=self.max_tokens, return_tensors="np")
            return enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)
        from vnr.data import text

        ids = np.stack([text.tokenize(t, self.vocab, self.max_tokens) for t in texts])
        # CLIP pools at the highest token id (EOS); hashed ids carry no EOS, so the
        # scratch encoder pools wherever the largest hash lands: fine for random weights.
        return ids, (ids > 0).astype(np.int32)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for lo in range(0, len(texts), self.batch):
            chunk = list(texts[lo:lo + self.batch])
            pad = self.batch - len(chunk)
            ids, mask = self._tokens(chunk + [""] * pad)
            out.append(np.asarray(self._txt(self._state, ids, mask))[:len(chunk)])
        return normalise(np.concatenate(out)) if out else np.zeros((0, self.dim), np.float32)

    def pixels(self, jpeg: bytes) -> np.ndarray:
        """Encoded image -> CLIP's normalised float32 [S, S, 3] (its image processor's)."""
        return images.clip_normalize(images.decode(jpeg, self.image_size, "clip"))

    def encode_images(self, jpegs: Sequence[bytes]) -> np.ndarray:
        return _encode_images(self, self._img, jpegs)


@functools.lru_cache(maxsize=4)
def _shared_scorer(name: str, seed: int) -> ClipScorer:
    """One CLIP per (name, seed) for the keyframe embedder's experts (loaded once)."""
    return ClipScorer(name, seed=seed)


def _crop_centre(jpeg: bytes, frac: float) -> bytes:
    """The central `frac` x `frac` of an image, as PNG bytes (lossless)."""
    from PIL import Image

    img = Image.open(io.BytesIO(jpeg)).convert("RGB")
    w, h = img.size
    cw, ch = max(1, round(w * frac)), max(1, round(h * frac))
    left, top = (w - cw) // 2, (h - ch) // 2
    buf = io.BytesIO()
    img.crop((left, top, left + cw, top + ch)).save(buf, "PNG")
    return buf.getvalue()


class ClipImageExpert:
    """A MoEE image expert from a CLIP image tower: the whole keyframe (`crop=1`) or its
    centre crop; keyframes without a JPEG take the stored keyframe feature (counted)."""

    def __init__(self, encoder: str, seed: int = 0, crop: float = 1.0, batch: int = 256):
        self.scorer, self.crop, self.batch = _shared_scorer(encoder, seed), crop, batch
        self.dim = self.scorer.dim
        self.counts: collections.Counter = collections.Counter()

    def encode_keyframes(self, frames: Sequence[Keyframe]) -> np.ndarray:
        out = np.zeros((len(frames), self.dim), np.float32)
        with_jpeg = [i for i, f in enumerate(frames) if f.path is not None]
        for lo in range(0, len(with_jpeg), self.batch):
            idx = with_jpeg[lo:lo + self.batch]
            imgs = [frames[i].jpeg() for i in idx]
            if self.crop < 1.0:
                imgs = [_crop_centre(j, self.crop) for j in imgs]
            out[idx] = self.scorer.encode_images(imgs)
        stored = [i for i, f in enumerate(frames) if f.path is None]
        for i in stored:
            if frames[i].feature.shape != (self.dim,):
                raise ValueError(f"{frames[i].frame_id}: stored feature of shape "
                                 f"{frames[i].feature.shape} cannot stand in for a "
                                 f"{self.dim}-wide image expert")
            out[i] = frames[i].feature
        self.counts["from_stored_feature"] += len(stored)
        return out


class CharacterExpert:
    """The paper's character expert: multi-hot over the `dim` most named characters."""

    def __init__(self, dim: int = 100):
        self.dim = dim
        self.vocabulary: list[str] = []

    def encode_keyframes(self, frames: Sequence[Keyframe]) -> np.ndarray:
        counts = collections.Counter(n for f in frames for n in set(f.names))
        self.vocabulary = sorted(counts, key=lambda n: (-counts[n], n))[:self.dim]
        index = {n: i for i, n in enumerate(self.vocabulary)}
        out = np.zeros((len(frames), self.dim), np.float32)
        for row, f in enumerate(frames):
            for n in f.names:
                if n in index:
                    out[row, index[n]] = 1.0
        return out


def scene_expert(encoder: str, seed: int = 0) -> ClipImageExpert:
    """Scene stand-in (paper: DenseNet-161 / Places365): CLIP of the whole keyframe."""
    return ClipImageExpert(encoder, seed)


def object_expert(encoder: str, seed: int = 0) -> ClipImageExpert:
    """Object stand-in (paper: SENet-154 / ImageNet): CLIP of the keyframe's centre crop."""
    return ClipImageExpert(encoder, seed, crop=0.5)


def character_expert(encoder: str, seed: int = 0) -> CharacterExpert:
    """The paper's character expert (top-100 characters named in the text)."""
    del encoder, seed  # reads names, no model
    return CharacterExpert(100)


DEFAULT_EXPERTS = {"scene": scene_expert, "object": object_expert,
                   "character": character_expert}


class DenseNetScorer(TorchvisionImageScorer):
    """DenseNet pooled features (resize 256, crop 224 as torchvision's DenseNet transform)."""

    def __init__(self, encoder: str = "densenet121", seed: int = 0, batch: int = 32):
        import jax
        from flax import nnx

        from vnr.models.encoders import densenet

        self.batch, self.image_size, self.resize_ratio = batch, 224, 256 / 224
        if encoder == "scratch:tiny":  # tests: a small random DenseNet on 32 x 32 images
            cfg = densenet.DenseNetConfig(growth_rate=8, block_config=(2, 2),
                                          num_init_features=16, bn_size=2, num_classes=0)
            model, self.image_size = densenet.DenseNet(cfg, nnx.Rngs(seed)), 32
        elif encoder == "scratch:densenet121":
            cfg = dataclasses.replace(densenet.DENSENET121, num_classes=0)
            model = densenet.DenseNet(cfg, nnx.Rngs(seed))
        else:
            model = densenet.load_densenet(encoder or "densenet121")
        self.dim = model.config.num_features
        graphdef, self._state = nnx.split(model)
        self._fwd = jax.jit(lambda st, px: nnx.merge(graphdef, st)(px).pooled)


def densenet_embedder(encoder: str = "", seed: int = 0) -> DenseNetScorer:
    """The builder's `candidate_embedder` (§4.1.3): the config's `candidate_encoder` names
    the checkpoint ("" = densenet121 under $VNR_ENCODERS_DIR)."""
    return DenseNetScorer(encoder or "densenet121", seed)


class InceptionScorer(TorchvisionImageScorer):
    """Inception-v3 2048-d pooled features (Appendix A.1's image features), torchvision's
    Inception transform: resize 342, centre crop 299 (`image_size` smaller only for tests;
    >= 75). The fc is dropped (`num_classes=0`): its tensors in the checkpoint are ignored."""

    def __init__(self, encoder: str = "inception_v3", seed: int = 0, batch: int = 32,
                 image_size: int = 299):
        import jax
        from flax import nnx

        from vnr.models.encoders import inception, loading

        self.batch, self.image_size, self.resize_ratio = batch, image_size, 342 / 299
        if encoder == "scratch:inception_v3":  # random weights: plumbing only
            cfg = dataclasses.replace(inception.INCEPTION_V3, num_classes=0)
            model = loading.instantiate(lambda r: inception.InceptionV3(cfg, r), None,
                                        key=jax.random.key(seed))
        else:
            model = inception.load_inception(encoder or "inception_v3", num_classes=0)
        self.dim = model.config.num_features
        graphdef, self._state = nnx.split(model)
        self._fwd = jax.jit(lambda st, px: nnx.merge(graphdef, st)(px).pooled)


def inception_embedder(encoder: str = "", seed: int = 0) -> InceptionScorer:
    """A builder image embedder (A.1's Inception-v3 pooled features): the builder's
    `feature_embedder` for a config naming a `feature_encoder` (or a `candidate_embedder`);
    the name is the checkpoint ("" = inception_v3 under $VNR_ENCODERS_DIR, a torchvision
    state dict converted to model.safetensors; see `load_inception`'s error). It embeds
    images only, so it cannot be the keyframe `embedder`, which scores text too."""
    return InceptionScorer(encoder or "inception_v3", seed)


def image_embedder(encoder: str, seed: int = 0) -> TorchvisionImageScorer:
    """The image-only embedder `encoder` names: `inception*` (also `scratch:inception_v3`)
    is Inception-v3, `densenet*` / `scratch:densenet121` / `scratch:tiny` DenseNet; a
    directory is read by its name the same way."""
    base = encoder.removeprefix("scratch:").rstrip("/").rpartition("/")[2].lower()
    if base.startswith("inception"):
        return inception_embedder(encoder, seed)
    if base.startswith("densenet") or encoder == "scratch:tiny":
        return densenet_embedder(encoder, seed)
    raise ValueError(f"image encoder {encoder!r}: name an inception_v3* or densenet* "
                     "checkpoint (or scratch:inception_v3 / scratch:densenet121)")


def paper_experts(data: Any = None) -> dict[str, Any]:
    """The paper's experts (§4.3.2): scene and object bound to the checkpoint files the
    training config's `data.scene_checkpoint` / `data.object_checkpoint` name (default the
    published file names under $VNR_ENCODERS_DIR; `experts.py`), and the character expert.
    The bound paths are recorded with the build, so a dataset built from other files is
    not reused silently."""
    from vnr.benchmarks.sc2st import experts

    get = (lambda k: (data.get(k) or "")) if data is not None else (lambda k: "")
    return {"scene": functools.partial(experts.places365_expert,
                                       checkpoint=get("scene_checkpoint") or
                                       experts.PLACES365_FILE),
            "object": functools.partial(experts.senet_expert,
                                        checkpoint=get("object_checkpoint") or
                                        experts.SENET154_FILE),
            "character": character_expert}


def builder_models(config: Any, data: Any = None) -> dict[str, Any]:
    """The model functions the Sc2St builder `config` (a `Sc2StConfig`) needs: the keyframe
    `embedder` and `experts` always (used only when the config stores experts: the paper's
    networks, `paper_experts(data)`, when the config names `expert_encoders`, else the CLIP
    stand-ins), and `image_embedder` as `candidate_embedder` / `feature_embedder` when the
    config names a `candidate_encoder` / `feature_encoder`. `data`: the training config's
    `data` (the expert checkpoint files)."""
    models: dict[str, Any] = {"embedder": clip_embedder, "experts": DEFAULT_EXPERTS}
    if getattr(config, "expert_encoders", ()):
        models["experts"] = paper_experts(data)
    if config.candidate_encoder:
        models["candidate_embedder"] = image_embedder
    if config.feature_encoder:
        models["feature_embedder"] = image_embedder
    return models
