"""BEiT image tower (Hugging Face ``BeitModel``, e.g. ``microsoft/beit-base-patch16-224-pt22k-
ft22k``, the vision encoder of Singularity), NNX, channels-last.

Architecture (BEiT-base: width 768, 12 layers, 12 heads, patch 16, 224x224)::

    images [B, S, S, 3] (normalised) -> embeddings.patch_embeddings.projection: p x p / p conv
      -> [B, (S/p)^2, C] tokens in row-major order; embeddings.cls_token put in front
      (no absolute position embedding: use_absolute_position_embeddings is false)
    encoder.layer.i (pre-LN, layer scale):
      x + lambda_1 * attention(layernorm_before(x)); x + lambda_2 * MLP(layernorm_after(x))
      attention: query and value with bias, key without; softmax(q k^T / sqrt(d) + bias),
        bias[h, i, j] = relative_position_bias_table[relative_position_index[i, j], h]
        (each layer its own table of (2W-1)^2 + 3 rows: the last three are cls->token,
        token->cls and cls->cls; W = S / p)
      MLP: intermediate.dense, exact GELU, output.dense
    -> pooler.layernorm(mean of the patch tokens) (use_mean_pooling: no final layernorm)

Output (``EncoderOutput``): ``last_hidden_state`` [B, 1 + W^2, C] is the last layer's output
as it is (with use_mean_pooling ``BeitModel.layernorm`` is the identity); ``pooler_output``
and ``pooled`` = ``pooler.layernorm(mean(patch tokens))`` (float32). Without mean pooling a
final ``layernorm`` is applied and ``pooled`` is the [CLS] token, as ``BeitPooler``.

Keys: NNX paths are ``BeitModel``'s state-dict keys with ``kernel``/``scale`` for ``weight``
(``encoder.layer.3.attention.attention.relative_position_bias.relative_position_bias_table``,
``encoder.layer.3.lambda_1``, ``embeddings.cls_token``). Older transformers (4.15, which
Singularity pins) also saved the derived buffer
``...relative_position_bias.relative_position_index`` [W^2+1, W^2+1]; it is recomputed here
(``relative_position_index``), and ``buffer_shapes`` lists it for loaders.
Tables are used at the size they are stored: no interpolation to other image sizes.

Stochastic depth (``drop_path_rate``, linear over the layers) is ``nnx.Dropout`` broadcast
over (tokens, width), off in eval mode (the default). The softmax and the bias run in
float32 whatever ``dtype``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models import attention
from vnr.models.encoders import layers
from vnr.models.encoders.layers import EncoderOutput, Node, dense, layer_norm, param
from vnr.models.layers import annotate

NORM_NAMES = ("norm",)


@dataclasses.dataclass(frozen=True)
class BeitConfig:
    """``BeitConfig`` fields the tower uses; defaults are beit-base-patch16-224-pt22k-ft22k's
    (``configs/beit-base-patch16-224-pt22k-ft22k.json`` in Singularity)."""

    image_size: int = 224
    patch_size: int = 16
    num_channels: int = 3
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-12
    layer_scale_init_value: float = 0.1
    use_mean_pooling: bool = True
    drop_path_rate: float = 0.1
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    initializer_range: float = 0.02

    @property
    def window(self) -> int:
        """Side of the patch grid (14 at 224 / 16)."""
        return self.image_size // self.patch_size

    @property
    def num_relative_distance(self) -> int:
        """Rows of each layer's bias table: (2W - 1)^2 + 3."""
        return (2 * self.window - 1) ** 2 + 3

    def check(self) -> None:
        """ValueError (one line) for sizes the original cannot run."""
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch_size "
                             f"{self.patch_size}")
        layers.check_divisible(self.hidden_size, self.num_attention_heads)


BEIT_BASE_224 = BeitConfig()


@functools.lru_cache(maxsize=8)
def relative_position_index(window: int) -> np.ndarray:
    """[W^2 + 1, W^2 + 1] row of the bias table for each (query, key) token pair, [CLS]
    first, as ``BeitRelativePositionBias`` (and the buffer older transformers saved)."""
    coords = np.stack(np.meshgrid(np.arange(window), np.arange(window), indexing="ij"))
    coords = coords.reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0) + (window - 1)
    n = (2 * window - 1) ** 2 + 3
    index = np.zeros((window * window + 1,) * 2, np.int64)
    index[1:, 1:] = rel[..., 0] * (2 * window - 1) + rel[..., 1]
    index[0, :] = n - 3
    index[:, 0] = n - 2
    index[0, 0] = n - 1
    index.flags.writeable = False
    return index


class BeitLayer(layers.TransformerLayer):
    """Pre-LN layer with layer scale and its own relative position bias (upstream's names)."""

    def __init__(self, cfg: BeitConfig, drop_path: float, *, dtype: Any, param_dtype: Any,
                 rngs: nnx.Rngs):
        super().__init__(cfg)
        h, m = cfg.hidden_size, cfg.intermediate_size
        kw, ln = layers.sublayer_kwargs(cfg, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.window = cfg.window
        table = jnp.zeros((cfg.num_relative_distance, cfg.num_attention_heads), param_dtype)
        self.layernorm_before = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.attention = Node(
            {"attention": Node(
                query=dense(h, h, ("embed", "heads"), **kw),
                key=dense(h, h, ("embed", "heads"), use_bias=False, **kw),
                value=dense(h, h, ("embed", "heads"), **kw),
                relative_position_bias=Node(
                    relative_position_bias_table=param(table, (None, None))),
                dropout=layers.dropout(cfg.attention_probs_dropout_prob, rngs))},
            output=Node(dense=dense(h, h, ("heads", "embed"), **kw),
                        dropout=layers.dropout(cfg.hidden_dropout_prob, rngs)))
        self.layernorm_after = layer_norm(h, cfg.layer_norm_eps, **ln)
        self.intermediate = Node(dense=dense(h, m, ("embed", "mlp"), **kw))
        self.output = Node(dense=dense(m, h, ("mlp", "embed"), **kw),
                           dropout=layers.dropout(cfg.hidden_dropout_prob, rngs))
        scale = jnp.full((h,), cfg.layer_scale_init_value, param_dtype)
        self.lambda_1 = param(scale, NORM_NAMES)
        self.lambda_2 = param(scale, NORM_NAMES)
        self.drop_path = nnx.Dropout(drop_path, broadcast_dims=(1, 2), deterministic=True,
                                     rngs=rngs)

    def bias(self) -> jax.Array:
        """[heads, N, N] float32 relative position bias of this layer."""
        table = self.attention.attention.relative_position_bias.relative_position_bias_table
        index = relative_position_index(self.window)
        n = index.shape[0]
        return table[...].astype(jnp.float32)[index.reshape(-1)].reshape(n, n, -1).transpose(
            2, 0, 1)

    def _attend(self, x: jax.Array, deterministic: bool | None) -> jax.Array:
        sa = self.attention.attention
        q, k, v = (layers.split_heads(p(x), self.num_heads) for p in (sa.query, sa.key,
                                                                        sa.value))
        q = q * jnp.asarray(q.shape[-1] ** -0.5, q.dtype)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        probs = jax.nn.softmax(logits + self.bias()[None], axis=-1).astype(v.dtype)
        probs = sa.dropout(probs, deterministic=deterministic)
        out = jnp.einsum("bhqk,bkhd->bqhd", probs, v)
        return out.reshape(out.shape[:2] + (-1,))

    def __call__(self, x: jax.Array, mask: attention.Mask | None,
                 deterministic: bool | None) -> jax.Array:
        """x [B, N, C] -> same shape; ``mask`` is unused (every token attends everywhere)."""
        out = self.attention.output
        a = out.dropout(out.dense(self._attend(self.layernorm_before(x), deterministic)),
                        deterministic=deterministic)
        x = x + self.drop_path(self.lambda_1[...].astype(a.dtype) * a,
                               deterministic=deterministic)
        y = self.output.dense(self.act(self.intermediate.dense(self.layernorm_after(x))))
        y = self.output.dropout(y, deterministic=deterministic)
        return x + self.drop_path(self.lambda_2[...].astype(y.dtype) * y,
                                  deterministic=deterministic)


class BeitModel(nnx.Module):
    """BEiT encoder: images [B, S, S, 3] -> ``EncoderOutput`` (see the module doc).

    Args:
      cfg: sizes (``BEIT_BASE_224`` is beit-base-patch16-224).
      add_pooling_layer: build ``pooler`` (Singularity builds it: mean pooling).
      dtype: compute dtype (e.g. ``jnp.bfloat16``); param_dtype: parameter dtype.
      rngs: ``params`` and ``dropout`` (drop path) streams.
    """

    def __init__(self, cfg: BeitConfig = BEIT_BASE_224, *, add_pooling_layer: bool = True,
                 dtype: Any = jnp.float32, param_dtype: Any = jnp.float32, rngs: nnx.Rngs):
        cfg.check()
        self.config, self.dtype = cfg, dtype
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h, p = cfg.hidden_size, cfg.patch_size
        conv = nnx.Conv(cfg.num_channels, h, (p, p), strides=(p, p), padding="VALID",
                        dtype=dtype, param_dtype=param_dtype, rngs=rngs,
                        kernel_init=annotate(nnx.initializers.normal(cfg.initializer_range),
                                             ("patch", "patch", "patch", "embed")),
                        bias_init=annotate(nnx.initializers.zeros_init(), ("embed",)))
        cls = param(jnp.zeros((1, 1, h), param_dtype), (None, None, "embed"))
        self.embeddings = Node(cls_token=cls, patch_embeddings=Node(projection=conv))
        rates = np.linspace(0.0, cfg.drop_path_rate, cfg.num_hidden_layers).tolist()
        self.encoder = Node(layer=nnx.List([BeitLayer(cfg, r, **kw) for r in rates]))
        mean = cfg.use_mean_pooling
        self.layernorm = None if mean else layer_norm(h, cfg.layer_norm_eps, **kw)
        self.pooler = (Node(layernorm=layer_norm(h, cfg.layer_norm_eps, **kw))
                       if add_pooling_layer and mean else None)

    def __call__(self, images: jax.Array, *, deterministic: bool | None = None
                 ) -> EncoderOutput:
        """Encodes normalised channels-last images [B, image_size, image_size, channels]."""
        s, c = self.config.image_size, self.config.num_channels
        if images.ndim != 4 or tuple(images.shape[1:]) != (s, s, c):
            raise ValueError(f"BEiT: expected channels-last images [B, {s}, {s}, {c}], got "
                             f"shape {tuple(images.shape)}")
        x = self.embeddings.patch_embeddings.projection(images.astype(self.dtype))
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        cls = jnp.broadcast_to(self.embeddings.cls_token[...].astype(x.dtype),
                               (x.shape[0], 1, x.shape[-1]))
        x = layers.apply_stack(self.encoder.layer, jnp.concatenate([cls, x], axis=1), None,
                               deterministic)
        if self.layernorm is not None:
            x = self.layernorm(x)
        if self.pooler is not None:
            pooled = self.pooler.layernorm(layers.mean_pool(x[:, 1:], None))
            return EncoderOutput(x, pooled, pooled)
        return EncoderOutput(x, None, x[:, 0])


def buffer_shapes(cfg: BeitConfig = BEIT_BASE_224, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """The derived ``relative_position_index`` buffer of every layer (older transformers
    saved it; recomputed here) with its shape."""
    n = cfg.window ** 2 + 1
    return {f"{prefix}encoder.layer.{i}.attention.attention.relative_position_bias."
            "relative_position_index": (n, n) for i in range(cfg.num_hidden_layers)}
