"""RMN, the role-aware narrator of Movie101 (§4.2), and a transformer decoder with a KV cache.

Encoder: per second, CLIP ⊕ S3D ⊕ the frame's F face features (already in descending
detection-confidence order) -> one linear projection + learned positions; the movie's genres
as a sequence of G learned genre embeddings, each layer-normalised (upstream's TagsEncoder:
embedding + Norm, G = 4), padded slots masked, are prepended (§4.2: "a sequence of genre
features"); a pre-LN transformer encoder (`vnr.models.layers.Block`) gives the memory
M [G+T, W].

Decoder: pre-LN layers of causal self-attention (KV cache for decoding), cross-attention to
M and an MLP; vocabulary scores `W_o h_t`.

Role pointer (Eq. 1): at step t the decoder's own cross-attention over the memory (last
decoder layer, mean over heads), restricted to the video rows and renormalised, is α_t;
`c_t = Σ_j α_tj M_j` is the context-filtered video feature; the score of cast member r is the
scaled dot product of `q(c_t)` with the projected portrait face feature `P(p_r)`; a gate
`λ_t = σ(w · h_t + b)` from the decoder state multiplies the role scores, which are
concatenated after the vocabulary scores before ONE softmax over V + R outputs. Output V + r
is "the name of cast member r" (the caller expands it to the full role name). Cast slots
without a portrait feature (or beyond the cast) get score -1e9. Upstream (RMN
modules/transformer.py) differs in three details we do not copy (REPRODUCING.md): it
re-softmaxes the head-mean attention weights (which flattens them towards uniform), its
role scores are multi-head attention *probabilities* of a face encoder's outputs, and α
weights its dynamic memory bank rather than the encoder output. `pointer=False` gives the
same model without the pointer (role outputs always -1e9): OUR ablation, not a row of
Table 3 (the paper ablates f_v and g, always with the pointer).

`cached_step` / `full_step` are `vnr.ops.beam_decode` step functions (the second recomputes
the whole prefix; tests check both give the same beams).

Decoding layouts (chosen from profiles of the batched beam search, see
bench/decode.py): the self-attention KV cache is head-major [H, N, L, Dh] in beam slots
(`InPlace`, never reordered: a gathered [N, L] slot table says where each beam's history is;
`_attend_slots`), cross-attention keys/values are computed once per decode (`cross_kv`)
head-major [H, N, Dh, T], and the role pointer never projects the memory per step
(`RMN.role_scores`). Each removes a per-step copy or a per-step O(T·W²) projection.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.benchmarks.movie101.memory_bank import MemoryBank
from vnr.models.compute import float32
from vnr.models.layers import Block, annotate, dense, layer_norm
from vnr.ops.beam_decode import InPlace

NEG = -1.0e9


def _attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None, heads: int,
            return_att: bool = False) -> jax.Array | tuple[jax.Array, jax.Array]:
    """q [N,S,W], k/v [N,T,W], mask broadcastable to [N,1,S,T] (True = attend); with
    `return_att` also the attention weights averaged over heads [N,S,T]."""
    n, s, w = q.shape
    t = k.shape[1]
    dh = w // heads
    q, k, v = (x.reshape(n, -1, heads, dh) for x in (q, k, v))
    logits = jnp.einsum("nshd,nthd->nhst", q, k) / jnp.sqrt(dh).astype(q.dtype)
    if mask is not None:
        logits = jnp.where(mask, logits, NEG)
    att = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(v.dtype)
    out = jnp.einsum("nhst,nthd->nshd", att, v).reshape(n, s, w) if t else q.reshape(n, s, w)
    return (out, att.mean(1)) if return_att else out


def _attend_slots(q: jax.Array, k: jax.Array, v: jax.Array, k_new: jax.Array,
                  v_new: jax.Array, slot: jax.Array, t: jax.Array, group: int) -> jax.Array:
    """Causal attention of position t over a beam-slot KV cache (no reordered copy).

    q [N,1,W]; k/v [H,N,L,Dh], the cache BEFORE position t is written (head-major, so the
    contractions are batched GEMMs over (head, example) that never transpose the cache;
    reading the old cache also lets XLA write the new entry in place afterwards), with rows
    in physical beam slots, N = examples x `group`; k_new/v_new [H,N,1,Dh] position t of
    every row; slot [N,L]: the slot (within the row's group) holding position s of row n's
    history. Row n attends to k[:, g(n), slot[n,s], s] for s < t (g(n) its group) and to
    its own new key: scores against all `group` slots of each position, then the one named
    by `slot` is kept (a one-hot mix: the cache is read once, as plain attention would,
    never gathered or copied)."""
    n, _, w = q.shape
    heads, _, L, dh = k.shape
    b = n // group
    scale = 1.0 / jnp.sqrt(dh).astype(q.dtype)
    qh = q.reshape(n, heads, dh).transpose(1, 0, 2)  # [h, n, d] (small)
    kh, vh = (x.reshape(heads, b, group, L, dh) for x in (k, v))
    pick = (slot.reshape(b, group, 1, L) == jnp.arange(group)[None, None, :, None]
            ).astype(q.dtype)  # [b, k, j, s]: beam k reads slot j at position s
    # the cache is the left operand with its contracted dim minor: no transposed copy of it
    logits = jnp.einsum("hbjsd,hbkd->hbjsk", kh, qh.reshape(heads, b, group, dh)) * scale
    logits = (logits * pick.transpose(0, 2, 3, 1)[None]).sum(2)  # [h, b, s, k]
    logits = logits.transpose(0, 1, 3, 2).reshape(heads, n, L)
    logits = jnp.where(jnp.arange(L) < t, logits, NEG)
    new = jnp.einsum("hnd,hnd->hn", qh, k_new[:, :, 0]) * scale
    att = jax.nn.softmax(jnp.concatenate([logits, new[..., None]], -1).astype(jnp.float32),
                         axis=-1).astype(v.dtype)
    mix = att[..., :L].reshape(heads, b, group, 1, L) * pick[None]  # [h, b, k, j, s]
    out = jnp.einsum("hbkjs,hbjsd->hbkd", mix, vh).reshape(heads, n, dh)
    out = out + att[..., L:] * v_new[:, :, 0]
    return out.transpose(1, 0, 2).reshape(n, 1, w)


class DecoderLayer(nnx.Module):
    """Pre-LN: causal self-attention (cacheable), cross-attention, MLP."""

    def __init__(self, width: int, heads: int, mlp: int, dropout: float, rngs: nnx.Rngs):
        self.heads = heads
        self.ln1, self.ln2, self.ln3 = (layer_norm(width, rngs) for _ in range(3))
        self.sq, self.sk, self.sv, self.so = (dense(width, width, n, rngs) for n in (
            ("embed", "heads"), ("embed", "heads"), ("embed", "heads"), ("heads", "embed")))
        self.cq, self.ck, self.cv, self.co = (dense(width, width, n, rngs) for n in (
            ("embed", "heads"), ("embed", "heads"), ("embed", "heads"), ("heads", "embed")))
        self.up = dense(width, mlp, ("embed", "mlp"), rngs)
        self.down = dense(mlp, width, ("mlp", "embed"), rngs)
        self.drop = nnx.Dropout(dropout)

    def _rest(self, x, mem, mem_mask, train, rngs, cross_kv=None):
        """Cross-attention + MLP -> (x, cross-attention weights averaged over heads
        [N,S,T]: the decoder's attention over the memory, used by the role pointer)."""
        h = self.ln2(x)
        if cross_kv is None:
            y, att = _attend(self.cq(h), self.ck(mem), self.cv(mem), mem_mask[:, None, None, :],
                             self.heads, return_att=True)
        else:  # head-major keys and values [H,N,Dh,T] from `cross_kv`
            ck, cv = cross_kv
            n, s, w = h.shape
            q = self.cq(h).reshape(n, s, ck.shape[0], -1).transpose(2, 0, 1, 3)  # [H,N,S,Dh]
            logits = jnp.einsum("hndt,hnsd->hnst", ck, q) / jnp.sqrt(ck.shape[2]).astype(
                q.dtype)
            logits = jnp.where(mem_mask[None, :, None, :], logits, NEG)
            att = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(cv.dtype)
            y = jnp.einsum("hndt,hnst->hnsd", cv, att).transpose(1, 2, 0, 3).reshape(n, s, w)
            att = att.mean(0)
        x = x + self.drop(self.co(y), deterministic=not train, rngs=rngs)
        h = self.down(jax.nn.gelu(self.up(self.ln3(x))))
        return x + self.drop(h, deterministic=not train, rngs=rngs), att

    def __call__(self, x, mem, mem_mask, *, train: bool = False, rngs=None):
        """Teacher forcing: x [N,S,W] -> ([N,S,W] (causal), cross-attention [N,S,T])."""
        h = self.ln1(x)
        s = x.shape[1]
        causal = jnp.tril(jnp.ones((s, s), bool))[None, None]
        y = _attend(self.sq(h), self.sk(h), self.sv(h), causal, self.heads)
        x = x + self.drop(self.so(y), deterministic=not train, rngs=rngs)
        return self._rest(x, mem, mem_mask, train, rngs)

    def step(self, x, mem, mem_mask, k_cache, v_cache, t, cross_kv=None, slot=None,
             group: int = 1):
        """One position: x [N,1,W] -> (x, k_cache, v_cache, cross-attention [N,1,T]);
        `cross_kv` = the precomputed cross-attention keys/values of `mem` (else recomputed).
        Without `slot`: caches [N,Lmax,W] (rows = beams, gathered by the caller); with
        `slot` [N,Lmax]: head-major beam-slot caches [H,N,Lmax,Dh] in groups of `group`
        rows (see `_attend_slots`). Caches are updated in place at t."""
        h = self.ln1(x)
        k, v = self.sk(h), self.sv(h)
        if slot is not None:
            n, heads = x.shape[0], k_cache.shape[0]
            k, v = (y.reshape(n, 1, heads, -1).transpose(2, 0, 1, 3) for y in (k, v))
            y = _attend_slots(self.sq(h), k_cache, v_cache, k, v, slot, t, group)
            # a data dependency of the writes on the reads (adds 0.0): without it XLA cannot
            # order the reads first and copies every cache buffer twice per step (seen in
            # the compiled HLO); with it the caches are updated in place
            dep = 0.0 * y[:1, :1, :1].reshape(1, 1, 1, 1)
            k, v = k + dep, v + dep
            k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k, t, axis=2)
            v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, v, t, axis=2)
        else:
            k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k, t, axis=1)
            v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, v, t, axis=1)
            mask = (jnp.arange(k_cache.shape[1]) <= t)[None, None, None, :]
            y = _attend(self.sq(h), k_cache, v_cache, mask, self.heads)
        x = x + self.so(y)
        x, att = self._rest(x, mem, mem_mask, False, None, cross_kv)
        return x, k_cache, v_cache, att


class TransformerDecoder(nnx.Module):
    """Token + position embeddings, `layers` DecoderLayers, final LN, vocabulary head."""

    def __init__(self, vocab: int, width: int, layers: int, heads: int, mlp: int, max_len: int,
                 dropout: float = 0.0, *, rngs: nnx.Rngs):
        init = nnx.initializers.normal(0.02)
        self.max_len, self.width = max_len, width
        self.embed = nnx.Embed(vocab, width, embedding_init=annotate(init, ("vocab", "embed")),
                               rngs=rngs)
        self.pos = nnx.Param(annotate(init, (None, "embed"))(rngs.params(), (max_len, width)))
        self.layers = nnx.List([DecoderLayer(width, heads, mlp, dropout, rngs)
                                for _ in range(layers)])
        self.ln = layer_norm(width, rngs)
        self.head = dense(width, vocab, ("embed", "vocab"), rngs)

    def hidden(self, tokens, mem, mem_mask, *, train: bool = False, rngs=None):
        """tokens [N,S] -> final hidden states [N,S,W] (teacher forcing)."""
        return self.hidden_x(self.embed(tokens), mem, mem_mask, train=train, rngs=rngs)

    def hidden_x(self, x, mem, mem_mask, *, train: bool = False, rngs=None,
                 return_attn: bool = False):
        """Embedded inputs x [N,S,W] (no positions yet) -> hidden states [N,S,W] (and, with
        `return_attn`, the last layer's cross-attention over `mem` [N,S,T], head mean)."""
        x = x + self.pos[None, : x.shape[1]]
        for layer in self.layers:
            x, att = layer(x, mem, mem_mask, train=train, rngs=rngs)
        return (self.ln(x), att) if return_attn else self.ln(x)

    def init_cache(self, n: int, dtype=jnp.float32) -> dict[str, Any]:
        """Self-attention KV cache for N rows (example-major beams, for beam_decode): per
        layer head-major k/v [H, N, max_len, W/H] wrapped in `InPlace` (beam_search never
        copies them: each beam writes its own slot) and `slot` [N, max_len] int32, the slot
        holding each position of a row's history (gathered with the beams; see
        `_attend_slots`). Plain [N, max_len, W] arrays instead of this dict entry also work
        (no "slot": the caller gathers the whole cache, the layout before the slots)."""
        heads = self.layers[0].heads
        shape = (heads, n, self.max_len, self.width // heads)
        return {"k": [InPlace(jnp.zeros(shape, dtype)) for _ in self.layers],
                "v": [InPlace(jnp.zeros(shape, dtype)) for _ in self.layers],
                "slot": jnp.zeros((n, self.max_len), jnp.int32)}

    def cross_kv(self, mem: jax.Array) -> list[tuple[jax.Array, jax.Array]]:
        """Cross-attention keys/values of `mem` [N,T,W] per layer, computed once per decode,
        head-major [H,N,W/H,T] (the layout XLA contracts without transposing them again at
        every step)."""
        def heads(x, layer, perm):
            return x.reshape(*x.shape[:2], layer.heads, -1).transpose(perm)
        return [(heads(layer.ck(mem), layer, (2, 0, 3, 1)),
                 heads(layer.cv(mem), layer, (2, 0, 3, 1))) for layer in self.layers]

    def step(self, token, mem, mem_mask, cache, t, cross=None):
        """token [N] at position t -> (hidden [N,W], cache)."""
        return self.step_x(self.embed(token), mem, mem_mask, cache, t, cross)

    def step_x(self, x, mem, mem_mask, cache, t, cross=None, return_attn: bool = False):
        """Embedded input x [N,W] at position t -> (hidden [N,W], cache) (and, with
        `return_attn`, the last layer's cross-attention [N,T]); `cross` from `cross_kv`
        (else the cross-attention keys/values are recomputed)."""
        x = x[:, None] + jax.lax.dynamic_slice_in_dim(self.pos[...], t, 1)[None]
        group = max(cache["k"][0].beam, 1) if isinstance(cache["k"][0], InPlace) else 1
        slot = cache.get("slot")
        if slot is not None:  # this position of every row is in the row's own slot
            own = (jnp.arange(x.shape[0], dtype=jnp.int32) % group)[:, None]
            slot = jax.lax.dynamic_update_slice_in_dim(slot, own, t, axis=1)
        ks, vs = [], []
        for i, layer in enumerate(self.layers):
            kc, vc = cache["k"][i], cache["v"][i]
            in_place = isinstance(kc, InPlace)
            x, k, v, att = layer.step(x, mem, mem_mask, kc.value if in_place else kc,
                                 vc.value if in_place else vc, t,
                                 None if cross is None else cross[i], slot, group)
            ks.append(InPlace(k, kc.beam) if in_place else k)
            vs.append(InPlace(v, vc.beam) if in_place else v)
        new = {"k": ks, "v": vs}
        if slot is not None:
            new["slot"] = slot
        if return_attn:
            return self.ln(x)[:, 0], new, att[:, 0]
        return self.ln(x)[:, 0], new


def cached_step(graph: Any, tokens, state, t, consts):
    """beam_decode step for a bare TransformerDecoder with a KV cache. state: {"cache"};
    consts (per example, identical across its beams, never gathered): params, mem, mem_mask,
    cross (from `cross_kv`)."""
    dec = nnx.merge(graph, consts["params"])
    h, cache = dec.step(tokens, consts["mem"], consts["mem_mask"], state["cache"], t,
                        consts["cross"])
    return jax.nn.log_softmax(float32(dec.head(h))), {"cache": cache}


def full_step(graph: Any, tokens, state, t, consts):
    """beam_decode step recomputing the whole prefix (reference for the cache)."""
    dec = nnx.merge(graph, consts["params"])
    prefix = jax.lax.dynamic_update_slice_in_dim(state["prefix"], tokens[:, None], t, axis=1)
    h = dec.hidden(prefix, consts["mem"], consts["mem_mask"])
    h_t = jnp.take_along_axis(h, jnp.full((h.shape[0], 1, 1), t), axis=1)[:, 0]
    return jax.nn.log_softmax(float32(dec.head(h_t))), {"prefix": prefix}


class RMN(nnx.Module):
    """Role-aware narrator: video (+ faces, + genre) encoder, decoder, role pointer (Eq. 1).

    `faces=0` drops the frame face features (RMN w/o f_v), `genre_token=False` the genre
    token (w/o g), `pointer=False` the role pointer; `memory_bank=True` makes the decoder
    attend OVP's dynamic memory bank (`memory_bank.py`) instead of the fixed video states.
    VT = none of them, OVP = memory bank only (configs/movie101/mcn.py has the Table 3
    rows)."""

    def __init__(self, *, frame_dim: int, face_dim: int, faces: int, genres: int, vocab: int,
                 max_roles: int, width: int, enc_layers: int, dec_layers: int, heads: int,
                 mlp: int, max_frames: int, max_len: int, dropout: float, pointer: bool,
                 genre_token: bool = True, memory_bank: bool = False, max_genres: int = 4,
                 rngs: nnx.Rngs):
        init = nnx.initializers.normal(0.02)
        self.vocab, self.max_roles, self.pointer, self.width = vocab, max_roles, pointer, width
        self.genre_token, self.max_genres = genre_token, max_genres
        self.inp = dense(frame_dim + faces * face_dim, width, ("mlp", "embed"), rngs)
        self.frame_pos = nnx.Param(annotate(init, (None, "embed"))(rngs.params(),
                                                                   (max_frames, width)))
        self.genre = nnx.Embed(genres, width, embedding_init=annotate(init, ("vocab", "embed")),
                               rngs=rngs)
        self.genre_ln = layer_norm(width, rngs)
        self.encoder = nnx.List([Block(width, heads, mlp, dropout, rngs)
                                 for _ in range(enc_layers)])
        self.enc_ln = layer_norm(width, rngs)
        self.decoder = TransformerDecoder(vocab, width, dec_layers, heads, mlp, max_len,
                                          dropout, rngs=rngs)
        self.pq = dense(width, width, ("embed", "heads"), rngs)
        self.portrait = dense(face_dim, width, ("mlp", "embed"), rngs)
        self.gate = dense(width, 1, ("embed", None), rngs)
        self.bank = MemoryBank(width, rngs) if memory_bank else None

    @property
    def video_offset(self) -> int:
        """Memory rows before the video (the G genre slots)."""
        return self.max_genres if self.genre_token else 0

    def encode(self, frames, faces, frame_mask, genre, *, train: bool = False, rngs=None):
        """frames [B,T,Dv], faces [B,T,F,Df], frame_mask [B,T], genre [B,G] (-1 = pad)
        -> memory [B,G+T,W], mask [B,G+T] (the G genre slots first when `genre_token`)."""
        b, t = frames.shape[:2]
        x = self.inp(jnp.concatenate([frames, faces.reshape(b, t, -1)], -1))
        x = x + self.frame_pos[None, :t]
        mask = frame_mask
        if self.genre_token:
            if genre.shape[1] != self.max_genres:
                raise ValueError(f"genre has {genre.shape[1]} slots, the model "
                                 f"max_genres={self.max_genres}")
            g = self.genre_ln(self.genre(jnp.maximum(genre, 0)))
            x = jnp.concatenate([g.astype(x.dtype), x], 1)
            mask = jnp.concatenate([genre >= 0, frame_mask], 1)
        for blk in self.encoder:
            x = blk(x, mask, train=train, rngs=rngs)
        return self.enc_ln(x), mask

    def embed_tokens(self, tokens, portraits):
        """tokens [B,S] (ids >= V name cast member id - V) -> [B,S,W]: a pointer token is
        fed back as that member's projected portrait feature, so the decoder knows who."""
        v = self.vocab
        is_role = tokens >= v
        x = self.decoder.embed(jnp.where(is_role, 0, tokens))
        raw = jnp.take_along_axis(portraits[:, None],
                                  jnp.clip(tokens - v, 0, self.max_roles - 1)[..., None, None],
                                  axis=2)[..., 0, :]  # project only the member named
        return jnp.where(is_role[..., None], self.portrait(raw), x)

    def role_scores(self, h, alpha, mem, mem_mask, portraits, role_mask):
        """Eq. 1's λ·y^role [B,S,R] (NEG where no portrait / no pointer).

        alpha [B,S,T(+1)]: the decoder's own cross-attention over the memory at each step
        (last layer, head mean). Its video part (genre token dropped, renormalised over the
        real frames) weights the video memory into the context-filtered feature
        c_t = Σ_j α_tj M_j; the score of cast member r is q(c_t)·P(p_r)/√W (query from the
        video feature, key the projected portrait face feature); λ_t = σ(w·h_t + b).
        Computed as (q Wpᵀ)·p + q·bp: no per-step projection of all portraits."""
        off = self.video_offset
        c = jnp.einsum("bst,btw->bsw", self.video_alpha(alpha, mem_mask), mem[:, off:])
        q = self.pq(c)
        p = self.portrait
        s = (jnp.einsum("bsw,dw,brd->bsr", q, p.kernel[...], portraits)
             + jnp.einsum("bsw,w->bs", q, p.bias[...])[..., None]) / jnp.sqrt(self.width)
        lam = jax.nn.sigmoid(self.gate(h))
        valid = role_mask[:, None] & self.pointer
        return jnp.where(valid, lam * s, NEG)

    def video_alpha(self, alpha, mem_mask):
        """alpha [..., T(+1)] over the memory -> its video part renormalised over the real
        frames [..., T] (the α_t of Eq. 1 and of the memory bank update)."""
        off = self.video_offset
        a = alpha[..., off:] * mem_mask[:, None, off:] if alpha.ndim == 3 else \
            alpha[..., off:] * mem_mask[:, off:]
        return a / jnp.maximum(a.sum(-1, keepdims=True), 1e-9)

    def logits(self, h, alpha, mem, mem_mask, portraits, role_mask):
        """[.., V + R]: vocabulary scores then gated role scores (one softmax over both)."""
        return jnp.concatenate([self.decoder.head(h), self.role_scores(
            h, alpha, mem, mem_mask, portraits, role_mask)], -1)

    def __call__(self, batch: dict, *, train: bool = False, rngs=None) -> jax.Array:
        """Teacher forcing: logits [B,S,V+R] for batch["tokens_in"]."""
        mem, mask = self.encode(batch["frames"], batch["faces"], batch["frame_mask"],
                                batch["genre"], train=train, rngs=rngs)
        x = self.embed_tokens(batch["tokens_in"], batch["portraits"])
        if self.bank is not None:
            return self._bank_forward(x, mem, mask, batch["portraits"], batch["role_mask"])
        h, alpha = self.decoder.hidden_x(x, mem, mask, train=train, rngs=rngs,
                                         return_attn=True)
        return self.logits(h, alpha, mem, mask, batch["portraits"], batch["role_mask"])

    def bank_step(self, x, mem, mask, portraits, role_mask, cache, bank, t):
        """One decoding step against the memory bank: x [N,W] embedded token at t ->
        (logits [N,V+R], cache, bank state). The pointer reads the bank before the update,
        then the bank is updated with this step's α and h (as upstream's loop)."""
        off = self.video_offset
        m = jnp.concatenate([mem[:, :off], bank["bank"]], 1)
        h, cache, alpha = self.decoder.step_x(x, m, mask, cache, t, None, return_attn=True)
        logits = self.logits(h[:, None], alpha[:, None], m, mask, portraits, role_mask)[:, 0]
        bank = self.bank.update(bank, mem[:, off:], self.video_alpha(alpha, mask), h)
        return logits, cache, bank

    def _bank_forward(self, x, mem, mask, portraits, role_mask):
        """Teacher forcing through the bank: a scan over positions (each step's memory
        depends on the previous steps), self-attention through a plain KV cache; no dropout
        inside the decoder on this path."""
        n, s, w = x.shape
        shape = (n, self.decoder.max_len, w)
        cache = {"k": [jnp.zeros(shape, x.dtype) for _ in self.decoder.layers],
                 "v": [jnp.zeros(shape, x.dtype) for _ in self.decoder.layers]}
        bank = self.bank.init(mem[:, self.video_offset:])

        def body(carry, inp):
            xt, t = inp
            logits, *new = self.bank_step(xt, mem, mask, portraits, role_mask, *carry, t)
            # The carry keeps its dtypes (a bfloat16 model's bank update is bfloat16).
            return jax.tree.map(lambda n, o: n.astype(o.dtype), tuple(new), carry), logits

        _, logits = jax.lax.scan(body, (cache, bank), (x.transpose(1, 0, 2), jnp.arange(s)))
        return logits.transpose(1, 0, 2)


def rmn_step(graph: Any, tokens, state, t, consts):
    """beam_decode step for RMN. state: {"cache"}; consts: params, mem, mem_mask, cross,
    portraits, role_mask (per example, tiled over beams, never gathered)."""
    model: RMN = nnx.merge(graph, consts["params"])
    c = consts
    x = model.embed_tokens(tokens[:, None], c["portraits"])[:, 0]
    h, cache, alpha = model.decoder.step_x(x, c["mem"], c["mem_mask"], state["cache"], t,
                                           c["cross"], return_attn=True)
    logits = model.logits(h[:, None], alpha[:, None], c["mem"], c["mem_mask"], c["portraits"],
                          c["role_mask"])[:, 0]
    return jax.nn.log_softmax(float32(logits)), {"cache": cache}


def rmn_bank_step(graph: Any, tokens, state, t, consts):
    """beam_decode step for RMN with the memory bank. state: {"cache", "bank"} (the bank
    state is per beam, gathered with it); consts: params, mem, mem_mask, portraits,
    role_mask (cross-attention keys/values are recomputed: the memory changes every step)."""
    model: RMN = nnx.merge(graph, consts["params"])
    c = consts
    x = model.embed_tokens(tokens[:, None], c["portraits"])[:, 0]
    logits, cache, bank = model.bank_step(x, c["mem"], c["mem_mask"], c["portraits"],
                                          c["role_mask"], state["cache"], state["bank"], t)
    return jax.nn.log_softmax(float32(logits)), {"cache": cache, "bank": bank}
