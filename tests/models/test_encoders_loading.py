"""Loading encoders: sharded placement, bad checkpoints, offline hub ids."""

import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

pytest.importorskip("transformers")

from vnr.models import encoders  # noqa: E402
from vnr.models.encoders import loading, testing  # noqa: E402

RULES = dict(encoders.DEFAULT_RULES)


@pytest.fixture
def mesh():
    return jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def check_shardings(model, mesh) -> int:
    """Every parameter sits on the mesh with the spec its logical names give; returns #sharded."""
    sharded = 0
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        names = loading.var_names(var)
        assert len(names) == var.get_value().ndim, (path, names)
        want = PartitionSpec(*(RULES.get(n) if n else None for n in names))
        got = var.get_value().sharding
        assert got == NamedSharding(mesh, want), (path, names, got)
        sharded += any(want)
    return sharded


@pytest.mark.parametrize("arch", ["bert", "clip-p16"])
def test_sharded_load_matches_rules_and_outputs(arch, mesh, tmp_path):
    testing.write_tiny_checkpoint(arch, tmp_path, "msgpack")
    model, _, cfg = encoders.load_pretrained(tmp_path, mesh=mesh)
    assert check_shardings(model, mesh) > 0
    plain, _, _ = encoders.load_pretrained(tmp_path)
    if arch == "bert":
        ids = jnp.array([[5, 6, 7, 8, 3, 0, 0, 0]] * 4)
        fwd = nnx.jit(lambda m: m(ids, (ids > 0).astype(jnp.int32)).last_hidden_state)
    else:
        img = jnp.asarray(np.random.default_rng(0).normal(size=(4, 32, 32, 3)), jnp.float32)
        fwd = nnx.jit(lambda m: m.encode_image(img).pooled)
    with jax.set_mesh(mesh):
        a = fwd(model)
    np.testing.assert_allclose(np.asarray(a), np.asarray(fwd(plain)), atol=1e-5)


def test_sharded_scratch_create(mesh):
    model, _, _ = encoders.create("scratch:bert-tiny", rngs=nnx.Rngs(0), mesh=mesh)
    assert check_shardings(model, mesh) > 0


def test_sharding_rules_and_fallback(mesh):
    assert encoders.logical_to_mesh(("vocab", "embed")) == PartitionSpec("model", None)
    assert encoders.logical_to_mesh(("embed", "mlp"), [("embed", "data")]) == PartitionSpec(
        "data", None
    )
    # 95 rows cannot be split over 2 devices: replicated rather than failing
    assert encoders.sharding_for(("vocab", "embed"), (95, 32), mesh).spec == PartitionSpec(
        None, None
    )
    # one mesh axis per spec
    got = encoders.sharding_for(("heads", "mlp"), (32, 64), mesh)
    assert got.spec == PartitionSpec("model", None)


def rewrite(directory, fn):
    path = directory / "model.safetensors"
    tensors = fn(dict(load_file(str(path))))
    save_file(tensors, str(path), metadata={"format": "pt"})


def test_missing_tensor_is_named(tmp_path):
    testing.write_tiny_checkpoint("bert", tmp_path, "pt-safetensors")
    name = "encoder.layer.1.output.dense.weight"
    rewrite(tmp_path, lambda t: {k: v for k, v in t.items() if k != name})
    with pytest.raises(encoders.CheckpointError, match=f"missing tensor '{name}'"):
        encoders.load_pretrained(tmp_path)


def test_wrong_shape_names_tensor_and_both_shapes(tmp_path):
    testing.write_tiny_checkpoint("bert", tmp_path, "pt-safetensors")
    name = "encoder.layer.0.intermediate.dense.weight"  # (64, 32) in PyTorch layout
    rewrite(tmp_path, lambda t: {**t, name: np.zeros((48, 32), np.float32)})
    with pytest.raises(encoders.CheckpointError) as err:
        encoders.load_pretrained(tmp_path)
    msg = str(err.value)
    assert name in msg and "(48, 32)" in msg and "(32, 64)" in msg, msg


def test_unused_tensor_is_an_error_but_heads_and_prefix_are_fine(tmp_path):
    testing.write_tiny_checkpoint("bert", tmp_path, "pt-safetensors")
    extra = np.zeros((3,), np.float32)
    rewrite(
        tmp_path,
        lambda t: {
            **{f"bert.{k}": v for k, v in t.items()},
            "cls.predictions.bias": extra,
            "bert.embeddings.position_ids": extra,
        },
    )
    model, _, _ = encoders.load_pretrained(tmp_path)  # BertForPreTraining-style names load
    assert isinstance(model, encoders.BertModel)
    rewrite(tmp_path, lambda t: {**t, "bert.encoder.extra.weight": extra})
    with pytest.raises(encoders.CheckpointError, match="unused tensor 'bert.encoder.extra.weight'"):
        encoders.load_pretrained(tmp_path)
    model, _, _ = encoders.load_pretrained(tmp_path, ignore_unused=["encoder.extra"])


def test_mismatched_architecture(tmp_path):
    testing.write_tiny_checkpoint("bert", tmp_path, "msgpack")
    testing.tiny_config("albert").save_pretrained(tmp_path)  # albert config, bert weights
    with pytest.raises(encoders.CheckpointError) as err:
        encoders.load_pretrained(tmp_path)
    msg = str(err.value)
    assert "missing tensor" in msg and "unused tensor" in msg
    assert "embeddings.word_embeddings.embedding" in msg and "(96, 16)" in msg, msg
    conf = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**conf, "model_type": "gpt2"}))
    with pytest.raises(encoders.CheckpointError, match="unsupported architecture"):
        encoders.load_pretrained(tmp_path)


def test_no_weights_file(tmp_path):
    testing.tiny_config("bert").save_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="no model.safetensors or flax_model.msgpack"):
        encoders.load_pretrained(tmp_path)


def test_hub_id_offline_fails_fast_with_advice(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("VNR_ENCODERS_DIR", str(tmp_path / "encoders"))
    t0 = time.monotonic()
    with pytest.raises(FileNotFoundError) as err:
        encoders.load_pretrained("clip-vit-base-patch32")
    assert time.monotonic() - t0 < 30
    msg = str(err.value)
    assert "openai/clip-vit-base-patch32" in msg and "huggingface-cli download" in msg
    assert str(tmp_path / "encoders" / "clip-vit-base-patch32") in msg
    with pytest.raises(FileNotFoundError, match="no checkpoint directory"):
        encoders.load_pretrained(str(tmp_path / "nowhere"))


def test_named_encoder_from_encoders_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VNR_ENCODERS_DIR", str(tmp_path))
    testing.write_tiny_checkpoint("albert", tmp_path / "albert-base-v2", "flax-safetensors")
    model, _, cfg = encoders.create("albert-base-v2", rngs=nnx.Rngs(0))
    assert isinstance(model, encoders.AlbertModel) and cfg.embedding_size == 16


def test_bf16_and_sharded_safetensors(tmp_path):
    from safetensors.flax import save_file as save_jax

    ref_dir, bf_dir, split_dir = tmp_path / "ref", tmp_path / "bf16", tmp_path / "split"
    testing.write_tiny_checkpoint("bert", ref_dir, "pt-safetensors")
    tensors = load_file(str(ref_dir / "model.safetensors"))
    for d in (bf_dir, split_dir):
        d.mkdir()
        (d / "config.json").write_text((ref_dir / "config.json").read_text())
    bf16 = {k: jnp.asarray(v, jnp.bfloat16) for k, v in tensors.items()}
    save_jax(bf16, str(bf_dir / "model.safetensors"), metadata={"format": "pt"})
    names = sorted(tensors)
    shards = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    for fname, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(split_dir / fname), metadata={"format": "pt"})
    index = {"weight_map": {k: f for f, keys in shards.items() for k in keys}}
    (split_dir / "model.safetensors.index.json").write_text(json.dumps(index))

    ids = jnp.array([[5, 6, 7, 8, 3]])
    fwd = nnx.jit(lambda m: m(ids).last_hidden_state)
    ref = fwd(encoders.load_pretrained(ref_dir)[0])
    np.testing.assert_array_equal(fwd(encoders.load_pretrained(split_dir)[0]), ref)
    model = encoders.load_pretrained(bf_dir)[0]
    assert model.embeddings.word_embeddings.embedding.get_value().dtype == jnp.float32
    np.testing.assert_allclose(fwd(model), ref, atol=0.1)
