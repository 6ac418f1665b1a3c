"""OVP's dynamic video memory bank (Song et al. 2021), as Movie101's RMN code updates it
(`modules/transformer.py`, `update_memory`; our own implementation of that rule).

The decoder cross-attends a memory bank M instead of the encoder's video states E [T, W].
Initially M_j = E_j · a_j with the "added" state a_j = max(0, 1 - (j + 1) / 50) (later frames
start mostly absent). After every decoding step, with the step's hidden state h and the
decoder's video attention α (last layer, head mean, renormalised over real frames), over the
last H = 20 steps (weights w = softmax((i + 1) / 20) over the buffer slots in use, newest
weighted most) ᾱ = Σ w α, q̄ = Σ w h:
    remove: M ← M ⊙ (1 - σ(r·h) ᾱ_j σ(M_j · Q q̄))
    add:    n_j = σ(u · [E_j ; Σ_j ᾱ_j E_j]); M ← M + E ⊙ (1 - a) σ(d·h) n;
            a ← a + (1 - a) σ(d·h) n
so attended content fades (diversity) and not-yet-added frames next to it enter (coherence).
`init` / `update` are pure functions of the bank's parameters and a state dict, so the same
code runs inside a teacher-forced `lax.scan` and inside `vnr.ops.beam_decode` (the state is
per beam and gathered with it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import dense

HISTORY = 20  # steps of attention / hidden states the update averages (upstream: 20)
RAMP = 50  # frames over which the initial "added" state decays to 0 (upstream: 50)


class MemoryBank(nnx.Module):
    """Gates of the dynamic memory bank (remove / add gates from h, the similarity query,
    the next-frame attention)."""

    def __init__(self, width: int, rngs: nnx.Rngs):
        self.remove_gate = dense(width, 1, ("embed", None), rngs)
        self.add_gate = dense(width, 1, ("embed", None), rngs)
        self.q = dense(width, width, ("embed", "heads"), rngs)  # upstream: no bias
        self.next_attn = dense(2 * width, 1, ("embed", None), rngs)

    def init(self, video: jax.Array) -> dict[str, jax.Array]:
        """video [N,T,W] encoder states -> state {bank, added, alpha_hist, h_hist}."""
        n, t, w = video.shape
        added = jnp.clip(1.0 - (jnp.arange(t) + 1.0) / RAMP, 0.0, 1.0)
        added = jnp.broadcast_to(added[None, :, None], (n, t, 1)).astype(video.dtype)
        return {"bank": video * added, "added": added,
                "alpha_hist": jnp.zeros((n, HISTORY, t), video.dtype),
                "h_hist": jnp.zeros((n, HISTORY, w), video.dtype),
                "steps": jnp.zeros((n,), jnp.int32)}

    def update(self, state: dict[str, jax.Array], video: jax.Array, alpha: jax.Array,
               h: jax.Array) -> dict[str, jax.Array]:
        """One step: alpha [N,T] video attention (sums to 1 over real frames), h [N,W]."""
        ah = jnp.concatenate([state["alpha_hist"][:, 1:], alpha[:, None]], 1)
        hh = jnp.concatenate([state["h_hist"][:, 1:], h[:, None]], 1)
        steps = state["steps"] + 1
        slot = jnp.arange(HISTORY)
        used = slot[None] >= HISTORY - jnp.minimum(steps, HISTORY)[:, None]  # newest last
        wts = jax.nn.softmax(jnp.where(used, (slot[None] + 1.0) / HISTORY, -1e9), -1)
        a = jnp.einsum("nk,nkt->nt", wts, ah)[..., None]  # [N,T,1]
        q = jnp.einsum("nk,nkw->nw", wts, hh)
        remove = jax.nn.sigmoid(self.remove_gate(h))[:, None]  # [N,1,1]
        add = jax.nn.sigmoid(self.add_gate(h))[:, None]
        bank = state["bank"]
        sim = jax.nn.sigmoid(jnp.einsum("ntw,nw->nt", bank, self.q(q)))[..., None]
        bank = bank * (1.0 - remove * a * sim)
        ctx = (video * a).sum(1, keepdims=True)
        nxt = jax.nn.sigmoid(self.next_attn(jnp.concatenate(
            [video, jnp.broadcast_to(ctx, video.shape)], -1)))
        bank = bank + video * (1.0 - state["added"]) * (add * nxt)
        added = state["added"] + (1.0 - state["added"]) * (add * nxt)
        return {"bank": bank, "added": added, "alpha_hist": ah, "h_hist": hh, "steps": steps}
