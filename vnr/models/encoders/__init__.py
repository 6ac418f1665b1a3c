"""Pretrained encoders in Flax NNX that load Hugging Face checkpoints.

Architectures (``config.json`` ``model_type`` -> module):

* ``clip`` -> ``CLIPModel`` (both towers, projections, ``logit_scale``); with
  ``tower="vision"|"text"`` -> ``CLIPVisionModel`` / ``CLIPTextModel`` with the projection.
  ``clip_vision_model`` / ``clip_text_model`` -> the single tower. ViT patch 32 and 16.
  Images are channels-last ``(batch, size, size, 3)``, normalised as CLIP's processor does.
* ``bert`` -> ``BertModel``; ``roberta`` / ``xlm-roberta`` -> ``BertModel`` with fairseq
  positions; ``albert`` -> ``AlbertModel`` (factorised embeddings, shared layer groups).

Every tower returns ``EncoderOutput(last_hidden_state, pooler_output, pooled)``:
``pooler_output`` as the original defines it (BERT-family ``tanh(dense(CLS))``; CLIP the
final-LN'd CLS / EOS token); ``pooled`` the configured embedding (CLIP: the projection when
present; BERT-family: ``"pooler"``, ``"cls"``, ``"mean"`` or ``"max"`` — sentence-transformers
checkpoints get their ``1_Pooling`` mode). Models are returned in eval mode (dropout off);
``model.train()`` turns dropout on (streams from ``rngs``). ``dtype=jnp.bfloat16`` computes in
bf16 with ``param_dtype`` (float32) parameters; softmax and LayerNorm statistics stay float32.

Entry points::

    model, tokenizer, hf_config = load_pretrained("bert-base-uncased", mesh=mesh)
    model, tokenizer, hf_config = create("scratch:tiny", rngs=nnx.Rngs(0))

``load_pretrained(name_or_dir, *, mesh=None, rules=None, dtype, param_dtype, rngs, tower,
pooling, ignore_unused)`` reads ``config.json`` and ``model.safetensors`` (or
``flax_model.msgpack``) from a directory, ``$VNR_ENCODERS_DIR/<name>`` or the hub (names:
``loading.HUB_IDS``), maps every tensor onto the NNX parameters (transposing PyTorch
layouts), raises ``CheckpointError`` for missing, misshapen or unused tensors, and places
each parameter directly into its ``NamedSharding``. Offline without the files it fails at
once, saying how to download them and where to put them.

``create(name, *, rngs, mesh, rules, dtype, param_dtype, **kwargs)`` does the same for
pretrained names and also builds random ``scratch:<size>`` (a CLIP dual encoder) or
``scratch:<arch>-<size>`` encoders, arch in ``clip``, ``clip-vision``, ``clip-text``,
``bert``, ``albert``, ``xlm-roberta``; sizes (``factory.SCRATCH_SIZES``):

* ``tiny``:  width 32, 2 layers, 2 heads, FFN 64, vocab 1024, 64 positions, 32x32 images,
  patch 16, projection 32 (ALBERT embeddings 16) — for tests;
* ``small``: width 256, 4 layers, 4 heads, FFN 1024, vocab 30522, 128 positions, 224x224
  images, patch 32, projection 256 (ALBERT embeddings 128).

Keyword overrides change any config field (``create("scratch:bert-tiny", vocab_size=30522)``).

Sharding: parameters carry logical names (``vocab``, ``embed``, ``mlp``, ``heads``, ``norm``,
``pos``, ``patch``; see ``layers``) mapped to mesh axes by ``rules`` (default
``vnr.sharding.DEFAULT_RULES``: vocab/mlp/heads -> ``"model"``, the rest replicated); a dim the
mesh axis does not divide is replicated.
"""

import importlib
from typing import Any

# Public name -> (module, its name there): imported on first use, so a run that only needs a
# tokenizer or the loader does not import (and trace-register) every architecture.
_LAZY = {
    "AlbertModel": ("bert", "AlbertModel"),
    "BertModel": ("bert", "BertModel"),
    "CLIPModel": ("clip", "CLIPModel"),
    "CLIPOutput": ("clip", "CLIPOutput"),
    "CLIPTextModel": ("clip", "CLIPTextModel"),
    "CLIPVisionModel": ("clip", "CLIPVisionModel"),
    "SCRATCH_ARCHS": ("factory", "SCRATCH_ARCHS"),
    "SCRATCH_SIZES": ("factory", "SCRATCH_SIZES"),
    "builder": ("factory", "builder"),
    "create": ("factory", "create"),
    "load_pretrained": ("factory", "load_pretrained"),
    "scratch_config": ("factory", "scratch_config"),
    "EncoderOutput": ("layers", "EncoderOutput"),
    "mean_pool": ("layers", "mean_pool"),
    "HUB_IDS": ("loading", "HUB_IDS"),
    "CheckpointError": ("loading", "CheckpointError"),
    "DEFAULT_RULES": ("vnr.sharding", "DEFAULT_RULES"),
    "logical_to_mesh": ("vnr.sharding", "logical_to_spec"),
    "sharding_for": ("vnr.sharding", "named_sharding"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _LAZY[name]
    module = module if module.startswith("vnr.") else f"{__name__}.{module}"
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_RULES",
    "HUB_IDS",
    "SCRATCH_ARCHS",
    "SCRATCH_SIZES",
    "AlbertModel",
    "BertModel",
    "CLIPModel",
    "CLIPOutput",
    "CLIPTextModel",
    "CLIPVisionModel",
    "CheckpointError",
    "EncoderOutput",
    "builder",
    "create",
    "load_pretrained",
    "logical_to_mesh",
    "mean_pool",
    "scratch_config",
    "sharding_for",
]
