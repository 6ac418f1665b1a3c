"""RNL's IA-Net base (Liu et al., 2021) in the layout of Movie101's release
(`CNCLIP+RNL/RNL/models_/gcn_final.py`, read as reference behaviour, not copied).

Video: clips -> FC -> `local_layers` residual multi-head self-attention layers restricted to
clips within ±`local_width` of each other -> BiGRU (V); plus FC(faces) (F, RNL's f_v).
Query: word embeddings -> BiGRU, then, for RNL's f_t, FC(portrait face) tokens appended.
Interaction: `blocks` x (gated co-attention, gated self-attention) (`GatedAttention`), each
updating both sequences; then every clip attends over the query with additive tanh attention
and [clip, attended query] goes through a second BiGRU. The head is 2D-TAN's moment map over
those clip features (`tng_model.proposal_map`, two 3x3 convolutions), not upstream's 1D
anchor + boundary regression head (REPRODUCING.md lists this and the other differences).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import dense

NEG = -1.0e9


def bigru(din: int, width: int, rngs: nnx.Rngs) -> nnx.Bidirectional:
    """A BiGRU of output width `width` (width // 2 per direction). rngs=False: the carry
    starts at zero, so no RNG key is kept in the state (it would not restore)."""
    return nnx.Bidirectional(
        nnx.RNN(nnx.GRUCell(din, width // 2, rngs=rngs), rngs=False),
        nnx.RNN(nnx.GRUCell(din, width // 2, rngs=rngs), rngs=False), rngs=False)


def run_bigru(gru: nnx.Bidirectional, x: jax.Array, lengths: jax.Array | None = None
              ) -> jax.Array:
    zero = jnp.zeros((x.shape[0], gru.forward_rnn.cell.hidden_features), x.dtype)
    return gru(x, initial_carry=(zero, zero), seq_lengths=lengths)


class GatedAttention(nnx.Module):
    """IA-Net's gated attention layer on (video a [B, La, W], query b [B, Lb, W]).

    Attention weights come from bias-free projections split into `heads` heads; they are
    applied to the unprojected features and averaged over heads. `cross`: a attends over b
    and b over a (co-attention); else each attends over itself (self-attention). Each side
    is then updated as g * x + (1 - g) * tanh(W [x, attended]), g = sigmoid(W' [x, attended]).
    Padding of the query (b_mask) is masked (upstream leaves masks out)."""

    def __init__(self, width: int, heads: int, cross: bool, rngs: nnx.Rngs):
        self.heads, self.cross = heads, cross
        self.pa = nnx.Linear(width, width, use_bias=False, rngs=rngs)
        self.pb = nnx.Linear(width, width, use_bias=False, rngs=rngs)
        self.upd = nnx.List([dense(2 * width, width, ("mlp", "embed"), rngs) for _ in range(2)])
        self.gate = nnx.List([dense(2 * width, width, ("mlp", "embed"), rngs) for _ in range(2)])

    def _attend(self, q: jax.Array, k: jax.Array, v: jax.Array, k_mask: jax.Array | None
                ) -> jax.Array:
        b, lq, w = q.shape
        dk = w // self.heads
        qh = q.reshape(b, lq, self.heads, dk)
        kh = k.reshape(b, k.shape[1], self.heads, dk)
        s = jnp.einsum("bihd,bjhd->bhij", qh, kh) / math.sqrt(dk)
        if k_mask is not None:
            s = jnp.where(k_mask[:, None, None], s, NEG)
        p = jax.nn.softmax(s, -1).mean(1)  # heads averaged: one weight per (i, j)
        return jnp.einsum("bij,bjw->biw", p, v)

    def __call__(self, a: jax.Array, b: jax.Array, b_mask: jax.Array
                 ) -> tuple[jax.Array, jax.Array]:
        qa, qb = self.pa(a), self.pb(b)
        if self.cross:
            wa = self._attend(qa, qb, b, b_mask)  # each clip: the query it attends to
            wb = self._attend(qb, qa, a, None)  # each token: the clips it attends to
        else:
            wa = self._attend(qa, qa, a, None)
            wb = self._attend(qb, qb, b, b_mask)
        out = []
        for k, (x, w) in enumerate(((a, wa), (b, wb))):
            xw = jnp.concatenate([x, w], -1)
            g = jax.nn.sigmoid(self.gate[k](xw))
            out.append(g * x + (1 - g) * jnp.tanh(self.upd[k](xw)))
        return out[0], out[1] * b_mask[..., None]


class IANetEncoder(nnx.Module):
    """Clip features [B, n, W] aligned with the query (the IA-Net base; faces / portraits
    are RNL's f_v / f_t, off with faces = 0 / portraits = False)."""

    def __init__(self, *, frame_dim: int, face_dim: int, faces: int, vocab: int, width: int,
                 portraits: bool, heads: int = 4, blocks: int = 3, local_layers: int = 2,
                 local_width: int = 3, rngs: nnx.Rngs):
        init = nnx.initializers.normal(0.02)
        self.use_portraits, self.local_width = portraits, local_width
        self.fc = dense(frame_dim, width, ("mlp", "embed"), rngs)
        self.local = nnx.List([nnx.MultiHeadAttention(heads, width, decode=False, rngs=rngs)
                               for _ in range(local_layers)])
        self.gru = bigru(width, width, rngs)
        self.face_fc = dense(faces * face_dim, width, ("mlp", "embed"), rngs) if faces else None
        self.embed = nnx.Embed(vocab, width, embedding_init=init, rngs=rngs)
        self.text_gru = bigru(width, width, rngs)
        self.portrait = dense(face_dim, width, ("mlp", "embed"), rngs) if portraits else None
        self.blocks = nnx.List([GatedAttention(width, heads, cross=k % 2 == 0, rngs=rngs)
                                for k in range(2 * blocks)])
        self.ws1 = dense(width, width, ("embed", "mlp"), rngs)
        self.ws2 = nnx.Linear(width, width, use_bias=False, rngs=rngs)
        self.wst = nnx.Linear(width, 1, use_bias=False, rngs=rngs)
        self.fuse = bigru(2 * width, width, rngs)

    def query(self, batch: dict) -> tuple[jax.Array, jax.Array]:
        tokens = batch["tokens"]
        m = tokens > 0
        t = run_bigru(self.text_gru, self.embed(tokens), jnp.maximum(m.sum(1), 1))
        if self.portrait is not None:
            t = jnp.concatenate([t, self.portrait(batch["portraits"])], 1)
            m = jnp.concatenate([m, batch["portrait_mask"]], 1)
        return t * m[..., None], m

    def __call__(self, batch: dict) -> jax.Array:
        b, n = batch["clips"].shape[:2]
        x = jax.nn.relu(self.fc(batch["clips"]))
        i = jnp.arange(n)
        near = jnp.abs(i[:, None] - i[None]) <= self.local_width
        for att in self.local:
            x = x + att(x, mask=near[None, None])
        v = run_bigru(self.gru, x)
        if self.face_fc is not None:
            v = v + self.face_fc(batch["faces"].reshape(b, n, -1))
        t, tm = self.query(batch)
        for blk in self.blocks:
            v, t = blk(v, t, tm)
        s = self.wst(jnp.tanh(self.ws1(v)[:, :, None] + self.ws2(t)[:, None]))[..., 0]
        a = jax.nn.softmax(jnp.where(tm[:, None], s, NEG), -1)
        return run_bigru(self.fuse, jnp.concatenate([v, jnp.einsum("bij,bjw->biw", a, t)], -1))
