"""BERT, RoBERTa / XLM-RoBERTa and ALBERT text encoders in Flax NNX.

The module tree mirrors Hugging Face's (``embeddings.word_embeddings``,
``encoder.layer.<i>.attention.self.query``, ``encoder.albert_layer_groups.<g>.albert_layers.<j>``,
``pooler``), so each NNX parameter path spells its checkpoint tensor's name.

* BERT: absolute positions ``0..n-1``; pooler ``tanh(dense(h[:, 0]))``.
* RoBERTa / XLM-R: same network; positions count non-pad tokens from ``pad_token_id + 1``
  (pads keep ``pad_token_id``), as fairseq does.
* ALBERT: factorised embeddings (``embedding_size`` then ``embedding_hidden_mapping_in``),
  ``num_hidden_layers`` applications of ``num_hidden_groups`` shared layer groups (each of
  ``inner_group_num`` layers); pooler ``tanh(pooler(h[:, 0]))``.

Inputs are int ``(batch, length)`` token ids with an optional ``attention_mask`` (1 = real
token), ``token_type_ids`` and ``position_ids``. Outputs are ``layers.EncoderOutput``;
``pooled`` follows ``pooling`` (``"pooler"`` by default, ``"mean"`` for sentence-transformers
checkpoints, ``"cls"`` when there is no pooler layer).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models import attention
from vnr.models.encoders import layers
from vnr.models.encoders.layers import EncoderOutput, Node, dense, dropout, embed, layer_norm

Config = Any  # a transformers BertConfig / XLMRobertaConfig / RobertaConfig / AlbertConfig


def roberta_position_ids(input_ids: jax.Array, pad_token_id: int) -> jax.Array:
    """fairseq positions: non-pad tokens count up from ``pad_token_id + 1``; pads keep it."""
    mask = (input_ids != pad_token_id).astype(jnp.int32)
    return jnp.cumsum(mask, axis=1) * mask + pad_token_id


class Embeddings(nnx.Module):
    """Word + token-type + position embeddings, LayerNorm, dropout."""

    def __init__(self, cfg: Config, width: int, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        kw = dict(rngs=rngs, std=cfg.initializer_range, dtype=dtype, param_dtype=param_dtype)
        self.word_embeddings = embed(cfg.vocab_size, width, ("vocab", "embed"), **kw)
        self.position_embeddings = embed(cfg.max_position_embeddings, width, ("pos", "embed"), **kw)
        self.token_type_embeddings = embed(cfg.type_vocab_size, width, (None, "embed"), **kw)
        self.LayerNorm = layer_norm(
            width, cfg.layer_norm_eps, rngs=rngs, dtype=dtype, param_dtype=param_dtype
        )
        self.dropout = dropout(cfg.hidden_dropout_prob, rngs)

    def __call__(
        self,
        input_ids: jax.Array,
        token_type_ids: jax.Array,
        position_ids: jax.Array,
        deterministic: bool | None,
    ) -> jax.Array:
        h = self.word_embeddings(input_ids)
        h = h + self.token_type_embeddings(token_type_ids)
        h = h + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(h), deterministic=deterministic)


class BertLayer(layers.TransformerLayer):
    """Post-LN transformer layer with BERT's tensor names."""

    def __init__(self, cfg: Config, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        super().__init__(cfg)
        h, m = cfg.hidden_size, cfg.intermediate_size
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self_attention = Node(
            query=dense(h, h, ("embed", "heads"), **kw),
            key=dense(h, h, ("embed", "heads"), **kw),
            value=dense(h, h, ("embed", "heads"), **kw),
            dropout=dropout(cfg.attention_probs_dropout_prob, rngs),
        )
        self.attention = Node(
            {"self": self_attention},
            output=Node(
                dense=dense(h, h, ("heads", "embed"), **kw),
                LayerNorm=layer_norm(h, cfg.layer_norm_eps, **ln),
                dropout=dropout(cfg.hidden_dropout_prob, rngs),
            ),
        )
        self.intermediate = Node(dense=dense(h, m, ("embed", "mlp"), **kw))
        self.output = Node(
            dense=dense(m, h, ("mlp", "embed"), **kw),
            LayerNorm=layer_norm(h, cfg.layer_norm_eps, **ln),
            dropout=dropout(cfg.hidden_dropout_prob, rngs),
        )

    def __call__(
        self, x: jax.Array, mask: attention.Mask | None, deterministic: bool | None
    ) -> jax.Array:
        return self.feed_forward(self.self_attention(x, mask, deterministic), deterministic)

    def self_attention(
        self, x: jax.Array, mask: attention.Mask | None, deterministic: bool | None
    ) -> jax.Array:
        """The attention sublayer (with its residual and LayerNorm), shared with layers that
        add a sublayer between it and the feed-forward one (xbert's cross-attention)."""
        sa, so = self.attention.self, self.attention.output
        a = self.attend(x, (sa.query, sa.key, sa.value), mask, sa.dropout, deterministic)
        a = so.dropout(so.dense(a), deterministic=deterministic)
        return so.LayerNorm(a + x)

    def feed_forward(self, x: jax.Array, deterministic: bool | None) -> jax.Array:
        """The feed-forward sublayer with its residual and LayerNorm."""
        y = self.act(self.intermediate.dense(x))
        y = self.output.dropout(self.output.dense(y), deterministic=deterministic)
        return self.output.LayerNorm(y + x)


class _TextEncoder(nnx.Module):
    """The forward pass BERT and ALBERT share: default ids, embeddings, layers, pooling."""

    embeddings: Embeddings
    pooling: str

    def _positions(self, input_ids: jax.Array) -> jax.Array:
        return jnp.broadcast_to(jnp.arange(input_ids.shape[-1]), input_ids.shape)

    def _encode(
        self, x: jax.Array, mask: attention.Mask | None, deterministic: bool | None
    ) -> jax.Array:
        raise NotImplementedError

    def _pooler(self) -> nnx.Linear | None:
        raise NotImplementedError

    def __call__(
        self,
        input_ids: jax.Array,
        attention_mask: jax.Array | None = None,
        token_type_ids: jax.Array | None = None,
        position_ids: jax.Array | None = None,
        *,
        deterministic: bool | None = None,
    ) -> EncoderOutput:
        """Encodes token ids.

        Args:
          input_ids: int ``(batch, length)``.
          attention_mask: ``(batch, length)``, 1 = real token; None = all real.
          token_type_ids: segment ids; default zeros.
          position_ids: default per ``position_scheme``.
          deterministic: overrides the dropout mode set by ``train()`` / ``eval()``.

        Returns:
          ``EncoderOutput`` (hidden states, pooler output, configured pooled embedding).
        """
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(input_ids)
        if position_ids is None:
            position_ids = self._positions(input_ids)
        x = self.embeddings(input_ids, token_type_ids, position_ids, deterministic)
        x = self._encode(x, attention.Mask(attention_mask), deterministic)
        pooler = self._pooler()
        pooled = jnp.tanh(pooler(x[:, 0])) if pooler is not None else None
        return EncoderOutput(x, pooled, layers.pool(self.pooling, x, attention_mask, pooled))


class BertModel(_TextEncoder):
    """BERT or RoBERTa/XLM-R encoder (``position_scheme`` = ``"absolute"`` / ``"roberta"``).

    Args:
      cfg: the Hugging Face config.
      add_pooling_layer: build the ``pooler`` (tanh(dense(CLS))).
      pooling: what ``EncoderOutput.pooled`` is: ``"pooler"``, ``"cls"``, ``"mean"``, ``"max"``;
        default ``"pooler"`` with a pooler layer else ``"cls"``.
      position_scheme: ``"absolute"`` (BERT) or ``"roberta"`` (positions from padding).
      dtype: compute dtype (e.g. ``jnp.bfloat16``); param_dtype: parameter dtype.
      rngs: ``params`` and ``dropout`` streams (or a default one).
    """

    def __init__(
        self,
        cfg: Config,
        *,
        add_pooling_layer: bool = True,
        pooling: str | None = None,
        position_scheme: str = "absolute",
        dtype: Any = jnp.float32,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ):
        if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"position_embedding_type={cfg.position_embedding_type!r} is not supported "
                "(only 'absolute')"
            )
        if position_scheme not in ("absolute", "roberta"):
            raise ValueError(
                f"position_scheme must be 'absolute' or 'roberta', got {position_scheme}"
            )
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.pad_token_id = cfg.pad_token_id
        self.position_scheme = position_scheme
        self.pooling = pooling or ("pooler" if add_pooling_layer else "cls")
        self.embeddings = Embeddings(cfg, cfg.hidden_size, **kw)
        self.encoder = Node(
            layer=nnx.List([BertLayer(cfg, **kw) for _ in range(cfg.num_hidden_layers)])
        )
        h = cfg.hidden_size
        self.pooler = (
            Node(dense=dense(h, h, ("embed", None), std=cfg.initializer_range, **kw))
            if add_pooling_layer
            else None
        )

    def _positions(self, input_ids: jax.Array) -> jax.Array:
        if self.position_scheme == "roberta":
            return roberta_position_ids(input_ids, self.pad_token_id)
        return super()._positions(input_ids)

    def _encode(
        self, x: jax.Array, mask: attention.Mask | None, deterministic: bool | None
    ) -> jax.Array:
        return layers.apply_stack(self.encoder.layer, x, mask, deterministic)

    def _pooler(self) -> nnx.Linear | None:
        return self.pooler.dense if self.pooler is not None else None


class AlbertLayer(layers.TransformerLayer):
    """ALBERT's post-LN transformer layer with its tensor names."""

    def __init__(self, cfg: Config, *, dtype: Any, param_dtype: Any, rngs: nnx.Rngs):
        super().__init__(cfg)
        h, m = cfg.hidden_size, cfg.intermediate_size
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.attention = Node(
            query=dense(h, h, ("embed", "heads"), **kw),
            key=dense(h, h, ("embed", "heads"), **kw),
            value=dense(h, h, ("embed", "heads"), **kw),
            dense=dense(h, h, ("heads", "embed"), **kw),
            LayerNorm=layer_norm(h, cfg.layer_norm_eps, **ln),
            attention_dropout=dropout(cfg.attention_probs_dropout_prob, rngs),
            dropout=dropout(cfg.hidden_dropout_prob, rngs),
        )
        self.ffn = dense(h, m, ("embed", "mlp"), **kw)
        self.ffn_output = dense(m, h, ("mlp", "embed"), **kw)
        self.full_layer_layer_norm = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.dropout = dropout(cfg.hidden_dropout_prob, rngs)

    def __call__(
        self, x: jax.Array, mask: attention.Mask | None, deterministic: bool | None
    ) -> jax.Array:
        at = self.attention
        a = self.attend(x, (at.query, at.key, at.value), mask, at.attention_dropout, deterministic)
        a = at.dropout(at.dense(a), deterministic=deterministic)
        x = at.LayerNorm(a + x)
        y = self.ffn_output(self.act(self.ffn(x)))
        y = self.dropout(y, deterministic=deterministic)
        return self.full_layer_layer_norm(y + x)


class AlbertModel(_TextEncoder):
    """ALBERT encoder: factorised embeddings and cross-layer parameter sharing.

    Args:
      cfg: the Hugging Face ``AlbertConfig``.
      add_pooling_layer: build the ``pooler`` (tanh(dense(CLS))).
      pooling: as ``BertModel``.
      dtype: compute dtype; param_dtype: parameter dtype.
      rngs: ``params`` and ``dropout`` streams (or a default one).
    """

    def __init__(
        self,
        cfg: Config,
        *,
        add_pooling_layer: bool = True,
        pooling: str | None = None,
        dtype: Any = jnp.float32,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        e, h = cfg.embedding_size, cfg.hidden_size
        self.num_layers, self.num_groups = cfg.num_hidden_layers, cfg.num_hidden_groups
        self.pooling = pooling or ("pooler" if add_pooling_layer else "cls")
        self.embeddings = Embeddings(cfg, e, **kw)
        groups = [
            Node(
                albert_layers=nnx.List([AlbertLayer(cfg, **kw) for _ in range(cfg.inner_group_num)])
            )
            for _ in range(cfg.num_hidden_groups)
        ]
        self.encoder = Node(
            embedding_hidden_mapping_in=dense(
                e, h, (None, "embed"), std=cfg.initializer_range, **kw
            ),
            albert_layer_groups=nnx.List(groups),
        )
        self.pooler = (
            dense(h, h, ("embed", None), std=cfg.initializer_range, **kw)
            if add_pooling_layer
            else None
        )

    def _encode(
        self, x: jax.Array, mask: attention.Mask | None, deterministic: bool | None
    ) -> jax.Array:
        x = self.encoder.embedding_hidden_mapping_in(x)
        for i in range(self.num_layers):
            group = int(i / (self.num_layers / self.num_groups))  # as the original
            for layer in self.encoder.albert_layer_groups[group].albert_layers:
                x = layers.apply_layer(layer, x, mask, deterministic)
        return x

    def _pooler(self) -> nnx.Linear | None:
        return self.pooler
