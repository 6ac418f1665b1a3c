"""Sc2St mixture-of-embedding-experts rows of Table 3 (paper §4.3.2 V-MoEE, §4.3.4 C-CMoEE).

MoEE (Miech et al., their code `antoine77340/Mixture-of-Embedding-Experts`): the text and
each visual expert e are mapped by *gated embedding units*, one per expert and side
(`vnr.models.netvlad.GatedEmbeddingUnit`: y = W_1 x + b_1, y * sigmoid(BN(W_2 y + b_2)),
l2-normalised, with MoEE's batch norm in the gate; `gate_norm=False` drops that batch norm,
our earlier variant, kept as an option); the text also gives mixture weights over the
experts, softmax(W_m s); the score of a keyframe is sum_e w~_e cos(GEU_e^text(s),
GEU_e^image(x_e)), where an expert missing for that keyframe (an all-zero feature: no
character named, say) is masked out and the weights of the present ones renormalised,
w~_e = w_e m_e / sum_e' w_e' m_e', as MoEE does for absent modalities. The query of round t
is sentence t alone (non-contextual, as the paper's V- rows).

Text side (`text`):
  "netvlad"  MoEE's: the sentence's word vectors [30, D] (batch key `words`, zero padded,
             `data.py`) pooled by NetVLAD with `clusters` (32) clusters and its batch norm,
             padding pooled like words as MoEE does (`vnr.models.netvlad.NetVLAD`);
  "encoder"  ours: the pooled output of the model's sentence encoder (a BERT).
Joint space: `width` > 0 for every expert, or 0 = each expert's own feature width (MoEE's
`video_modality_dim[m][1]`, the visual expert's 2048, say).

Experts (`experts`, name -> width): the paper's are scene (DenseNet-161 / Places365),
object (SENet-154 / ImageNet) and a character embedding of the top-100 characters named in
the text. The model takes whatever expert columns the builder stored (`*_experts` builder
configs: `expert_<name>`, batch keys `x_<name>` for keyframes 1..L and `c_<name>` for the
candidates); the paper's networks are in `experts.py`, the CLIP stand-ins in `embedders.py`.
Without expert columns there is one expert, `features`, the stored keyframe embedding.

C-CMoEE (Bain et al., contextual MoEE): the same, plus one *context expert* per expert
from the keyframe history: the mean of keyframes 1..t-1 that have the expert (the "past
clips" the paper keeps, §4.3.4) through a GEU, compared with the candidate's feature
through its own GEU; its mixture weight comes from the text like the others, masked when
either side is missing. (A context term that does not depend on the candidate would add
the same number to all 100 candidates, so the context is compared with the candidate: our
reading.)

Batch norm: in training every row of a batch is one row of the statistics (each of the
B x 9 x C candidates for an image unit, each of the B x 9 sentences for a text unit, each
word slot for NetVLAD); evaluation uses the running statistics.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import dense
from vnr.models.netvlad import GatedEmbeddingUnit, NetVLAD

TEXTS = ("netvlad", "encoder")


def feature_keys(name: str) -> tuple[str, str]:
    """Batch keys (keyframes [B, L, D], candidates [B, R, C, D]) of expert `name`."""
    return ("features", "cands") if name == "features" else (f"x_{name}", f"c_{name}")


def _present(x: jax.Array) -> jax.Array:
    """True where an expert feature is not all zero (the expert saw something)."""
    return jnp.any(x != 0, axis=-1)


class MoEE(nnx.Module):
    """V-MoEE (`context=False`) or C-CMoEE (`context=True`) over `experts` (name -> width;
    default one expert, the stored keyframe `features`). Returns candidate scores
    [B, L-1, C] for rounds t = 2..L. `text="netvlad"` needs `word_dim` (the word vectors'
    width); `text="encoder"` needs `text_encoder` and its `text_width`."""

    def __init__(self, *, context: bool, feature_dim: int, width: int, rngs: nnx.Rngs,
                 experts: dict[str, int] | None = None, text: str = "encoder",
                 text_encoder: Any = None, text_width: int = 0, word_dim: int = 0,
                 clusters: int = 32, gate_norm: bool = True):
        if text not in TEXTS:
            raise ValueError(f"MoEE text={text!r}: choose one of {TEXTS}")
        self.context, self.text_mode = context, text
        dims = dict(experts or {"features": feature_dim})
        self.names = tuple(dims)
        if text == "netvlad":
            if word_dim < 1:
                raise ValueError("MoEE text='netvlad' needs the word vectors' width (word_dim)")
            self.text = NetVLAD(word_dim, clusters, rngs)
            text_width = self.text.out_dim
        else:
            self.text = text_encoder
        out = {n: width or dims[n] for n in self.names}

        def units(din: dict[str, int]) -> nnx.List:
            return nnx.List([GatedEmbeddingUnit(din[n], out[n], rngs, batch_norm=gate_norm)
                             for n in self.names])

        self.text_units = units(dict.fromkeys(self.names, text_width))
        self.image_units = units(dims)
        n_weights = len(self.names)
        if context:
            self.history_units = units(dims)
            self.cand_ctx_units = units(dims)
            n_weights *= 2
        self.weights = dense(text_width, n_weights, ("embed", None), rngs)

    def sentences(self, batch: dict, train: bool) -> jax.Array:
        """[B, L-1, text width]: the sentences of rounds t = 2..L."""
        if self.text_mode == "netvlad":
            words = batch["words"][:, 1:]  # [B, R, N, D]
            b, r, n, d = words.shape
            return self.text(words.reshape(b * r, n, d), train=train).reshape(b, r, -1)
        tokens = batch["tokens"][:, 1:]
        b, r, t = tokens.shape
        flat = tokens.reshape(b * r, t)
        sent = self.text(flat, (flat > 0).astype(jnp.int32)).pooled.astype(jnp.float32)
        return sent.reshape(b, r, -1)

    def __call__(self, batch: dict, train: bool = False, rngs: nnx.Rngs | None = None
                 ) -> jax.Array:
        del rngs  # no dropout
        sent = self.sentences(batch, train)
        sims, masks = [], []
        for e, name in enumerate(self.names):
            cands = batch[feature_keys(name)[1]]  # [B, R, C, D]
            sims.append(jnp.einsum("brw,brcw->brc", self.text_units[e](sent, train=train),
                                   self.image_units[e](cands, train=train)))
            masks.append(_present(cands))
        if self.context:
            for e, name in enumerate(self.names):
                x_key, c_key = feature_keys(name)
                feats, cands = batch[x_key][:, :-1], batch[c_key]  # keyframes 1..L-1
                have = _present(feats).astype(jnp.float32)[..., None]  # [B, L-1, 1]
                count = jnp.cumsum(have, axis=1)
                history = jnp.cumsum(feats * have, axis=1) / jnp.maximum(count, 1.0)
                h = self.history_units[e](history, train=train)
                c = self.cand_ctx_units[e](cands, train=train)
                sims.append(jnp.einsum("brw,brcw->brc", h, c))
                masks.append(_present(cands) & (count[..., 0] > 0)[..., None])
        w = jax.nn.softmax(self.weights(sent), -1)  # [B, R, E]
        m = jnp.stack(masks, -1).astype(jnp.float32)  # [B, R, C, E]
        w = w[:, :, None, :] * m
        w = w / jnp.maximum(w.sum(-1, keepdims=True), 1e-9)  # renormalised over present ones
        return jnp.einsum("brce,ebrc->brc", w, jnp.stack(sims))
