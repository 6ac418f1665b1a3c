"""`rngs`: `nnx.Rngs` whose draw counters, and keys from a concrete seed, stay concrete
while a model is traced.

Each draw of an NNX RNG stream increments its counter (`count[...] += 1`), and NNX probes
the new value's `.sharding`. Under `jax.jit` or `nnx.eval_shape` the counter is a tracer,
whose `.sharding` raises an error whose message walks every equation traced so far (jax
0.10; removed upstream later): building a model under a trace is then quadratic in its
size (`nnx.eval_shape` of a 1024-wide BERT of 12 / 24 / 48 layers: 0.43 / 1.34 / 4.84 s,
against 0.17 / 0.31 / 0.59 s with these counters). Here the counter is kept and
incremented outside the trace (`jax.ensure_compile_time_eval`).

A stream made from a seed or a concrete key also folds its counter in there: a traced
init then gets each parameter's key as a constant instead of one threefry hash per
parameter, a smaller program (with `loading.instantiate`'s towers: XLA:CPU compile of the
init of a smoke Sc2St model with a BERT tower, and of HCMC with CLIP towers, at the suite's
optimisation level 0, -32 %). A key traced from an input (the train step's dropout key)
is folded in the trace as before. Threefry is integer arithmetic, so the draws, and every
initial value, are the same as `nnx.Rngs`' bit for bit (`tests/models/test_rng.py`).
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx


class CountedStream(nnx.RngStream):
    """An `nnx.RngStream` whose counter is a concrete array, also inside a trace."""

    def __init__(self, key: Any, *, tag: str):
        with jax.ensure_compile_time_eval():  # the counter's zeros: concrete
            super().__init__(key, tag=tag)

    def __call__(self) -> jax.Array:
        with jax.ensure_compile_time_eval():
            count = self.count[...]
            self.count[...] = count + 1
            return jax.random.fold_in(self.key[...], count)


def rngs(default: Any = None, **streams: Any) -> nnx.Rngs:
    """`nnx.Rngs(default, **streams)` with every stream a `CountedStream`."""
    with jax.ensure_compile_time_eval():
        out = nnx.Rngs(default, **streams)
    for tag, stream in list(vars(out).items()):
        if isinstance(stream, nnx.RngStream):
            setattr(out, tag, CountedStream(stream.key[...], tag=tag))
    return out
