"""Sc2St rounds benchmark: `python -m bench sc2st [--batch 32 --fusion sa]`.

Side by side on the same model and batch (the default `configs/sc2st/main.py`
sizes, 100 candidates, random inputs): storyboard-rounds per second of

* evaluation: all 9 rounds (t = 2..10) in one jit with `lax.scan` over
  `StoryboardModel.round_step`, vs a Python loop calling the jitted `round_step`
  once per round (the encoders run once, jitted, in both);
* training (loss, exact gradient through all rounds, AdamW update): one jit with
  `lax.scan`, vs a Python loop of jitted per-round forward steps followed by
  jitted per-round backward steps (`jax.vjp` of `round_step`, recomputing the
  round) and one jitted update. The two gradients are compared (max abs diff).

Dropout is off in both so they compute the same numbers.
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import flags
from flax import nnx

from bench.timing import wall_times
from vnr import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _config(fusion: str):
    spec = importlib.util.spec_from_file_location("sc2st_cfg", ROOT / "configs/sc2st/main.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(fusion)


def _batch(cfg, b: int, c: int, seed: int = 0) -> dict[str, jax.Array]:
    rng = np.random.default_rng(seed)
    d, n, t = cfg.data.feature_dim, cfg.data.length, cfg.data.max_tokens
    return {"tokens": jnp.asarray(rng.integers(2, cfg.data.vocab_size, (b, n, t)), jnp.int32),
            "features": jnp.asarray(rng.normal(size=(b, n, d)), jnp.float32),
            "cands": jnp.asarray(rng.normal(size=(b, n - 1, c, d)), jnp.float32),
            "answer": jnp.asarray(rng.integers(0, c, (b, n - 1)), jnp.int32)}


def _ce(scores: jax.Array, answer: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(scores, answer).mean()


def main(argv: list[str]) -> None:
    from vnr.benchmarks.sc2st.model import TRAINED

    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_integer("batch", 32, "storyboards per batch", lower_bound=1,
                             flag_values=fv)
        flags.DEFINE_integer("candidates", 100, "candidates per round", lower_bound=1,
                             flag_values=fv)
        flags.DEFINE_enum("fusion", "sa", TRAINED, "the model", flag_values=fv)
        flags.DEFINE_integer("repeats", 10, "timed runs", lower_bound=1, flag_values=fv)

    a = cli.parse(argv[1:], "python -m bench sc2st", __doc__, define)

    from vnr.benchmarks.sc2st import task

    cfg = _config(a.fusion)
    model = task.make_model(cfg, nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)  # rest: rng counters

    def merge(st):
        return nnx.merge(graphdef, st, rest)

    batch = _batch(cfg, a.batch, a.candidates)
    rounds = cfg.data.length - 1
    tx = optax.adamw(1e-3)
    opt = tx.init(params)
    n_rounds = a.batch * rounds
    print(f"== Sc2St rounds: fusion {a.fusion}, batch {a.batch} storyboards x {rounds} rounds, "
          f"{a.candidates} candidates, width {cfg.model.width}, {jax.devices()[0].platform} ==")

    # ------------------------------------------------------------------ evaluation
    eval_scan = jax.jit(lambda st, bt: merge(st)(bt))
    prep = jax.jit(lambda st, bt: merge(st).prepare(bt))
    step = jax.jit(lambda st, carry, x: merge(st).round_step(carry, x))

    def eval_loop():
        carry, xs = prep(params, batch)
        out = []
        for r in range(rounds):
            carry, s = step(params, carry, jax.tree.map(lambda v, r=r: v[r], xs))
            out.append(s)
        return jnp.stack(out, 1)

    np.testing.assert_allclose(eval_scan(params, batch), eval_loop(), rtol=2e-4, atol=2e-4)
    t_scan = float(np.median(wall_times(lambda: eval_scan(params, batch), a.repeats)))
    t_loop = float(np.median(wall_times(eval_loop, a.repeats)))
    print(f"eval   lax.scan    : {n_rounds / t_scan:10.1f} rounds/s ({1e3 * t_scan:.1f} ms/batch)")
    print(f"eval   Python loop : {n_rounds / t_loop:10.1f} rounds/s ({1e3 * t_loop:.1f} ms/batch)")
    print(f"eval   scan / loop : {t_loop / t_scan:.2f}x")

    # ------------------------------------------------------------------ training
    def loss_scan(st, bt):
        return _ce(merge(st)(bt), bt["answer"])

    @jax.jit
    def train_scan(st, o, bt):
        loss, g = jax.value_and_grad(loss_scan)(st, bt)
        upd, o = tx.update(g, o, st)
        return optax.apply_updates(st, upd), o, loss, g

    def round_loss(st, carry, x, ans):
        carry, s = merge(st).round_step(carry, x)
        return carry, _ce(s, ans) / rounds

    fwd = jax.jit(round_loss)

    @jax.jit
    def bwd(st, carry, x, ans, g_carry):
        _, vjp = jax.vjp(lambda s_, c_, x_: round_loss(s_, c_, x_, ans), st, carry, x)
        return vjp((g_carry, jnp.ones(())))

    @jax.jit
    def bwd_prep(st, bt, g_carry, g_xs):
        _, vjp = jax.vjp(lambda s_: merge(s_).prepare(bt), st)
        return vjp((g_carry, g_xs))[0]

    @jax.jit
    def update(st, o, grads):
        upd, o = tx.update(grads, o, st)
        return optax.apply_updates(st, upd), o

    def train_loop(st, o, bt):
        carry, xs = prep(st, bt)
        carries, loss = [carry], 0.0
        x_r = [jax.tree.map(lambda v, r=r: v[r], xs) for r in range(rounds)]
        for r in range(rounds):
            carry, lr = fwd(st, carry, x_r[r], bt["answer"][:, r])
            carries.append(carry)
            loss = loss + lr
        g_carry = jax.tree.map(jnp.zeros_like, carry)
        g_st, g_x = None, [None] * rounds
        for r in reversed(range(rounds)):
            gs, g_carry, g_x[r] = bwd(st, carries[r], x_r[r], bt["answer"][:, r], g_carry)
            g_st = gs if g_st is None else jax.tree.map(jnp.add, g_st, gs)
        g_xs = jax.tree.map(lambda *v: jnp.stack(v), *g_x)
        g_xs["r"] = jnp.zeros(rounds, jax.dtypes.float0)
        g_st = jax.tree.map(jnp.add, g_st, bwd_prep(st, bt, g_carry, g_xs))
        st, o = update(st, o, g_st)
        return st, o, loss, g_st

    _, _, l1, g1 = train_scan(params, opt, batch)
    _, _, l2, g2 = train_loop(params, opt, batch)
    diff = max(float(jnp.abs(x - y).max()) for x, y in zip(jax.tree.leaves(g1),
                                                             jax.tree.leaves(g2), strict=True))
    print(f"train  loss scan {float(l1):.5f} vs loop {float(l2):.5f}; "
          f"max |grad diff| {diff:.2e}")
    t_scan = float(np.median(wall_times(lambda: train_scan(params, opt, batch), a.repeats)))
    t_loop = float(np.median(wall_times(lambda: train_loop(params, opt, batch), a.repeats)))
    print(f"train  lax.scan    : {n_rounds / t_scan:10.1f} rounds/s ({1e3 * t_scan:.1f} ms/step)")
    print(f"train  Python loop : {n_rounds / t_loop:10.1f} rounds/s ({1e3 * t_loop:.1f} ms/step)")
    print(f"train  scan / loop : {t_loop / t_scan:.2f}x")
