"""UniVL's caption decoder (upstream ``modules/module_decoder.py``) in NNX: ``decoder.*``.

Layout: ``embeddings.LayerNorm`` (the word and position tables are the text BERT's, tied
upstream, so they are passed in at call time rather than stored twice), ``decoder.layer.<i>``
(``slf_attn`` / ``enc_attn``: ``att.query|key|value`` and ``output.dense|LayerNorm``;
``intermediate.dense``; ``output.dense|LayerNorm``), and the language-model head
``classifier.cls.predictions`` (``transform.dense|LayerNorm`` and ``bias``; its output
matrix is again BERT's word table). The state dict repeats the three tied tables under
``decoder.``: ``TIED_KEYS``, read from ``bert.`` instead.

A layer: causal self-attention over the caption (keys also masked by the caption mask),
then attention from the caption to the cross encoder's states (keys masked by the joint
text+video mask), then the feed-forward block; each sublayer post-LN with a residual, as
BERT. Logits: ``transform(h) @ word_table.T + bias``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models import attention
from vnr.models.encoders import layers
from vnr.models.encoders.layers import Node, dense, dropout, layer_norm

TIED_KEYS = ("decoder.embeddings.word_embeddings.weight",
             "decoder.embeddings.position_embeddings.weight",
             "decoder.classifier.cls.predictions.decoder.weight")


def _attention_block(cfg: Any, kw: dict, ln: dict, rngs: nnx.Rngs) -> Node:
    """``att`` (q/k/v projections) and ``output`` (dense, LayerNorm) of one attention."""
    h = cfg.hidden_size
    return Node(
        att=Node(query=dense(h, h, ("embed", "heads"), **kw),
                 key=dense(h, h, ("embed", "heads"), **kw),
                 value=dense(h, h, ("embed", "heads"), **kw),
                 dropout=dropout(cfg.attention_probs_dropout_prob, rngs)),
        output=Node(dense=dense(h, h, ("heads", "embed"), **kw),
                    LayerNorm=layer_norm(h, cfg.layer_norm_eps, **ln),
                    dropout=dropout(cfg.hidden_dropout_prob, rngs)),
    )


class DecoderLayer(layers.TransformerLayer):
    """Self-attention, attention to the encoder, feed-forward; upstream's tensor names."""

    def __init__(self, cfg: Any, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        super().__init__(cfg)
        h, m = cfg.hidden_size, cfg.intermediate_size
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.slf_attn = _attention_block(cfg, kw, ln, rngs)
        self.enc_attn = _attention_block(cfg, kw, ln, rngs)
        self.intermediate = Node(dense=dense(h, m, ("embed", "mlp"), **kw))
        self.output = Node(dense=dense(m, h, ("mlp", "embed"), **kw),
                           LayerNorm=layer_norm(h, cfg.layer_norm_eps, **ln),
                           dropout=dropout(cfg.hidden_dropout_prob, rngs))

    def _sublayer(self, block: Node, x: jax.Array, memory: jax.Array, mask: attention.Mask,
                  deterministic: bool | None) -> jax.Array:
        at, out = block.att, block.output
        q, k, v = (layers.split_heads(p(s), self.num_heads)
                   for p, s in ((at.query, x), (at.key, memory), (at.value, memory)))
        a = layers.dot_product_attention(q, k, v, mask, at.dropout, deterministic,
                                         self.attention_impl)
        a = out.dropout(out.dense(a), deterministic=deterministic)
        return out.LayerNorm(a + x)

    def __call__(self, x: jax.Array, caption_mask: jax.Array, memory: jax.Array,
                 memory_mask: jax.Array, deterministic: bool | None) -> jax.Array:
        x = self._sublayer(self.slf_attn, x, x, attention.Mask(caption_mask, causal=True),
                           deterministic)
        x = self._sublayer(self.enc_attn, x, memory.astype(x.dtype),
                           attention.Mask(memory_mask), deterministic)
        y = self.output.dropout(self.output.dense(self.act(self.intermediate.dense(x))),
                                deterministic=deterministic)
        return self.output.LayerNorm(y + x)


class CaptionDecoder(nnx.Module):
    """``decoder.*``: caption token ids + cross-encoder states -> vocabulary logits.

    Args:
      cfg: needs ``hidden_size``, ``intermediate_size``, ``num_attention_heads``,
        ``hidden_act``, ``layer_norm_eps``, dropout rates, ``initializer_range``,
        ``vocab_size`` and ``decoder_layers``.
      dtype: compute dtype; param_dtype: parameter dtype.
      rngs: parameter and dropout streams.
    """

    def __init__(self, cfg: Any, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h = cfg.hidden_size
        self.embeddings = Node(LayerNorm=layer_norm(h, cfg.layer_norm_eps, **kw),
                               dropout=dropout(cfg.hidden_dropout_prob, rngs))
        self.decoder = Node(layer=nnx.List(
            [DecoderLayer(cfg, **kw) for _ in range(cfg.decoder_layers)]))
        transform = Node(dense=dense(h, h, ("embed", None), std=cfg.initializer_range, **kw),
                         LayerNorm=layer_norm(h, cfg.layer_norm_eps, **kw))
        bias = nnx.Param(jnp.zeros((cfg.vocab_size,), param_dtype), out_sharding=("vocab",),
                         eager_sharding=False)
        self.classifier = Node({"cls": Node(predictions=Node(transform=transform, bias=bias))})
        self.act = layers.activation(cfg.hidden_act)
        self.dtype = dtype

    def __call__(self, caption_ids: jax.Array, caption_mask: jax.Array, memory: jax.Array,
                 memory_mask: jax.Array, word_table: jax.Array, position_table: jax.Array,
                 *, deterministic: bool | None = None) -> jax.Array:
        """Teacher-forced logits ``(B, Lc, vocab)`` (float32).

        Args:
          caption_ids: int ``(B, Lc)``; caption_mask: 1 = real token.
          memory: the cross encoder's states ``(B, Lt+Lv, H)``; memory_mask: its mask.
          word_table, position_table: the text BERT's embedding tables (tied upstream).
        """
        n = caption_ids.shape[1]
        x = (jnp.take(word_table, caption_ids, axis=0) + position_table[:n][None]).astype(
            self.dtype)
        x = self.embeddings.dropout(self.embeddings.LayerNorm(x), deterministic=deterministic)
        for layer in self.decoder.layer:
            x = layer(x, caption_mask, memory, memory_mask, deterministic)
        head = self.classifier.cls.predictions
        y = head.transform.LayerNorm(self.act(head.transform.dense(x)))
        logits = y @ word_table.astype(y.dtype).T
        return logits.astype(jnp.float32) + head.bias[...].astype(jnp.float32)
