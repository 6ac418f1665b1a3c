"""Per-movie, per-second features in the layout of the Movie101 release (RMN README,
`readers/caption_data.py`, `driver/inference.py` of yuezih/Movie101).

    <feature dir>/clip/<movie>.mp4.npy.npz        key `features` [T, 512]   CLIP
    <feature dir>/s3d/<movie>-4.npz               key `features` [T, 1024]  S3D
    <feature dir>/frame_face/<movie>.mp4.npy.npz  key `features` [T, 1536]  3 faces x 512 per
                                                  second, in detection-confidence order
    portrait HDF5: role_id -> group with dataset `features` [512] (upstream reads
                   `h5[role_id]['features']`; a bare [512] dataset is accepted too)

The feature dir is `<manual_dir>/features/` (or `feature/`, upstream's `data/feature`).
The portrait HDF5 is looked for at `<manual_dir>/metadata/portrait_face.hdf5` (the reader's
path), `<manual_dir>/metadata/protrait_face.hdf5` and `<feature dir>/{portrait,protrait}
_face.hdf5` (the README's and `inference.py`'s spelling); the first that exists is used.

A file that exists but does not match its layout (other key, rank or width, or a movie's
file under another name such as `frame_face/<movie>.npz`) raises `FeatureLayoutError`
naming the file and the expected layout. A file that cannot be read at all (truncated zip,
OS error) is counted: an unreadable face file keeps the movie's CLIP/S3D features
(`kept_without_faces`), an unreadable CLIP/S3D file keeps the movie without video features.
"""

from __future__ import annotations

import collections
import pathlib

import numpy as np

from tfds_builders import arrays, common

FACES = 3  # faces per second in frame_face (upstream: 3 x 512)
FEATURE_DIRS = ("features", "feature")
PORTRAIT_FILES = ("metadata/portrait_face.hdf5", "metadata/protrait_face.hdf5",
                  "{feat}/protrait_face.hdf5", "{feat}/portrait_face.hdf5")
LAYOUT = {
    "clip": "clip/<movie>.mp4.npy.npz with key `features` [T, 512] (CLIP, one row per second)",
    "s3d": "s3d/<movie>-4.npz with key `features` [T, 1024] (S3D, one row per second)",
    "face": "frame_face/<movie>.mp4.npy.npz with key `features` [T, 3 x D] (3 faces of D = "
            "512 per second, confidence order)",
    "portrait": "an HDF5 mapping role_id -> group with dataset `features` [512] (or a bare "
                "[512] dataset)",
}
FILES = {"clip": "clip/{m}.mp4.npy.npz", "s3d": "s3d/{m}-4.npz",
         "face": "frame_face/{m}.mp4.npy.npz"}


class FeatureLayoutError(common.ManualDirError):
    """A feature file or directory that exists but is not in the release's layout."""


def feature_dir(root: pathlib.Path) -> pathlib.Path | None:
    """`<manual_dir>/features` (or `feature`), None when neither exists."""
    for name in FEATURE_DIRS:
        if (root / name).is_dir():
            return root / name
    return None


def portrait_file(root: pathlib.Path) -> pathlib.Path | None:
    feat = feature_dir(root)
    for pattern in PORTRAIT_FILES:
        if "{feat}" in pattern and feat is None:
            continue
        p = root / pattern.format(feat=feat.name if feat else "")
        if p.is_file():
            return p
    return None


def read_portraits(root: pathlib.Path) -> tuple[pathlib.Path | None, dict[str, np.ndarray]]:
    """(the portrait HDF5 used, role_id -> [D] float32); ({}, None) when there is none. An
    old per-movie `portrait_face/` directory without an HDF5 is a FeatureLayoutError."""
    path = portrait_file(root)
    feat = feature_dir(root)
    if path is None:
        if feat is not None and (feat / "portrait_face").is_dir():
            raise FeatureLayoutError(
                f"{feat / 'portrait_face'}: per-movie portrait files are not the release's "
                f"layout; expected {LAYOUT['portrait']} at <manual_dir>/metadata/"
                "portrait_face.hdf5 or <features>/protrait_face.hdf5")
        return None, {}
    import h5py

    out: dict[str, np.ndarray] = {}
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise FeatureLayoutError(f"{path}: not a readable HDF5 file ({e}); expected "
                                 f"{LAYOUT['portrait']}") from None
    with f:
        for rid in f:
            node = f[rid]
            arr = node["features"] if isinstance(node, h5py.Group) and "features" in node \
                else node
            if not isinstance(arr, h5py.Dataset) or arr.size == 0 or \
                    max(arr.shape or (1,)) != arr.size:
                raise FeatureLayoutError(f"{path}: entry {rid!r} is not a vector; expected "
                                         f"{LAYOUT['portrait']}")
            try:
                vec = arrays.check(np.asarray(arr[()]).reshape(-1), f"{path}[{rid!r}]", (None,),
                                   store=np.float16)
            except arrays.ArrayError as e:  # complex / string / non-finite values
                raise FeatureLayoutError(f"{e}; expected {LAYOUT['portrait']}") from None
            out[str(rid)] = vec.astype(np.float32)
    dims = {v.shape[0] for v in out.values()}
    if len(dims) > 1:
        raise FeatureLayoutError(f"{path}: role vectors have different widths {sorted(dims)}; "
                                 f"expected {LAYOUT['portrait']}")
    return path, out


def empty_features() -> dict[str, np.ndarray]:
    return {"clip": np.zeros((0, 0), np.float16), "s3d": np.zeros((0, 0), np.float16),
            "face": np.zeros((0, 0, 0), np.float16), "face_score": np.zeros((0, 0), np.float32),
            "portrait_face": np.zeros((0, 0), np.float16),
            "portrait_face_mask": np.zeros((0,), bool)}


def _other_names(feat: pathlib.Path, kind: str, movie_id: str) -> list[pathlib.Path]:
    """Files of this movie in kind's directory under a name the release does not use."""
    d = feat / FILES[kind].split("/")[0]
    if not d.is_dir():
        return []
    want = FILES[kind].format(m=movie_id).split("/")[1]
    return sorted(p for p in d.glob(f"{movie_id}*") if p.name != want and
                  p.name.split(".")[0].split("-")[0] == movie_id)


def _read(feat: pathlib.Path, kind: str, movie_id: str, skips: collections.Counter
          ) -> np.ndarray | None:
    """The `features` array of one file; None when absent or unreadable (counted)."""
    path = feat / FILES[kind].format(m=movie_id)
    if not path.is_file():
        other = _other_names(feat, kind, movie_id)
        if other:
            raise FeatureLayoutError(f"{other[0]}: not a release file name; expected "
                                     f"{LAYOUT[kind]}")
        common.count(skips, f"kept_missing_{kind}_file", path)
        return None
    try:
        a = arrays.load(path, (None, None), key="features", store=np.float16, min_rows=0)
    except arrays.ArrayError as e:
        if e.kind in ("key", "shape"):
            raise FeatureLayoutError(f"{e}; expected {LAYOUT[kind]}") from None
        reason = "unreadable" if e.kind == "unreadable" else "unusable"
        common.record_skip(skips, f"{reason}_{kind}_file", path, e.detail)
        return None
    if a.shape[1] == 0:
        raise FeatureLayoutError(f"{path}: array of shape {a.shape}; expected {LAYOUT[kind]}")
    return a.astype(np.float32)


def read_movie_features(root: pathlib.Path, movie_id: str, role_ids: list[str],
                        portraits: dict[str, np.ndarray], skips: collections.Counter,
                        portrait_path: pathlib.Path | None = None) -> dict[str, np.ndarray]:
    """The movie's feature arrays (empty arrays where absent). `root` is the manual_dir;
    `portraits` from `read_portraits`. Counts per movie: kept_without_faces,
    kept_without_portraits, kept_portrait_missing_role (per cast member)."""
    out = empty_features()
    feat = feature_dir(root)
    if feat is None:
        common.count(skips, "kept_without_features", movie_id)
        return out
    clip = _read(feat, "clip", movie_id, skips)
    s3d = _read(feat, "s3d", movie_id, skips)
    face = _read(feat, "face", movie_id, skips)
    pdim = next(iter(portraits.values())).shape[0] if portraits else 0
    if face is not None:
        width = face.shape[1]
        path = feat / FILES["face"].format(m=movie_id)
        if width % FACES or (pdim and width != FACES * pdim):
            want = f"{FACES} x {pdim}" if pdim else f"a multiple of {FACES}"
            raise FeatureLayoutError(f"{path}: width {width}, expected {want} (the portrait "
                                     f"width); layout: {LAYOUT['face']}")
        out["face"] = face.reshape(len(face), FACES, width // FACES).astype(np.float16)
        out["face_score"] = (np.abs(out["face"]).sum(-1) > 0).astype(np.float32)
    else:
        common.count(skips, "kept_without_faces", movie_id)
    for k, a in (("clip", clip), ("s3d", s3d)):
        if a is not None:
            out[k] = a.astype(np.float16)
    if portraits:
        mat = np.zeros((len(role_ids), pdim), np.float16)
        mask = np.zeros((len(role_ids),), bool)
        for i, rid in enumerate(role_ids):
            if rid in portraits:
                mat[i], mask[i] = portraits[rid], True
            else:
                common.count(skips, "kept_portrait_missing_role",
                             f"{portrait_path}: role {rid} of movie {movie_id}")
                common.log.warning("%s: no role %s of movie %s", portrait_path, rid, movie_id)
        out["portrait_face"], out["portrait_face_mask"] = mat, mask
    if not out["portrait_face_mask"].any():
        common.count(skips, "kept_without_portraits", movie_id)
    lens = {k: len(out[k]) for k in ("clip", "s3d", "face") if len(out[k])}
    if len(set(lens.values())) > 1:
        t = min(lens.values())
        common.count(skips, "kept_feature_lengths_truncated", movie_id)
        common.log.warning("%s: feature lengths %s differ; truncated to %d s", movie_id, lens, t)
        for k in lens:
            out[k] = out[k][:t]
        if len(out["face"]):
            out["face_score"] = out["face_score"][:t]
    return out
