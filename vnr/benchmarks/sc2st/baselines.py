"""Sc2St mixture-of-embedding-experts rows of Table 3 (paper §4.3.2 V-MoEE, §4.3.4 C-CMoEE).

MoEE (Miech et al.): the text and each visual expert e are mapped by *gated embedding
units* GEU(x) = normalise(y * sigmoid(W_2 y + b_2)), y = W_1 x + b_1, one per expert and
side; the text also gives mixture weights over the experts, softmax(W_m s); the score of a
keyframe is sum_e w~_e cos(GEU_e^text(s), GEU_e^image(x_e)), where an expert missing for
that keyframe (an all-zero feature: no character named, say) is masked out and the
weights of the present ones renormalised, w~_e = w_e m_e / sum_e' w_e' m_e', as MoEE does
for absent modalities. The query of round t is sentence t alone (non-contextual, as the
paper's V- rows).

Experts (`experts`, name -> width): the paper's are scene (DenseNet-161 / Places365),
object (SENet-154 / ImageNet) and a character embedding of the top-100 characters named in
the text. The model takes whatever expert columns the builder stored (`*_experts` builder
configs: `expert_<name>`, batch keys `x_<name>` for keyframes 1..L and `c_<name>` for the
candidates); what stands in for each paper feature is in `embedders.py`. Without expert
columns there is one expert, `features`, the stored keyframe embedding (the pre-expert
behaviour).

C-CMoEE (Bain et al., contextual MoEE): the same, plus one *context expert* per expert
from the keyframe history: the mean of keyframes 1..t-1 that have the expert (the "past
clips" the paper keeps, §4.3.4) through a GEU, compared with the candidate's feature
through its own GEU; its mixture weight comes from the text like the others, masked when
either side is missing. (A context term that does not depend on the candidate would add
the same number to all 100 candidates, so the context is compared with the candidate: our
reading.)

Deviations (REPRODUCING.md): the text side is the model's sentence encoder (pooled BERT),
not word vectors with NetVLAD; the loss is the task's softmax cross-entropy over the 100
candidates (MoEE used a max-margin ranking loss).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import dense


class GEU(nnx.Module):
    """Gated embedding unit: L2-normalised y * sigmoid(W_2 y + b_2), y = W_1 x + b_1."""

    def __init__(self, din: int, dout: int, rngs: nnx.Rngs):
        self.fc = dense(din, dout, ("embed", None), rngs)
        self.gate = dense(dout, dout, ("embed", None), rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = self.fc(x)
        y = y * jax.nn.sigmoid(self.gate(y))
        # rsqrt of a floored square norm: a zero y (a missing expert's zero input at init)
        # has a finite gradient, where the gradient of ||y|| at 0 is NaN
        return y * jax.lax.rsqrt(jnp.maximum(jnp.sum(y * y, axis=-1, keepdims=True), 1e-12))


def feature_keys(name: str) -> tuple[str, str]:
    """Batch keys (keyframes [B, L, D], candidates [B, R, C, D]) of expert `name`."""
    return ("features", "cands") if name == "features" else (f"x_{name}", f"c_{name}")


def _present(x: jax.Array) -> jax.Array:
    """True where an expert feature is not all zero (the expert saw something)."""
    return jnp.any(x != 0, axis=-1)


class MoEE(nnx.Module):
    """V-MoEE (`context=False`) or C-CMoEE (`context=True`) over `experts` (name -> width;
    default one expert, the stored keyframe `features`). Returns candidate scores
    [B, L-1, C] for rounds t = 2..L."""

    def __init__(self, *, context: bool, text_encoder: Any, text_width: int, feature_dim: int,
                 width: int, rngs: nnx.Rngs, experts: dict[str, int] | None = None):
        self.context = context
        self.text = text_encoder
        self.names = tuple(experts or {"features": feature_dim})
        dims = dict(experts or {"features": feature_dim})
        self.text_units = nnx.List([GEU(text_width, width, rngs) for _ in self.names])
        self.image_units = nnx.List([GEU(dims[n], width, rngs) for n in self.names])
        n_weights = len(self.names)
        if context:
            self.history_units = nnx.List([GEU(dims[n], width, rngs) for n in self.names])
            self.cand_ctx_units = nnx.List([GEU(dims[n], width, rngs) for n in self.names])
            n_weights *= 2
        self.weights = dense(text_width, n_weights, ("embed", None), rngs)

    def __call__(self, batch: dict, train: bool = False, rngs: nnx.Rngs | None = None
                 ) -> jax.Array:
        del train, rngs  # no dropout
        tokens = batch["tokens"][:, 1:]  # sentences of rounds t = 2..L
        b, r, t = tokens.shape
        flat = tokens.reshape(b * r, t)
        sent = self.text(flat, (flat > 0).astype(jnp.int32)).pooled.astype(jnp.float32)
        sent = sent.reshape(b, r, -1)
        sims, masks = [], []
        for e, name in enumerate(self.names):
            cands = batch[feature_keys(name)[1]]  # [B, R, C, D]
            sims.append(jnp.einsum("brw,brcw->brc", self.text_units[e](sent),
                                   self.image_units[e](cands)))
            masks.append(_present(cands))
        if self.context:
            for e, name in enumerate(self.names):
                x_key, c_key = feature_keys(name)
                feats, cands = batch[x_key][:, :-1], batch[c_key]  # keyframes 1..L-1
                have = _present(feats).astype(jnp.float32)[..., None]  # [B, L-1, 1]
                count = jnp.cumsum(have, axis=1)
                history = jnp.cumsum(feats * have, axis=1) / jnp.maximum(count, 1.0)
                sims.append(jnp.einsum("brw,brcw->brc", self.history_units[e](history),
                                       self.cand_ctx_units[e](cands)))
                masks.append(_present(cands) & (count[..., 0] > 0)[..., None])
        w = jax.nn.softmax(self.weights(sent), -1)  # [B, R, E]
        m = jnp.stack(masks, -1).astype(jnp.float32)  # [B, R, C, E]
        w = w[:, :, None, :] * m
        w = w / jnp.maximum(w.sum(-1, keepdims=True), 1e-9)  # renormalised over present ones
        return jnp.einsum("brce,ebrc->brc", w, jnp.stack(sims))
