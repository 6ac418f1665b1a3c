"""Must show: feature files named, keyed and shaped exactly as the Movie101 release ships them
(clip/<movie>.mp4.npy.npz, s3d/<movie>-4.npz, frame_face/<movie>.mp4.npy.npz [T, 1536],
a portrait HDF5 role_id -> `features` [512] under both spellings) for a few generated movies;
v1 and v2 configs built on them reach the examples (non-empty role masks) and RMN trains.
Bad feature input: wrong width / old names are errors naming the file, an unreadable face
file keeps the movie without faces, a portrait HDF5 without a cast role is counted."""

from __future__ import annotations

import json
import pathlib

import h5py
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from configs.movie101 import mcn as mcn_config
from tfds_builders import movie101 as m101
from tfds_builders.movie101 import features, parsing, synthetic
from vnr.benchmarks.movie101 import mcn as task
from vnr.benchmarks.movie101 import mcn_data as data

SIZES = dict(train=2, val=1, test=1, seconds=40, roles=(3, 3), dims=(512, 1024, 512))


def write_release_v2(root: pathlib.Path) -> pathlib.Path:
    """Movie101v2/data layout + the release's features; portraits as protrait_face.hdf5 in
    the feature dir (the RMN README's and inference.py's spelling)."""
    synthetic.write_corpus(root, seed=3, sizes=SIZES, portrait_file="features/protrait_face.hdf5")
    return root


def write_release_v1(root: pathlib.Path, v2: pathlib.Path) -> pathlib.Path:
    """Movie101v1 layout (public_split, meta_anno, Movie101-N, narration_role) for the same
    generated movies and features; portraits at metadata/portrait_face.hdf5 (the reader's
    path); v2's metadata/meta beside it gives the genres."""
    (root / "metadata").mkdir(parents=True)
    for d in ("Movie101-N", "narration_role"):
        (root / d).mkdir()
    (root / "features").symlink_to(v2 / "features", target_is_directory=True)
    (root / "metadata" / "meta").symlink_to(v2 / "metadata" / "meta", target_is_directory=True)
    with h5py.File(v2 / "features" / "protrait_face.hdf5") as src, \
            h5py.File(root / "metadata" / "portrait_face.hdf5", "w") as dst:
        for rid in src:
            dst.create_group(rid).create_dataset("features", data=src[rid]["features"][()])
    split, anno = {"train": [], "val": [], "test": []}, {}
    rows: dict[str, list] = {s: [] for s in split}
    roles: dict[str, dict] = {s: {} for s in split}
    for p in sorted((v2 / "metadata" / "meta").glob("*.json")):
        mid, meta = p.stem, json.loads(p.read_text())
        s = parsing.movie_split(mid)
        split[s].append(mid)
        anno[mid] = {rid: {"name": r["actor"], "rolename": r["role"]}
                     for rid, r in meta["role"].items()}
        names = [r["role"] for r in meta["role"].values()]
        for line in (v2 / "narration" / "short-71k-en" / f"{mid}.txt").read_text().splitlines():
            a, b, text, _ = parsing.parse_v2_line(line)
            plain, ptr, _, _ = parsing.resolve_roles(text, names)
            rows[s].append({"movie_id": mid, "start_time": int(a), "end_time": int(b),
                            "content": plain})
            roles[s][str(len(roles[s]))] = {"movie_id": mid, "sentences": [ptr],
                                            "timestamps": [[str(int(a)), str(int(b))]]}
    (root / "public_split.json").write_text(json.dumps(split))
    (root / "metadata" / "meta_anno.json").write_text(json.dumps(anno))
    for s in split:
        (root / "Movie101-N" / f"{s}.json").write_text(json.dumps(rows[s]))
        (root / "narration_role" / f"{s}.json").write_text(json.dumps(roles[s]))
    return root


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> dict[str, pathlib.Path]:
    base = tmp_path_factory.mktemp("release")
    v2 = write_release_v2(base / "Movie101v2" / "data")
    return {"v2": v2, "v1": write_release_v1(base / "Movie101v1", v2), "data": base / "tfds"}


def _config(release, version: str):
    c = mcn_config.get_config(f"smoke,{version}" + (",en" if version == "v2" else ""))
    c.data.update(data_dir=str(release["data"]), manual_dir=str(release[version]),
                  vocab_size=64, max_roles=4)
    c.progress = False
    return c


@pytest.mark.e2e
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_release_features_reach_examples_and_rmn_trains(release, version, caplog) -> None:
    c = _config(release, version)
    assert (c.data.frame_dim, c.data.face_dim) == (1536, 512)  # from the BuilderConfig
    caplog.set_level("INFO")
    data.prepare(c.data)
    movie = m101.data_source(c.data.movies_config, "train", c.data.data_dir, c.data.manual_dir)[0]
    assert movie["clip"].shape == (40, 512) and movie["s3d"].shape == (40, 1024)
    assert movie["face"].shape == (40, 3, 512) and movie["portrait_face_mask"].all()
    if version == "v1":
        assert movie["genre"]  # from v2's metadata/meta for the same movie id
    cov = data.check(c.data)
    assert all(v["with_faces"] == v["with_portraits"] == v["used"] == v["narrations"] > 0
               for v in cov.values())
    assert "with frame faces" in caplog.text
    model = task.make_model(c, nnx.Rngs(0))
    opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
    it = iter(task.train_data(c, 4, 0, 1))

    @nnx.jit
    def step(model, opt, batch):
        (loss, aux), g = nnx.value_and_grad(
            lambda m: task.loss_fn(c, m, batch, nnx.Rngs(0)), has_aux=True)(model)
        opt.update(model, g)
        return loss

    losses = []
    for _ in range(3):
        batch = next(it)
        assert batch["role_mask"].any(1).all() and np.abs(batch["faces"]).sum() > 0
        assert (batch["targets"] >= c.data.vocab_size).any()  # pointer targets present
        losses.append(float(step(model, opt, {k: jnp.asarray(v) for k, v in batch.items()})))
    assert np.isfinite(losses).all()


def _movies(root: pathlib.Path) -> list[str]:
    return sorted(p.stem for p in (root / "metadata" / "meta").glob("*.json"))


def test_bad_feature_files_are_errors_or_counted(tmp_path: pathlib.Path) -> None:
    import collections

    root = synthetic_release(tmp_path / "r")
    mids = _movies(root)
    path, vecs = features.read_portraits(root)
    assert path == root / "metadata" / "portrait_face.hdf5"
    meta = json.loads((root / "metadata" / "meta" / f"{mids[0]}.json").read_text())
    rids = list(meta["role"]) + ["6500000000000000000"]  # a cast role absent from the HDF5
    skips: collections.Counter = collections.Counter()
    out = features.read_movie_features(root, mids[0], rids, vecs, skips, path)
    assert out["portrait_face_mask"].tolist() == [True] * (len(rids) - 1) + [False]
    assert skips["kept_portrait_missing_role"] == 1
    # an unreadable face file: CLIP/S3D kept, counted as kept without faces
    (root / "features" / "frame_face" / f"{mids[1]}.mp4.npy.npz").write_bytes(b"PK\x03\x04 cut")
    skips.clear()
    out = features.read_movie_features(root, mids[1], rids[:1], vecs, skips, path)
    assert len(out["clip"]) == 40 and out["face"].size == 0
    assert skips["kept_without_faces"] == 1 and skips["unreadable_face_file"] == 1
    # wrong width: an error naming the file and the layout
    f = root / "features" / "frame_face" / f"{mids[2]}.mp4.npy.npz"
    np.savez(f, features=np.zeros((40, 1000), np.float16))
    with pytest.raises(features.FeatureLayoutError, match=f"{f.name}.*width 1000.*3 x 16"):
        features.read_movie_features(root, mids[2], rids[:1], vecs, skips, path)
    np.savez(f, feats=np.zeros((40, 48), np.float16))
    with pytest.raises(features.FeatureLayoutError, match="no `features`"):
        features.read_movie_features(root, mids[2], rids[:1], vecs, skips, path)
    # the pre-release layout (frame_face/<movie>.npz): an error, not a silent miss
    f.rename(f.parent / f"{mids[2]}.npz")
    with pytest.raises(features.FeatureLayoutError, match=r"frame_face.*\.mp4\.npy\.npz"):
        features.read_movie_features(root, mids[2], rids[:1], vecs, skips, path)
    with h5py.File(path, "a") as h:
        h.create_dataset("6599999999999999999", data=np.zeros((2, 3)))
    with pytest.raises(features.FeatureLayoutError, match="not a vector"):
        features.read_portraits(root)


def synthetic_release(root: pathlib.Path) -> pathlib.Path:
    synthetic.write_corpus(root, seed=4, sizes=dict(SIZES, dims=(16, 16, 16)))
    return root


def test_pointer_run_without_portraits_stops(tmp_path: pathlib.Path) -> None:
    root = synthetic_release(tmp_path / "r")
    (root / "metadata" / "portrait_face.hdf5").unlink()
    c = mcn_config.get_config("smoke,v2,en")
    c.data.update(data_dir=str(tmp_path / "tfds"), manual_dir=str(root), vocab_size=32)
    c.data.frame_dim, c.data.face_dim = 32, 16
    data.prepare(c.data)
    with pytest.raises(ValueError, match="pointer=True but no train narration has a portrait"):
        data.check(c.data)
    summary = json.loads((pathlib.Path(m101.prepare("v2_movies", c.data.data_dir, root,
                                                    build=False).data_dir)
                          / "build_summary.json").read_text())
    assert summary["skipped"]["kept_without_portraits"] == 4
