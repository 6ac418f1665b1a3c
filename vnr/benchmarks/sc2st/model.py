"""Sc2St contextual retrieval model (paper §4.4): script, two LSTM streams, LF/GF/SA fusion.

Round t (t = 2..10) asks for keyframe t given the whole script (10 sentences),
sentences 1..t and ground-truth keyframes 1..t-1:

* text encoder: a BERT (`vnr.models.encoders`, pooled output) per sentence,
  projected to `width`; image encoder: the frozen CLIP image embeddings the
  builder stores for every keyframe (choice made here: no pixels at train time,
  so steps are cheap), projected by a linear layer shared with the candidates;
* script encoder: one transformer block over the 10 sentence embeddings (+
  positions), masked mean, a linear layer and tanh -> the initial hidden states
  of both LSTMs (cells start at zero);
* two LSTM streams: sentences s_1..s_t -> h^s_t, keyframes v_1..v_{t-1} -> h^v_{t-1};
* fusion -> the context gist g_t (`fusion.py`), then a decoder MLP to the candidate space:
  LF       g = [h^s; h^v] (the MLP is the paper's LF MLP);
  GF       Eq. 1: g = G_S(h^s) * h^v + G_I(h^v) * h^s (element-wise sigmoid gates, summed);
  SA       Eq. 2-3: u = MLP([h^s; h^v]) as N channels of width U, self-attention across
           the channels with W_q, W_k, W_v, g = the attended channels flattened;
  gf_prose (ours, an option) the GF prose: gated streams concatenated, then the MLP;
  sa_time  (ours, an option: SA across time steps, not channels) attention over every recurrent
           output so far [h^s_1..h^s_t; h^v_1..h^v_{t-1}] (+ a text/image type embedding,
           masked to what exists), Q, K, V = X W_q, X W_k, X W_v, residual; the MLP reads
           the attended outputs at h^s_t and h^v_{t-1};
  LF-T     g = h^s (text context only);  LF-V g = h^v (visual only);
* score of candidate c: g . W_img c (dot product), softmax cross-entropy over the
  100 candidates.

Rounds run in one `jax.lax.scan` over `round_step` (carry: both LSTM states and
the output buffers SA attends over); `rounds_loop` runs the same step from Python
(for checks and the benchmark). Baselines "similarity" (cosine of each candidate
to keyframe t-1) and "prior" (uniform random scores) have no trained parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.benchmarks.sc2st import fusion as fusion_lib
from vnr.models.layers import Block, annotate, dense, layer_norm

TRAINED = ("lf", "gf", "sa", "gf_prose", "sa_time", "lf_t", "lf_v")  # recurrent models
MOEE = ("moee", "cmoee")  # baselines with parameters (`baselines.py`)
FUSIONS = (*TRAINED, *MOEE, "similarity", "prior")


class LSTM(nnx.Module):
    """A plain LSTM cell (gates i, f, g, o; forget bias 1) with a pure `step`."""

    def __init__(self, din: int, hidden: int, rngs: nnx.Rngs):
        init = nnx.initializers.lecun_normal()
        self.wx = nnx.Param(annotate(init, ("embed", "mlp"))(rngs.params(), (din, 4 * hidden)))
        self.wh = nnx.Param(annotate(init, ("embed", "mlp"))(rngs.params(), (hidden, 4 * hidden)))
        bias = jnp.zeros((4 * hidden,)).at[hidden:2 * hidden].set(1.0)
        self.b = nnx.Param(annotate(lambda *_: bias, ("mlp",))(rngs.params(), (4 * hidden,)))

    def __call__(self, state: tuple[jax.Array, jax.Array], x: jax.Array
                 ) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        h, c = state
        z = x @ self.wx[...] + h @ self.wh[...] + self.b[...]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h


class MLP(nnx.Module):
    def __init__(self, din: int, hidden: int, dout: int, rngs: nnx.Rngs):
        self.up = dense(din, hidden, ("embed", "mlp"), rngs)
        self.down = dense(hidden, dout, ("mlp", "embed"), rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down(jax.nn.gelu(self.up(x)))


class StoryboardModel(nnx.Module):
    """See the module docstring. Batch keys: tokens [B, L, T], features [B, L, D],
    cands [B, L-1, C, D] (L = 10 keyframes)."""

    def __init__(self, *, fusion: str, text_encoder: Any, text_width: int, feature_dim: int,
                 width: int, mlp: int, length: int, heads: int, dropout: float, rngs: nnx.Rngs,
                 sa_channels: int = 8, sa_unit: int = 32, sa_normalise: str = "printed"):
        if fusion not in FUSIONS or fusion in MOEE:
            raise ValueError(f"fusion={fusion!r}: choose one of {FUSIONS} (MoEE rows are "
                             "`baselines.MoEE`)")
        self.fusion, self.length, self.width = fusion, length, width
        self.text = text_encoder
        self.text_proj = dense(text_width, width, ("embed", None), rngs)
        self.img_proj = dense(feature_dim, width, ("embed", None), rngs)
        self.pos = nnx.Param(annotate(nnx.initializers.normal(0.02), (None, "embed"))(
            rngs.params(), (length, width)))
        self.script = Block(width, heads, mlp, dropout, rngs)
        self.script_ln = layer_norm(width, rngs)
        self.init_state = dense(width, 2 * width, ("embed", "mlp"), rngs)
        self.lstm_s = LSTM(width, width, rngs)
        self.lstm_v = LSTM(width, width, rngs)
        self.drop = nnx.Dropout(dropout)
        din = width if fusion in ("lf_t", "lf_v") else 2 * width
        if fusion == "gf":
            self.mix = fusion_lib.GatedFusion(width, rngs)
        elif fusion == "gf_prose":
            self.mix = fusion_lib.ProseGatedFusion(width, rngs)
        elif fusion == "sa":
            self.mix = fusion_lib.ChannelAttentionFusion(width, mlp, sa_channels, sa_unit, rngs,
                                                         sa_normalise)
        if fusion in ("gf", "gf_prose", "sa"):
            din = self.mix.out_dim
        if fusion == "sa_time":
            self.q = dense(width, width, ("embed", "heads"), rngs)
            self.k = dense(width, width, ("embed", "heads"), rngs)
            self.v = dense(width, width, ("embed", "heads"), rngs)
            self.kind = nnx.Param(annotate(nnx.initializers.normal(0.02), (None, "embed"))(
                rngs.params(), (2, width)))
        self.head = MLP(din, mlp, width, rngs)

    # ------------------------------------------------------------------ encoders
    def encode_sentences(self, tokens: jax.Array) -> jax.Array:
        """[B, L, T] token ids -> [B, L, W] pooled, projected sentence embeddings."""
        b, n, t = tokens.shape
        flat = tokens.reshape(b * n, t)
        out = self.text(flat, (flat > 0).astype(jnp.int32))
        return self.text_proj(out.pooled.astype(jnp.float32)).reshape(b, n, -1)

    def encode_images(self, feats: jax.Array) -> jax.Array:
        return self.img_proj(feats)

    def script_state(self, sent: jax.Array, train: bool, rngs: nnx.Rngs | None):
        """Script encoder: [B, L, W] sentence embeddings -> initial (h, c) of both LSTMs."""
        x = self.script(sent + self.pos[...], None, train=train, rngs=rngs)
        h0 = jnp.tanh(self.init_state(self.script_ln(x.mean(1))))
        hs, hv = jnp.split(h0, 2, axis=-1)
        zero = jnp.zeros_like(hs)
        return (hs, zero), (hv, zero)

    # ------------------------------------------------------------------ rounds
    def prepare(self, batch: dict, train: bool = False, rngs: nnx.Rngs | None = None):
        """Everything before the rounds: (carry, xs) for `round_step` (xs leading axis: rounds)."""
        sent = self.encode_sentences(batch["tokens"])
        sent = self.drop(sent, deterministic=not train, rngs=rngs)
        img = self.drop(self.encode_images(batch["features"]), deterministic=not train,
                        rngs=rngs)
        cand = self.encode_images(batch["cands"])  # [B, R, C, W]
        state_s, state_v = self.script_state(sent, train, rngs)
        state_s, h1 = self.lstm_s(state_s, sent[:, 0])  # sentence 1 before round 2
        b, n, w = sent.shape
        buf_s = jnp.zeros((b, n, w), sent.dtype).at[:, 0].set(h1.astype(sent.dtype))
        buf_v = jnp.zeros((b, n - 1, w), sent.dtype)
        rounds = n - 1
        xs = {"r": jnp.arange(rounds), "sent": jnp.moveaxis(sent[:, 1:], 1, 0),
              "img": jnp.moveaxis(img[:, :-1], 1, 0), "cand": jnp.moveaxis(cand, 1, 0)}
        return (state_s, state_v, buf_s, buf_v), xs

    def round_step(self, carry: tuple, x: dict) -> tuple[tuple, jax.Array]:
        """Round t = r + 2: read sentence t and keyframe t-1, score the candidates [B, C]."""
        state_s, state_v, buf_s, buf_v = carry
        r = x["r"]
        state_s, hs = self.lstm_s(state_s, x["sent"])
        state_v, hv = self.lstm_v(state_v, x["img"])
        # The buffers keep their dtype (a bfloat16 model's LSTM outputs bfloat16).
        buf_s = jax.lax.dynamic_update_index_in_dim(buf_s, hs.astype(buf_s.dtype), r + 1, axis=1)
        buf_v = jax.lax.dynamic_update_index_in_dim(buf_v, hv.astype(buf_v.dtype), r, axis=1)
        gist = self.fuse(hs, hv, buf_s, buf_v, r)
        scores = jnp.einsum("bw,bcw->bc", gist, x["cand"])
        new = jax.tree.map(lambda n, o: n.astype(o.dtype), (state_s, state_v, buf_s, buf_v),
                           carry)  # a bfloat16 model's scan carry keeps its dtypes
        return new, scores

    def fuse(self, hs: jax.Array, hv: jax.Array, buf_s: jax.Array, buf_v: jax.Array,
             r: jax.Array) -> jax.Array:
        f = self.fusion
        if f == "lf_t":
            return self.head(hs)
        if f == "lf_v":
            return self.head(hv)
        if f == "lf":
            return self.head(jnp.concatenate([hs, hv], -1))
        if f in ("gf", "gf_prose", "sa"):
            return self.head(self.mix(hs, hv))
        # sa_time: self-attention over every recurrent output so far.
        kind = self.kind[...]
        x = jnp.concatenate([buf_s + kind[0], buf_v + kind[1]], axis=1)  # [B, 2L-1, W]
        n_s, n_v = buf_s.shape[1], buf_v.shape[1]
        valid = jnp.concatenate([jnp.arange(n_s) <= r + 1, jnp.arange(n_v) <= r])  # [2L-1]
        q, k, v = self.q(x), self.k(x), self.v(x)
        logits = jnp.einsum("bqw,bkw->bqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
        logits = jnp.where(valid[None, None, :], logits, -1e9)
        z = x + jnp.einsum("bqk,bkw->bqw", jax.nn.softmax(logits, axis=-1), v)
        z_s = jax.lax.dynamic_index_in_dim(z, r + 1, axis=1, keepdims=False)
        z_v = jax.lax.dynamic_index_in_dim(z, n_s + r, axis=1, keepdims=False)
        return self.head(jnp.concatenate([z_s, z_v], -1))

    def rounds_scan(self, carry: tuple, xs: dict) -> jax.Array:
        """All rounds in one `lax.scan`: [B, R, C] scores."""
        _, scores = jax.lax.scan(self.round_step, carry, xs)
        return jnp.moveaxis(scores, 0, 1)

    def rounds_loop(self, carry: tuple, xs: dict) -> jax.Array:
        """The same rounds as a Python loop over `round_step` (reference, benchmark)."""
        out = []
        for r in range(xs["r"].shape[0]):
            carry, s = self.round_step(carry, jax.tree.map(lambda a, r=r: a[r], xs))
            out.append(s)
        return jnp.stack(out, 1)

    def __call__(self, batch: dict, train: bool = False, rngs: nnx.Rngs | None = None
                 ) -> jax.Array:
        """Candidate scores [B, L-1, C] for rounds t = 2..L."""
        if self.fusion == "similarity":
            return similarity_scores(batch["features"], batch["cands"])
        if self.fusion == "prior":
            raise ValueError("the prior baseline scores at random: use `prior_scores`")
        carry, xs = self.prepare(batch, train, rngs)
        return self.rounds_scan(carry, xs)


def similarity_scores(features: jax.Array, cands: jax.Array) -> jax.Array:
    """Baseline: cosine of every candidate of round t to ground-truth keyframe t-1."""
    prev = features[:, :-1]
    prev = prev / jnp.maximum(jnp.linalg.norm(prev, axis=-1, keepdims=True), 1e-12)
    c = cands / jnp.maximum(jnp.linalg.norm(cands, axis=-1, keepdims=True), 1e-12)
    return jnp.einsum("brd,brcd->brc", prev, c)


def prior_scores(key: jax.Array, index: jax.Array, shape: tuple[int, int]) -> jax.Array:
    """Baseline: i.i.d. uniform scores per storyboard (seeded by its index) [B, R, C]."""
    return jax.vmap(lambda i: jax.random.uniform(jax.random.fold_in(key, i), shape))(index)
