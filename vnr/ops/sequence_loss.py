"""Token-level training losses for sequence decoders: label-smoothed KL and unlikelihood.

`smoothed_kl(logits, targets, mask, smoothing, classes)`: the KL divergence from a smoothed
target distribution (1 - eps on the target, eps spread evenly over the other valid classes)
to the model's softmax, summed over the valid positions and divided by their count. With
eps = 0 it is the plain token cross-entropy. `classes` [B, C] (or [C]) marks the classes
that may carry smoothing mass: a masked-out class (a padding id, an absent cast slot with a
-1e9 score) must get none, or its log-probability would dominate the loss.

`unlikelihood(logits, targets, mask)`: Welleck et al.'s token-level unlikelihood term:
at position t, -log(1 - p(c)) for every distinct class c among the earlier targets of the
same sequence other than targets[t] (1 - p clipped at 1e-5), summed and divided by the
number of valid positions. It is computed by gathering, never as a [B, S, C] indicator.

Movie101's RMN trains with the sum of both (eps 0.1; RMN `metrics/criterion.py`
`UnlikelihoodLoss`, built in `models/transformer.py` `build_loss`). Upstream takes "earlier
targets" over the whole flattened batch (a lower triangle over B x S positions, so an
example's negatives depend on the batch it landed in); here they are the same sequence's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def smoothed_kl(logits: jax.Array, targets: jax.Array, mask: jax.Array, smoothing: float,
                classes: jax.Array | None = None) -> jax.Array:
    """logits [B,S,C], targets int [B,S], mask bool [B,S], classes bool [B,C] or [C]
    (default: all) -> scalar mean KL per valid position."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing {smoothing} must be in [0, 1)")
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    n = jnp.maximum(mask.sum(), 1).astype(jnp.float32)
    target_logp = jnp.take_along_axis(logp, targets[..., None], -1)[..., 0]
    loss = -(1.0 - smoothing) * target_logp
    if smoothing:
        c = logits.shape[-1]
        valid = jnp.ones((c,), bool) if classes is None else classes
        valid = jnp.broadcast_to(valid if valid.ndim == 1 else valid[:, None], logp.shape)
        others = valid & (jnp.arange(c) != targets[..., None])
        count = jnp.maximum(others.sum(-1), 1).astype(jnp.float32)
        q = smoothing / count  # per other class
        loss = loss - q * jnp.where(others, logp, 0.0).sum(-1)
        # + sum q log q: the KL's constant, so the value is the divergence itself
        entropy = (1.0 - smoothing) * jnp.log(1.0 - smoothing) + smoothing * jnp.log(q)
        loss = loss + entropy
    return jnp.where(mask, loss, 0.0).sum() / n


def unlikelihood(logits: jax.Array, targets: jax.Array, mask: jax.Array) -> jax.Array:
    """logits [B,S,C], targets int [B,S], mask bool [B,S] -> scalar (see the module doc)."""
    p = jax.nn.softmax(logits.astype(jnp.float32), -1)
    s = targets.shape[1]
    same = targets[:, :, None] == targets[:, None, :]  # [B, s', s'']
    earlier = jnp.tril(jnp.ones((s, s), bool), -1)  # [t, s']: s' < t
    # s' is a class's first valid occurrence: counted once per prefix, as a set would be
    first = ~(same & earlier[None] & mask[:, None, :]).any(-1) & mask
    neg = earlier[None] & first[:, None, :] & ~same & mask[:, :, None]  # [B, t, s']
    p_neg = jnp.take_along_axis(p, jnp.broadcast_to(targets[:, None, :], neg.shape), -1)
    term = -jnp.log(jnp.clip(1.0 - p_neg, 1e-5, None))
    n = jnp.maximum(mask.sum(), 1).astype(jnp.float32)
    return jnp.where(neg, term, 0.0).sum() / n
