"""`vnr.models.rng.rngs` draws what `nnx.Rngs` draws, eagerly and under a trace, and keeps
its counters concrete inside the trace (what makes tracing a model linear in its size)."""

import jax
import numpy as np
from flax import nnx
from transformers import BertConfig

from vnr import sharding
from vnr.models import rng
from vnr.models.encoders.bert import BertModel

CFG = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=16)


def _flat(state: nnx.State) -> dict:
    out = {}
    for k, v in nnx.to_flat_state(state):
        x = v[...]
        out[k] = np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(
            x.dtype, jax.dtypes.prng_key) else x)
    return out


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=str(k))


def test_the_same_parameters_and_streams_as_nnx_rngs_eagerly_and_jitted():
    _same(_flat(nnx.state(BertModel(CFG, rngs=nnx.Rngs(3)))),
          _flat(nnx.state(BertModel(CFG, rngs=rng.rngs(3)))))
    mesh = sharding.make_mesh((1, 1), devices=jax.devices()[:1])
    got = [_flat(sharding.create_sharded(lambda r=r: BertModel(CFG, rngs=r(3)), mesh, [])[1])
           for r in (nnx.Rngs, rng.rngs)]
    _same(*got)
    two = rng.rngs(params=jax.random.key(1), dropout=jax.random.key(2))
    ref = nnx.Rngs(params=jax.random.key(1), dropout=jax.random.key(2))
    for _ in range(3):  # several draws of each stream, forks and splits too
        for stream in ("params", "dropout"):
            np.testing.assert_array_equal(jax.random.key_data(getattr(two, stream)()),
                                          jax.random.key_data(getattr(ref, stream)()))
    np.testing.assert_array_equal(jax.random.key_data(two.params.fork()()),
                                  jax.random.key_data(ref.params.fork()()))


def test_counters_stay_concrete_inside_a_trace():
    seen = []

    def build():
        r = rng.rngs(0)
        BertModel(CFG, rngs=r)
        seen.append(r.default.count[...])
        return r.default.key[...]

    jax.jit(build)()
    assert not isinstance(seen[0], jax.core.Tracer) and int(seen[0]) > 10


def test_keys_from_a_seed_are_constants_of_the_trace_and_traced_keys_stay_traced():
    """Seeded draws fold in outside the trace (no threefry per parameter in the program);
    a key that is an input of the trace is folded in the trace, to the same values."""
    seen = []

    def draw(key):
        a, b = rng.rngs(5).default(), rng.rngs(key).default()
        seen.extend([a, b])
        return a, b

    got = jax.jit(draw)(jax.random.key(5))
    assert not isinstance(seen[0], jax.core.Tracer) and isinstance(seen[1], jax.core.Tracer)
    want = jax.random.key_data(nnx.Rngs(5).default())
    for k in got:
        np.testing.assert_array_equal(jax.random.key_data(k), want)


def test_a_tower_built_inside_a_traced_init_is_traced_through():
    """`loading.instantiate` under a trace with a concrete key (what a seeded `rng.rngs`
    now draws there) traces the tower's random init into the outer program instead of
    compiling and running it on its own; the values are those of a top-level instantiate."""
    from vnr.models.encoders import loading

    ctor = lambda r: BertModel(CFG, rngs=r)  # noqa: E731

    def build():
        model = loading.instantiate(ctor, None, key=rng.rngs(4).params())
        return nnx.state(model, nnx.Param)

    assert "random_bits" in str(jax.make_jaxpr(build)())  # drawn in the program itself
    top = nnx.state(loading.instantiate(ctor, None, key=rng.rngs(4).params()), nnx.Param)
    _same(_flat(jax.jit(build)()), _flat(top))
