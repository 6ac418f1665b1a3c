"""Table 3's models: the config rows (VT, OVP, RMN and its f_v / g ablations) build the
right RMN variant; OVP's memory bank (as upstream's update rule) gives the same logits when
teacher-forced through a scan and when decoded step by step with the beam-slot KV cache."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs.movie101 import mcn as mcn_config
from vnr.benchmarks.movie101 import mcn as task
from vnr.benchmarks.movie101.mcn_model import RMN, rmn_bank_step
from vnr.benchmarks.movie101.memory_bank import HISTORY, MemoryBank
from vnr.ops.beam_decode import set_beam


@pytest.mark.parametrize("arg,faces,genre,pointer,bank", [
    ("vt", 0, False, False, False), ("ovp", 0, False, False, True),
    ("no_faces,no_genre", 0, False, True, True), ("no_genre", 3, False, True, True),
    ("", 3, True, True, True), ("no_bank", 3, True, True, False)])
def test_table3_rows(arg, faces, genre, pointer, bank) -> None:
    c = mcn_config.get_config(",".join(x for x in ("smoke", arg) if x))
    m = task.make_model(c, nnx.Rngs(0))
    assert (c.data.faces, m.genre_token, m.pointer, m.bank is not None) == (
        faces, genre, pointer, bank)
    assert m.inp.kernel.shape[0] == c.data.frame_dim + faces * c.data.face_dim
    with pytest.raises(ValueError, match="ablation flags go with RMN"):
        mcn_config.get_config("smoke,vt,no_faces")


def test_memory_bank_update_by_hand() -> None:
    """One update against the rule written out (remove, then add; history weights)."""
    mb = MemoryBank(4, nnx.Rngs(1))
    k = jax.random.split(jax.random.key(0), 3)
    video = jax.random.normal(k[0], (1, 3, 4))
    st = mb.init(video)
    np.testing.assert_allclose(st["added"][0, :, 0], [49 / 50, 48 / 50, 47 / 50], rtol=1e-6)
    alpha = jnp.array([[0.2, 0.5, 0.3]])
    h = jax.random.normal(k[1], (1, 4))
    new = mb.update(st, video, alpha, h)
    a, e, m0, add0 = alpha[0][:, None], video[0], st["bank"][0], st["added"][0]
    rem = jax.nn.sigmoid(mb.remove_gate(h))[0]
    ad = jax.nn.sigmoid(mb.add_gate(h))[0]
    sim = jax.nn.sigmoid(m0 @ mb.q(h)[0])[:, None]  # one step in the history: q = h
    m1 = m0 * (1 - rem * a * sim)
    ctx = (e * a).sum(0)
    nxt = jax.nn.sigmoid(mb.next_attn(jnp.concatenate([e, jnp.tile(ctx, (3, 1))], -1)))
    np.testing.assert_allclose(new["bank"][0], m1 + e * (1 - add0) * ad * nxt, rtol=1e-5,
                               atol=1e-6)
    assert new["alpha_hist"].shape == (1, HISTORY, 3) and int(new["steps"][0]) == 1


def test_bank_teacher_forcing_equals_step_decoding() -> None:
    m = RMN(frame_dim=8, face_dim=6, faces=2, genres=3, vocab=9, max_roles=4, width=16,
            enc_layers=1, dec_layers=2, heads=2, mlp=32, max_frames=5, max_len=6, dropout=0.0,
            pointer=True, memory_bank=True, max_genres=2, rngs=nnx.Rngs(0))
    k = jax.random.split(jax.random.key(5), 3)
    batch = {"frames": jax.random.normal(k[0], (2, 5, 8)),
             "faces": jax.random.normal(k[1], (2, 5, 2, 6)),
             "frame_mask": jnp.arange(5)[None] < jnp.array([[5], [3]]),
             "genre": jnp.array([[0, -1], [1, 2]]),
             "portraits": jax.random.normal(k[2], (2, 4, 6)),
             "role_mask": jnp.array([[True, True, False, True], [True, False, True, True]]),
             "tokens_in": jnp.array([[1, 4, 10, 5, 6], [1, 3, 3, 12, 7]])}
    want = nnx.jit(lambda m, b: m(b))(m, batch)
    mem, mask = nnx.jit(lambda m, b: m.encode(b["frames"], b["faces"], b["frame_mask"],
                                               b["genre"]))(m, batch)
    graph, params = nnx.split(m)
    step = jax.jit(functools.partial(rmn_bank_step, graph))
    consts = {"params": params, "mem": mem, "mem_mask": mask, "portraits": batch["portraits"],
              "role_mask": batch["role_mask"]}
    state = set_beam({"cache": m.decoder.init_cache(2),
                      "bank": m.bank.init(mem[:, m.video_offset:])}, 1)
    for t in range(5):
        lp, state = step(batch["tokens_in"][:, t], state, t, consts)
        np.testing.assert_allclose(lp, jax.nn.log_softmax(want[:, t]), rtol=1e-4, atol=1e-4)


def test_paper_rows_follow_upstream_rmn_where_the_paper_is_silent() -> None:
    """Each value names the upstream file it follows (yuezih/Movie101 d773b91,
    Movie101v1/baseline/RMN)."""
    from configs.movie101 import mcn

    c = mcn.get_config("v1")
    m = c.model
    assert (m.width, m.enc_layers, m.dec_layers, m.heads) == (512, 3, 3, 8)  # modules/
    # transformer.py TransformerConfig: d_model 512, enc/dec_n_layers 3, heads 8
    assert m.mlp == 2048 and m.dropout == 0.1  # modules/common.py FeedForward d_ff=2048
    assert c.data.max_genres == 4  # readers/caption_data.py: tags padded to 4 (commented
    # out there, as is modules/transformer_encoder.py TagsEncoder: embedding + Norm)
    assert m.label_smoothing == 0.1 and m.unlikelihood  # models/transformer.py build_loss:
    # metrics/criterion.py UnlikelihoodLoss(0.1, ...)
    assert c.eval.beam_size == 1  # models/transformer.py evaluate: decoding='greedy'
    assert c.data.max_frames == 40 and c.data.max_tokens == 150  # readers/caption_data.py
    ours = mcn.get_config("v1,beam,plain_loss")
    assert ours.eval.beam_size == 5 and not ours.model.unlikelihood
    assert ours.model.label_smoothing == 0.0
