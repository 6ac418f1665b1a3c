"""Chinese-CLIP (Hugging Face ``ChineseCLIPModel``, e.g. OFA-Sys/chinese-clip-vit-huge-patch14)
in Flax NNX, composed of the CLIP ViT of ``clip.py`` and the BERT of ``bert.py``.

Movie101 fine-tunes Chinese-CLIP-huge on frames for global shot retrieval and scores EMScore
with it. Architecture (ViT-H/14 + RoBERTa-wwm-ext-large for the huge checkpoint)::

    text_model: BERT (RoBERTa-wwm-ext keeps BERT's layout and absolute positions 0..n-1,
      token types, post-LN layers, exact GELU), built without a pooler (upstream's
      ``add_pooling_layer=False``) -> last_hidden_state [B, L, Dt]
    text embedding = text_projection(last_hidden_state[:, 0]): the [CLS] token, not a pooler
      (upstream's ``get_text_features`` and ``forward`` both take token 0)
    vision_model: CLIP's ViT (patch conv without bias, class token, learned positions,
      pre_layrnorm, pre-LN layers with quick_gelu) -> post_layernorm(h[:, 0])
    image embedding = visual_projection(that pooled CLS); both projections have no bias
    logits_per_text = normalise(text) @ normalise(image).T * exp(logit_scale)

Images are **channels-last** ``(batch, size, size, 3)``, normalised (``preprocessing``).
Inputs to the text tower are int ``(batch, length)`` ids with an optional padding mask.

Keys: NNX paths are the state-dict keys with ``kernel``/``scale``/``embedding`` for
``weight`` (``text_model.encoder.layer.3.attention.self.query``,
``vision_model.encoder.layers.3.self_attn.q_proj``, ``vision_model.embeddings.patch_embedding``
[W, 3, 14, 14] stored as [14, 14, 3, W], ``text_projection``, ``visual_projection``,
``logit_scale``). Files saved by older transformers (the hub's pickle has int64 storages)
also hold the ``position_ids`` / ``token_type_ids`` buffers, which are skipped.

Loading (``from_pretrained``): ``config.json`` plus ``pytorch_model.bin`` (what the hub's main
branch ships, read without torch and whole: about twice its 3.8 GB in host memory) or
``model.safetensors``. Every parameter gets exactly one tensor of its shape and every tensor
is used (buffers aside); the first problem is one ``CheckpointError`` line naming the file and
the key. ``match`` does the same for any subtree (the whole model, one tower with or without
its projection, or a bare tower transformer), for the trainer's ``pretrained`` hook.

Preprocessing (``ChineseCLIPImageProcessor`` with the hub's ``preprocessor_config.json``):
frames resized to the 224x224 square (bicubic; no aspect-preserving resize and no centre
crop), scaled to [0, 1], normalised with CLIP's mean / std (``preprocessing``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from vnr.models.encoders import clip, loading, videomae
from vnr.models.encoders.bert import BertModel
from vnr.models.encoders.layers import EncoderOutput, dense, param
from vnr.models.encoders.loading import CheckpointError
from vnr.sharding import Rules

Config = Any  # transformers ChineseCLIPConfig (text_config, vision_config, projection_dim)
MODEL_TYPE = "chinese_clip"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
# Top-level children of ChineseCLIPModel (= first components of its keys).
PARTS = ("text_model", "vision_model", "text_projection", "visual_projection", "logit_scale")
# A parameter only the bare vision / text transformer has, and that tower's key prefix.
BARE_TOWERS = {"embeddings.class_embedding": "vision_model.",
               "embeddings.word_embeddings.embedding": "text_model."}


# ----------------------------------------------------------------------------- modules


def _projection(din: int, dout: int, std: float, **kw: Any) -> nnx.Linear:
    return dense(din, dout, ("embed", None), use_bias=False, std=std, **kw)


def _vision(module: nnx.Module, cfg: Config, with_projection: bool, **kw: Any) -> None:
    vc = cfg.vision_config
    module.vision_model = clip.CLIPVisionTransformer(vc, **kw)
    module.visual_projection = (_projection(vc.hidden_size, cfg.projection_dim,
                                            vc.initializer_range, **kw)
                                if with_projection else None)


def _text(module: nnx.Module, cfg: Config, with_projection: bool, **kw: Any) -> None:
    tc = cfg.text_config
    module.text_model = BertModel(tc, add_pooling_layer=False, pooling="cls", **kw)
    module.text_projection = (_projection(tc.hidden_size, cfg.projection_dim,
                                          tc.initializer_range, **kw)
                              if with_projection else None)


class ChineseCLIPVisionModel(nnx.Module):
    """The image tower (``vision_model``), optionally with ``visual_projection`` (then
    ``pooled`` is the projected, unnormalised image embedding).

    Args:
      cfg: ``ChineseCLIPConfig`` (its ``vision_config`` and ``projection_dim``).
      with_projection: build ``visual_projection``.
      dtype: compute dtype; param_dtype: parameter dtype; rngs: ``params`` / ``dropout``.
    """

    def __init__(self, cfg: Config, *, with_projection: bool = True, dtype: Any = jnp.float32,
                 param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        _vision(self, cfg, with_projection, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

    # Same attribute names as clip.CLIPVisionModel, so the same forward pass.
    __call__ = clip.CLIPVisionModel.__call__


class ChineseCLIPTextModel(nnx.Module):
    """The text tower (``text_model``, BERT without pooler), optionally with
    ``text_projection``; ``pooled`` is the [CLS] state, projected when there is one.

    Args:
      cfg: ``ChineseCLIPConfig`` (its ``text_config`` and ``projection_dim``).
      with_projection: build ``text_projection``.
      dtype: compute dtype; param_dtype: parameter dtype; rngs: ``params`` / ``dropout``.
    """

    def __init__(self, cfg: Config, *, with_projection: bool = True, dtype: Any = jnp.float32,
                 param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        _text(self, cfg, with_projection, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array | None = None,
                 token_type_ids: jax.Array | None = None, position_ids: jax.Array | None = None,
                 *, deterministic: bool | None = None) -> EncoderOutput:
        """Encodes token ids ``(batch, length)`` with an optional padding mask."""
        out = self.text_model(input_ids, attention_mask, token_type_ids, position_ids,
                              deterministic=deterministic)
        proj = self.text_projection
        return out if proj is None else out.replace(pooled=proj(out.pooled))


class ChineseCLIPModel(nnx.Module):
    """Both towers, both projections and ``logit_scale`` (HF ``ChineseCLIPModel``).

    Args:
      cfg: ``ChineseCLIPConfig``.
      dtype: compute dtype; param_dtype: parameter dtype; rngs: ``params`` / ``dropout``.
    """

    def __init__(self, cfg: Config, *, dtype: Any = jnp.float32, param_dtype: Any = jnp.float32,
                 rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        _text(self, cfg, True, **kw)
        _vision(self, cfg, True, **kw)
        self.logit_scale = param(jnp.asarray(cfg.logit_scale_init_value, param_dtype), ())

    # The towers' forward passes (same attribute names); ``pooled`` is the unnormalised
    # projected embedding. ``__call__`` -> ``clip.CLIPOutput`` (unit-norm embeddings,
    # ``logits_per_image`` [images, texts]) is CLIP's, over these two.
    encode_image = ChineseCLIPVisionModel.__call__
    encode_text = ChineseCLIPTextModel.__call__
    __call__ = clip.CLIPModel.__call__


# ----------------------------------------------------------------------------- preprocessing


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """What the checkpoint's image processor does: resize to ``size`` x ``size`` (bicubic;
    the hub's file turns the centre crop off, so frames are squashed to the square), then
    ``(x / 255 - mean) / std`` per channel."""

    size: int = 224
    mean: tuple[float, float, float] = CLIP_MEAN
    std: tuple[float, float, float] = CLIP_STD
    center_crop: bool = False

    def normalise(self, frames: np.ndarray) -> np.ndarray:
        """uint8 RGB frames [..., size, size, 3] (already resized) -> the float32 input."""
        return videomae.normalise(frames, self.mean, self.std)


def preprocessing(directory: str | Path | None = None) -> Preprocessing:
    """The preprocessing of a checkpoint directory's ``preprocessor_config.json`` (square
    ``size``, ``image_mean`` / ``image_std``, ``do_center_crop``); the hub's values (CLIP's
    mean / std, 224 px, no crop) without one."""
    path = Path(directory) / "preprocessor_config.json" if directory is not None else None
    if path is None or not path.is_file():
        return Preprocessing()
    raw = json.loads(path.read_text())
    size = raw.get("size", 224)
    if isinstance(size, dict):
        sides = {size.get("height"), size.get("width")} - {None}
        sides = sides or {size.get("shortest_edge")}
        if len(sides) != 1:
            raise CheckpointError(f"{path}: size {size} is not square")
        size = sides.pop()
    return Preprocessing(int(size), tuple(raw.get("image_mean", CLIP_MEAN)),
                         tuple(raw.get("image_std", CLIP_STD)),
                         bool(raw.get("do_center_crop", False)))


# ----------------------------------------------------------------------------- loading


def read_config(directory: str | Path) -> Config:
    """The ``ChineseCLIPConfig`` of a checkpoint directory (one-line ``CheckpointError``
    naming the file when it is absent or of another model type)."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: no config.json in the checkpoint directory")
    raw = json.loads(path.read_text())
    if raw.get("model_type") != MODEL_TYPE:
        raise CheckpointError(f"{path}: model_type {raw.get('model_type')!r}, expected "
                              f"{MODEL_TYPE!r}")
    from transformers import ChineseCLIPConfig

    return ChineseCLIPConfig.from_dict(raw)


def layout(shapes: Mapping[str, Sequence[int]], where: str | Path) -> tuple[str, tuple[str, ...]]:
    """``(key prefix, prefixes left unread)`` of a subtree, from its parameter names: names
    under ``PARTS`` read those parts (unnamed parts are left, e.g. the text tower and
    ``logit_scale`` for a vision tower); a bare tower transformer (``embeddings.*`` at the
    top) reads ``vision_model.`` or ``text_model.`` keys and leaves the rest."""
    tops = {n.split(".")[0] for n in shapes}
    if tops & set(PARTS):
        prefix, wanted = "", tops
    else:
        hit = next((p for name, p in BARE_TOWERS.items() if name in shapes), None)
        if hit is None:
            first = next(iter(shapes), None)
            raise CheckpointError(f"{where}: the subtree is neither a Chinese-CLIP model nor "
                                  f"one of its towers (parameter {first!r}; expected names "
                                  f"under {', '.join(PARTS)}, or a bare tower)")
        prefix, wanted = hit, {hit[:-1]}
    left = tuple(p if p == "logit_scale" else f"{p}." for p in PARTS if p not in wanted)
    return prefix, left


def match(tensors: Mapping[str, np.ndarray], shapes: Mapping[str, Sequence[int]],
          where: str | Path) -> dict[str, np.ndarray]:
    """NNX parameter name -> array (NNX layout) for ``shapes`` (the NNX names and shapes of
    a Chinese-CLIP subtree as built, see ``layout``) from a Hugging Face state dict. Every
    parameter needs one tensor of its shape, every tensor of the parts read must be used
    (``position_ids`` / ``token_type_ids`` buffers aside); the first problem is one
    ``CheckpointError`` line naming ``where`` and the key, with the count of the others."""
    prefix, left = layout(shapes, where)
    # Top-level leaves (logit_scale) are matched here: they have no module for torch_key.
    top = {n: tuple(s) for n, s in shapes.items() if "." not in n}
    nested = {n: tuple(s) for n, s in shapes.items() if "." in n}
    arrays = videomae.match(nested, tensors, Path(where), (prefix,), (*left, *top))
    for name, shape in top.items():
        key = prefix + name
        if key not in tensors:
            raise CheckpointError(f"{where}: missing tensor {key!r} for parameter {name!r} "
                                  f"of shape {shape}")
        if tuple(tensors[key].shape) != shape:
            raise CheckpointError(f"{where}: tensor {key!r} has shape "
                                  f"{tuple(tensors[key].shape)} in the checkpoint but the "
                                  f"model's parameter {name!r} has shape {shape}")
        arrays[name] = np.asarray(tensors[key])
    return arrays


TOWERS = {None: ChineseCLIPModel, "vision": ChineseCLIPVisionModel,
          "text": ChineseCLIPTextModel}


def from_pretrained(name_or_dir: str | Path, *, tower: str | None = None,
                    dtype: Any = jnp.float32, param_dtype: Any = jnp.float32,
                    key: jax.Array | None = None, mesh: Mesh | None = None,
                    rules: Rules | None = None, weights: str | Path | None = None
                    ) -> nnx.Module:
    """Chinese-CLIP with a Hugging Face checkpoint's weights (or, with `weights`, those of a
    Chinese-CLIP training checkpoint in that directory's architecture).

    Args:
      name_or_dir: a directory, or a name / hub id ``loading.resolve`` finds locally.
      tower: None for ``ChineseCLIPModel``; ``"vision"`` / ``"text"`` for that tower with
        its projection (the other tower and ``logit_scale`` are left unread).
      dtype: compute dtype; param_dtype: parameter dtype.
      key: PRNG key for the dropout streams; mesh, rules: placement (``loading.instantiate``).
      weights: a file saved by Chinese-CLIP's training code (e.g. Movie101's fine-tuned
        cnclip-huge-movie101.pt; the ``cn_clip`` port); the directory then gives only the
        architecture (config.json).

    Raises:
      CheckpointError: one line naming the file and the offending key.
    """
    if tower not in TOWERS:
        raise ValueError(f"tower must be one of {sorted(TOWERS, key=str)}, got {tower!r}")
    directory = loading.resolve(name_or_dir)
    cfg = read_config(directory)
    cls = TOWERS[tower]

    def ctor(rngs: nnx.Rngs) -> nnx.Module:
        return cls(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

    if weights:
        from vnr.models.encoders import cn_clip

        if not Path(weights).exists():
            raise CheckpointError(f"{weights}: no such checkpoint (a Chinese-CLIP training "
                                  "checkpoint; nothing is downloaded)")
        tensors, where = cn_clip.read_tensors(weights)
        arrays = match(tensors, loading.param_shapes(ctor), where)
    else:
        tensors, where = videomae.read_tensors(directory)
        arrays = match(tensors, loading.param_shapes(ctor), where)
    return loading.instantiate(ctor, arrays, key=jax.random.key(0) if key is None else key,
                               mesh=mesh, rules=rules)
