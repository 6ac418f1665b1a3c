"""Same loss and gradients on every mesh; parameters land in their rule shardings."""

import functools

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from configs.moviepuzzle.main import get_config
from vnr import sharding
from vnr.benchmarks.moviepuzzle import pairwise as task
from vnr.models import encoders, layers

MESHES = [(1, 1), (8, 1), (4, 2), (2, 4)]


def _config():
    c = get_config("smoke")
    c.model.update(dropout=0.0, heads=4, width=32, mlp=64)  # divisible by 4-way model axis
    return c


def _batch(config, b=8, n=12, seed=0):
    rng = np.random.default_rng(seed)
    d = config.data
    n_real = rng.integers(5, n + 1, size=b)
    mask = np.arange(n)[None] < n_real[:, None]
    pos = np.stack([np.concatenate([rng.permutation(k), np.arange(k, n)]) for k in n_real])
    return {
        "frames": rng.integers(0, 255, (b, n, d.image_size, d.image_size, 3), dtype=np.uint8),
        "tokens": rng.integers(0, d.vocab_size, (b, n, d.max_tokens)).astype(np.int32),
        "mask": mask,
        "position": pos.astype(np.int32),
        "shot_id": np.zeros((b, n), np.int32),
        "scene_id": np.zeros((b, n), np.int32),
    }


@functools.cache
def _loss_and_grads_cached(mesh_shape):
    return _loss_and_grads(_config(), mesh_shape)


def _loss_and_grads(config, mesh_shape):
    devices = jax.devices()[: int(np.prod(mesh_shape))]
    mesh = sharding.make_mesh(mesh_shape, devices=devices)
    rules = [tuple(r) for r in config.sharding_rules]
    graphdef, state, shardings = sharding.create_sharded(
        lambda: task.make_model(config, nnx.Rngs(0)), mesh, rules)

    def f(state, batch):
        model = nnx.merge(graphdef, state)
        rngs = nnx.Rngs(dropout=jax.random.key(1))
        (loss, _), grads = nnx.value_and_grad(
            lambda m, r: task.loss_fn(config, m, batch, r), has_aux=True)(model, rngs)
        return loss, nnx.state(grads, nnx.Param)

    batch = sharding.global_batch(_batch(config), mesh)
    loss, grads = jax.jit(f, in_shardings=(shardings, sharding.batch_sharding(mesh)))(state, batch)
    return float(loss), jax.device_get(grads.to_pure_dict()), state, mesh


def test_same_loss_and_grads_on_all_meshes():
    ref_loss, ref_grads, _, _ = _loss_and_grads_cached(MESHES[0])
    for shape in MESHES[1:]:
        loss, grads, _, _ = _loss_and_grads_cached(shape)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, err_msg=str(shape))
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6),
                     grads, ref_grads)


def _make_on(mesh_shape, abstract=False):
    """`create_sharded` of the smoke model on a mesh: (graphdef, state, shardings, mesh)."""
    config = _config()
    mesh = sharding.make_mesh(mesh_shape)
    return (*sharding.create_sharded(lambda: task.make_model(config, nnx.Rngs(0)), mesh,
                                     [tuple(r) for r in config.sharding_rules], abstract), mesh)


_initialised_on = functools.cache(_make_on)  # the real init, shared by this file's tests


def test_parameters_follow_rules():
    """The init writes each parameter in its rule's sharding (no loss compiled for this)."""
    _, state, _, mesh = _initialised_on((4, 2))
    params = state.to_pure_dict()
    assert params["blocks"][0]["up"]["kernel"].sharding.spec == P(None, "model")
    assert params["blocks"][0]["down"]["kernel"].sharding.spec == P("model", None)
    assert params["blocks"][0]["q"]["kernel"].sharding.spec == P(None, "model")
    assert params["text"]["embed"]["embedding"].sharding.spec == P("model", None)
    assert params["ln"]["scale"].sharding.spec == P(None)
    assert params["blocks"][0]["up"]["kernel"].sharding.mesh.shape == mesh.shape


def test_abstract_state_has_the_shapes_and_shardings_of_the_real_one():
    """`abstract=True` (a state a checkpoint is restored into) compiles no init: shapes and
    dtypes of the real state, the same shardings."""
    _, real, real_sh, _ = _initialised_on((4, 2))
    _, shapes, shapes_sh, _ = _make_on((4, 2), abstract=True)
    pairs = zip(jax.tree.leaves(real), jax.tree.leaves(shapes), strict=True)
    assert all(isinstance(b, jax.ShapeDtypeStruct) and (a.shape, a.dtype) == (b.shape, b.dtype)
               for a, b in pairs)
    assert jax.tree.leaves(real_sh) == jax.tree.leaves(shapes_sh)


def test_random_init_lowers_threefry_as_a_gpu_kernel_and_restores_the_flag(monkeypatch):
    """A one-device init program (one device, or every array replicated) lowers threefry as
    one GPU kernel per draw (XLA took about 3 minutes to compile the unrolled rounds on an
    H200); a sharded one does not (the kernel has no sharding rule). jax reads the flag when
    lowering, not tracing; it is back to its value afterwards, also on error."""
    flag = "jax_threefry_gpu_kernel_lowering"
    start, seen, toggle = getattr(jax.config, flag), [], sharding.kernel_threefry

    def spy(on: bool = True):
        seen.append(on)
        return toggle(on)

    monkeypatch.setattr(sharding, "kernel_threefry", spy)
    rules = [tuple(r) for r in _config().sharding_rules]
    for shape in ((1, 1), (8, 1), (4, 2)):  # ("embed", "mlp"): split over "model" on (4, 2)
        mesh = sharding.make_mesh(shape, devices=jax.devices()[: int(np.prod(shape))])
        sharding.create_sharded(lambda: layers.dense(4, 8, ("embed", "mlp"), nnx.Rngs(0)),
                                mesh, rules)
        sharding.create_sharded(lambda: nnx.Linear(2, 3, rngs=nnx.Rngs(0)), mesh, rules,
                                abstract=True)  # compiles nothing
    assert seen == [True, True, False] and getattr(jax.config, flag) == start
    seen.clear()  # a pretrained tower's random init: the same decision
    for shape in ((8, 1), (4, 2)):
        mesh = sharding.make_mesh(shape)
        model, _, _ = encoders.create("scratch:bert-tiny", rngs=nnx.Rngs(0), mesh=mesh,
                                      num_hidden_layers=1, vocab_size=64)
        assert {x.sharding.mesh.devices.shape for x in jax.tree.leaves(nnx.state(model))} \
            == {shape}
    assert seen == [True, False] and getattr(jax.config, flag) == start
    # inside another transformation (bench/video counts FLOPs on nnx.eval_shape's model)
    shapes = nnx.eval_shape(lambda: encoders.create("scratch:bert-tiny", rngs=nnx.Rngs(0),
                                                    num_hidden_layers=1)[0])
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(nnx.state(shapes)))
    monkeypatch.undo()
    traced = jax.jit(lambda k: jax.random.normal(k, (4,))).trace(jax.random.key(0))
    with sharding.kernel_threefry():  # lowered for CUDA (here, on CPU): one FFI call a draw
        text = traced.lower(lowering_platforms=("cuda",)).as_text()
    assert "cu_threefry2x32_ffi" in text
    assert "cu_threefry2x32_ffi" not in traced.lower(lowering_platforms=("cuda",)).as_text()
    with pytest.raises(RuntimeError), sharding.kernel_threefry():
        raise RuntimeError
    assert getattr(jax.config, flag) == start


def test_bad_mesh_and_batch_fail_with_clear_errors():
    with pytest.raises(ValueError, match=r"mesh.shape \(3, 1\) needs 3 devices but there are 8"):
        sharding.make_mesh((3, 1))
    with pytest.raises(ValueError, match=r"mesh.shape \(-1, 3\) does not divide the 8 devices"):
        sharding.make_mesh((-1, 3))
    mesh = sharding.make_mesh((8, 1))
    with pytest.raises(ValueError, match=r"batch_size=12 is not divisible by the mesh's data axis"):
        sharding.check_batch_size(12, mesh)


def test_logical_to_spec_uses_each_mesh_axis_once():
    rules = [("mlp", "model"), ("heads", "model"), ("batch", "data")]
    assert sharding.logical_to_spec(("mlp", "heads"), rules) == P("model", None)
    assert sharding.logical_to_spec(("embed", "mlp"), rules) == P(None, "model")
    assert sharding.logical_to_spec(None, rules) == P()


def test_a_replicated_init_runs_on_one_device_with_the_values_of_a_sharded_one(monkeypatch):
    """Every array replicated (mesh (8, 1)): the init is one device's program, copied onto
    all 8, with the values of the init constrained onto the (4, 2) mesh's rule shardings."""
    config = _config()
    rules = [tuple(r) for r in config.sharding_rules]
    make = lambda: task.make_model(config, nnx.Rngs(0))  # noqa: E731
    constrained, constrain = [], jax.lax.with_sharding_constraint
    monkeypatch.setattr(jax.lax, "with_sharding_constraint",
                        lambda x, s: constrained.append(1) or constrain(x, s))
    _, split, _ = sharding.create_sharded(make, sharding.make_mesh((4, 2)), rules)
    assert constrained
    constrained.clear()
    _, whole, shardings = sharding.create_sharded(make, sharding.make_mesh((8, 1)), rules)
    assert not constrained
    for a, s in zip(jax.tree.leaves(whole), jax.tree.leaves(shardings), strict=True):
        assert a.sharding == s and s.is_fully_replicated and len(a.devices()) == 8
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(split), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
