"""Tiny Hugging Face checkpoints written offline, for tests and benchmarks.

``write_tiny_checkpoint(arch, directory, layout)`` saves a small random config and weights the
way a user's downloaded directory looks: ``config.json`` plus ``flax_model.msgpack``
(``layout="msgpack"``), Flax-layout ``model.safetensors`` (``"flax-safetensors"``) or the
hub's usual PyTorch-layout ``model.safetensors`` (``"pt-safetensors"``). Weights are random
(biases and LayerNorms too), so a wrong mapping cannot hide behind zeros and ones.
Needs transformers' Flax classes (transformers < 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np

ARCHS = ("bert", "albert", "xlm-roberta", "clip-p16", "clip-p32", "clip-vision")
LAYOUTS = ("msgpack", "flax-safetensors", "pt-safetensors")


def tiny_config(arch: str) -> Any:
    """A small transformers config for ``arch`` in ``ARCHS`` (width 32, 2-4 layers, 4 heads)."""
    import transformers as tf

    common = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64)
    text = dict(common, vocab_size=96, num_hidden_layers=2, max_position_embeddings=40)
    if arch == "bert":
        return tf.BertConfig(**text)
    if arch == "albert":
        groups = dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=1)
        return tf.AlbertConfig(**{**text, **groups}, embedding_size=16)
    if arch == "xlm-roberta":
        roberta = dict(max_position_embeddings=42, pad_token_id=1, type_vocab_size=1)
        return tf.XLMRobertaConfig(**{**text, **roberta})
    if arch.startswith("clip"):
        image, patch = (64, 32) if arch == "clip-p32" else (32, 16)
        vision = dict(num_hidden_layers=2, image_size=image, patch_size=patch, **common)
        if arch == "clip-vision":
            return tf.CLIPVisionConfig(projection_dim=24, **vision)
        text = dict(
            vocab_size=96, num_hidden_layers=2, max_position_embeddings=16, eos_token_id=2, **common
        )
        return tf.CLIPConfig(text_config=text, vision_config=vision, projection_dim=24)
    raise ValueError(f"arch must be one of {ARCHS}")


def flax_class(arch: str) -> Any:
    """The transformers Flax model class for ``arch``."""
    import transformers as tf

    return {
        "bert": tf.FlaxBertModel,
        "albert": tf.FlaxAlbertModel,
        "xlm-roberta": tf.FlaxXLMRobertaModel,
        "clip-p16": tf.FlaxCLIPModel,
        "clip-p32": tf.FlaxCLIPModel,
        "clip-vision": tf.FlaxCLIPVisionModel,
    }[arch]


def to_pt_layout(flat: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Flax names/layouts -> PyTorch ones (``kernel``/``embedding``/``scale`` -> ``weight``,
    dense kernels transposed, conv kernels to ``(out, in, kh, kw)``)."""
    out = {}
    for key, x in flat.items():
        module, _, leaf = key.rpartition(".")
        if leaf == "kernel":
            x = x.T if x.ndim == 2 else x.transpose(3, 2, 0, 1)
        name = f"{module}.weight" if leaf in ("kernel", "embedding", "scale") else key
        out[name] = np.array(x, order="C")  # keeps 0-d (logit_scale) 0-d
    return out


def write_tiny_checkpoint(
    arch: str, directory: str | Path, layout: str = "msgpack", seed: int = 0,
    **config: Any,
) -> tuple[Any, dict]:
    """Writes a random tiny checkpoint of ``arch`` to ``directory``.

    Args:
      arch: one of ``ARCHS``.
      directory: created if needed.
      layout: one of ``LAYOUTS``.
      seed: numpy seed of the weights.
      **config: ``tiny_config`` values to change (e.g. ``vocab_size``).

    Returns:
      ``(transformers Flax model without params, nested params)``; call the model with
      ``params=`` for reference outputs.
    """
    from flax.traverse_util import flatten_dict, unflatten_dict
    from safetensors.numpy import save_file

    cfg = tiny_config(arch)
    for key, value in config.items():
        setattr(cfg, key, value)
    model = flax_class(arch)(cfg, _do_init=False)
    shapes = jax.eval_shape(
        lambda k: model.init_weights(k, model.input_shape), jax.random.PRNGKey(0)
    )
    rng = np.random.default_rng(seed)
    flat = {
        k: (
            rng.normal(size=v.shape) * (0.2 if v.ndim < 2 else 0.05)
            + (1.0 if k[-1] == "scale" else 0.0)
        ).astype(np.float32)
        for k, v in flatten_dict(shapes).items()
    }
    params = unflatten_dict(flat)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if layout == "pt-safetensors":
        cfg.save_pretrained(d)
        named = {".".join(k): v for k, v in flat.items()}
        save_file(to_pt_layout(named), str(d / "model.safetensors"), metadata={"format": "pt"})
    elif layout in ("msgpack", "flax-safetensors"):
        model.save_pretrained(d, params=params, safe_serialization=layout == "flax-safetensors")
    else:
        raise ValueError(f"layout must be one of {LAYOUTS}")
    return model, params
