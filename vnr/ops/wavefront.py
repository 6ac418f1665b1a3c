"""Input checks and anti-diagonal wavefront helpers shared by DTW and Drop-DTW.

``vnr.ops.dtw`` (soft-DTW, hard DTW) and ``vnr.ops.drop_dtw`` both validate a cost
``[B, N, M]`` with optional lengths the same way and run their recursions over the skewed
cost (``skew``: diagonal ``d`` is the contiguous slice ``[d, B, N]``); the helpers live here
so neither module imports the other.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# Stands in for +inf inside the recursions: finite, so soft-min weights never see inf - inf.
BIG = 1e10


# ----------------------------------------------------------------------------- validation


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_gamma(gamma: Any, name: str = "gamma") -> float:
    """Validates a smoothing parameter: a concrete finite float > 0 (it is static under jit)."""
    if not _is_concrete(gamma):
        raise ValueError(f"{name} must be a concrete Python float (it is a static parameter)")
    try:
        g = float(gamma)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a float > 0, got {gamma!r}") from e
    if not math.isfinite(g) or g <= 0.0:
        raise ValueError(f"{name} must be finite and > 0, got {g}")
    return g


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array or nested sequence, without converting a JAX array."""
    return tuple(np.shape(x))


def check_cost(cost: Any, name: str = "cost") -> Any:
    """Validates the shape ``[B, N, M]`` (N, M >= 1) without converting a JAX/NumPy array."""
    if not hasattr(cost, "shape"):
        cost = np.asarray(cost)
    shape = shape_of(cost)
    if len(shape) != 3:
        raise ValueError(f"{name} must have shape [B, N, M], got shape {shape}")
    if shape[1] < 1 or shape[2] < 1:
        raise ValueError(f"{name} must have N >= 1 and M >= 1, got shape {shape}")
    return cost


def check_lengths(lengths: Any, batch: int, size: int, name: str) -> Any:
    """Validates ``lengths [B]`` (values in ``[1, size]`` when concrete); None stays None."""
    if lengths is None:
        return None
    if not _is_concrete(lengths):
        if shape_of(lengths) != (batch,):
            raise ValueError(
                f"{name} must have shape [B]=({batch},), got shape {shape_of(lengths)}")
        return lengths
    arr = np.asarray(lengths)
    if arr.shape != (batch,):
        raise ValueError(f"{name} must have shape [B]=({batch},), got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.number) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold integers, got {arr}")
    if arr.size and (arr.min() < 1 or arr.max() > size):
        raise ValueError(
            f"{name} values must be in [1, {size}], got min {arr.min()} max {arr.max()}"
        )
    return arr.astype(np.int32)


def prepare(cost: Any, len_x: Any, len_y: Any, name: str = "cost"):
    """Validates ``cost``, ``len_x``, ``len_y`` outside jit; see :func:`as_arrays` inside."""
    cost = check_cost(cost, name)
    b, n, m = shape_of(cost)
    return cost, check_lengths(len_x, b, n, "len_x"), check_lengths(len_y, b, m, "len_y")


def as_arrays(cost: Any, len_x: Any, len_y: Any):
    """Inside jit: float cost, int32 lengths (None -> full length)."""
    cost = jnp.asarray(cost)
    if not jnp.issubdtype(cost.dtype, jnp.floating):
        cost = cost.astype(jnp.float32)
    b, n, m = cost.shape
    lx = jnp.full((b,), n, jnp.int32) if len_x is None else jnp.asarray(len_x).astype(jnp.int32)
    ly = jnp.full((b,), m, jnp.int32) if len_y is None else jnp.asarray(len_y).astype(jnp.int32)
    return cost, lx, ly


# ----------------------------------------------------------------------------- wavefront helpers


def skew(x: jax.Array, fill: float = 0.0) -> jax.Array:
    """``[B, N, M] -> [N + M - 1, B, N]`` with ``out[d, b, i] = x[b, i, d - i]`` (fill outside)."""
    b, n, m = x.shape
    xp = jnp.pad(x, ((0, 0), (0, 0), (0, n)), constant_values=fill)
    flat = xp.reshape(b, n * (m + n))[:, : n * (m + n - 1)]
    return flat.reshape(b, n, m + n - 1).transpose(2, 0, 1)


def unskew(s: jax.Array, m: int) -> jax.Array:
    """Inverse of :func:`skew`: ``[N + M - 1, B, N] -> [B, N, M]``."""
    d, b, n = s.shape
    flat = s.transpose(1, 2, 0).reshape(b, n * d)
    flat = jnp.pad(flat, ((0, 0), (0, n)))
    return flat.reshape(b, n, d + 1)[:, :, :m]


def shift_down(x: jax.Array, fill: Any) -> jax.Array:
    """``out[..., i] = x[..., i - 1]``, ``out[..., 0] = fill`` (fill: scalar or ``[B]``)."""
    fill = jnp.broadcast_to(jnp.asarray(fill, x.dtype), x.shape[:-1])[..., None]
    return jnp.concatenate([fill, x[..., :-1]], axis=-1)


def shift_up(x: jax.Array, fill: Any = 0.0) -> jax.Array:
    """``out[..., i] = x[..., i + 1]``, last entry ``fill``."""
    fill = jnp.broadcast_to(jnp.asarray(fill, x.dtype), x.shape[:-1])[..., None]
    return jnp.concatenate([x[..., 1:], fill], axis=-1)


def softmin(vals: list[jax.Array], gamma: float) -> jax.Array:
    """``-gamma log sum_k exp(-vals[k] / gamma)``, shifted by the min so it never overflows."""
    m = functools.reduce(jnp.minimum, vals)
    m = lax.stop_gradient(m)
    s = sum(jnp.exp((m - v) / gamma) for v in vals)
    return m - gamma * jnp.log(s)


def take_index(x: jax.Array, idx: jax.Array) -> jax.Array:
    """``x[b, idx[b]]`` for ``x [B, K]``, ``idx [B]``."""
    return jnp.take_along_axis(x, idx[:, None], axis=1)[:, 0]
