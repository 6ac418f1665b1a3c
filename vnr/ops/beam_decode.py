"""Batched, jit-compiled beam search for any autoregressive decoder (greedy = beam 1).

    seqs, scores, lengths, steps = beam_search(step_fn, state, batch_size=B, beam_size=K,
                                               max_len=L, bos_id=1, eos_id=2)

`step_fn(tokens [B*K] int32, state, t[, consts]) -> (log_probs [B*K, V] float32, new_state)`
scores the next token of every beam given its last token (`t` is the position of `tokens`,
0 = BOS) and a decoder state whose every leaf has leading dim B*K (e.g. a KV cache; build
it with `tile_beams` from a per-example state). `consts` (e.g. the model parameters) is
passed to `step_fn` unchanged and never gathered; it is omitted from the call when None.
The search runs in one `lax.while_loop`: live beams and finished hypotheses are kept
separately; each step takes the top 2K of the K·V continuations (so K live ones survive
even if K end in EOS), moves the EOS endings among the best K to the finished set (fairseq's
and transformers' rule: with beam 1 the search is exactly greedy) and gathers the decoder state
of the surviving beams with one `take` per leaf (no Python loop over beams or examples).

State wrapped in `InPlace(x)` is never gathered: its rows stay in their physical beam slot
and `beam_search` sets `InPlace.beam = K` so the step knows the slot groups. A KV cache
uses it to avoid copying the whole cache every step (`vnr.benchmarks.movie101.mcn_model`: each beam
writes its new key/value into its own slot in place, and a small gathered table
`slot [B*K, L]` says which of its example's K slots holds each earlier position of the
beam's history). For a [B*K, L, W] cache this replaces a read+write of every cache byte per
step with a [B*K, L] int32 gather.

Scores: a hypothesis of `n` generated tokens (EOS included) with summed log-probability
`s` scores `s / lp(n)`, `lp(n) = ((5 + n) / 6) ** alpha` (GNMT length penalty; alpha=0 is
the plain sum). Beams that reach `max_len` without EOS are finished there (truncated).
Early stop: an example is done when it has K finished hypotheses and no live beam can
still beat the worst of them — a live beam's log-probability only decreases, so its best
possible final score is `s / lp(max_len)` for alpha >= 0 (`s / lp(t+1)` for alpha < 0);
the loop exits when every example is done. With `beam_size >= V ** max_len` nothing is
ever pruned and the result is the exact best sequence (tests check this by brute force).

Returns `seqs [B, K, L]` (generated tokens, BOS excluded, `pad_id` after EOS),
`scores [B, K]` (best first), `lengths [B, K]` (tokens incl. EOS) and `steps` (decoder
calls made).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

NEG = -1.0e9  # "impossible" log-prob; finite so arithmetic never makes NaN


def length_penalty(n: jax.Array, alpha: float) -> jax.Array:
    """GNMT length normaliser ((5 + n) / 6) ** alpha."""
    return ((5.0 + n.astype(jnp.float32)) / 6.0) ** alpha


def tile_beams(tree: Any, beam_size: int) -> Any:
    """Repeats every leaf [B, ...] -> [B*K, ...] (example-major, as beam_search expects)."""
    return jax.tree.map(lambda x: jnp.repeat(x, beam_size, axis=0), tree)


@partial(jax.tree_util.register_dataclass, data_fields=["value"], meta_fields=["beam"])
@dataclasses.dataclass(frozen=True)
class InPlace:
    """A state subtree that `beam_search` never gathers (rows stay in their beam slot);
    `beam` is the number of beams per example (0 = not set: outside a beam search)."""

    value: Any
    beam: int = 0


def _is_in_place(x: Any) -> bool:
    return isinstance(x, InPlace)


def set_beam(tree: Any, beam_size: int) -> Any:
    """Every `InPlace` node of `tree` with `beam = beam_size`."""
    return jax.tree.map(lambda x: InPlace(x.value, beam_size) if _is_in_place(x) else x, tree,
                        is_leaf=_is_in_place)


def gather_beams(tree: Any, idx: jax.Array, batch: int, beam: int) -> Any:
    """state leaves [B*K, ...] -> rows idx [B, K] (beam indices within each example);
    `InPlace` nodes are returned unchanged."""
    for x in jax.tree.leaves(tree, is_leaf=_is_in_place):
        if _is_in_place(x) and x.beam != beam:
            raise ValueError(f"gather_beams: an InPlace state node has beam={x.beam}, not "
                             f"{beam}; call set_beam(state, {beam}) before the first step")
    flat = (idx + jnp.arange(batch)[:, None] * beam).reshape(-1)
    return jax.tree.map(lambda x: x if _is_in_place(x) else jnp.take(x, flat, axis=0), tree,
                        is_leaf=_is_in_place)


@partial(jax.jit, static_argnames=("step_fn", "batch_size", "beam_size", "max_len", "bos_id",
                                   "eos_id", "pad_id", "alpha", "early_stop"))
def beam_search(step_fn: Callable, state: Any, *, batch_size: int, beam_size: int,
                max_len: int, bos_id: int, eos_id: int, pad_id: int = 0, alpha: float = 0.0,
                early_stop: bool = True, consts: Any = None
                ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """See the module docstring. `step_fn` must be hashable (a module-level function or a
    `functools.partial` of one over hashable args); pass arrays through `state`."""
    B, K, L = batch_size, beam_size, max_len
    live_seq = jnp.full((B, K, L + 1), pad_id, jnp.int32).at[:, :, 0].set(bos_id)
    live_lp = jnp.tile(jnp.array([0.0] + [NEG] * (K - 1), jnp.float32), (B, 1))
    fin_seq = jnp.full((B, K, L), pad_id, jnp.int32)
    fin_score = jnp.full((B, K), NEG, jnp.float32)
    fin_len = jnp.zeros((B, K), jnp.int32)
    max_lp = length_penalty(jnp.asarray(L), alpha)
    state = set_beam(state, K)

    def done_fn(live_lp, fin_score, t):
        bound_lp = max_lp if alpha >= 0 else length_penalty(t + 1, alpha)
        best_live = live_lp.max(-1) / bound_lp
        full = fin_score[:, -1] > NEG / 2
        return full & (fin_score[:, -1] >= best_live)

    def cond(c):
        t, *_, done = c
        return (t < L) & ~jnp.all(done) if early_stop else t < L

    def body(c):
        t, live_seq, live_lp, state, fin_seq, fin_score, fin_len, _ = c
        tokens = jnp.take_along_axis(live_seq, jnp.full((B, K, 1), t), axis=2).reshape(-1)
        if consts is None:
            logp, state = step_fn(tokens, state, t)
        else:
            logp, state = step_fn(tokens, state, t, consts)
        V = logp.shape[-1]
        # two-stage top-k (exact): the best 2K of all K*V continuations are among each
        # beam's best 2K tokens; ranking K*2K candidates is far cheaper than K*V
        c = min(2 * K, V)
        beam_lp, beam_tok = jax.lax.top_k(logp.reshape(B, K, V).astype(jnp.float32), c)
        cand = (live_lp[:, :, None] + beam_lp).reshape(B, -1)
        top_lp, top_idx = jax.lax.top_k(cand, min(2 * K, K * c))
        src = top_idx // c
        tok = jnp.take_along_axis(beam_tok.reshape(B, -1), top_idx, 1).astype(jnp.int32)
        seqs = jnp.take_along_axis(live_seq, src[:, :, None], axis=1)
        seqs = seqs.at[:, :, t + 1].set(tok)
        is_eos = tok == eos_id
        last = t + 1 >= L
        n = t + 1
        # finished: EOS endings among the best K candidates (as fairseq's and transformers'
        # beam search: an EOS ranked K..2K-1 is dropped, so beam 1 is exactly greedy), and at
        # the last step everything; scored with the penalty
        ends = (is_eos & (jnp.arange(top_lp.shape[1]) < K)[None]) | last
        new_score = jnp.where(ends & (top_lp > NEG / 2), top_lp / length_penalty(n, alpha), NEG)
        all_score = jnp.concatenate([fin_score, new_score], 1)
        all_seq = jnp.concatenate([fin_seq, seqs[:, :, 1:]], 1)
        all_len = jnp.concatenate([fin_len, jnp.full(new_score.shape, n, jnp.int32)], 1)
        fin_score, keep = jax.lax.top_k(all_score, K)
        fin_seq = jnp.take_along_axis(all_seq, keep[:, :, None], 1)
        fin_len = jnp.take_along_axis(all_len, keep, 1)
        # live: the best K non-EOS continuations
        alive_lp = jnp.where(is_eos, NEG, top_lp)
        live_lp, keep = jax.lax.top_k(alive_lp, K)
        live_seq = jnp.take_along_axis(seqs, keep[:, :, None], 1)
        state = gather_beams(state, jnp.take_along_axis(src, keep, 1), B, K)
        done = done_fn(live_lp, fin_score, t + 1)
        return t + 1, live_seq, live_lp, state, fin_seq, fin_score, fin_len, done

    init = (jnp.asarray(0), live_seq, live_lp, state, fin_seq, fin_score, fin_len,
            jnp.zeros((B,), bool))
    t, _, _, _, fin_seq, fin_score, fin_len, _ = jax.lax.while_loop(cond, body, init)
    pos = jnp.arange(L)[None, None]
    fin_seq = jnp.where(pos < fin_len[:, :, None], fin_seq, pad_id)
    return fin_seq, fin_score, fin_len, t


def greedy_search(step_fn: Callable, state: Any, **kwargs: Any):
    """Beam search with one beam: the argmax token at every step."""
    return beam_search(step_fn, state, beam_size=1, **kwargs)
