"""Name -> encoder: ``load_pretrained`` (checkpoint weights) and ``create`` (also ``scratch:``).

Architectures are picked by ``config.json``'s ``model_type`` through the ``_BUILDERS`` dict:
``bert``, ``roberta`` / ``xlm-roberta``, ``albert``, ``clip`` (both towers, or one with
``tower=``), ``clip_vision_model``, ``clip_text_model``. Anything else is an error.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from vnr.models.encoders.bert import AlbertModel, BertModel
from vnr.models.encoders.clip import CLIPModel, CLIPTextModel, CLIPVisionModel
from vnr.models.encoders.loading import (
    CheckpointError,
    Rules,
    instantiate,
    match_tensors,
    param_shapes,
    read_checkpoint,
    resolve,
)
from vnr.models.encoders.tokenizers import saved_tokenizer

Ctor = Callable[[nnx.Rngs], nnx.Module]

# Pre-training heads a base-model checkpoint may carry; they are skipped, not errors.
_HEADS = {
    "bert": ("cls.",),
    "roberta": ("lm_head.",),
    "xlm-roberta": ("lm_head.",),
    "albert": ("predictions.", "sop_classifier."),
}
_PREFIXES = {
    "bert": ("", "bert."),
    "roberta": ("", "roberta."),
    "xlm-roberta": ("", "roberta."),
    "albert": ("", "albert."),
}
_OTHER_TOWER = {
    "vision": ("text_model.", "text_projection.", "logit_scale"),
    "text": ("vision_model.", "visual_projection.", "logit_scale"),
}

_SIZE_FIELDS = (
    # width, layers, heads, FFN width, vocab, text positions, image side, patch, projection,
    # ALBERT factorised-embedding width
    *("hidden", "layers", "heads", "mlp", "vocab", "positions", "image", "patch"),
    *("projection", "embedding"),
)
SCRATCH_SIZES: dict[str, dict[str, int]] = {
    name: dict(zip(_SIZE_FIELDS, row, strict=True))
    for name, row in {
        "tiny": (32, 2, 2, 64, 1024, 64, 32, 16, 32, 16),
        "small": (256, 4, 4, 1024, 30522, 128, 224, 32, 256, 128),
        # CLIP ViT-B/32's shapes (the MoviePuzzle paper's towers) for paper-size benchmarks
        # without a checkpoint; its text tower is narrower (_TEXT_SIZES).
        "b32": (768, 12, 12, 3072, 49408, 77, 224, 32, 512, 128),
    }.items()
}
# Text-tower fields that differ from the vision tower's in a CLIP size.
_TEXT_SIZES: dict[str, dict[str, int]] = {"b32": dict(hidden=512, heads=8, mlp=2048)}
SCRATCH_ARCHS = ("clip", "clip-vision", "clip-text", "bert", "albert", "xlm-roberta")


def _bert_family(cfg: Any, opts: dict[str, Any]) -> tuple[Ctor, tuple[str, ...], tuple[str, ...]]:
    mt = cfg.model_type
    kw = dict(
        add_pooling_layer=opts["add_pooling_layer"],
        pooling=opts["pooling"],
        dtype=opts["dtype"],
        param_dtype=opts["param_dtype"],
    )
    if mt == "albert":
        ctor = lambda r: AlbertModel(cfg, rngs=r, **kw)
    else:
        scheme = "absolute" if mt == "bert" else "roberta"
        ctor = lambda r: BertModel(cfg, position_scheme=scheme, rngs=r, **kw)
    return ctor, _PREFIXES[mt], _HEADS[mt]


def _clip(cfg: Any, opts: dict[str, Any]) -> tuple[Ctor, tuple[str, ...], tuple[str, ...]]:
    kw = dict(dtype=opts["dtype"], param_dtype=opts["param_dtype"])
    tower, mt = opts["tower"], cfg.model_type
    if mt == "clip" and tower is None:
        return (lambda r: CLIPModel(cfg, rngs=r, **kw)), ("",), ()
    if mt == "clip":
        sub = copy.deepcopy(cfg.vision_config if tower == "vision" else cfg.text_config)
        sub.projection_dim = cfg.projection_dim
        proj, ignore = True, _OTHER_TOWER[tower]
    else:
        sub, proj, ignore = cfg, opts["with_projection"], ()
    cls = CLIPVisionModel if (tower or mt.split("_")[1]) == "vision" else CLIPTextModel
    return (lambda r: cls(sub, with_projection=proj, rngs=r, **kw)), ("",), ignore


_BUILDERS: dict[str, Callable[..., tuple[Ctor, tuple[str, ...], tuple[str, ...]]]] = {
    "bert": _bert_family,
    "roberta": _bert_family,
    "xlm-roberta": _bert_family,
    "albert": _bert_family,
    "clip": _clip,
    "clip_vision_model": _clip,
    "clip_text_model": _clip,
}


def builder(
    cfg: Any,
    *,
    tower: str | None = None,
    add_pooling_layer: bool = True,
    pooling: str | None = None,
    with_projection: bool = False,
    dtype: Any = jnp.float32,
    param_dtype: Any = jnp.float32,
) -> tuple[Ctor, tuple[str, ...], tuple[str, ...]]:
    """The constructor for a Hugging Face config, and how its checkpoints are named.

    Args:
      cfg: a transformers config (``model_type`` selects the architecture).
      tower: for ``clip`` configs, ``"vision"`` or ``"text"`` to build one tower (with its
        projection); None = the dual encoder.
      add_pooling_layer: BERT-family pooler layer.
      pooling: BERT-family ``pooled`` output (``pooler``/``cls``/``mean``/``max``).
      with_projection: for single-tower CLIP configs, build the projection.
      dtype: compute dtype; param_dtype: parameter dtype.

    Returns:
      ``(rngs -> module, checkpoint name prefixes, ignorable tensor prefixes)``.
    """
    mt = getattr(cfg, "model_type", None)
    if mt not in _BUILDERS:
        raise CheckpointError(
            f"unsupported architecture: model_type={mt!r} "
            f"(architectures={getattr(cfg, 'architectures', None)}); supported: {sorted(_BUILDERS)}"
        )
    if tower not in (None, "vision", "text") or (tower and mt != "clip"):
        raise ValueError(f"tower={tower!r} needs a 'clip' config and 'vision' or 'text'")
    opts = dict(
        tower=tower,
        add_pooling_layer=add_pooling_layer,
        pooling=pooling,
        with_projection=with_projection,
        dtype=dtype,
        param_dtype=param_dtype,
    )
    return _BUILDERS[mt](cfg, opts)


def sentence_transformers_pooling(directory: Path) -> str | None:
    """``"mean"``/``"cls"``/``"max"`` from a sentence-transformers ``1_Pooling/config.json``."""
    path = Path(directory) / "1_Pooling" / "config.json"
    if not path.is_file():
        return None
    conf = json.loads(path.read_text())
    for flag, kind in (
        ("pooling_mode_mean_tokens", "mean"),
        ("pooling_mode_cls_token", "cls"),
        ("pooling_mode_max_tokens", "max"),
    ):
        if conf.get(flag):
            return kind
    return None


def _key(rngs: nnx.Rngs | int | None) -> jax.Array:
    """A typed PRNG key from ``rngs`` (its ``params`` stream), an int seed, or seed 0."""
    if rngs is None or isinstance(rngs, int):
        return jax.random.key(rngs or 0)
    try:
        key = rngs.params()
    except (AttributeError, KeyError):  # an Rngs with only a dropout stream
        key = rngs.dropout()
    return (
        key
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
        else jax.random.wrap_key_data(key)
    )


def load_pretrained(
    name_or_dir: str | Path,
    *,
    mesh: Mesh | None = None,
    rules: Rules | None = None,
    dtype: Any = jnp.float32,
    param_dtype: Any = jnp.float32,
    rngs: nnx.Rngs | int | None = None,
    tower: str | None = None,
    pooling: str | None = None,
    ignore_unused: Sequence[str] = (),
) -> tuple[nnx.Module, Any, Any]:
    """Loads a Hugging Face checkpoint into our NNX encoder, sharded on ``mesh``.

    Args:
      name_or_dir: a directory, a short name (``clip-vit-base-patch32``, ``bert-base-uncased``,
        ``albert-base-v2``, ``xlm-roberta-base``, ...) or a hub id; see ``loading.resolve``.
      mesh: device mesh to place parameters on; None = default device.
      rules: logical-to-mesh rules (default ``vnr.sharding.DEFAULT_RULES``).
      dtype: compute dtype (``jnp.bfloat16`` for bf16 compute); param_dtype: parameter dtype.
      rngs: dropout rngs (``nnx.Rngs``, an int seed, or None = seed 0).
      tower: ``"vision"``/``"text"`` to keep one tower (with projection) of a CLIP checkpoint.
      pooling: BERT-family ``pooled`` kind; default from a sentence-transformers
        ``1_Pooling/config.json`` if present, else the pooler (CLS without one).
      ignore_unused: extra tensor-name prefixes allowed to stay unused (e.g. ``"classifier."``).

    Returns:
      ``(model in eval mode, fast tokenizer or None, transformers config)``.

    Raises:
      FileNotFoundError: nothing to load (message says where to put the files).
      CheckpointError: unsupported architecture, missing / misshapen / unused tensors.
    """
    from transformers import AutoConfig

    directory = resolve(name_or_dir)
    cfg = AutoConfig.from_pretrained(str(directory))
    tensors, layout = read_checkpoint(directory)
    ctor, prefixes, ignore = builder(
        cfg,
        tower=tower,
        add_pooling_layer=any("pooler" in k for k in tensors),
        pooling=pooling or sentence_transformers_pooling(directory),
        with_projection=any(
            k.startswith(("visual_projection", "text_projection")) for k in tensors
        ),
        dtype=dtype,
        param_dtype=param_dtype,
    )
    try:
        arrays = match_tensors(
            param_shapes(ctor),
            tensors,
            layout,
            prefixes=prefixes,
            ignore=ignore + tuple(ignore_unused),
        )
    except CheckpointError as e:
        raise CheckpointError(
            f"{directory} (config.json model_type={cfg.model_type!r}, {layout} layout): {e}"
        ) from None
    model = instantiate(ctor, arrays, key=_key(rngs), mesh=mesh, rules=rules)
    return model, saved_tokenizer(directory), cfg


def scratch_config(arch: str = "clip", size: str = "tiny", **overrides: Any) -> Any:
    """A transformers config for a small randomly initialised encoder.

    Args:
      arch: one of ``SCRATCH_ARCHS``.
      size: a key of ``SCRATCH_SIZES``.
      **overrides: config attributes to replace (for CLIP, set on every sub-config having them).

    Returns:
      The config.
    """
    import transformers as tf

    if arch not in SCRATCH_ARCHS or size not in SCRATCH_SIZES:
        raise ValueError(
            f"scratch encoders: arch in {SCRATCH_ARCHS}, size in {list(SCRATCH_SIZES)}"
        )
    s = SCRATCH_SIZES[size]
    common = dict(
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        intermediate_size=s["mlp"],
    )
    text = dict(common, vocab_size=s["vocab"], max_position_embeddings=s["positions"])
    if arch.startswith("clip"):
        vc = tf.CLIPVisionConfig(
            **common, image_size=s["image"], patch_size=s["patch"], projection_dim=s["projection"]
        )
        t = {**s, **_TEXT_SIZES.get(size, {})}
        text.update(hidden_size=t["hidden"], num_attention_heads=t["heads"],
                    intermediate_size=t["mlp"])
        tc = tf.CLIPTextConfig(**text, projection_dim=s["projection"])
        cfg = {
            "clip": lambda: tf.CLIPConfig(
                text_config=tc.to_dict(), vision_config=vc.to_dict(), projection_dim=s["projection"]
            ),
            "clip-vision": lambda: vc,
            "clip-text": lambda: tc,
        }[arch]()
        for sub in (cfg, getattr(cfg, "vision_config", None), getattr(cfg, "text_config", None)):
            for k, v in overrides.items():
                if sub is not None and hasattr(sub, k):
                    setattr(sub, k, v)
        return cfg
    if arch == "albert":
        return tf.AlbertConfig(**{**text, "embedding_size": s["embedding"], **overrides})
    cls = tf.BertConfig if arch == "bert" else tf.XLMRobertaConfig
    return cls(**{**text, **overrides})


def create(
    name: str,
    *,
    rngs: nnx.Rngs | int | None = None,
    mesh: Mesh | None = None,
    rules: Rules | None = None,
    dtype: Any = jnp.float32,
    param_dtype: Any = jnp.float32,
    **kwargs: Any,
) -> tuple[nnx.Module, Any, Any]:
    """An encoder by config name: pretrained weights, or ``scratch:[<arch>-]<size>``.

    Args:
      name: ``scratch:<size>`` (a tiny/small CLIP dual encoder), ``scratch:<arch>-<size>``
        (``arch`` in ``SCRATCH_ARCHS``, e.g. ``scratch:bert-tiny``), or anything
        ``load_pretrained`` takes.
      rngs: parameter / dropout rngs (``nnx.Rngs`` or int seed).
      mesh: device mesh; rules: logical-to-mesh rules.
      dtype: compute dtype; param_dtype: parameter dtype.
      **kwargs: scratch: config overrides (``vocab_size=30522``, ``image_size=224``...);
        otherwise passed to ``load_pretrained`` (``tower``, ``pooling``, ``ignore_unused``).

    Returns:
      ``(model in eval mode, tokenizer or None, transformers config)``.
    """
    if not name.startswith("scratch:"):
        return load_pretrained(
            name, mesh=mesh, rules=rules, dtype=dtype, param_dtype=param_dtype, rngs=rngs, **kwargs
        )
    spec = name.removeprefix("scratch:")
    arch, _, size = spec.rpartition("-")
    opts = {k: kwargs.pop(k) for k in ("tower", "pooling") if k in kwargs}
    cfg = scratch_config(arch or "clip", size, **kwargs)
    ctor, _, _ = builder(
        cfg, dtype=dtype, param_dtype=param_dtype, with_projection=cfg.model_type != "clip", **opts
    )
    return instantiate(ctor, None, key=_key(rngs), mesh=mesh, rules=rules), None, cfg
