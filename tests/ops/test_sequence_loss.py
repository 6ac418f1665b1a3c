"""Label-smoothed KL and token unlikelihood against direct [B, S, C] constructions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vnr.ops.sequence_loss import smoothed_kl, unlikelihood


def _case(seed: int = 0):
    k = jax.random.split(jax.random.key(seed), 2)
    logits = jax.random.normal(k[0], (3, 6, 7)) * 2
    targets = jnp.array([[4, 2, 4, 5, 2, 0], [1, 1, 1, 3, 0, 0], [6, 5, 4, 3, 2, 1]])
    mask = targets > 0
    return logits, targets, mask


def test_smoothed_kl_is_the_divergence_from_the_smoothed_target() -> None:
    logits, targets, mask = _case()
    classes = jnp.array([[False] + [True] * 6, [False] + [True] * 4 + [False] * 2,
                         [True] * 7])
    eps = 0.1
    p = np.asarray(jax.nn.softmax(logits, -1), np.float64)
    want, n = 0.0, 0
    for b in range(3):
        for s in range(6):
            if not mask[b, s]:
                continue
            n += 1
            t = int(targets[b, s])
            others = [c for c in range(7) if classes[b, c] and c != t]
            q = np.zeros(7)
            q[others], q[t] = eps / len(others), 1 - eps
            nz = q > 0
            want += float((q[nz] * np.log(q[nz] / p[b, s, nz])).sum())
    got = smoothed_kl(logits, targets, mask, eps, classes)
    np.testing.assert_allclose(got, want / n, rtol=1e-5)
    ce = -jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(smoothed_kl(logits, targets, mask, 0.0),
                               (ce * mask).sum() / mask.sum(), rtol=1e-6)
    with pytest.raises(ValueError, match="label smoothing 1.0"):
        smoothed_kl(logits, targets, mask, 1.0)


def test_unlikelihood_penalises_each_earlier_distinct_target_once() -> None:
    logits, targets, mask = _case(1)
    p = np.asarray(jax.nn.softmax(logits, -1), np.float64)
    want = 0.0
    for b in range(3):
        for t in range(6):
            if not mask[b, t]:
                continue
            negs = {int(targets[b, s]) for s in range(t) if mask[b, s]} - {int(targets[b, t])}
            want += sum(-np.log(max(1 - p[b, t, c], 1e-5)) for c in negs)
    got = unlikelihood(logits, targets, mask)
    np.testing.assert_allclose(got, want / int(mask.sum()), rtol=1e-5)
    # a sequence repeating one token has no negatives at all
    same = jnp.full((1, 4), 3)
    assert float(unlikelihood(logits[:1, :4], same, same > 0)) == 0.0
    g = jax.grad(lambda x: unlikelihood(x, targets, mask))(logits)
    assert np.isfinite(np.asarray(g)).all()
