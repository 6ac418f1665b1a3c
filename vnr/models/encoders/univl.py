"""UniVL (Luo et al. 2020, microsoft/UniVL) text-video encoders and retrieval scoring in NNX.

Architecture (upstream ``modules/``; every LayerNorm is TF-style with eps 1e-12):

* ``normalize_video.visual_norm2d``: LayerNorm over the raw 1024-d S3D features of each
  second, applied before the visual encoder (``NormalizeVideo`` in ``modeling.py``).
* ``bert``: BERT-base-uncased (``module_bert.py``), 12 layers, the same tree and names as
  Hugging Face BERT, so it is ``bert.BertModel`` here (absolute positions, pooler).
* ``visual``: a 6-layer BERT stack (``module_visual.py``) whose "word embedding" is a Linear
  from the feature width, plus learned positions and LayerNorm (no token types); pooler.
* ``cross``: a 2-layer BERT stack (``module_cross.py``) over ``concat(text states, video
  states)`` plus positions ``0..Lt+Lv-1`` and token types (0 text, 1 video); pooler
  ``tanh(dense(h[:, 0]))`` on the text's [CLS] slot.
* ``similarity_dense``: Linear(hidden, 1) on the cross pooler output: one logit per pair.
* ``decoder``: the 3-layer caption decoder over the cross encoder's states
  (``univl_decoder.py``; its word / position tables are the text BERT's).

Key layout: NNX parameter ``a.b.kernel`` / ``scale`` / ``embedding`` is upstream
``a.b.weight`` (Linear kernels transposed); ``bias`` is ``bias``. The pre-training
checkpoint ``univl.pretrained.bin`` also holds ``cls.*`` / ``cls_visual.*`` (masked
language / frame heads, not ported) and the decoder's copies of the tied tables
(``univl_decoder.TIED_KEYS``): the loader lets exactly those go unused, and all of
``decoder.*`` when built without a decoder (``UNUSED_PREFIXES``); any other stray key is
refused.

Scoring (``modeling.py`` ``UniVL.get_similarity_logits``, line 377 at upstream commit
8db88f3): with a cross encoder (stage two, or ``train_sim_after_cross``; the test on line
382) every (text, video) pair goes through ``_get_cross_output`` (l. 315) and
``similarity_dense`` (``_cross_similarity``, l. 341-371): ``mode="cross"``. Otherwise
(stage one, or ``_pretrain_joint``) the text is the masked mean of its states without
[CLS], the video the masked mean of its states (``_mean_pooling_for_similarity``, l. 327),
both L2-normalised (``use_mil`` off) and dotted: ``mode="mean"``. The forward pass is many
small ops: wrap calls in ``nnx.jit``.

Choices where upstream is loose:

* Masked attention keys get no weight (upstream adds -10000); equal unless a row has no
  real key at all (an all-padding video), which upstream turns into uniform attention.
* One ``UniVLConfig`` carries the shared width, heads and FFN size of all towers (upstream
  has four config files with the same values). ``cross_layers=0`` builds no cross encoder
  (stage-one fine-tuned checkpoints): only ``mode="mean"`` then.
* Both means guard an empty mask (count 1): upstream does so for the video; for a text of
  [CLS] alone upstream divides by zero (NaN), here it gives 0 (random token masking in
  SYMON's memory training can leave such rows).
* The decoder's tied copies are not compared with ``bert.``'s tables (upstream ties them,
  so they are equal in every file it saves).

Inputs: token ids ``(B, Lt)`` with an attention mask (1 = real; [CLS] first, [SEP] last,
zero padding: ``UniVLTokenizer``), video features ``(B, Lv, video_dim)`` with a mask.
``dtype`` is the compute dtype (bfloat16 works), ``param_dtype`` the parameters'.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models import attention
from vnr.models.encoders import bert, layers, loading
from vnr.models.encoders.layers import EncoderOutput, Node, dense, dropout, embed, layer_norm
from vnr.models.encoders.loading import CheckpointError
from vnr.models.encoders.univl_decoder import TIED_KEYS, CaptionDecoder
from vnr.models.layers import annotate

# Tensors of univl.pretrained.bin this port reads no value from: the pre-training heads,
# and the decoder when the model is built without one.
HEAD_PREFIXES = ("cls.", "cls_visual.")
UNUSED_PREFIXES = (*HEAD_PREFIXES, "decoder.")
CROSS_PREFIXES = ("cross.", "similarity_dense.")  # left when built without cross


@dataclasses.dataclass(frozen=True)
class UniVLConfig:
    """Sizes of the released model (``bert-base-uncased`` + ``visual-base`` with
    ``visual_num_hidden_layers=6`` + ``cross-base`` + ``decoder-base`` with 3 layers);
    ``from_checkpoint`` infers them. ``decoder_layers=0``: no decoder."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    text_layers: int = 12
    text_positions: int = 512
    type_vocab_size: int = 2
    video_dim: int = 1024
    visual_layers: int = 6
    visual_positions: int = 512
    cross_layers: int = 2
    cross_positions: int = 1024
    decoder_layers: int = 3
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1

    def tower(self, num_layers: int, positions: int) -> types.SimpleNamespace:
        """The Hugging Face-style config ``bert.BertModel`` / ``bert.BertLayer`` read."""
        return types.SimpleNamespace(**dataclasses.asdict(self), num_hidden_layers=num_layers,
                                     max_position_embeddings=positions, pad_token_id=0)


UNIVL_BASE = UniVLConfig()


def _stack(cfg: UniVLConfig, n: int, **kw: Any) -> tuple[Node, Node]:
    """``encoder.layer.<i>`` (BERT layers) and ``pooler.dense`` of a visual / cross tower."""
    h = cfg.hidden_size
    encoder = Node(layer=nnx.List([bert.BertLayer(cfg, **kw) for _ in range(n)]))
    pooler = Node(dense=dense(h, h, ("embed", None), std=cfg.initializer_range, **kw))
    return encoder, pooler


class _Tower(nnx.Module):
    """What the visual and cross towers share: layers over embedded inputs, then the pooler."""

    encoder: Node
    pooler: Node

    def _finish(self, x: jax.Array, mask: jax.Array | None,
                deterministic: bool | None) -> EncoderOutput:
        x = layers.apply_stack(self.encoder.layer, x, attention.Mask(mask), deterministic)
        pooled = jnp.tanh(self.pooler.dense(x[:, 0]))
        return EncoderOutput(x, pooled, pooled)


class VisualEncoder(_Tower):
    """``visual.*``: features -> Linear + positions -> LayerNorm -> BERT layers -> pooler."""

    def __init__(self, cfg: UniVLConfig, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h, std = cfg.hidden_size, cfg.initializer_range
        self.embeddings = Node(
            word_embeddings=dense(cfg.video_dim, h, (None, "embed"), std=std, **kw),
            position_embeddings=embed(cfg.visual_positions, h, ("pos", "embed"), std=std, **kw),
            LayerNorm=layer_norm(h, cfg.layer_norm_eps, **kw),
            dropout=dropout(cfg.hidden_dropout_prob, rngs),
        )
        self.encoder, self.pooler = _stack(cfg, cfg.visual_layers, **kw)

    def __call__(self, video: jax.Array, video_mask: jax.Array | None = None, *,
                 deterministic: bool | None = None) -> EncoderOutput:
        """Normalised features ``(B, Lv, video_dim)``, mask ``(B, Lv)`` (None = all real)."""
        e = self.embeddings
        x = e.word_embeddings(video) + e.position_embeddings(jnp.arange(video.shape[1]))[None]
        x = e.dropout(e.LayerNorm(x), deterministic=deterministic)
        return self._finish(x, video_mask, deterministic)


class CrossEncoder(_Tower):
    """``cross.*``: text and video states side by side, + positions + token types."""

    def __init__(self, cfg: UniVLConfig, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h, std = cfg.hidden_size, cfg.initializer_range
        self.embeddings = Node(
            position_embeddings=embed(cfg.cross_positions, h, ("pos", "embed"), std=std, **kw),
            token_type_embeddings=embed(cfg.type_vocab_size, h, (None, "embed"), std=std, **kw),
            LayerNorm=layer_norm(h, cfg.layer_norm_eps, **kw),
            dropout=dropout(cfg.hidden_dropout_prob, rngs),
        )
        self.encoder, self.pooler = _stack(cfg, cfg.cross_layers, **kw)

    def __call__(self, text: jax.Array, text_mask: jax.Array, video: jax.Array,
                 video_mask: jax.Array, *, deterministic: bool | None = None) -> EncoderOutput:
        """Text states ``(B, Lt, H)`` and video states ``(B, Lv, H)`` with their masks ->
        joint states ``(B, Lt+Lv, H)`` and the pooled [CLS] slot."""
        e = self.embeddings
        x = jnp.concatenate([text, video.astype(text.dtype)], axis=1)
        types_ = jnp.concatenate([jnp.zeros(text.shape[:2], jnp.int32),
                                  jnp.ones(video.shape[:2], jnp.int32)], axis=1)
        x = x + e.position_embeddings(jnp.arange(x.shape[1]))[None] + e.token_type_embeddings(
            types_)
        x = e.dropout(e.LayerNorm(x), deterministic=deterministic)
        mask = jnp.concatenate([text_mask, video_mask], axis=1)
        return self._finish(x, mask, deterministic)


def _l2_normalise(x: jax.Array) -> jax.Array:
    """``x / max(|x|, 1e-12)`` along the last axis (torch's ``F.normalize``)."""
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def pool_text(states: jax.Array, mask: jax.Array, normalize: bool = True) -> jax.Array:
    """``(B, H)`` float32 stage-one text embedding: the masked mean of the states without
    the [CLS] slot (``_mean_pooling_for_similarity``), L2-normalised unless ``normalize``
    is False. A row with no real token but [CLS] gives 0 (upstream divides by 0: NaN)."""
    m = jnp.asarray(mask, jnp.float32).at[:, 0].set(0.0)[..., None]
    t = (states.astype(jnp.float32) * m).sum(1) / jnp.maximum(m.sum(1), 1.0)
    return _l2_normalise(t) if normalize else t


def pool_video(states: jax.Array, mask: jax.Array, normalize: bool = True) -> jax.Array:
    """``(B, H)`` float32 stage-one video embedding: the masked mean of the states (an
    all-padding row divides by 1, as upstream), L2-normalised unless ``normalize`` is False."""
    m = jnp.asarray(mask, jnp.float32)[..., None]
    v = (states.astype(jnp.float32) * m).sum(1) / jnp.maximum(m.sum(1), 1.0)
    return _l2_normalise(v) if normalize else v


class UniVL(nnx.Module):
    """UniVL's text, video and cross encoders with both retrieval scores (module docstring).

    Args:
      cfg: sizes (``UNIVL_BASE`` for the released checkpoint).
      dtype: compute dtype; param_dtype: parameter dtype.
      rngs: ``params`` and ``dropout`` streams.
    """

    def __init__(self, cfg: UniVLConfig = UNIVL_BASE, *, dtype: Any = jnp.float32,
                 param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.config = cfg
        self.bert = bert.BertModel(cfg.tower(cfg.text_layers, cfg.text_positions), **kw)
        self.normalize_video = Node(visual_norm2d=nnx.LayerNorm(
            cfg.video_dim, epsilon=cfg.layer_norm_eps, use_fast_variance=False,
            scale_init=annotate(nnx.initializers.ones_init(), ("norm",)),
            bias_init=annotate(nnx.initializers.zeros_init(), ("norm",)), **kw))
        self.visual = VisualEncoder(cfg, **kw)
        self.cross = CrossEncoder(cfg, **kw) if cfg.cross_layers else None
        self.similarity_dense = (
            dense(cfg.hidden_size, 1, ("embed", None), std=cfg.initializer_range, **kw)
            if cfg.cross_layers else None)
        if cfg.decoder_layers and not cfg.cross_layers:
            raise ValueError("the caption decoder reads the cross encoder: cross_layers=0 "
                             "needs decoder_layers=0")
        self.decoder = CaptionDecoder(cfg, **kw) if cfg.decoder_layers else None

    def encode_text(self, input_ids: jax.Array, attention_mask: jax.Array,
                    token_type_ids: jax.Array | None = None, *,
                    deterministic: bool | None = None) -> EncoderOutput:
        """Token ids ``(B, Lt)`` -> BERT states and pooler output."""
        return self.bert(input_ids, attention_mask, token_type_ids, deterministic=deterministic)

    def encode_video(self, video: jax.Array, video_mask: jax.Array | None = None, *,
                     deterministic: bool | None = None) -> EncoderOutput:
        """Raw features ``(B, Lv, video_dim)`` -> ``normalize_video`` -> visual encoder."""
        x = self.normalize_video.visual_norm2d(jnp.asarray(video, jnp.float32))
        return self.visual(x, video_mask, deterministic=deterministic)

    def cross_encode(self, text: jax.Array, text_mask: jax.Array, video: jax.Array,
                     video_mask: jax.Array, *, deterministic: bool | None = None
                     ) -> EncoderOutput:
        """The cross encoder on matched pairs (row i of text with row i of video)."""
        if self.cross is None:
            raise ValueError("this UniVL has no cross encoder (cross_layers=0): use mode='mean'")
        return self.cross(text, text_mask, video, video_mask, deterministic=deterministic)

    def pair_logits(self, text: jax.Array, text_mask: jax.Array, video: jax.Array,
                    video_mask: jax.Array, *, deterministic: bool | None = None) -> jax.Array:
        """``(B,)`` float32 match logits of matched pairs: ``similarity_dense(cross pooled)``."""
        pooled = self.cross_encode(text, text_mask, video, video_mask,
                                   deterministic=deterministic).pooler_output
        return self.similarity_dense(pooled)[:, 0].astype(jnp.float32)

    def cross_similarity(self, text: jax.Array, text_mask: jax.Array, video: jax.Array,
                         video_mask: jax.Array, *, text_chunk: int | None = None,
                         deterministic: bool | None = None) -> jax.Array:
        """``(Bt, Bv)`` logits of every text against every video through the cross encoder,
        ``text_chunk`` texts (default all) at a time: each chunk runs Bt_chunk * Bv pairs."""
        bt, bv = text.shape[0], video.shape[0]
        step = text_chunk or bt
        rows = []
        for s in range(0, bt, step):
            t, m = text[s:s + step], text_mask[s:s + step]
            n = t.shape[0]
            tt = jnp.repeat(t, bv, axis=0)
            tm = jnp.repeat(m, bv, axis=0)
            vv = jnp.tile(video, (n, 1, 1))
            vm = jnp.tile(video_mask, (n, 1))
            rows.append(self.pair_logits(tt, tm, vv, vm, deterministic=deterministic)
                        .reshape(n, bv))
        return jnp.concatenate(rows, axis=0)

    def caption_logits(self, text: jax.Array, text_mask: jax.Array, video: jax.Array,
                       video_mask: jax.Array, caption_ids: jax.Array, caption_mask: jax.Array,
                       *, deterministic: bool | None = None) -> jax.Array:
        """Teacher-forced caption logits ``(B, Lc, vocab)`` of matched pairs: the decoder
        over the cross encoder's joint states (upstream ``_get_decoder_score``)."""
        if self.decoder is None:
            raise ValueError("this UniVL has no caption decoder (decoder_layers=0)")
        joint = self.cross_encode(text, text_mask, video, video_mask,
                                  deterministic=deterministic).last_hidden_state
        emb = self.bert.embeddings
        return self.decoder(caption_ids, caption_mask, joint,
                            jnp.concatenate([text_mask, video_mask], axis=1),
                            emb.word_embeddings.embedding[...],
                            emb.position_embeddings.embedding[...],
                            deterministic=deterministic)

    @staticmethod
    def mean_similarity(text: jax.Array, text_mask: jax.Array, video: jax.Array,
                        video_mask: jax.Array, *, normalize: bool = True) -> jax.Array:
        """``(Bt, Bv)`` dot products of masked means (text without [CLS]), L2-normalised
        unless ``normalize=False`` (upstream's ``use_mil``)."""
        return pool_text(text, text_mask, normalize) @ pool_video(video, video_mask,
                                                                  normalize).T

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array, video: jax.Array,
                 video_mask: jax.Array, *, mode: str = "cross", text_chunk: int | None = None,
                 deterministic: bool | None = None) -> jax.Array:
        """``(Bt, Bv)`` retrieval logits of texts against videos (``mode`` "cross" or "mean")."""
        text = self.encode_text(input_ids, attention_mask, deterministic=deterministic)
        vid = self.encode_video(video, video_mask, deterministic=deterministic)
        if mode == "cross":
            return self.cross_similarity(text.last_hidden_state, attention_mask,
                                         vid.last_hidden_state, video_mask,
                                         text_chunk=text_chunk, deterministic=deterministic)
        if mode == "mean":
            return self.mean_similarity(text.last_hidden_state, attention_mask,
                                        vid.last_hidden_state, video_mask)
        raise ValueError(f"mode must be 'cross' or 'mean', got {mode!r}")


# ----------------------------------------------------------------------------- loading

def _param_shapes(cfg: UniVLConfig) -> dict[str, tuple[int, ...]]:
    return loading.param_shapes(lambda rngs: UniVL(cfg, rngs=rngs))


def upstream_shapes(cfg: UniVLConfig = UNIVL_BASE) -> dict[str, tuple[int, ...]]:
    """Upstream key -> torch shape of every tensor this port reads (abstract: no memory)."""
    return {loading.torch_key(k): loading.torch_shape(k, s)
            for k, s in _param_shapes(cfg).items()}


def _layer_count(tensors: Mapping[str, Any], stack: str) -> int:
    found = re.compile(rf"{re.escape(stack)}\.layer\.(\d+)\.")
    ids = [int(m.group(1)) for k in tensors if (m := found.match(k))]
    return max(ids) + 1 if ids else 0


def infer_config(tensors: Mapping[str, Any], where: str, *, num_attention_heads: int = 12,
                 hidden_act: str = "gelu") -> UniVLConfig:
    """The sizes of the model a state dict holds (heads and activation cannot be read from
    shapes: upstream's 12 and "gelu" by default). No ``cross.*`` -> ``cross_layers=0``, no
    ``decoder.*`` -> ``decoder_layers=0``."""

    def shape(key: str) -> tuple[int, ...]:
        if key not in tensors:
            raise CheckpointError(f"{where}: missing key {key!r} (not a UniVL checkpoint?)")
        v = tensors[key]
        return tuple(getattr(v, "shape", v))  # an array, or a shape (read_torch_shapes)

    vocab, width = shape("bert.embeddings.word_embeddings.weight")
    cross = _layer_count(tensors, "cross.encoder")
    return UniVLConfig(
        vocab_size=vocab, hidden_size=width, num_attention_heads=num_attention_heads,
        intermediate_size=shape("bert.encoder.layer.0.intermediate.dense.weight")[0],
        hidden_act=hidden_act, text_layers=_layer_count(tensors, "bert.encoder"),
        text_positions=shape("bert.embeddings.position_embeddings.weight")[0],
        type_vocab_size=shape("bert.embeddings.token_type_embeddings.weight")[0],
        video_dim=shape("visual.embeddings.word_embeddings.weight")[1],
        visual_layers=_layer_count(tensors, "visual.encoder"),
        visual_positions=shape("visual.embeddings.position_embeddings.weight")[0],
        cross_layers=cross,
        cross_positions=shape("cross.embeddings.position_embeddings.weight")[0] if cross else 0,
        decoder_layers=_layer_count(tensors, "decoder.decoder"))


def match(tensors: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]],
          where: str) -> dict[str, np.ndarray]:
    """NNX parameter name -> array (Flax layout) for ``shapes`` (the NNX names and shapes of
    a ``UniVL`` as built) from an upstream state dict.

    Every parameter must be there with its shape, and every tensor must be read unless it is
    a pre-training head, a part the model does not build (``cross.`` and
    ``similarity_dense.`` without a cross encoder, ``decoder.`` without a decoder) or a tied
    copy of the decoder; the first problem is one ``CheckpointError`` line naming ``where``
    and the key, with the count of the others.
    """
    problems, arrays, wanted = [], {}, set()
    for name, shape in shapes.items():
        key, want = loading.torch_key(name), loading.torch_shape(name, shape)
        wanted.add(key)
        if key not in tensors:
            problems.append(f"missing key {key!r} (UniVL expects shape {want})")
        elif tuple(tensors[key].shape) != want:
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, "
                            f"UniVL expects {want}")
        else:
            arrays[name] = loading.to_nnx_layout(name, np.asarray(tensors[key]))
    decoder = any(n.startswith("decoder.") for n in shapes)
    spare = HEAD_PREFIXES if decoder else UNUSED_PREFIXES
    if not any(n.startswith("cross.") for n in shapes):
        spare = (*spare, *CROSS_PREFIXES)
    problems += [f"unexpected key {k!r} (shape {tuple(tensors[k].shape)})" for k in
                 sorted(tensors) if k not in wanted and not k.startswith(spare)
                 and not (decoder and k in TIED_KEYS)]
    loading.refuse(where, problems)
    return arrays


def match_state_dict(tensors: Mapping[str, np.ndarray], cfg: UniVLConfig,
                     where: str) -> dict[str, np.ndarray]:
    """``match`` for the ``UniVL`` that ``cfg`` builds."""
    return match(tensors, _param_shapes(cfg), where)


def from_checkpoint(path: str | Path, *, cfg: UniVLConfig | None = None,
                    num_attention_heads: int = 12, decoder: bool = True, dtype: Any = jnp.float32,
                    param_dtype: Any = jnp.float32, key: jax.Array | None = None,
                    mesh: jax.sharding.Mesh | None = None, rules: Any = None) -> UniVL:
    """UniVL with the weights of upstream's ``torch.save``d state dict
    (``univl.pretrained.bin`` or a fine-tuned ``pytorch_model.bin.<n>``), read without torch.

    Args:
      path: the checkpoint file.
      cfg: the sizes; None = inferred from the tensor shapes (``infer_config``).
      num_attention_heads: heads per layer when inferring.
      decoder: build the caption decoder when the file has one (False: retrieval only,
        ``decoder.*`` left unread).
      dtype: compute dtype; param_dtype: parameter dtype.
      key: PRNG key for the dropout streams.
      mesh, rules: where parameters are placed (``loading.instantiate``).

    Raises:
      CheckpointError: one line naming ``path`` and the offending key.
    """
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    tensors = read_torch_checkpoint(path)
    cfg = cfg or infer_config(tensors, str(path), num_attention_heads=num_attention_heads)
    if not decoder:
        cfg = dataclasses.replace(cfg, decoder_layers=0)
    arrays = match_state_dict(tensors, cfg, str(path))
    model = loading.instantiate(
        lambda rngs: UniVL(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs), arrays,
        key=jax.random.key(0) if key is None else key, mesh=mesh, rules=rules)
    model.eval()
    return model


# ----------------------------------------------------------------------------- text


class UniVLTokenizer:
    """BERT-base-uncased WordPiece from a user-supplied ``vocab.txt``, laid out as UniVL's
    loaders do: ``[CLS] pieces [SEP]`` (pieces cut to ``max_words - 2``), zero padding.

    Args:
      vocab_file: the WordPiece vocabulary (one piece a line; nothing is downloaded).
      max_words: token slots per text (UniVL's README runs use 48).
    """

    def __init__(self, vocab_file: str | Path, max_words: int = 48):
        from transformers import BertTokenizerFast

        if not Path(vocab_file).is_file():
            raise FileNotFoundError(f"{vocab_file}: no WordPiece vocabulary file")
        self.max_words = max_words
        self._tok = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``texts`` -> (ids int32 ``(n, max_words)``, attention mask int32, 1 = real)."""
        rows = self._tok(list(texts), truncation=True, max_length=self.max_words)["input_ids"]
        ids = np.zeros((len(rows), self.max_words), np.int32)
        mask = np.zeros_like(ids)
        for i, row in enumerate(rows):
            ids[i, :len(row)], mask[i, :len(row)] = row, 1
        return ids, mask
