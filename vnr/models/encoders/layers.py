"""Building blocks shared by the encoders: annotated layers, attention, pooling, outputs.

Every parameter carries logical sharding names in its NNX metadata (``out_sharding``),
read by :func:`vnr.sharding.logical_to_spec` (the trainer's
``vnr/sharding.py``) to place it on a mesh:

* ``"vocab"``  token-embedding rows,
* ``"embed"``  model width,
* ``"mlp"``    feed-forward hidden width,
* ``"heads"``  attention q/k/v output and attention-out input (num_heads * head_dim),
* ``"norm"``   LayerNorm scale / bias,
* ``"pos"``    position-embedding rows,
* ``"patch"``  conv patch-kernel spatial and input-channel dims,
* ``None``     replicated.

Parameters are created with ``eager_sharding=False``: modules can be built anywhere
(with or without a mesh); placement is explicit (``loading.place`` / the trainer).

Attention goes through ``vnr.models.attention.attend`` (``jax.nn.dot_product_attention``;
masked keys get no weight; the softmax runs in float32 whatever ``dtype``), with a key
padding mask and a causal flag (``attention.Mask``) rather than an additive bias, the form
the fused kernels accept. Each layer's ``attention_impl`` and ``remat`` attributes are set by
``vnr.models.compute.configure`` from the run's config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx, struct

from vnr.models import attention
from vnr.models.layers import annotate as annotated

Names = tuple[str | None, ...]
Dtype = Any


def quick_gelu(x: jax.Array) -> jax.Array:
    """CLIP's sigmoid approximation of GELU: ``x * sigmoid(1.702 x)``."""
    return x * jax.nn.sigmoid(1.702 * x)


ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_fast": lambda x: jax.nn.gelu(x, approximate=True),
    "quick_gelu": quick_gelu,
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "tanh": jnp.tanh,
}


def activation(name: str) -> Callable[[jax.Array], jax.Array]:
    """Looks up a Hugging Face ``hidden_act`` name.

    Args:
      name: e.g. ``"gelu"`` (exact), ``"gelu_new"`` (tanh approximation), ``"quick_gelu"``.

    Returns:
      The activation function.
    """
    if name not in ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act {name!r}; known: {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]




def param(value: jax.Array, names: Names) -> nnx.Param:
    """A Param holding ``value`` annotated with logical sharding ``names``."""
    return nnx.Param(value, out_sharding=names, eager_sharding=False)


def dense(
    din: int,
    dout: int,
    names: Names,
    *,
    rngs: nnx.Rngs,
    std: float = 0.02,
    use_bias: bool = True,
    dtype: Dtype = jnp.float32,
    param_dtype: Dtype = jnp.float32,
) -> nnx.Linear:
    """A Linear layer; kernel ``(din, dout)`` named ``names``, bias named ``names[1:]``.

    Args:
      din: input width.
      dout: output width.
      names: logical names of the kernel's two dims.
      rngs: parameter rngs.
      std: stddev of the normal kernel initializer.
      use_bias: whether to add a bias.
      dtype: compute dtype.
      param_dtype: parameter dtype.

    Returns:
      The ``nnx.Linear``.
    """
    return nnx.Linear(
        din,
        dout,
        use_bias=use_bias,
        dtype=dtype,
        param_dtype=param_dtype,
        kernel_init=annotated(nnx.initializers.normal(std), names),
        bias_init=annotated(nnx.initializers.zeros_init(), names[1:]),
        rngs=rngs,
    )


def embed(
    num: int,
    features: int,
    names: Names,
    *,
    rngs: nnx.Rngs,
    std: float = 0.02,
    dtype: Dtype = jnp.float32,
    param_dtype: Dtype = jnp.float32,
) -> nnx.Embed:
    """An embedding table ``(num, features)`` named ``names``."""
    return nnx.Embed(
        num,
        features,
        dtype=dtype,
        param_dtype=param_dtype,
        embedding_init=annotated(nnx.initializers.normal(std), names),
        rngs=rngs,
    )


def layer_norm(
    features: int,
    eps: float,
    *,
    rngs: nnx.Rngs,
    dtype: Dtype = jnp.float32,
    param_dtype: Dtype = jnp.float32,
) -> nnx.LayerNorm:
    """A LayerNorm whose scale and bias are named ``("norm",)``."""
    return nnx.LayerNorm(
        features,
        epsilon=eps,
        dtype=dtype,
        param_dtype=param_dtype,
        scale_init=annotated(nnx.initializers.ones_init(), ("norm",)),
        bias_init=annotated(nnx.initializers.zeros_init(), ("norm",)),
        rngs=rngs,
    )


def dropout(rate: float, rngs: nnx.Rngs) -> nnx.Dropout:
    """A Dropout created in eval mode (``model.train()`` turns it on)."""
    return nnx.Dropout(rate, deterministic=True, rngs=rngs)


def dot_product_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    mask: attention.Mask | None,
    drop: nnx.Dropout | None = None,
    deterministic: bool | None = None,
    implementation: str = "default",
) -> jax.Array:
    """Multi-head attention on ``(batch, length, heads, head_dim)`` inputs.

    Args:
      q: queries.
      k: keys.
      v: values.
      mask: key padding mask and causal flag, or None (attend everywhere).
      drop: dropout on the attention probabilities (None = no dropout).
      deterministic: overrides ``drop``'s mode when not None.
      implementation: see ``vnr.models.attention``.

    Returns:
      ``(batch, q_len, heads * head_dim)``.
    """
    out = attention.attend(q, k, v, mask, implementation=implementation, drop=drop,
                           deterministic=deterministic)
    return out.reshape(out.shape[:2] + (-1,))


def split_heads(x: jax.Array, num_heads: int) -> jax.Array:
    """``(b, n, h*d)`` -> ``(b, n, h, d)``."""
    return x.reshape(x.shape[:2] + (num_heads, x.shape[-1] // num_heads))


def mean_pool(hidden: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Mask-aware mean over the sequence (sentence-transformers' mean pooling).

    Args:
      hidden: ``(batch, length, width)``.
      mask: ``(batch, length)``, nonzero = real token; None = all tokens.

    Returns:
      ``(batch, width)`` in float32.
    """
    hidden = hidden.astype(jnp.float32)
    if mask is None:
        return hidden.mean(axis=1)
    m = (mask > 0).astype(jnp.float32)[..., None]
    return (hidden * m).sum(axis=1) / jnp.maximum(m.sum(axis=1), 1e-9)


def max_pool(hidden: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Mask-aware max over the sequence."""
    if mask is None:
        return hidden.max(axis=1)
    neg = jnp.finfo(hidden.dtype).min
    return jnp.where((mask > 0)[..., None], hidden, neg).max(axis=1)


POOLINGS = ("pooler", "cls", "mean", "max")


def pool(
    kind: str, hidden: jax.Array, mask: jax.Array | None, pooler_output: jax.Array | None
) -> jax.Array:
    """The sentence embedding a model is configured to give.

    Args:
      kind: one of ``"pooler"`` (the original's pooler output), ``"cls"`` (first token),
        ``"mean"`` / ``"max"`` (mask-aware, as sentence-transformers).
      hidden: last hidden state ``(batch, length, width)``.
      mask: attention mask or None.
      pooler_output: the model's own pooled output (needed for ``"pooler"``).

    Returns:
      ``(batch, width)``.
    """
    if kind == "pooler":
        if pooler_output is None:
            raise ValueError("pooling='pooler' but this model has no pooler layer")
        return pooler_output
    if kind == "cls":
        return hidden[:, 0]
    if kind == "mean":
        return mean_pool(hidden, mask)
    if kind == "max":
        return max_pool(hidden, mask)
    raise ValueError(f"unknown pooling {kind!r}; expected one of {POOLINGS}")


@struct.dataclass
class EncoderOutput:
    """What a text or vision tower returns.

    Attributes:
      last_hidden_state: ``(batch, length, width)``.
      pooler_output: the original's pooled output (BERT/ALBERT/XLM-R: tanh(dense(CLS)),
        None without a pooler layer; CLIP: final-LN'd CLS / EOS token).
      pooled: the configured sentence / image embedding (see ``pool``); for CLIP towers
        with a projection, the projected embedding (``image_embeds`` / ``text_embeds``).
    """

    last_hidden_state: jax.Array
    pooler_output: jax.Array | None = None
    pooled: jax.Array | None = None


def check_divisible(width: int, heads: int) -> None:
    """Raises when ``width`` is not a multiple of ``heads``."""
    if width % heads:
        raise ValueError(f"hidden_size {width} is not a multiple of num_attention_heads {heads}")


class TransformerLayer(nnx.Module):
    """Base of the encoders' transformer layers: head count, activation, self-attention.

    Subclasses build their sublayers (named as in their checkpoints) with the ``dense`` and
    ``layer_norm`` keyword arguments that ``sublayer_kwargs`` returns.
    """

    def __init__(self, cfg: Any):
        check_divisible(cfg.hidden_size, cfg.num_attention_heads)
        self.num_heads = cfg.num_attention_heads
        self.act = activation(cfg.hidden_act)
        self.attention_impl = "default"  # set by vnr.models.compute.configure
        self.remat = False
        self.scan = False  # config.scan_layers: the stack runs as one lax.scan (apply_stack)

    def attend(
        self,
        x: jax.Array,
        proj: tuple[nnx.Linear, nnx.Linear, nnx.Linear],
        mask: attention.Mask | None,
        drop: nnx.Dropout | None,
        deterministic: bool | None,
    ) -> jax.Array:
        """Multi-head self-attention of ``x`` through the ``(query, key, value)`` projections."""
        q, k, v = (split_heads(p(x), self.num_heads) for p in proj)
        return dot_product_attention(q, k, v, mask, drop, deterministic, self.attention_impl)


def apply_layer(layer: TransformerLayer, x: jax.Array, mask: attention.Mask | None,
                deterministic: bool | None) -> jax.Array:
    """``layer(x, mask, deterministic)``, rematerialised in the backward pass when the
    layer's ``remat`` is set (activations recomputed instead of stored)."""
    if not layer.remat:
        return layer(x, mask, deterministic)
    return nnx.remat(lambda m, a, b, d: m(a, b, d), static_argnums=(3,))(
        layer, x, mask, deterministic)


def apply_stack(stack: Any, x: jax.Array, mask: attention.Mask | None,
                deterministic: bool | None) -> jax.Array:
    """The layers of ``stack`` in order (each through ``apply_layer``). With ``scan`` set on
    its layers (``config.scan_layers``, `vnr.models.compute`), one ``jax.lax.scan`` over their
    stacked states instead: the layer is traced and compiled once, so compile time stops
    growing with depth. Parameters stay stored per layer (checkpoints and pretrained
    loading are unchanged); the stacking copies them once per call. Each layer keeps its own
    non-parameter state (dropout RNG streams), written back after the scan, so the values
    equal the loop's."""
    layers_ = list(stack)
    splits = [nnx.split(layer) for layer in layers_] if len(layers_) > 1 and getattr(
        layers_[0], "scan", False) else []
    if not splits or any(g != splits[0][0] for g, _ in splits[1:]):
        for layer in layers_:
            x = apply_layer(layer, x, mask, deterministic)
        return x
    graphdef = splits[0][0]
    stacked = jax.tree.map(lambda *v: jnp.stack(v), *[st for _, st in splits])

    def body(h: jax.Array, st: Any) -> tuple[jax.Array, Any]:
        layer = nnx.merge(graphdef, st)
        h = apply_layer(layer, h, mask, deterministic)
        return h, nnx.state(layer, nnx.Not(nnx.Param))

    x, rest = jax.lax.scan(body, x, stacked)
    if _draws(layers_[0], deterministic):  # dropout advanced the layers' RNG streams
        for i, layer in enumerate(layers_):
            nnx.update(layer, jax.tree.map(lambda v, i=i: v[i], rest))
    return x


def _draws(layer: nnx.Module, deterministic: bool | None) -> bool:
    """Whether calling `layer` draws dropout randomness (so its RNG state changes)."""
    drops = [n for _, n in nnx.iter_graph(layer)
             if isinstance(n, nnx.Dropout) and n.rate > 0]
    if deterministic is not None:
        return bool(drops) and not deterministic
    return any(not n.deterministic for n in drops)


def sublayer_kwargs(
    cfg: Any, *, dtype: Dtype, param_dtype: Dtype, rngs: nnx.Rngs
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(dense kwargs, layer_norm kwargs)`` for a layer's sublayers."""
    norm = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
    return dict(norm, std=cfg.initializer_range), norm


class Node(nnx.Module):
    """A named container mirroring one module of the original checkpoint's tree.

    ``Node(query=..., key=...)`` makes ``node.query`` etc., so NNX parameter paths spell the
    original tensor names (``encoder.layer.0.attention.self.query.kernel``). A child named
    ``self`` must come in the positional dict: ``Node({"self": ...}, output=...)``.
    """

    def __init__(self, children: dict[str, Any] | None = None, /, **more: Any):
        for name, child in {**(children or {}), **more}.items():
            setattr(self, name, child)


class FrozenBatchNorm(nnx.Module):
    """Batch norm in PyTorch's eval mode over the last axis: the stored running statistics,
    torch's names (`weight` is `scale`); the ported conv nets (S3D, TransNetV2) are frozen
    feature extractors, so no batch statistics are computed."""

    def __init__(self, n: int, eps: float):
        self.eps = eps
        self.scale = nnx.Param(jnp.ones((n,)), out_sharding=("conv",), eager_sharding=False)
        self.bias = nnx.Param(jnp.zeros((n,)), out_sharding=("conv",), eager_sharding=False)
        self.running_mean = nnx.Param(jnp.zeros((n,)), out_sharding=("conv",),
                                      eager_sharding=False)
        self.running_var = nnx.Param(jnp.ones((n,)), out_sharding=("conv",),
                                     eager_sharding=False)

    def __call__(self, x: jax.Array) -> jax.Array:
        inv = jax.lax.rsqrt(self.running_var[...] + self.eps) * self.scale[...]
        return (x - self.running_mean[...]) * inv + self.bias[...]
