"""Batched beam search: exact vs brute force, batch = per example, greedy = beam 1, length
penalty, early stop, KV-cached decoder = full recompute."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vnr.ops.beam_decode import NEG, beam_search, greedy_search, length_penalty, tile_beams

V, L, M, BOS, EOS = 4, 4, 97, 1, 2


def prefix_step(tokens, state, t):
    """A decoder whose next-token distribution depends on the WHOLE prefix (through a rolling
    code), so a wrongly gathered state gives wrong answers. state: code [N], table [N, M, V]."""
    code = (state["code"] * 31 + tokens + 7 * t) % M
    logits = jnp.take_along_axis(state["table"], code[:, None, None], axis=1)[:, 0]
    return jax.nn.log_softmax(logits), dict(state, code=code)


def np_logp(table: np.ndarray, seq: list[int]) -> list[np.ndarray]:
    """Per-step log-prob vectors of the same decoder, in NumPy, along `seq`."""
    code, out = 0, []
    for t, tok in enumerate([BOS, *seq]):
        code = (code * 31 + tok + 7 * t) % M
        lg = table[code].astype(np.float64)
        out.append(lg - np.log(np.exp(lg - lg.max()).sum()) - lg.max())
    return out


def brute_force(table: np.ndarray, alpha: float) -> tuple[tuple, float]:
    """Best sequence over everything beam_search can return: EOS-terminated sequences of
    length <= L (EOS counted) and truncated length-L sequences."""
    best, best_score = None, -np.inf
    for n in range(1, L + 1):
        for seq in itertools.product(range(V), repeat=n):
            if EOS in seq[:-1] or (n < L and seq[-1] != EOS):
                continue
            lps = np_logp(table, list(seq))
            s = sum(lps[i][tok] for i, tok in enumerate(seq))
            score = s / ((5 + n) / 6) ** alpha
            if score > best_score:
                best, best_score = seq, score
    return best, best_score


def tables(batch: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(batch, M, V)).astype(np.float32) * 2


def run(table: np.ndarray, beam: int, alpha: float = 0.0, early_stop: bool = True,
        max_len: int = L):
    b = len(table)
    state = tile_beams({"code": jnp.zeros((b,), jnp.int32), "table": jnp.asarray(table)}, beam)
    return beam_search(prefix_step, state, batch_size=b, beam_size=beam, max_len=max_len,
                       bos_id=BOS, eos_id=EOS, alpha=alpha, early_stop=early_stop)


@pytest.mark.parametrize("alpha", [0.0, 0.8])
def test_exact_when_beam_covers_everything(alpha: float) -> None:
    tab = tables(6, seed=int(alpha * 10))
    seqs, scores, lengths, _ = run(tab, beam=V**L, alpha=alpha)
    for b in range(len(tab)):
        want, want_score = brute_force(tab[b], alpha)
        n = int(lengths[b, 0])
        assert tuple(np.asarray(seqs[b, 0, :n]).tolist()) == want
        np.testing.assert_allclose(float(scores[b, 0]), want_score, rtol=1e-5)
        assert np.all(np.diff(np.asarray(scores[b])) <= 1e-6)  # best first
        assert np.all(np.asarray(seqs[b, 0, n:]) == 0)  # padded after the end


def test_batch_equals_per_example_and_early_stop_changes_nothing() -> None:
    tab = tables(5, seed=3)
    seqs, scores, lengths, _ = run(tab, beam=3, alpha=0.6)
    seqs2, scores2, lengths2, _ = run(tab, beam=3, alpha=0.6, early_stop=False)
    np.testing.assert_array_equal(seqs, seqs2)
    np.testing.assert_allclose(scores, scores2)
    for b in range(len(tab)):
        s1, sc1, l1, _ = run(tab[b:b + 1], beam=3, alpha=0.6)
        np.testing.assert_array_equal(s1[0], seqs[b])
        np.testing.assert_allclose(sc1[0], scores[b], rtol=1e-6)
        np.testing.assert_array_equal(l1[0], lengths[b])


def test_greedy_is_beam_one() -> None:
    tab = tables(4, seed=5)
    state = {"code": jnp.zeros((4,), jnp.int32), "table": jnp.asarray(tab)}
    seqs, _, lengths, _ = greedy_search(prefix_step, state, batch_size=4, max_len=6,
                                        bos_id=BOS, eos_id=EOS)
    for b in range(4):
        out = []
        for _ in range(6):
            tok = int(np.argmax(np_logp(tab[b], out)[-1]))
            out.append(tok)
            if tok == EOS:
                break
        assert np.asarray(seqs[b, 0, :int(lengths[b, 0])]).tolist() == out


def test_length_penalty_prefers_longer_and_early_stop_saves_steps() -> None:
    # a decoder that says EOS with p=0.6 at every step: alpha=0 stops at once, a strong
    # length penalty (long hypotheses divided by more) keeps going
    def eos_step(tokens, state, t):
        p = jnp.array([0.1, 0.1, 0.6, 0.2])
        return jnp.log(jnp.broadcast_to(p, (tokens.shape[0], 4))), state

    kw = dict(batch_size=2, beam_size=2, max_len=8, bos_id=BOS, eos_id=EOS)
    _, sc0, len0, steps0 = beam_search(eos_step, {"x": jnp.zeros((4,))}, alpha=0.0, **kw)
    _, sc1, len1, steps1 = beam_search(eos_step, {"x": jnp.zeros((4,))}, alpha=5.0, **kw)
    _, _, _, steps_full = beam_search(eos_step, {"x": jnp.zeros((4,))}, alpha=0.0,
                                      early_stop=False, **kw)
    assert int(len0[0, 0]) == 1 and int(len1[0, 0]) > 1
    np.testing.assert_allclose(float(sc0[0, 0]), np.log(0.6), rtol=1e-6)
    lp = float(length_penalty(jnp.asarray(int(len1[0, 0])), 5.0))
    want = (np.log(0.2) * (int(len1[0, 0]) - 1) + np.log(0.6)) / lp
    np.testing.assert_allclose(float(sc1[0, 0]), want, rtol=1e-5)
    assert int(steps0) < int(steps_full) == 8


def test_impossible_beams_stay_finite() -> None:
    tab = tables(2, seed=9)
    _, scores, _, _ = run(tab, beam=V**L + 3)  # more beams than hypotheses
    assert np.isfinite(np.asarray(scores)).all() and float(scores.min()) <= NEG / 2


def test_kv_cache_decoder_matches_full_recompute() -> None:
    """The RMN decoder with its KV cache gives the same beams as recomputing the prefix."""
    from flax import nnx

    from vnr.benchmarks.movie101.mcn_model import TransformerDecoder, cached_step, full_step

    dec = TransformerDecoder(vocab=11, width=16, layers=2, heads=2, mlp=32, max_len=7,
                             rngs=nnx.Rngs(0))
    graph, params = nnx.split(dec)
    mem = jax.random.normal(jax.random.key(1), (3, 5, 16))
    mem_mask = jnp.arange(5)[None] < jnp.array([[5], [3], [4]])
    K = 3
    common = dict(batch_size=3, beam_size=K, max_len=6, bos_id=1, eos_id=2, alpha=0.3)
    consts = tile_beams({"mem": mem, "mem_mask": mem_mask}, K)
    consts.update(params=params, cross=dec.cross_kv(consts["mem"]))
    s1 = {"cache": dec.init_cache(3 * K)}
    s2 = {"prefix": jnp.zeros((3 * K, 7), jnp.int32)}
    out1 = beam_search(functools.partial(cached_step, graph), s1, consts=consts, **common)
    out2 = beam_search(functools.partial(full_step, graph), s2, consts=consts, **common)
    assert int(out1[3]) > 1
    np.testing.assert_array_equal(out1[0], out2[0])
    np.testing.assert_allclose(out1[1], out2[1], rtol=1e-4, atol=1e-5)


def test_slot_cache_matches_full_recompute_under_reordering() -> None:
    """The in-place beam-slot KV cache (never copied; a gathered slot table) gives the
    log-probs of a full prefix recompute while beams are reordered arbitrarily."""
    from flax import nnx

    from vnr.benchmarks.movie101.mcn_model import TransformerDecoder, cached_step, full_step
    from vnr.ops.beam_decode import InPlace, gather_beams, set_beam

    B, K, T = 2, 4, 6
    dec = TransformerDecoder(vocab=13, width=16, layers=2, heads=2, mlp=32, max_len=T,
                             rngs=nnx.Rngs(0))
    slots = set_beam({"cache": dec.init_cache(B * K)}, K)
    assert isinstance(slots["cache"]["k"][0], InPlace) and slots["cache"]["k"][0].beam == K

    @nnx.jit
    def step(dec, tokens, slots, prefix, t, parents):  # one program, run for every t
        graph, params = nnx.split(dec)
        mem = jax.random.normal(jax.random.key(1), (B, 5, 16))
        consts = tile_beams({"mem": mem, "mem_mask": jnp.ones((B, 5), bool)}, K)
        consts.update(params=params, cross=dec.cross_kv(consts["mem"]))
        lp1, slots = cached_step(graph, tokens, slots, t, consts)
        lp2, prefix = full_step(graph, tokens, prefix, t, consts)
        return lp1, lp2, gather_beams(slots, parents, B, K), gather_beams(prefix, parents, B, K)

    prefix = {"prefix": np.zeros((B * K, T), np.int32)}
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 13, B * K).astype(np.int32)
    for t in range(T):
        parents = rng.integers(0, K, (B, K))  # arbitrary, with repeats
        lp1, lp2, slots, prefix = step(dec, tokens, slots, prefix, t, parents)
        np.testing.assert_allclose(lp1, lp2, rtol=1e-4, atol=1e-5)
        tokens = rng.integers(0, 13, B * K).astype(np.int32)
    assert int((np.asarray(slots["cache"]["slot"]) != np.arange(B * K)[:, None] % K).sum()) > 0
    with pytest.raises(ValueError, match="set_beam"):
        gather_beams({"cache": dec.init_cache(K)}, jnp.zeros((1, K), int), 1, K)


def test_rmn_role_scores_use_the_decoders_attention() -> None:
    """Eq. 1: role scores from the decoder's own cross-attention α_t (last layer, head mean,
    genre slots dropped, renormalised over real frames) weighting the video memory, equal
    to the explicit projected form; the cached decode step gives the teacher-forced α."""
    from flax import nnx

    from vnr.benchmarks.movie101.mcn_model import RMN

    m = RMN(frame_dim=8, face_dim=6, faces=2, genres=3, vocab=9, max_roles=4, width=16,
            enc_layers=1, dec_layers=2, heads=2, mlp=32, max_frames=5, max_len=6, dropout=0.0,
            pointer=True, max_genres=2, rngs=nnx.Rngs(0))
    role_mask = np.array([[True, True, False, True], [True, False, True, True]])
    tokens = np.array([[1, 4, 10, 5], [1, 3, 3, 12]])  # 10, 12: pointer tokens fed back

    @nnx.jit
    def forward(m):  # every model call below: one program
        m.portrait.bias[...] = jax.random.normal(jax.random.key(7), m.portrait.bias.shape)
        k = jax.random.split(jax.random.key(3), 4)
        frames, faces = jax.random.normal(k[0], (2, 5, 8)), jax.random.normal(k[1], (2, 5, 2, 6))
        fmask = jnp.arange(5)[None] < jnp.array([[5], [2]])
        por = jax.random.normal(k[2], (2, 4, 6))
        mem, mask = m.encode(frames, faces, fmask, jnp.array([[0, -1], [1, 2]]))
        x = m.embed_tokens(tokens, por)
        h, alpha = m.decoder.hidden_x(x, mem, mask, return_attn=True)
        a = alpha[..., 2:] * fmask[:, None]  # the two genre slots dropped
        a = a / a.sum(-1, keepdims=True)
        c = jnp.einsum("bst,btw->bsw", a, mem[:, 2:])
        s = jnp.einsum("bsw,brw->bsr", m.pq(c), m.portrait(por)) / 4.0
        want = jnp.where(role_mask[:, None], jax.nn.sigmoid(m.gate(h)) * s, NEG)
        got = m.role_scores(h, alpha, mem, mask, por, role_mask)
        cache, steps = m.decoder.init_cache(2), []
        for t in range(4):  # the decode path's α (KV cache, precomputed cross K/V)
            ht, cache, at = m.decoder.step_x(x[:, t], mem, mask, cache, t,
                                             m.decoder.cross_kv(mem), return_attn=True)
            steps.append((ht, at))
        return h, alpha, got, want, steps

    h, alpha, got, want, steps = forward(m)
    assert alpha.shape == (2, 4, 7) and np.allclose(alpha.sum(-1), 1, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert np.all(np.asarray(got)[1, :, 1] == NEG)  # no portrait: cannot be pointed to
    for t, (ht, at) in enumerate(steps):  # each step: the teacher-forced α and state
        np.testing.assert_allclose(at, alpha[:, t], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ht, h[:, t], rtol=1e-4, atol=1e-4)


def _eos_second_step(tokens, state, t):
    """Token 3 at 0.55 then 0.9 a step, </s> (2) the rest: ending at once (log 0.45) beats
    the greedy path's total (log 0.55 + 2 log 0.9) over three steps."""
    p = jnp.where(t == 0, jnp.array([0.0, 0.0, 0.45, 0.55]), jnp.array([0.0, 0.0, 0.1, 0.9]))
    logp = jnp.log(jnp.maximum(p, 1e-12))
    return jnp.broadcast_to(logp, (tokens.shape[0], 4)), state


def test_an_eos_outside_the_best_k_never_ends_a_hypothesis():
    """As fairseq's and transformers' beam search: only an </s> among the best K candidates
    ends a hypothesis, so one beam is exactly greedy (never the better-scoring early </s>
    ranked second), and K = 2 keeps it."""
    kw = dict(batch_size=1, max_len=3, bos_id=1, eos_id=2, early_stop=True)
    seqs, _, lengths, _ = beam_search(_eos_second_step, {"x": jnp.zeros((1, 1))},
                                      beam_size=1, **kw)
    assert seqs[0, 0].tolist() == [3, 3, 3] and int(lengths[0, 0]) == 3
    seqs, scores, lengths, _ = beam_search(_eos_second_step, {"x": jnp.zeros((2, 1))},
                                           beam_size=2, **kw)
    assert seqs[0, 0].tolist()[:1] == [2] and int(lengths[0, 0]) == 1
    assert float(scores[0, 0]) == pytest.approx(np.log(0.45), rel=1e-5)
