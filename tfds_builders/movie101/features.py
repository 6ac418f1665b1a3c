"""Per-movie, per-second features in the layout the Movie101 release ships them (README.md).

    <manual_dir>/features/clip/<movie>.mp4.npy.npz      [T, 512]     OpenAI CLIP (ViT unstated)
    <manual_dir>/features/s3d/<movie>-4.npz             [T, 1024]    S3D, 1 per second
    <manual_dir>/features/frame_face/<movie>.npz        features [T, F, 512] (+ scores [T, F])
    <manual_dir>/features/portrait_face/<movie>.npz     one [512] array per role id

An `.npz` holding a single array is read whatever its key; otherwise the key `features`
is used. Faces are reordered by descending detection score when `scores` is present (RMN
concatenates faces in detection-confidence order); rows without a face are zeros with score 0.
"""

from __future__ import annotations

import collections
import pathlib

import numpy as np

from tfds_builders import common


def _load(path: pathlib.Path, skips: collections.Counter) -> dict[str, np.ndarray] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: np.asarray(z[k]) for k in z.files}
    except (OSError, ValueError) as e:
        common.record_skip(skips, "bad_feature_file", path, str(e).splitlines()[0])
        return None


def _main(arrs: dict[str, np.ndarray]) -> np.ndarray:
    if len(arrs) == 1:
        return next(iter(arrs.values()))
    return arrs["features"]


def empty_features() -> dict[str, np.ndarray]:
    return {"clip": np.zeros((0, 0), np.float16), "s3d": np.zeros((0, 0), np.float16),
            "face": np.zeros((0, 0, 0), np.float16), "face_score": np.zeros((0, 0), np.float32),
            "portrait_face": np.zeros((0, 0), np.float16),
            "portrait_face_mask": np.zeros((0,), bool)}


def read_movie_features(root: pathlib.Path, movie_id: str, role_ids: list[str],
                        skips: collections.Counter) -> dict[str, np.ndarray]:
    """The movie's feature arrays (empty arrays where a file is absent or unusable)."""
    out = empty_features()
    if not root.is_dir():
        skips["kept_without_features"] += 1
        return out
    files = {
        "clip": root / "clip" / f"{movie_id}.mp4.npy.npz",
        "s3d": root / "s3d" / f"{movie_id}-4.npz",
        "face": root / "frame_face" / f"{movie_id}.npz",
        "portrait_face": root / "portrait_face" / f"{movie_id}.npz",
    }
    loaded = {k: _load(p, skips) for k, p in files.items()}
    for k, arrs in loaded.items():
        if arrs is None:
            skips[f"kept_missing_{k}_features"] += 1
    try:
        for k in ("clip", "s3d"):
            if loaded[k] is not None:
                a = _main(loaded[k]).astype(np.float32)
                if a.ndim != 2:
                    raise ValueError(f"{files[k]}: expected [T, D], got {a.shape}")
                out[k] = a.astype(np.float16)
        if loaded["face"] is not None:
            f = loaded["face"]
            feats = _main({k: v for k, v in f.items() if k != "scores"}).astype(np.float32)
            if feats.ndim != 3:
                raise ValueError(f"{files['face']}: expected [T, F, D], got {feats.shape}")
            scores = f.get("scores")
            if scores is None:
                scores = np.where(np.abs(feats).sum(-1) > 0, 1.0, 0.0)
            order = np.argsort(-scores, axis=1, kind="stable")
            out["face"] = np.take_along_axis(feats, order[..., None], 1).astype(np.float16)
            out["face_score"] = np.take_along_axis(scores, order, 1).astype(np.float32)
        if loaded["portrait_face"] is not None:
            p = loaded["portrait_face"]
            dims = {v.shape[-1] for v in p.values()}
            if len(dims) != 1:
                raise ValueError(f"{files['portrait_face']}: roles have different dims {dims}")
            dim = dims.pop()
            mat = np.zeros((len(role_ids), dim), np.float16)
            mask = np.zeros((len(role_ids),), bool)
            for i, rid in enumerate(role_ids):
                if rid in p:
                    mat[i], mask[i] = p[rid].reshape(-1), True
                else:
                    skips["kept_missing_portrait_face"] += 1
            out["portrait_face"], out["portrait_face_mask"] = mat, mask
    except (KeyError, ValueError) as e:
        common.record_skip(skips, "bad_feature_file", movie_id, str(e))
        return empty_features()
    lens = {k: len(out[k]) for k in ("clip", "s3d", "face") if len(out[k])}
    if len(set(lens.values())) > 1:
        t = min(lens.values())
        skips["kept_feature_lengths_truncated"] += 1
        common.log.warning("%s: feature lengths %s differ; truncated to %d s", movie_id, lens, t)
        for k in lens:
            out[k] = out[k][:t]
        if len(out["face"]):
            out["face_score"] = out["face_score"][:t]
    return out
