"""Sc2St mixture-of-embedding-experts rows of Table 3 (paper §4.3.2 V-MoEE, §4.3.4 C-CMoEE).

MoEE (Miech et al.): the text and each visual expert are mapped by *gated embedding units*
GEU(x) = normalise(y * sigmoid(W_2 y + b_2)), y = W_1 x + b_1, one per expert and side; the
text also gives mixture weights over the experts, softmax(W_m s); the score of a keyframe is
sum_e w_e cos(GEU_e^text(s), GEU_e^image(x_e)). The query of round t is sentence t alone
(non-contextual, as the paper's V- rows).

C-CMoEE (Bain et al., contextual MoEE): the same, plus a *context expert* from the keyframe
history: the mean of keyframes 1..t-1 (the "past clips" the paper keeps, §4.3.4) through a
GEU, compared with the candidate through its own GEU; its mixture weight comes from the
text like the others. (A context term that does not depend on the candidate would add the
same number to all 100 candidates, so the context is compared with the candidate: our
reading.)

Deviations (REPRODUCING.md): the paper's experts are scene (DenseNet-161 / Places365),
object (SENet-154 / ImageNet) and a top-100 character embedding; the builder stores one
embedding per keyframe, so there is one visual expert, that embedding. The text side is
the model's sentence encoder (pooled BERT), not word vectors with NetVLAD. The loss is the
task's softmax cross-entropy over the 100 candidates (MoEE used a max-margin ranking loss).
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
        return y / jnp.maximum(jnp.linalg.norm(y, axis=-1, keepdims=True), 1e-6)


class MoEE(nnx.Module):
    """V-MoEE (`context=False`) or C-CMoEE (`context=True`). Batch keys as
    `StoryboardModel`; returns candidate scores [B, L-1, C] for rounds t = 2..L."""

    def __init__(self, *, context: bool, text_encoder: Any, text_width: int, feature_dim: int,
                 width: int, rngs: nnx.Rngs):
        self.context = context
        self.text = text_encoder
        experts = 2 if context else 1
        self.text_unit = GEU(text_width, width, rngs)
        self.image_unit = GEU(feature_dim, width, rngs)
        if context:
            self.history_unit = GEU(feature_dim, width, rngs)
            self.cand_ctx_unit = GEU(feature_dim, width, rngs)
        self.weights = dense(text_width, experts, ("embed", None), rngs)

    def __call__(self, batch: dict, train: bool = False, rngs: nnx.Rngs | None = None
                 ) -> jax.Array:
        del train, rngs  # no dropout
        tokens = batch["tokens"][:, 1:]  # sentences of rounds t = 2..L
        b, r, t = tokens.shape
        flat = tokens.reshape(b * r, t)
        sent = self.text(flat, (flat > 0).astype(jnp.int32)).pooled.astype(jnp.float32)
        sent = sent.reshape(b, r, -1)
        w = jax.nn.softmax(self.weights(sent), -1)  # [B, R, E]
        cands = batch["cands"]  # [B, R, C, D]
        sims = [jnp.einsum("brw,brcw->brc", self.text_unit(sent), self.image_unit(cands))]
        if self.context:
            feats = batch["features"]  # keyframes 1..L
            n = jnp.arange(1, r + 1, dtype=jnp.float32)[None, :, None]
            history = jnp.cumsum(feats[:, :-1], axis=1) / n  # mean of keyframes 1..t-1
            sims.append(jnp.einsum("brw,brcw->brc", self.history_unit(history),
                                   self.cand_ctx_unit(cands)))
        return jnp.einsum("bre,ebrc->brc", w, jnp.stack(sims))
