"""Singularity (Lei et al. 2022, jayleicn/singularity) in NNX, with a loader of its released
`.pth` checkpoints (read without torch).

Upstream (`models/model_retrieval_base.py`, `SingularityRetrievalBase`):

* `vision_encoder`: Hugging Face `BeitModel` (beit-base-patch16-224-pt22k-ft22k, mean
  pooling, pooler built) run on every frame alone (`vnr.models.encoders.beit`);
  `vision_layernorm` (LayerNorm, eps 1e-12) normalises its tokens, not the pooled output:
  tokens = vision_layernorm(last hidden state) [B, T, 1 + L, C], pooled = BEiT's
  pooler.layernorm(mean of patch tokens) [B, T, C] (`_encode_image`).
* Temporal variant (`singularity_temporal_*`; README: `add_temporal_embed`, a 2-layer
  `temporal_vision_encoder`): `temporal_embeddings` [1, F, 1, C] (in every file, unused
  without the flag) added to the tokens (first T rows; T > F: `F.interpolate` linear), then
  with T > 1 2 BERT layers over time at each token position (`temporal_encode_frames`);
  pooled stays BEiT's unless `update_pooler_embed` (then the temporal [CLS]).
* `text_encoder`: xbert, BERT-base: layers 0..8 (`fusion_layer` 9) are the text encoder
  (`mode="text"`), layers 9..11 add `crossattention` over the frames' tokens (k/v from
  `encoder_width` 768) between self-attention and FFN (`mode="fusion"`).
* `vision_proj`, `text_proj` (768 -> 256), `temp` (0.07 at init), `itm_head` (768 -> 2).

Single-frame bias / late fusion of scores: retrieval scores mean over frames of the cosine
similarity between each frame's projection and the text's [CLS] projection
(`get_sim`; evaluation uses t = 1, training divides by `temp`). `video_embed` is therefore
the mean of the L2-normalised frame embeddings (not re-normalised: its norm is at most 1), so
`video_embed @ text_embed.T` is upstream's score exactly. The ITM / fused path feeds all the
frames' tokens at once (`eval_frame_ensemble="concat"`, upstream's default) as
`encoder_hidden_states`; the fused [CLS] goes to `itm_head` (logit 1 = match).

Checkpoints: `torch.save({"model": state_dict, "config": ..., ...})`. Pre-trained files
(`singularity_5m.pth`, `singularity_17m.pth`, `singularity_temporal_{5m,17m}.pth`) hold
`BertForMaskedLM`: `text_encoder.bert.*` plus the MLM head `text_encoder.cls.*` (skipped);
fine-tuned retrieval files (`ft_<task>_singularity*.pth`) hold `text_encoder.*`. Derived
buffers (`position_ids`, BEiT's `relative_position_index`: shape checked) may be present;
momentum copies (`*_m.*`), queues and `text_decoder.*` (VQA) are skipped. Frames: resized
to 224 (bicubic), mean = std = 0.5 (`dataset/__init__.py`); text: bert-base-uncased.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from vnr.models import attention
from vnr.models.encoders import beit, bert, layers, loading
from vnr.models.encoders.layers import Node, dense, layer_norm, param
from vnr.models.encoders.loading import CheckpointError
from vnr.sharding import Rules

TEXT_PREFIXES = ("text_encoder.bert.", "text_encoder.")  # pre-trained, fine-tuned
SKIPPED = ("text_encoder.cls.", "text_decoder.", "image_queue", "text_queue", "idx_queue")
INDEX = "relative_position_bias.relative_position_index"
TABLE = "relative_position_bias.relative_position_bias_table"


@dataclasses.dataclass(frozen=True)
class XBertConfig:
    """xbert's `configs/config_bert.json` (bert-base-uncased plus `fusion_layer`,
    `encoder_width`), the fields `bert.BertModel`'s layers read."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    initializer_range: float = 0.02
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    fusion_layer: int = 9
    encoder_width: int = 768
    position_embedding_type: str = "absolute"


@dataclasses.dataclass(frozen=True)
class SingularityConfig:
    """Sizes and switches; defaults are the released single-frame models'."""

    vision: beit.BeitConfig = beit.BEIT_BASE_224
    text: XBertConfig = XBertConfig()
    embed_dim: int = 256
    temp: float = 0.07
    num_frames: int = 1  # rows of temporal_embeddings (video_input.num_frames in training)
    temporal_layers: int = 0  # temporal_vision_encoder.num_layers; 0 = not built
    add_temporal_embed: bool = False
    update_pooler_embed: bool = False

    def check(self) -> None:
        """ValueError (one line) for widths upstream's wiring cannot join."""
        v, t = self.vision.hidden_size, self.text
        if t.encoder_width != v:
            raise ValueError(f"encoder_width {t.encoder_width} != the BEiT width {v}")
        if self.temporal_layers and t.hidden_size != v:
            raise ValueError(f"the temporal encoder has the text width {t.hidden_size}, the "
                             f"BEiT tokens {v}")
        if not 0 <= t.fusion_layer <= t.num_hidden_layers:
            raise ValueError(f"fusion_layer {t.fusion_layer} outside 0..{t.num_hidden_layers}")


SINGULARITY = SingularityConfig()  # singularity_{5m,17m}.pth
SINGULARITY_TEMPORAL = SingularityConfig(num_frames=4, temporal_layers=2,
                                         add_temporal_embed=True)


def l2_normalize(x: jax.Array, eps: float = 1e-12) -> jax.Array:
    """torch's `F.normalize(x, dim=-1)`: x / max(||x||, eps)."""
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), eps)


def interpolation_matrix(old: int, new: int) -> np.ndarray:
    """[new, old] weights of `F.interpolate(mode="linear", align_corners=False)`."""
    w = np.zeros((new, old), np.float32)
    for i in range(new):
        src = max((i + 0.5) * old / new - 0.5, 0.0)
        lo = min(int(math.floor(src)), old - 1)
        hi, frac = min(lo + 1, old - 1), src - lo
        w[i, lo] += 1.0 - frac
        w[i, hi] += frac
    return w


class FusionLayer(bert.BertLayer):
    """xbert's layer at or after `fusion_layer`: self-attention, cross-attention over the
    frames' tokens (`crossattention.self.key/value` from `encoder_width`), FFN; post-LN."""

    def __init__(self, cfg: XBertConfig, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        super().__init__(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h, e = cfg.hidden_size, cfg.encoder_width
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        cross = Node(query=dense(h, h, ("embed", "heads"), **kw),
                     key=dense(e, h, ("embed", "heads"), **kw),
                     value=dense(e, h, ("embed", "heads"), **kw),
                     dropout=layers.dropout(cfg.attention_probs_dropout_prob, rngs))
        self.crossattention = Node(
            {"self": cross},
            output=Node(dense=dense(h, h, ("heads", "embed"), **kw),
                        LayerNorm=layer_norm(h, cfg.layer_norm_eps, **ln),
                        dropout=layers.dropout(cfg.hidden_dropout_prob, rngs)))

    def fuse(self, x: jax.Array, mask: attention.Mask | None, image: jax.Array,
             image_mask: jax.Array | None, deterministic: bool | None) -> jax.Array:
        """x [B, Lt, C] text states, image [B, Li, encoder_width] -> [B, Lt, C]."""
        if self.remat:
            return nnx.remat(lambda m, a, b, c, d, det: m._fuse(a, b, c, d, det),
                             static_argnums=(5,))(self, x, mask, image, image_mask,
                                                   deterministic)
        return self._fuse(x, mask, image, image_mask, deterministic)

    def _fuse(self, x: jax.Array, mask: attention.Mask | None, image: jax.Array,
              image_mask: jax.Array | None, deterministic: bool | None) -> jax.Array:
        x = self.self_attention(x, mask, deterministic)
        ca, co = self.crossattention.self, self.crossattention.output
        q = layers.split_heads(ca.query(x), self.num_heads)
        k, v = (layers.split_heads(p(image), self.num_heads) for p in (ca.key, ca.value))
        keys = None if image_mask is None else attention.Mask(image_mask)
        c = layers.dot_product_attention(q, k, v, keys, ca.dropout, deterministic,
                                         self.attention_impl)
        x = co.LayerNorm(co.dropout(co.dense(c), deterministic=deterministic) + x)
        return self.feed_forward(x, deterministic)


class XBert(nnx.Module):
    """xbert's `BertModel` without pooler: `text` runs the embeddings and the layers before
    `fusion_layer`, `fusion` the layers from it on (over given text states)."""

    def __init__(self, cfg: XBertConfig, *, dtype: Any = jnp.float32,
                 param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.fusion_layer = cfg.fusion_layer
        self.embeddings = bert.Embeddings(cfg, cfg.hidden_size, **kw)
        self.encoder = Node(layer=nnx.List([
            (bert.BertLayer if i < cfg.fusion_layer else FusionLayer)(cfg, **kw)
            for i in range(cfg.num_hidden_layers)]))

    def text(self, input_ids: jax.Array, attention_mask: jax.Array | None = None,
             token_type_ids: jax.Array | None = None, *, deterministic: bool | None = None
             ) -> jax.Array:
        """int ids [B, L] (mask: 1 = token) -> text states [B, L, C] (`mode="text"`)."""
        types = jnp.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        pos = jnp.broadcast_to(jnp.arange(input_ids.shape[-1]), input_ids.shape)
        x = self.embeddings(input_ids, types, pos, deterministic)
        return layers.apply_stack(list(self.encoder.layer)[:self.fusion_layer], x,
                                  attention.Mask(attention_mask), deterministic)

    def fusion(self, text: jax.Array, attention_mask: jax.Array | None, image: jax.Array,
               image_mask: jax.Array | None = None, *, deterministic: bool | None = None
               ) -> jax.Array:
        """Text states [B, Lt, C] over image tokens [B, Li, W] -> [B, Lt, C]
        (`mode="fusion"`); `image_mask` None = every token (upstream passes ones)."""
        mask = attention.Mask(attention_mask)
        for layer in list(self.encoder.layer)[self.fusion_layer:]:
            text = layer.fuse(text, mask, image, image_mask, deterministic)
        return text


class Singularity(nnx.Module):
    """Singularity's towers, projections and ITM head (see the module doc).

    Args:
      cfg: sizes (`SINGULARITY`, `SINGULARITY_TEMPORAL` are the released ones).
      itm_head: build `itm_head` (the pair classifier).
      dtype: compute dtype (e.g. `jnp.bfloat16`); param_dtype: parameter dtype.
      rngs: `params` and `dropout` streams.
    """

    def __init__(self, cfg: SingularityConfig = SINGULARITY, *, itm_head: bool = True,
                 dtype: Any = jnp.float32, param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        cfg.check()
        self.config = cfg
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        v, t, e = cfg.vision.hidden_size, cfg.text.hidden_size, cfg.embed_dim
        self.vision_encoder = beit.BeitModel(cfg.vision, add_pooling_layer=True, **kw)
        self.vision_layernorm = layer_norm(v, 1e-12, **kw)
        self.text_encoder = XBert(cfg.text, **kw)
        self.vision_proj = dense(v, e, ("embed", None), **kw)
        self.text_proj = dense(t, e, ("embed", None), **kw)
        self.temp = param(jnp.full((), cfg.temp, param_dtype), ())
        self.itm_head = dense(t, 2, ("embed", None), **kw) if itm_head else None
        self.temporal_embeddings = param(jnp.zeros((1, cfg.num_frames, 1, v), param_dtype),
                                         (None, None, None, "embed"))
        self.temporal_vision_encoder = Node(layer=nnx.List([
            bert.BertLayer(cfg.text, **kw) for _ in range(cfg.temporal_layers)])
        ) if cfg.temporal_layers else None

    def temporal_embedding(self, frames: int) -> jax.Array:
        """[1, frames, 1, C]: the first rows, or all rows linearly interpolated (more frames
        than trained with), as upstream's `encode_image`."""
        table = self.temporal_embeddings[...]
        if frames <= table.shape[1]:
            return table[:, :frames]
        w = jnp.asarray(interpolation_matrix(table.shape[1], frames), table.dtype)
        return jnp.einsum("nt,otzc->onzc", w, table)

    def encode_video(self, frames: jax.Array, *, deterministic: bool | None = None
                     ) -> tuple[jax.Array, jax.Array]:
        """Normalised channels-last frames [B, T, S, S, 3] -> (tokens [B, T * (1 + L), C],
        pooled [B, T, C]): upstream's `encode_image`."""
        if frames.ndim != 5:
            raise ValueError(f"Singularity: expected frames [B, T, H, W, C], got shape "
                             f"{tuple(frames.shape)}")
        b, t = frames.shape[:2]
        out = self.vision_encoder(frames.reshape((b * t,) + frames.shape[2:]),
                                  deterministic=deterministic)
        tokens = self.vision_layernorm(out.last_hidden_state)
        tokens = tokens.reshape((b, t) + tokens.shape[1:])
        pooled = out.pooled.reshape(b, t, -1)
        if self.config.add_temporal_embed:
            tokens = tokens + self.temporal_embedding(t).astype(tokens.dtype)
        if t > 1 and self.temporal_vision_encoder is not None:
            n, c = tokens.shape[2:]
            x = tokens.transpose(0, 2, 1, 3).reshape(b * n, t, c)
            x = layers.apply_stack(self.temporal_vision_encoder.layer, x, None, deterministic)
            tokens = x.reshape(b, n, t, c).transpose(0, 2, 1, 3)
            if self.config.update_pooler_embed:
                pooled = tokens[:, :, 0]
        return tokens.reshape(b, -1, tokens.shape[-1]), pooled

    def encode_text(self, input_ids: jax.Array, attention_mask: jax.Array | None = None, *,
                    deterministic: bool | None = None) -> jax.Array:
        """Token ids [B, L] -> text states [B, L, C] (upstream's `encode_text`)."""
        return self.text_encoder.text(input_ids, attention_mask, deterministic=deterministic)

    def frame_embeds(self, pooled: jax.Array) -> jax.Array:
        """Pooled frames [B, T, C] -> L2-normalised projections [B, T, embed_dim]."""
        return l2_normalize(self.vision_proj(pooled))

    def video_embed(self, frames: jax.Array, *, deterministic: bool | None = None
                    ) -> jax.Array:
        """[B, embed_dim]: mean over frames of the normalised frame embeddings."""
        return self.frame_embeds(self.encode_video(frames, deterministic=deterministic)[1]
                                 ).mean(axis=1)

    def text_embed(self, input_ids: jax.Array, attention_mask: jax.Array | None = None, *,
                   deterministic: bool | None = None) -> jax.Array:
        """[B, embed_dim]: the normalised projection of the text's [CLS] state."""
        hidden = self.encode_text(input_ids, attention_mask, deterministic=deterministic)
        return l2_normalize(self.text_proj(hidden[:, 0]))

    def similarity(self, video: jax.Array, text: jax.Array, temperature: float | None = 1.0
                   ) -> jax.Array:
        """[Bv, Bt] scores of `video_embed`s and `text_embed`s, divided by `temperature`
        (1: upstream's retrieval scoring; None: the learnt `temp`, the training logits)."""
        t = self.temp[...] if temperature is None else temperature
        return video @ text.T / t

    def fuse(self, text: jax.Array, text_mask: jax.Array | None, video_tokens: jax.Array,
             video_mask: jax.Array | None = None, *, deterministic: bool | None = None
             ) -> jax.Array:
        """The fusion layers: text states [B, Lt, C] over `encode_video` tokens."""
        return self.text_encoder.fusion(text, text_mask, video_tokens, video_mask,
                                        deterministic=deterministic)

    def pair_cls(self, frames: jax.Array, input_ids: jax.Array,
                 attention_mask: jax.Array | None = None, *,
                 deterministic: bool | None = None) -> jax.Array:
        """Fused [CLS] [B, C] of each (frames, text) pair (upstream's `itm_embeds`)."""
        tokens, _ = self.encode_video(frames, deterministic=deterministic)
        text = self.encode_text(input_ids, attention_mask, deterministic=deterministic)
        return self.fuse(text, attention_mask, tokens, deterministic=deterministic)[:, 0]

    def itm_logits(self, fused_cls: jax.Array) -> jax.Array:
        """[B, 2] ITM logits of fused [CLS] states (index 1 = match)."""
        if self.itm_head is None:
            raise ValueError("this Singularity was built without itm_head")
        return self.itm_head(fused_cls)


# ----------------------------------------------------------------------------- checkpoints


def torch_key(name: str, text_prefix: str = TEXT_PREFIXES[0]) -> str:
    """NNX parameter name -> the checkpoint's key (`temp`, `temporal_embeddings` stay)."""
    if "." not in name:
        return name
    if name.startswith("text_encoder."):
        return loading.torch_key(name[len("text_encoder."):], text_prefix)
    return loading.torch_key(name)


def upstream_shapes(cfg: SingularityConfig = SINGULARITY, text_prefix: str = TEXT_PREFIXES[0]
                    ) -> dict[str, tuple[int, ...]]:
    """{key: torch shape} of the parameters and derived buffers this port reads and checks
    (no MLM head), built abstractly."""
    shapes = loading.param_shapes(lambda rngs: Singularity(cfg, rngs=rngs))
    out = {torch_key(k, text_prefix): loading.torch_shape(k, s) for k, s in shapes.items()}
    out.update(beit.buffer_shapes(cfg.vision, "vision_encoder."))
    out[f"{text_prefix}embeddings.position_ids"] = (1, cfg.text.max_position_embeddings)
    return out


def text_prefix(tensors: Mapping[str, Any]) -> str:
    """`text_encoder.bert.` (pre-trained files) or `text_encoder.` (fine-tuned)."""
    return TEXT_PREFIXES[int(not any(k.startswith(TEXT_PREFIXES[0]) for k in tensors))]


def _layers(tensors: Mapping[str, Any], prefix: str, part: str = "") -> set[int]:
    pat = re.compile(re.escape(prefix) + r"layer\.(\d+)\." + re.escape(part))
    return {int(m.group(1)) for k in tensors if (m := pat.match(k))}


def _leftover_ok(key: str, shapes: Mapping[str, tuple[int, ...]], tops: set[str],
                 prefix: str, strict: bool) -> bool | tuple[int, ...]:
    """Whether a checkpoint key no parameter takes may stay (True), must be an index buffer
    of that shape (a tuple), or is unexpected (False)."""
    top = key.split(".")[0]
    if key.endswith("position_ids") or key.startswith(SKIPPED) or top.endswith(("_m", "_ptr")):
        return True
    if top not in tops:  # a part not built (the ITM head may always be left)
        return not strict or top == "itm_head"
    if key.endswith(INDEX):
        table = key[:-len(INDEX)] + TABLE
        rows = next((s[0] for n, s in shapes.items() if torch_key(n, prefix) == table), None)
        w = None if rows is None else (math.isqrt(rows - 3) + 1) // 2
        return False if w is None else (w * w + 1,) * 2
    text_only = not any(".crossattention." in n for n in shapes)
    built = _layers(shapes, "text_encoder.encoder.")
    m = re.match(re.escape(prefix) + r"encoder\.layer\.(\d+)\.", key)
    return bool(text_only and m and built and int(m.group(1)) >= len(built))


def match(tensors: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]],
          where: str, *, strict: bool = False) -> dict[str, np.ndarray]:
    """NNX name -> float32 array (NNX layout) for every entry of `shapes` (a `Singularity`
    subtree's NNX names and shapes) from a Singularity state dict.

    Every built parameter takes exactly one tensor of its shape. Tensors that may stay: the
    MLM head, momentum copies, queues, `text_decoder`, `position_ids`, BEiT's index buffers
    (shape-checked), the text layers past a text-only tower's, and (unless `strict`) whole
    top-level parts the model does not build. Anything else under a built part is unexpected.
    The first problem is one `CheckpointError` line naming `where` and the key."""
    prefix = text_prefix(tensors)
    wanted = {torch_key(n, prefix): n for n in shapes}
    if not set(wanted) & set(tensors):
        first = next(iter(tensors), None)
        raise CheckpointError(f"{where}: not a Singularity checkpoint: none of its "
                              f"{len(tensors)} tensors is a parameter of the model (first: "
                              f"{first!r})")
    tops = {k.split(".")[0] for k in wanted}
    problems = [f"missing key {k!r} (shape {loading.torch_shape(n, shapes[n])})"
                for k, n in wanted.items() if k not in tensors]
    for key in sorted(set(tensors) - set(wanted)):
        ok = _leftover_ok(key, shapes, tops, prefix, strict)
        if ok is False:
            problems.append(f"unexpected key {key!r} (shape {tuple(tensors[key].shape)})")
        elif ok is not True and tuple(tensors[key].shape) != ok:
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, the model "
                            f"expects {ok}")
    out = {}
    for key, name in ((k, n) for k, n in wanted.items() if k in tensors):
        want = loading.torch_shape(name, shapes[name])
        if tuple(tensors[key].shape) != want:
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, the model "
                            f"expects {want}")
        else:
            out[name] = loading.to_nnx_layout(name, np.asarray(tensors[key], np.float32))
    loading.refuse(where, problems)
    return out


def config_from_tensors(tensors: Mapping[str, np.ndarray], where: str, *,
                        text_heads: int | None = None) -> SingularityConfig:
    """Sizes from the tensors' shapes: BEiT's heads are its tables' columns, the text heads
    (not in the weights) `text_heads` or BEiT's; the temporal variant when the file has a
    `temporal_vision_encoder` (then with `add_temporal_embed`, as the README's flags)."""
    p = text_prefix(tensors)

    def shape(key: str) -> tuple[int, ...]:
        if key not in tensors:
            raise CheckpointError(f"{where}: not a Singularity checkpoint: no {key!r}")
        return tuple(tensors[key].shape)

    venc = "vision_encoder.encoder."
    depth = len(_layers(tensors, venc))
    width, channels, patch, _ = shape("vision_encoder.embeddings.patch_embeddings."
                                      "projection.weight")
    rows, heads = shape(f"{venc}layer.0.attention.attention.{TABLE}")
    window = (math.isqrt(rows - 3) + 1) // 2
    vision = beit.BeitConfig(
        image_size=window * patch, patch_size=patch, num_channels=channels, hidden_size=width,
        num_hidden_layers=depth, num_attention_heads=heads,
        intermediate_size=shape(f"{venc}layer.0.intermediate.dense.weight")[0])
    vocab, hidden = shape(f"{p}embeddings.word_embeddings.weight")
    n_text = len(_layers(tensors, f"{p}encoder."))
    fused = _layers(tensors, f"{p}encoder.", "crossattention.")
    cross = f"{p}encoder.layer.{min(fused)}.crossattention.self.key.weight" if fused else None
    text = XBertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=n_text,
        num_attention_heads=text_heads or heads,
        intermediate_size=shape(f"{p}encoder.layer.0.intermediate.dense.weight")[0],
        max_position_embeddings=shape(f"{p}embeddings.position_embeddings.weight")[0],
        type_vocab_size=shape(f"{p}embeddings.token_type_embeddings.weight")[0],
        fusion_layer=min(fused) if fused else n_text,
        encoder_width=shape(cross)[1] if cross else width)
    temporal = len(_layers(tensors, "temporal_vision_encoder."))
    return SingularityConfig(vision=vision, text=text, embed_dim=shape("vision_proj.weight")[0],
                             num_frames=shape("temporal_embeddings")[1],
                             temporal_layers=temporal, add_temporal_embed=temporal > 0)


def read_tensors(path: str | Path) -> dict[str, np.ndarray]:
    """The file's tensors. Upstream pickles its OmegaConf config next to the weights: a
    reader that can skip foreign classes (`foreign="skip"`) is asked to; else the error
    says how to keep only the weights."""
    from vnr.models.encoders import torch_checkpoint

    try:
        return torch_checkpoint.read_torch_checkpoint(path)
    except CheckpointError as e:
        if "omegaconf" not in str(e):
            raise
        try:
            return torch_checkpoint.read_torch_checkpoint(path, foreign="skip")
        except TypeError:  # a reader without that option
            raise CheckpointError(f"{e}; keep only the weights: torch.save({{'model': "
                                  "torch.load(p)['model']}, q)") from None


def from_checkpoint(path: str | Path, *, cfg: SingularityConfig | None = None,
                    text_heads: int | None = None, update_pooler_embed: bool = False,
                    itm_head: bool = True, dtype: Any = jnp.float32,
                    param_dtype: Any = jnp.float32, key: jax.Array | None = None,
                    mesh: Mesh | None = None, rules: Rules | None = None) -> Singularity:
    """Singularity with the weights of a released `.pth` (eval mode; nothing downloaded).

    Args:
      path: the checkpoint (`{"model": state_dict, ...}` or a bare state dict).
      cfg: sizes; default `config_from_tensors` (its text heads: `text_heads`).
      update_pooler_embed: the temporal [CLS] as pooled frames (upstream's flag).
      itm_head: build and load `itm_head`.
      dtype, param_dtype: compute and parameter dtypes; key: PRNG key of the dropout
        streams; mesh, rules: placement (see `loading`).
    """
    tensors = read_tensors(path)
    cfg = cfg or config_from_tensors(tensors, str(path), text_heads=text_heads)
    cfg = dataclasses.replace(cfg, update_pooler_embed=update_pooler_embed)

    def ctor(rngs: nnx.Rngs) -> Singularity:
        return Singularity(cfg, itm_head=itm_head, dtype=dtype, param_dtype=param_dtype,
                           rngs=rngs)

    arrays = match(tensors, loading.param_shapes(ctor), str(path), strict=True)
    return loading.instantiate(ctor, arrays, key=jax.random.key(0) if key is None else key,
                               mesh=mesh, rules=rules)
