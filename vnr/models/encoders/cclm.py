"""CCLM checkpoints (zengyan-97/CCLM `.th` files) -> vnr's Swin and XLM-R towers, no torch.

CCLM saves `torch.save({"model": model.state_dict(), "config": <its yaml dict>})` as
`model_state_epoch_<n>.th` (`Pretrain.py`, `utils/checkpointer.py`);
`read_torch_checkpoint` unwraps `model`. Its keys (`models/xvlm.py`, `XVLMBase`):

* `vision_encoder.*`: the Swin (`vnr.models.encoders.swin`), every parameter plus the
  buffers `...attn.relative_position_index` and `...attn_mask` (shifted blocks), which are
  derived from the config: they may be present (shapes checked) or absent (CCLM's own
  `load_pretrained` deletes them before loading). No `head`.
* `text_encoder.bert.*` (pre-training, `BertForMaskedLM`; fine-tuned models: `text_encoder.*`,
  a `BertModel` without pooler): XLM-R-large width (1024, 16 heads, FFN 4096, vocab 250002,
  514 positions, one token type), 12 layers = every other layer of xlm-roberta-large. Layers
  `0 .. fusion_layer - 1` (6) are the text encoder (`mode="text"`); the others also carry
  `crossattention.*` (the fusion encoder over image tokens, not ported here), and
  `text_encoder.cls.*` is the MLM head. CCLM's `BertEmbeddings` (`models/xbert.py`) numbers
  positions 0, 1, 2, ... whatever the padding (BERT's scheme, not fairseq's pad-offset one
  XLM-R was trained with), so the text tower is vnr's `BertModel` with
  `position_scheme="absolute"`, no pooler; CCLM's text feature is the first token
  (`pooling="cls"`), which its `text_proj` maps to the 256-d contrastive space.
* `vision_proj`, `text_proj`, `temp`, `itm_head`, `bbox_head`: heads, ignored here.

Every problem (a missing, misshapen or unexpected tensor of the tower) is one
`CheckpointError` line naming the file and the first key, with the count of the others.
Upstream resizes `relative_position_bias_table` (bicubic `interp2d`) when a checkpoint's
window differs from the config's; that is not done here: a different table shape is an error.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from vnr.models.encoders import loading, swin
from vnr.models.encoders.loading import CheckpointError
from vnr.sharding import Rules

VISION_PREFIX = "vision_encoder."
TEXT_PREFIXES = ("text_encoder.bert.", "text_encoder.")  # pre-trained, fine-tuned
SWIN_BUFFERS = ("attn.relative_position_index", "attn_mask")  # recomputed, not read


def match(tensors: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]], where: str,
          prefix: str, *, buffers: Mapping[str, tuple[int, ...]] | None = None,
          skip: Callable[[str], bool] = lambda k: False, what: str = "CCLM tower"
          ) -> dict[str, np.ndarray]:
    """NNX parameter name -> float32 array (Flax layout) for `shapes` (NNX names and shapes)
    from a torch state dict whose keys carry `prefix`.

    `buffers` (torch key -> shape) may be present (shape checked) or absent; keys `skip`
    accepts and keys outside `prefix` are left alone; any other key under `prefix` is
    unexpected. The first problem is one `CheckpointError` line naming `where` and the key.
    """
    buffers = buffers or {}
    wanted = {loading.torch_key(k, prefix): k for k in shapes}
    mine = {k for k in tensors if k.startswith(prefix) and not skip(k)}
    if not mine & set(wanted):
        first = next(iter(tensors), None)
        raise CheckpointError(f"{where}: not a CCLM checkpoint with a {what}: none of its "
                              f"{len(tensors)} tensors is under {prefix!r} (first: {first!r})")
    problems = [f"missing key {k!r} (shape {loading.torch_shape(n, shapes[n])})"
                for k, n in wanted.items() if k not in tensors]
    problems += [f"unexpected key {k!r} (shape {tuple(tensors[k].shape)})"
                 for k in sorted(mine - set(wanted) - set(buffers))]
    for key, want in buffers.items():
        if key in tensors and tuple(tensors[key].shape) != tuple(want):
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, the {what} "
                            f"expects {tuple(want)}")
    out = {}
    for key, name in wanted.items():
        if key not in tensors:
            continue
        want = loading.torch_shape(name, shapes[name])
        if tuple(tensors[key].shape) != want:
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, the {what} "
                            f"expects {want}")
            continue
        out[name] = loading.to_nnx_layout(name, np.asarray(tensors[key], np.float32))
    loading.refuse(where, problems)
    return out


# ----------------------------------------------------------------------------- image tower


def swin_shapes(cfg: swin.SwinConfig = swin.SWIN_B_224, prefix: str = VISION_PREFIX
                ) -> dict[str, tuple[int, ...]]:
    """Every key (parameters and buffers) of the Swin as CCLM stores it -> torch shape,
    built abstractly (nothing allocated)."""
    shapes = loading.param_shapes(lambda rngs: swin.SwinTransformer(cfg, rngs=rngs))
    out = {loading.torch_key(k, prefix): loading.torch_shape(k, s) for k, s in shapes.items()}
    return {**out, **swin.buffer_shapes(cfg, prefix)}


def match_swin(tensors: Mapping[str, np.ndarray], cfg: swin.SwinConfig, where: str,
               prefix: str = VISION_PREFIX) -> dict[str, np.ndarray]:
    """The Swin's parameters (NNX names, Flax layout) from a CCLM state dict."""
    shapes = loading.param_shapes(lambda rngs: swin.SwinTransformer(cfg, rngs=rngs))
    return match(tensors, shapes, where, prefix, buffers=swin.buffer_shapes(cfg, prefix),
                 what="Swin image tower")


def swin_from_checkpoint(path: str | Path, *, cfg: swin.SwinConfig = swin.SWIN_B_224,
                         prefix: str = VISION_PREFIX, dtype: Any = jnp.float32,
                         param_dtype: Any = jnp.float32, remat: bool = False,
                         key: jax.Array | None = None, mesh: Mesh | None = None,
                         rules: Rules | None = None) -> swin.SwinTransformer:
    """CCLM's Swin image tower with the weights of a CCLM `.th` checkpoint (eval mode).

    Args:
      path: the checkpoint (`{"model": state_dict, ...}` or a bare state dict).
      cfg: the Swin's widths (CCLM's 224 model: `SWIN_B_224`).
      prefix: the tower's key prefix (`vision_encoder.`; "" for a bare Swin state dict).
      dtype, param_dtype: compute and parameter dtypes; remat: per-block rematerialisation.
      key: PRNG key of the drop-path streams; mesh, rules: placement (see `loading`).
    """
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    arrays = match_swin(read_torch_checkpoint(path), cfg, str(path), prefix)
    return loading.instantiate(
        lambda rngs: swin.SwinTransformer(cfg, dtype=dtype, param_dtype=param_dtype,
                                          remat=remat, rngs=rngs),
        arrays, key=jax.random.key(0) if key is None else key, mesh=mesh, rules=rules)


# ----------------------------------------------------------------------------- text tower


@dataclasses.dataclass(frozen=True)
class TextConfig:
    """CCLM's text encoder, the fields `BertModel` reads from a Hugging Face config; the
    defaults are CCLM's (xlm-roberta-large widths, 6 text layers); `text_config` reads the
    widths and the layer count from a checkpoint."""

    vocab_size: int = 250002
    hidden_size: int = 1024
    num_hidden_layers: int = 6  # CCLM's fusion_layer: the layers without cross-attention
    num_attention_heads: int = 16
    intermediate_size: int = 4096
    hidden_act: str = "gelu"
    max_position_embeddings: int = 514
    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    initializer_range: float = 0.02
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    position_embedding_type: str = "absolute"


def text_prefix(tensors: Mapping[str, np.ndarray]) -> str:
    """`text_encoder.bert.` (pre-training checkpoints) or `text_encoder.` (fine-tuned)."""
    for p in TEXT_PREFIXES:
        if f"{p}embeddings.word_embeddings.weight" in tensors:
            return p
    return TEXT_PREFIXES[0]


def text_config(tensors: Mapping[str, np.ndarray], heads: int = 16) -> TextConfig:
    """Widths from the tensors' shapes; the text layers are those before the first layer
    with `crossattention` (heads are not in the weights: `heads`)."""
    p = text_prefix(tensors)
    cfg = TextConfig(num_attention_heads=heads)
    shape = lambda k: tuple(tensors[p + k].shape) if p + k in tensors else None  # noqa: E731
    layers = {int(m.group(1)) for k in tensors if (m := re.match(
        re.escape(p) + r"encoder\.layer\.(\d+)\.", k))}
    fused = {int(m.group(1)) for k in tensors if (m := re.match(
        re.escape(p) + r"encoder\.layer\.(\d+)\.crossattention\.", k))}
    text_layers = min(fused) if fused else len(layers)
    words, pos, types = (shape(f"embeddings.{n}_embeddings.weight")
                         for n in ("word", "position", "token_type"))
    ffn = shape("encoder.layer.0.intermediate.dense.weight")
    if not (words and pos and types and ffn) or any(len(s) != 2 for s in (words, pos, types, ffn)):
        return dataclasses.replace(cfg, num_hidden_layers=text_layers or cfg.num_hidden_layers)
    return dataclasses.replace(cfg, vocab_size=words[0], hidden_size=words[1],
                               max_position_embeddings=pos[0], type_vocab_size=types[0],
                               intermediate_size=ffn[0], num_hidden_layers=text_layers)


def _text_model(cfg: TextConfig, **kw: Any) -> Any:
    from vnr.models.encoders.bert import BertModel

    return BertModel(cfg, add_pooling_layer=False, pooling="cls", position_scheme="absolute",
                     **kw)


def match_text(tensors: Mapping[str, np.ndarray], cfg: TextConfig, where: str
               ) -> dict[str, np.ndarray]:
    """The text tower's parameters (NNX names, Flax layout) from a CCLM state dict: the
    embeddings and layers `0 .. num_hidden_layers - 1`; the fusion layers, the MLM head
    (`cls.`) and the `position_ids` buffer are left alone."""
    shapes = loading.param_shapes(lambda rngs: _text_model(cfg, rngs=rngs))
    return match_text_shapes(tensors, shapes, cfg.num_hidden_layers, where)


def match_text_shapes(tensors: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]],
                      text_layers: int, where: str) -> dict[str, np.ndarray]:
    """`match_text` for a text tower as built (`shapes`, with `text_layers` layers)."""
    p = text_prefix(tensors)

    def skip(k: str) -> bool:
        m = re.match(re.escape(p) + r"encoder\.layer\.(\d+)\.", k)
        return bool(m and int(m.group(1)) >= text_layers) or k.startswith(
            (f"{p}cls.", "text_encoder.cls.", VISION_PREFIX)) or k.endswith(
            "embeddings.position_ids") or (p == "text_encoder." and k.startswith(
                "text_encoder.bert."))

    return match(tensors, shapes, where, p, skip=skip, what="CCLM text tower")


def text_from_checkpoint(path: str | Path, *, cfg: TextConfig | None = None, heads: int = 16,
                         dtype: Any = jnp.float32, param_dtype: Any = jnp.float32,
                         key: jax.Array | None = None, mesh: Mesh | None = None,
                         rules: Rules | None = None) -> Any:
    """CCLM's text encoder (`mode="text"`: embeddings and the layers before fusion) as vnr's
    `BertModel` (absolute positions 0..n-1, no pooler, `pooled` = first token), eval mode.
    `cfg` defaults to `text_config(tensors, heads)`; tokenise with xlm-roberta-large's
    sentencepiece tokenizer (CCLM's `text_encoder` directory)."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    tensors = read_torch_checkpoint(path)
    cfg = cfg or text_config(tensors, heads)
    arrays = match_text(tensors, cfg, str(path))
    return loading.instantiate(
        lambda rngs: _text_model(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs),
        arrays, key=jax.random.key(0) if key is None else key, mesh=mesh, rules=rules)
