"""VideoCLIP (Xu et al. 2021; fairseq ``examples/MMPT``): zero-shot video-text retrieval in NNX.

Upstream is ``MMFusionSeparate`` (``mmpt/models/mmfusion.py``; line numbers below at fairseq
commit 3d262bb2), two towers initialised from bert-base-uncased and trained contrastively:

* ``video_encoder`` (``MMBertForEncoder``, ``transformermodel.py`` l. 136): ``videomlp``
  (``VideoTokenMLP``, ``mmpt/modules/mm.py`` l. 32: Linear 512 -> 768, GELU, LayerNorm with
  torch's default eps 1e-5, Linear 768 -> 768) turns each second's S3D feature into a token;
  ``bert`` is a 6-layer BERT (``num_hidden_video_layers``) whose embeddings
  (``MMBertEmbeddings``, mm.py l. 49) build ``[CLS] video tokens [SEP]`` from the word table's
  [CLS] / [SEP] rows (``caps[:, :2]``), positions ``0..T`` for [CLS] and the tokens and
  ``max_video_len + 1`` for [SEP] (mm.py l. 94-105), token types 0, attention mask
  ``[1, video_mask, 1]`` (``forward_video``, mmfusion.py l. 515-570).
* ``text_encoder``: Hugging Face's 12-layer ``BertModel`` on ``[CLS] words [SEP]`` padded
  with 0, positions ``0..L-1``, token types 0 (``forward_text``, l. 572-621).
* Pooling: masked means that leave [CLS] out and keep [SEP]: video over the tokens and [SEP]
  (weights ``[0, video_mask, 1] / (sum(video_mask) + 1)``, l. 551-569), text over the words
  and [SEP] (``[0, mask[1:]]``, l. 604-620). Neither tower's pooler is used.
* Score: the raw dot product ``text @ video.T`` (``RetrievalPredictor._aggregate_scores``,
  ``mmpt/evaluators/predictor.py`` l. 177-183; training's ``MMContraLoss`` uses the same
  logits), no normalisation or temperature.

Inputs as upstream's loaders make them (``Aligner``, ``mmpt/processors/processor.py``
l. 104-163, ``max_video_len`` 32 and ``max_len`` 96 in ``projects/retri/videoclip/*.yaml``):
video features ``(B, T <= max_video_len, 512)``, one S3D ``video_embedding`` per second
(30 fps, 30-frame clips, L2-normalised: ``s3d.VIDEOCLIP``), zero-padded, with a mask; the
text is bert-base-uncased WordPiece, at most ``max_len - max_video_len - 3`` = 61 pieces.
Upstream's caption layout ``[CLS] [SEP] words [SEP] pad`` (length ``max_len -
max_video_len``) carries the video's [CLS] / [SEP] in its first two slots; ``split_caps``
turns it into the text tower's input, which ``VideoCLIPTokenizer`` makes directly.

Checkpoint: ``runs/retri/videoclip/checkpoint_best.pt``, a fairseq training checkpoint; its
``model`` entry is ``FairseqMMModel``'s state dict, every key under ``mmmodel.``
(``mmpt/models/fairseqmmmodel.py`` l. 21-23; upstream's ``Task._trim_state_dict``,
``mmpt/tasks/task.py`` l. 115-131, strips it, as ``match`` does), float16 from ``--fp16``
training (cast to float32 here). The file also pickles training state, read with
``torch_checkpoint``'s ``foreign="skip"``. NNX names spell the keys (``kernel`` /
``scale`` / ``embedding`` = ``weight``, kernels transposed); ``IGNORED_KEYS`` (the poolers
and transformers 3.x's ``position_ids`` buffers) may stay unread, any other stray key is
refused.

Choices: masked keys get no attention weight (upstream adds a large negative number; equal,
since [CLS] and [SEP] are always attended). The video mask has a hole (padded seconds before
[SEP]), which ``attention="cudnn"`` cannot express. Wrap calls in ``nnx.jit``.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models import attention
from vnr.models.encoders import bert, layers, loading
from vnr.models.encoders.layers import EncoderOutput, dense, layer_norm
from vnr.models.encoders.loading import CheckpointError

WRAPPER_PREFIX = "mmmodel."  # fairseq's FairseqMMModel.mmmodel
# Tensors of checkpoint_best.pt this port reads no value from: the towers' poolers (retrieval
# pools hidden states) and the position-id buffers transformers 3.x saved in state dicts.
IGNORED_KEYS = (
    "video_encoder.bert.pooler.dense.weight", "video_encoder.bert.pooler.dense.bias",
    "text_encoder.pooler.dense.weight", "text_encoder.pooler.dense.bias",
    "video_encoder.bert.embeddings.position_ids", "text_encoder.embeddings.position_ids",
)
TOWERS = ("video_encoder.", "text_encoder.")  # either may be absent from ``match``'s shapes


@dataclasses.dataclass(frozen=True)
class VideoCLIPConfig:
    """Sizes of the released model (bert-base-uncased towers, 6 video layers) and the
    sequence lengths of its configs; ``from_checkpoint`` infers the sizes."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    text_layers: int = 12
    video_layers: int = 6
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    video_dim: int = 512
    max_video_len: int = 32
    max_len: int = 96
    cls_token_id: int = 101
    sep_token_id: int = 102
    pad_token_id: int = 0
    layer_norm_eps: float = 1e-12
    mlp_layer_norm_eps: float = 1e-5  # VideoTokenMLP's nn.LayerNorm default
    initializer_range: float = 0.02
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1

    @property
    def text_len(self) -> int:
        """Token slots of the text tower's input (63): ``[CLS] words [SEP]`` and padding."""
        return self.max_len - self.max_video_len - 1

    @property
    def max_words(self) -> int:
        """Word pieces kept per text (61), as ``Aligner._build_text_seq`` cuts them."""
        return self.max_len - self.max_video_len - 3

    def tower(self, num_layers: int) -> types.SimpleNamespace:
        """The Hugging Face-style config ``bert.BertModel`` reads."""
        return types.SimpleNamespace(**dataclasses.asdict(self), num_hidden_layers=num_layers)


VIDEOCLIP_BASE = VideoCLIPConfig()


class VideoTokenMLP(nnx.Module):
    """``videomlp``: a second's feature -> a video token (Linear, GELU, LayerNorm, Linear)."""

    def __init__(self, cfg: VideoCLIPConfig, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h, std = cfg.hidden_size, cfg.initializer_range
        self.linear1 = dense(cfg.video_dim, h, (None, "embed"), std=std, **kw)
        self.LayerNorm = layer_norm(h, cfg.mlp_layer_norm_eps, **kw)
        self.linear2 = dense(h, h, (None, "embed"), std=std, **kw)
        self.act = layers.activation(cfg.hidden_act)

    def __call__(self, video: jax.Array) -> jax.Array:
        """``(B, T, video_dim)`` -> ``(B, T, hidden)``."""
        return self.linear2(self.LayerNorm(self.act(self.linear1(video))))


def pool_video(states: jax.Array, video_mask: jax.Array) -> jax.Array:
    """``(B, H)`` float32: the mean of the video tower's states over the real video tokens and
    [SEP] ([CLS] left out), upstream's ``pooled_video``."""
    m = jnp.asarray(video_mask, jnp.float32)
    ones = jnp.ones((m.shape[0], 1), jnp.float32)
    w = jnp.concatenate([jnp.zeros_like(ones), m, ones], axis=1)[..., None]
    return (states.astype(jnp.float32) * w).sum(1) / w.sum(1)


def pool_text(states: jax.Array, attention_mask: jax.Array) -> jax.Array:
    """``(B, H)`` float32: the mean of the text tower's states over the words and [SEP]
    ([CLS] left out), upstream's ``pooled_text``; a row with nothing but [CLS] gives 0."""
    m = jnp.asarray(attention_mask, jnp.float32).at[:, 0].set(0.0)[..., None]
    return (states.astype(jnp.float32) * m).sum(1) / jnp.maximum(m.sum(1), 1.0)


class VideoEncoder(nnx.Module):
    """``video_encoder``: ``videomlp`` and a BERT over ``[CLS] video tokens [SEP]``."""

    def __init__(self, cfg: VideoCLIPConfig, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        if cfg.max_video_len + 2 > cfg.max_position_embeddings:
            raise ValueError(f"max_video_len {cfg.max_video_len} needs "
                             f"{cfg.max_video_len + 2} positions, the table has "
                             f"{cfg.max_position_embeddings}")
        self.config = cfg
        self.videomlp = VideoTokenMLP(cfg, **kw)
        self.bert = bert.BertModel(cfg.tower(cfg.video_layers), add_pooling_layer=False, **kw)

    def __call__(self, video: jax.Array, video_mask: jax.Array | None = None, *,
                 deterministic: bool | None = None) -> EncoderOutput:
        """Features ``(B, T, video_dim)`` (T <= max_video_len), mask ``(B, T)`` (1 = a real
        second; None = all) -> states ``(B, T + 2, H)`` and ``pooled`` = ``pool_video``."""
        cfg, e = self.config, self.bert.embeddings
        b, t = video.shape[:2]
        if t > cfg.max_video_len:
            raise ValueError(f"{t} video seconds > max_video_len {cfg.max_video_len} (upstream "
                             "cuts videos to max_video_len; the [SEP] position follows it)")
        if video_mask is None:
            video_mask = jnp.ones((b, t), jnp.int32)
        ids = jnp.broadcast_to(jnp.array([cfg.cls_token_id, cfg.sep_token_id]), (b, 2))
        words = e.word_embeddings(ids)
        tokens = self.videomlp(jnp.asarray(video)).astype(words.dtype)
        x = jnp.concatenate([words[:, :1], tokens, words[:, 1:]], axis=1)
        pos = jnp.concatenate([jnp.arange(t + 1), jnp.array([cfg.max_video_len + 1])])
        x = x + e.position_embeddings(pos)[None]
        x = x + e.token_type_embeddings(jnp.zeros((b, t + 2), jnp.int32))
        x = e.dropout(e.LayerNorm(x), deterministic=deterministic)
        one = jnp.ones((b, 1), jnp.int32)
        mask = jnp.concatenate([one, jnp.asarray(video_mask, jnp.int32), one], axis=1)
        x = layers.apply_stack(self.bert.encoder.layer, x, attention.Mask(mask), deterministic)
        return EncoderOutput(x, None, pool_video(x, video_mask))


class VideoCLIP(nnx.Module):
    """VideoCLIP's two towers and its retrieval score (module docstring).

    Args:
      cfg: sizes (``VIDEOCLIP_BASE`` for the released checkpoint).
      dtype: compute dtype; param_dtype: parameter dtype.
      rngs: ``params`` and ``dropout`` streams.
    """

    def __init__(self, cfg: VideoCLIPConfig = VIDEOCLIP_BASE, *, dtype: Any = jnp.float32,
                 param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.config = cfg
        self.video_encoder = VideoEncoder(cfg, **kw)
        self.text_encoder = bert.BertModel(cfg.tower(cfg.text_layers), add_pooling_layer=False,
                                           **kw)

    def encode_video(self, video: jax.Array, video_mask: jax.Array | None = None, *,
                     deterministic: bool | None = None) -> EncoderOutput:
        """Video tower: states ``(B, T + 2, H)`` of ``[CLS] tokens [SEP]``, ``pooled``."""
        return self.video_encoder(video, video_mask, deterministic=deterministic)

    def encode_text(self, input_ids: jax.Array, attention_mask: jax.Array, *,
                    deterministic: bool | None = None) -> EncoderOutput:
        """Text tower on ``[CLS] words [SEP]`` ids ``(B, L)``: states, ``pooled``."""
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise ValueError(f"{input_ids.shape[1]} text tokens > max_position_embeddings "
                             f"{self.config.max_position_embeddings}")
        out = self.text_encoder(input_ids, attention_mask, deterministic=deterministic)
        return EncoderOutput(out.last_hidden_state, None,
                             pool_text(out.last_hidden_state, attention_mask))

    def video_embed(self, video: jax.Array, video_mask: jax.Array | None = None, *,
                    deterministic: bool | None = None) -> jax.Array:
        """``(B, H)`` float32 ``pooled_video``."""
        return self.encode_video(video, video_mask, deterministic=deterministic).pooled

    def text_embed(self, input_ids: jax.Array, attention_mask: jax.Array, *,
                   deterministic: bool | None = None) -> jax.Array:
        """``(B, H)`` float32 ``pooled_text``."""
        return self.encode_text(input_ids, attention_mask, deterministic=deterministic).pooled

    @staticmethod
    def similarity(text_embeds: jax.Array, video_embeds: jax.Array) -> jax.Array:
        """``(Bt, Bv)`` float32 dot products, texts by videos (upstream's retrieval matrix)."""
        return jnp.asarray(text_embeds, jnp.float32) @ jnp.asarray(video_embeds, jnp.float32).T

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array, video: jax.Array,
                 video_mask: jax.Array | None = None, *,
                 deterministic: bool | None = None) -> jax.Array:
        """``(Bt, Bv)`` retrieval scores of texts against videos."""
        return self.similarity(
            self.text_embed(input_ids, attention_mask, deterministic=deterministic),
            self.video_embed(video, video_mask, deterministic=deterministic))


def split_caps(caps: np.ndarray, cmasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Upstream's caption layout ``[CLS] [SEP] words [SEP] pad`` (``Aligner``) -> the text
    tower's ids and mask ``[CLS] words [SEP] pad`` (``forward_text`` drops slot 1)."""
    caps, cmasks = np.asarray(caps), np.asarray(cmasks)
    return (np.concatenate([caps[:, :1], caps[:, 2:]], axis=1).astype(np.int32),
            np.concatenate([cmasks[:, :1], cmasks[:, 2:]], axis=1).astype(np.int32))


# ----------------------------------------------------------------------------- loading

def _param_shapes(cfg: VideoCLIPConfig) -> dict[str, tuple[int, ...]]:
    return loading.param_shapes(lambda rngs: VideoCLIP(cfg, rngs=rngs))


def upstream_shapes(cfg: VideoCLIPConfig = VIDEOCLIP_BASE) -> dict[str, tuple[int, ...]]:
    """Upstream key (without ``mmmodel.``) -> torch shape of every tensor this port reads."""
    return {loading.torch_key(k): loading.torch_shape(k, s)
            for k, s in _param_shapes(cfg).items()}


def unwrap(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """The state dict without fairseq's ``mmmodel.`` prefix (as ``_trim_state_dict``)."""
    n = len(WRAPPER_PREFIX)
    return {k[n:] if k.startswith(WRAPPER_PREFIX) else k: v for k, v in tensors.items()}


def _layer_count(tensors: Mapping[str, Any], stack: str) -> int:
    found = re.compile(rf"{re.escape(stack)}\.layer\.(\d+)\.")
    ids = [int(m.group(1)) for k in tensors if (m := found.match(k))]
    return max(ids) + 1 if ids else 0


def infer_config(tensors: Mapping[str, Any], where: str, *, num_attention_heads: int = 12,
                 max_video_len: int = 32, max_len: int = 96) -> VideoCLIPConfig:
    """The sizes of the model a state dict holds (``mmmodel.`` prefix or not); heads and the
    sequence lengths cannot be read from shapes (upstream's 12, 32 and 96 by default)."""
    tensors = unwrap(tensors)

    def shape(key: str) -> tuple[int, ...]:
        if key not in tensors:
            raise CheckpointError(f"{where}: missing key {key!r} (not a VideoCLIP checkpoint?)")
        v = tensors[key]
        return tuple(getattr(v, "shape", v))  # an array, or a shape (read_torch_shapes)

    vocab, width = shape("text_encoder.embeddings.word_embeddings.weight")
    return dataclasses.replace(
        VIDEOCLIP_BASE, vocab_size=vocab, hidden_size=width,
        num_attention_heads=num_attention_heads,
        intermediate_size=shape("text_encoder.encoder.layer.0.intermediate.dense.weight")[0],
        text_layers=_layer_count(tensors, "text_encoder.encoder"),
        video_layers=_layer_count(tensors, "video_encoder.bert.encoder"),
        max_position_embeddings=shape("text_encoder.embeddings.position_embeddings.weight")[0],
        type_vocab_size=shape("text_encoder.embeddings.token_type_embeddings.weight")[0],
        video_dim=shape("video_encoder.videomlp.linear1.weight")[1],
        max_video_len=max_video_len, max_len=max_len)


def match(tensors: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]],
          where: str) -> dict[str, np.ndarray]:
    """NNX parameter name -> float32 array (Flax layout) for ``shapes`` (the NNX names and
    shapes of a ``VideoCLIP`` as built, or of one of its towers: ``video_encoder.*`` or
    ``text_encoder.*`` names only) from an upstream state dict, with or without the
    ``mmmodel.`` prefix.

    Every parameter must be there with its shape, and every tensor must be read unless it is
    one of ``IGNORED_KEYS`` or belongs to a tower ``shapes`` leaves out; the first problem is
    one ``CheckpointError`` line naming ``where`` and the key, with the count of the others.
    """
    tensors = unwrap(tensors)
    spare = tuple(t for t in TOWERS if not any(n.startswith(t) for n in shapes))
    problems, arrays, wanted = [], {}, set()
    for name, shape in shapes.items():
        key, want = loading.torch_key(name), loading.torch_shape(name, shape)
        wanted.add(key)
        if key not in tensors:
            problems.append(f"missing key {key!r} (VideoCLIP expects shape {want})")
        elif tuple(tensors[key].shape) != want:
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, "
                            f"VideoCLIP expects {want}")
        else:
            x = loading.to_nnx_layout(name, np.asarray(tensors[key]))
            arrays[name] = x.astype(np.float32, copy=False) if x.dtype.kind == "f" else x
    problems += [f"unexpected key {k!r} (shape {tuple(tensors[k].shape)})" for k in
                 sorted(tensors) if k not in wanted and k not in IGNORED_KEYS
                 and not k.startswith(spare)]
    loading.refuse(where, problems)
    return arrays


def match_state_dict(tensors: Mapping[str, np.ndarray], cfg: VideoCLIPConfig,
                     where: str) -> dict[str, np.ndarray]:
    """``match`` for the ``VideoCLIP`` that ``cfg`` builds."""
    return match(tensors, _param_shapes(cfg), where)


def read_checkpoint(path: str | Path) -> dict[str, np.ndarray]:
    """The tensors of ``checkpoint_best.pt`` (its ``model`` entry), read without torch; the
    training state fairseq pickles next to it (config, meters, optimizer) is skipped."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    return read_torch_checkpoint(path, foreign="skip")


def from_checkpoint(path: str | Path, *, cfg: VideoCLIPConfig | None = None,
                    num_attention_heads: int = 12, max_video_len: int = 32, max_len: int = 96,
                    dtype: Any = jnp.float32, param_dtype: Any = jnp.float32,
                    key: jax.Array | None = None, mesh: jax.sharding.Mesh | None = None,
                    rules: Any = None) -> VideoCLIP:
    """VideoCLIP with the weights of upstream's ``checkpoint_best.pt`` (or a bare MMPT state
    dict), in eval mode.

    Args:
      path: the checkpoint file.
      cfg: the sizes; None = inferred from the tensor shapes (``infer_config``) with
        ``num_attention_heads``, ``max_video_len`` and ``max_len``.
      dtype: compute dtype; param_dtype: parameter dtype.
      key: PRNG key for the dropout streams.
      mesh, rules: where parameters are placed (``loading.instantiate``).

    Raises:
      CheckpointError: one line naming ``path`` and the offending key.
    """
    tensors = read_checkpoint(path)
    cfg = cfg or infer_config(tensors, str(path), num_attention_heads=num_attention_heads,
                              max_video_len=max_video_len, max_len=max_len)
    arrays = match_state_dict(tensors, cfg, str(path))
    model = loading.instantiate(
        lambda rngs: VideoCLIP(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs), arrays,
        key=jax.random.key(0) if key is None else key, mesh=mesh, rules=rules)
    model.eval()
    return model


# ----------------------------------------------------------------------------- text


class VideoCLIPTokenizer:
    """bert-base-uncased WordPiece from a user-supplied ``vocab.txt`` (nothing is downloaded),
    laid out as the text tower reads it: ``[CLS] pieces [SEP]``, pieces cut to
    ``max_len - max_video_len - 3``, zero padding to ``max_len - max_video_len - 1``.

    Args:
      vocab_file: the WordPiece vocabulary (one piece a line).
      max_len, max_video_len: upstream's config values (96 and 32).
    """

    def __init__(self, vocab_file: str | Path, max_len: int = 96, max_video_len: int = 32):
        from transformers import BertTokenizerFast

        if not Path(vocab_file).is_file():
            raise FileNotFoundError(f"{vocab_file}: no WordPiece vocabulary file")
        self.length = max_len - max_video_len - 1
        self.max_words = max_len - max_video_len - 3
        if self.max_words < 0:
            raise ValueError(f"max_len {max_len} leaves no text slots after {max_video_len}")
        self._tok = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``texts`` -> (ids int32 ``(n, length)``, attention mask int32, 1 = real)."""
        pieces = self._tok(list(texts), add_special_tokens=False)["input_ids"]
        ids = np.zeros((len(pieces), self.length), np.int32)
        mask = np.zeros_like(ids)
        cls, sep = self._tok.cls_token_id, self._tok.sep_token_id
        for i, p in enumerate(pieces):
            row = [cls, *p[: self.max_words], sep]
            ids[i, : len(row)], mask[i, : len(row)] = row, 1
        return ids, mask
