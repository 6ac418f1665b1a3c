"""Checksummed checkpoints (vnr/checksums.py, vnr/checkpoint.py): every committed step carries
a manifest of its files, written after an async save completes; a restore verifies it and
names the step and the file. The trainer-level fall-back (resume from the previous step,
bit-exact) is tests/trainer/test_faults.py; two processes' shards, test_multihost.py."""

from __future__ import annotations

import json
import pathlib
import shutil

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from vnr import checkpoint, checksums, run_reader


class _Iterator:
    """The data-iterator interface a checkpoint saves (grain's get_state / set_state)."""

    def __init__(self, position: int = 0):
        self.position = position

    def get_state(self) -> dict:
        return {"position": self.position}

    def set_state(self, state: bytes) -> None:
        self.position = json.loads(state)["position"]

    def start_prefetch(self) -> None:
        pass


def _state(seed: int, features: int = 3) -> nnx.State:
    model = nnx.Linear(4, features, rngs=nnx.Rngs(seed))
    return nnx.state((model, nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)))


def _shardings(state: nnx.State):
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree.map(lambda _: one, state)


@pytest.fixture
def run(tmp_path) -> pathlib.Path:
    """A workdir with async checkpoints at steps 1 and 2 (other parameters each)."""
    with checkpoint.manager(tmp_path / "checkpoints", keep=3) as mgr:
        for step in (1, 2):
            checkpoint.save(mgr, step, _state(step), _Iterator(10 * step))
        mgr.wait_until_finished()
    return tmp_path


def _largest(step_dir: pathlib.Path) -> pathlib.Path:
    return max((p for p in (step_dir / "state").rglob("*")
                if p.is_file() and p.name != checksums.MANIFEST), key=lambda p: p.stat().st_size)


def _flip(path: pathlib.Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_manifest_names_each_kind_of_damage(tmp_path):
    root = tmp_path / "item"
    (root / "d").mkdir(parents=True)
    for i, size in enumerate((10, 300, 7000)):
        (root / "d" / f"f{i}").write_bytes(bytes(range(256)) * (size // 256) + b"x" * (size % 256))
    files = checksums.write(root)
    assert sorted(files) == ["d/f0", "d/f1", "d/f2"] and files["d/f2"][0] == 7000
    checksums.verify(root)

    def damaged(how) -> str:
        copy = tmp_path / how.__name__
        shutil.copytree(root, copy)
        how(copy / "d" / "f1")
        with pytest.raises(checksums.Mismatch) as e:
            checksums.verify(copy)
        return str(e.value)

    assert damaged(_flip) == "d/f1 has other bytes than were written (sha256 differs)"
    assert damaged(pathlib.Path.unlink) == "d/f1 is missing"
    assert damaged(lambda p: p.write_bytes(p.read_bytes()[:100])) == \
        "d/f1 has 100 bytes, 300 were written"
    # Hashes split over processes: f1 is process 1's of 2 (every process checks sizes).
    shutil.copytree(root, tmp_path / "split")
    _flip(tmp_path / "split" / "d" / "f1")
    checksums.verify(tmp_path / "split", part=0, parts=2)
    with pytest.raises(checksums.Mismatch, match="d/f1"):
        checksums.verify(tmp_path / "split", part=1, parts=2)
    (tmp_path / "split" / checksums.MANIFEST).write_text("{not json")
    with pytest.raises(checksums.Mismatch, match=f"{checksums.MANIFEST} is unreadable"):
        checksums.verify(tmp_path / "split")
    with pytest.raises(FileNotFoundError):
        checksums.verify(tmp_path / "d_without_manifest")


def test_every_committed_step_carries_its_manifest(run):
    for step in (1, 2):
        step_dir = run / "checkpoints" / str(step)
        for item in checkpoint.ITEMS:
            listed = json.loads((step_dir / item / checksums.MANIFEST).read_text())["files"]
            on_disk = {p.relative_to(step_dir / item).as_posix()
                       for p in (step_dir / item).rglob("*") if p.is_file()}
            # Everything but the manifest and the commit marker written after it.
            assert set(listed) == on_disk - {checksums.MANIFEST, "commit_success.txt"}
        assert checkpoint.verify_step(step_dir, whole=True)


def test_restore_latest_moves_a_damaged_step_aside_and_names_the_file(run):
    step2 = run / "checkpoints" / "2"
    bad = _largest(step2)
    _flip(bad)
    warnings: list[str] = []
    it = _Iterator()
    with checkpoint.manager(run / "checkpoints") as mgr:
        step, state = checkpoint.restore_latest(mgr, _state(0), _shardings(_state(0)), it,
                                                warn=warnings.append)
    assert step == 1 and it.position == 10
    want = jax.tree.leaves(_state(1))
    for a, b in zip(jax.tree.leaves(state), want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    name = bad.relative_to(step2).as_posix()
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].startswith(f"checkpoint step 2 in {run / 'checkpoints'} is unreadable "
                                  f"({name} has other bytes than were written")
    aside = next((run / "checkpoints").glob("corrupt-2-*"))
    assert name in (aside / "restore_error.process0.txt").read_text()
    assert checkpoint.good_steps(run / "checkpoints") == [1]


def test_restore_of_a_named_step_verifies_it(run):
    """`restore` itself verifies (evaluation reads a chosen step, not the newest)."""
    bad = _largest(run / "checkpoints" / "1")
    bad.unlink()
    with checkpoint.manager(run / "checkpoints") as mgr, pytest.raises(
            checkpoint.CorruptCheckpoint,
            match=rf"^checkpoint step 1 in {run / 'checkpoints'}: "
                  rf"{bad.relative_to(run / 'checkpoints' / '1')} is missing$"):
        checkpoint.restore(mgr, 1, _state(0), _shardings(_state(0)), None)


def test_a_step_without_manifest_restores_with_a_warning(run):
    for item in checkpoint.ITEMS:
        (run / "checkpoints" / "2" / item / checksums.MANIFEST).unlink()
    warnings: list[str] = []
    with checkpoint.manager(run / "checkpoints") as mgr:
        step, _ = checkpoint.restore_latest(mgr, _state(0), _shardings(_state(0)), _Iterator(),
                                            warn=warnings.append)
    assert step == 2 and warnings == [f"checkpoint step 2 in {run / 'checkpoints'} has no "
                                      "checksums (written before they were recorded); "
                                      "restored unverified"]


def test_another_model_is_an_error_naming_the_checkpoint(run):
    other = _state(0, features=5)
    with checkpoint.manager(run / "checkpoints") as mgr, pytest.raises(
            checkpoint.IncompatibleCheckpoint,
            match=rf"checkpoint step 2 in {run / 'checkpoints'}: checkpoint parameter "
                  r"0\.bias has shape \(3,\), model expects \(5,\)"):
        checkpoint.restore_latest(mgr, other, _shardings(other), None)


def test_restore_run_verifies_the_other_runs_checkpoint(run):
    step, params = run_reader.restore_run(run)
    assert step == 2 and params["kernel"].shape == (4, 3)
    bad = _largest(run / "checkpoints" / "2")
    name = bad.relative_to(run / "checkpoints" / "2").as_posix()
    bad.write_bytes(bad.read_bytes()[:-1])
    with pytest.raises(checkpoint.CorruptCheckpoint,
                       match=rf"^init_from={run}: checkpoint step 2 \(.*/checkpoints/2\) is "
                             rf"corrupt: {name} has \d+ bytes, \d+ were written$"):
        run_reader.restore_run(run)
    # Without a manifest (written before they existed), a damaged file is still one line
    # naming the checkpoint, not TensorStore's page of spec.
    (run / "checkpoints" / "2" / "state" / checksums.MANIFEST).unlink()
    for p in (run / "checkpoints" / "2" / "state").rglob("d/*"):
        p.write_bytes(b"")
    with pytest.raises(checkpoint.CorruptCheckpoint) as e:
        run_reader.restore_run(run, key="workdir")
    assert str(e.value).startswith(f"workdir={run}: checkpoint step 2 (") and \
        " is unreadable: " in str(e.value) and "\n" not in str(e.value) and \
        len(str(e.value)) < 500


def test_short_error_keeps_the_gist_without_the_storage_spec():
    spec = "{" + ", ".join(f'"key{i}": {i}' for i in range(400)) + "}"
    error = ValueError(f'OUT_OF_RANGE: Error reading "w/.zarray": Requested byte range [0, 443) '
                       f"is not valid for value of size 100 [tensorstore_spec='{spec}'] "
                       "[source locations='tensorstore/kvstore/byte_range.cc:36']\nmore")
    assert checkpoint.short(error) == ('OUT_OF_RANGE: Error reading "w/.zarray": Requested '
                                       "byte range [0, 443) is not valid for value of size 100")
    assert checkpoint.short(ValueError(
        "Encountered error while reading array index: (slice(0, 4096, 1),). See full "
        "TensorStore details: <bound method spec of TensorStore({")) == (
        "Encountered error while reading array index: (slice(0, 4096, 1),).")
    assert len(checkpoint.short(ValueError("x" * 1000))) == 240
    assert checkpoint.short(KeyError()) == "KeyError"


@pytest.fixture
def selecting(tmp_path) -> pathlib.Path:
    """Checkpoints of a run selecting by `acc` (max): steps 1, 2, 3 at 0.9, 0.1, 0.5."""
    with checkpoint.manager(tmp_path / "checkpoints", 3, "acc") as mgr:
        for step, acc in ((1, 0.9), (2, 0.1), (3, 0.5)):
            checkpoint.save(mgr, step, _state(step), _Iterator(step), metrics={"acc": acc})
        mgr.wait_until_finished()
    return tmp_path / "checkpoints"


@pytest.mark.parametrize("damage", ["value", "bytes"])
def test_changed_metrics_are_a_named_warning_and_selection_falls_back(selecting, damage):
    """`<step>/metrics/metrics` (Orbax's item, what picks the best step) outside our item
    manifests: bytes replaced there would select step 2 ({"acc": 1.0}) or stop Orbax with a
    JSON traceback; instead the step is moved aside and step 1 (0.9) is selected."""
    path = selecting / "2" / "metrics" / "metrics"
    assert path.read_bytes() == b'{"acc": 0.1}'
    path.write_bytes(b'{"acc": 1.0}' if damage == "value" else b'{"acc"\xff 0.1}')
    with pytest.raises(checkpoint.CorruptCheckpoint, match=(
            rf"^checkpoint step 2 in {selecting} has unusable metrics \(metrics/metrics, "
            r"which selects the best step, (differs from|is unreadable).* move that step "
            r"directory aside to evaluate the others$")):
        checkpoint.reader(selecting, "acc")  # evaluation: one line naming it
    warnings: list[str] = []
    with checkpoint.manager(selecting, 3, "acc", warn=warnings.append) as mgr:
        assert checkpoint.best(mgr) == (1, {"acc": 0.9})
        assert mgr.all_steps() == [1, 3]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert warnings[0].startswith(f"checkpoint step 2 in {selecting} has unusable metrics "
                                  "(metrics/metrics, which selects the best step, ")
    assert ("differs from the metrics the step was saved with (data/vnr_metrics.json)"
            if damage == "value" else "is unreadable (UnicodeDecodeError") in warnings[0]
    assert warnings[0].endswith("selecting among the other steps")
    assert [p.name.split("-")[:2] for p in selecting.glob("corrupt-*")] == [["corrupt", "2"]]
    with checkpoint.reader(selecting, "acc") as mgr:  # the run's evaluation reads it now
        assert checkpoint.best(mgr) == (1, {"acc": 0.9})


def test_the_copy_of_the_metrics_is_in_the_data_manifest(selecting):
    """The copy the metrics are checked against is itself verified: changed there, the
    step's metrics are unusable too (never trusted by either file alone)."""
    copy = selecting / "2" / "data" / checkpoint.METRICS_COPY
    assert json.loads(copy.read_text()) == {"acc": 0.1}
    copy.write_text('{"acc": 1.0}')
    assert checkpoint.metrics_problem(selecting / "2") == (
        f"cannot be checked: data/{checkpoint.METRICS_COPY} has other bytes than were "
        "written (sha256 differs)")
    assert checkpoint.metrics_problem(selecting / "1") is None


def test_orbax_step_metadata_selects_nothing(selecting):
    """`_CHECKPOINT_METADATA` (rewritten by Orbax after our manifests, with the commit
    time) holds no metrics that select a step: replaced bytes or another `metrics` value
    there change neither the selection nor the restored state."""
    for step, edit in ((2, "metrics"), (1, "bytes")):
        path = selecting / str(step) / "_CHECKPOINT_METADATA"
        if edit == "metrics":
            meta = json.loads(path.read_text())
            assert meta["metrics"] == {}
            path.write_text(json.dumps({**meta, "metrics": {"acc": 5.0}}))
        else:
            _flip(path)
    warnings: list[str] = []
    with checkpoint.manager(selecting, 3, "acc", warn=warnings.append) as mgr:
        assert checkpoint.best(mgr) == (1, {"acc": 0.9})
        state = checkpoint.restore(mgr, 1, _state(0), _shardings(_state(0)), None)
    assert warnings == []
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(_state(1)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_restore_names_the_checkpoint_in_orbax_errors(run):
    """Without a manifest to catch it first, a damaged step is Orbax's / TensorStore's
    error: `restore` gives its gist in one line naming the step and the directory."""
    step1 = run / "checkpoints" / "1"
    for item in checkpoint.ITEMS:
        (step1 / item / checksums.MANIFEST).unlink()
    (step1 / "state" / "_METADATA").write_text("{not json")
    with checkpoint.manager(run / "checkpoints") as mgr, pytest.raises(
            checkpoint.CorruptCheckpoint) as e:
        checkpoint.restore(mgr, 1, _state(0), _shardings(_state(0)), None)
    assert str(e.value).startswith(f"checkpoint step 1 in {run / 'checkpoints'} is "
                                   "unreadable: ") and "\n" not in str(e.value), e.value
    other = _state(0, features=5)
    with checkpoint.manager(run / "checkpoints") as mgr, pytest.raises(
            checkpoint.IncompatibleCheckpoint, match=(
                rf"^checkpoint step 2 in {run / 'checkpoints'}: checkpoint parameter "
                r"0\.bias has shape \(3,\), model expects \(5,\)$")):
        checkpoint.restore(mgr, 2, other, _shardings(other), None)


class _Tower(nnx.Module):
    """A layer that keeps its own dropout stream, as the encoder towers do (a typed PRNG key
    in the state, saved as its key data)."""

    def __init__(self, rngs: nnx.Rngs):
        self.linear = nnx.Linear(4, 3, rngs=rngs)
        self.dropout = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.dropout(self.linear(x))


def test_a_state_holding_dropout_keys_restores_them(tmp_path):
    """A typed key is stored as its key data ([2] uint32 here), so the compatibility check
    compares that shape: such a run (Sc2St's text tower) resumed to an IncompatibleCheckpoint
    before. The key and its counter come back as saved, so dropout continues its stream."""
    model = _Tower(nnx.Rngs(params=0, dropout=7))
    model(np.ones((2, 4), np.float32))  # draws once: the counter moves
    state = nnx.state(model)
    with checkpoint.manager(tmp_path / "checkpoints", keep=3) as mgr:
        checkpoint.save(mgr, 1, state, _Iterator(3))
        mgr.wait_until_finished()
        fresh = nnx.state(_Tower(nnx.Rngs(params=1, dropout=99)))
        back = checkpoint.restore(mgr, 1, fresh, _shardings(fresh), _Iterator())
    want, got = state.to_pure_dict(), back.to_pure_dict()
    keys = [leaf for leaf in jax.tree.leaves(want)
            if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)]
    assert keys, "the state holds no typed key: the test no longer tests anything"
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            assert jax.dtypes.issubdtype(b.dtype, jax.dtypes.prng_key)
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_small_replicated_arrays_save_without_a_compile_per_replica(tmp_path):
    """Orbax writes a replicated array replica-parallel: each of the 8 replicas a slice along
    an axis they divide, one compiled slice program per array and replica (16 for this
    kernel and bias, 120 per save of a smoke model). Below
    `checkpoint.REPLICA_SLICE_MIN_BYTES` per replica one replica writes it whole, so saving
    a small state compiles nothing, and it restores as saved."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
    assert mesh.size == 8, "needs the suite's 8 simulated devices"
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    with checkpoint.manager(tmp_path / "warm", keep=1) as mgr:  # Orbax's own first-use work
        checkpoint.save(mgr, 1, jax.device_put(_state(0, features=8), replicated),
                        _Iterator())
        mgr.wait_until_finished()
    compiled: list[str] = []

    def listen(event: str, seconds: float, **kwargs) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(event)

    state = jax.device_put(_state(1, features=16), replicated)  # shapes not saved before
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        with checkpoint.manager(tmp_path / "checkpoints", keep=1) as mgr:
            checkpoint.save(mgr, 1, state, _Iterator())
            mgr.wait_until_finished()
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert not compiled, f"{len(compiled)} programs compiled to save a small replicated state"
    with checkpoint.manager(tmp_path / "checkpoints", keep=1) as mgr:
        back = checkpoint.restore(mgr, 1, state, jax.tree.map(lambda _: replicated, state),
                                  None)
    for a, b in zip(jax.tree.leaves(_state(1, features=16)), jax.tree.leaves(back),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_what_only_python_could_print_during_a_restore_goes_to_the_details(monkeypatch):
    """An exception raised where nobody can catch it (a failed Orbax read's coroutine,
    collected later; here a `__del__`) lands in the sink, collected before the hook returns
    once the block said its read failed, and stderr's hook is back afterwards. A block that
    did not fail pays no full collection (about 0.4 s in a process holding a model)."""
    import gc
    import sys

    collections, collect = [], gc.collect
    monkeypatch.setattr(gc, "collect", lambda: collections.append(collect()))
    with checkpoint.unraisable_into([]):
        pass
    assert collections == []

    class Raises:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the garbage collector frees it

        def __del__(self) -> None:
            raise ValueError("a read nobody awaited")

    before, sink = sys.unraisablehook, []
    with checkpoint.unraisable_into(sink) as failed:
        Raises()
        failed()
    assert sys.unraisablehook is before and len(collections) == 1
    assert len(sink) == 1 and "ValueError: a read nobody awaited" in sink[0]


def _restore_named_step(run: pathlib.Path) -> None:
    """`vnr.evaluate`'s read of its own run's named step (no manifest: nothing verifies it
    before Orbax reads)."""
    for item in checkpoint.ITEMS:
        (run / "checkpoints" / "1" / item / checksums.MANIFEST).unlink()
    with checkpoint.manager(run / "checkpoints") as mgr:
        checkpoint.restore(mgr, 1, _state(0), _shardings(_state(0)), None)


@pytest.mark.parametrize("read,patch", [
    (run_reader.restore_run, (run_reader.ocp.PyTreeCheckpointer, "restore")),
    (_restore_named_step, (checkpoint.ocp.CheckpointManager, "restore"))],
    ids=["another-run", "named-step"])
def test_a_failed_read_prints_nothing_more_than_its_one_line(run, monkeypatch, capfd, read,
                                                             patch):
    """`restore_run` (another run's step) or `restore` (a named step) on a damaged step: one
    CorruptCheckpoint line; the read's traceback and what Python could only print while the
    failed read is discarded (here a `__del__` in a cycle, as Orbax's abandoned coroutines)
    ride on the error's notes, not stderr."""
    import sys

    class Abandoned:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            raise ValueError("a read nobody awaited")

    def restore(self, *args, **kwargs):
        Abandoned()
        raise OSError("DATA_LOSS: Error reading shard 0 [tensorstore_spec='{...}']")

    monkeypatch.setattr(*patch, restore)
    hook = sys.unraisablehook
    with pytest.raises(checkpoint.CorruptCheckpoint) as e:
        read(run)
    assert str(e.value).endswith(" is unreadable: DATA_LOSS: Error reading shard 0")
    assert "\n" not in str(e.value) and e.value.gist == "DATA_LOSS: Error reading shard 0"
    notes = "\n".join(e.value.__notes__)
    assert "OSError: DATA_LOSS" in notes and "ValueError: a read nobody awaited" in notes
    assert e.value.__cause__ is None and sys.unraisablehook is hook
    assert "a read nobody awaited" not in capfd.readouterr().err
