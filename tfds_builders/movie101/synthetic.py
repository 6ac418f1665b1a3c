"""Generated Movie101 corpus in the v2 layout, with features that carry a planted signal.

`write_corpus(out_dir, seed, sizes)` writes `narration/short-71k-en/<movie>.txt`,
`metadata/meta/<movie>.json`, `metadata/portrait/<movie>/<role>.jpeg` and the release's
feature layout (`features.py`): `features/clip/<movie>.mp4.npy.npz`, `features/s3d/<movie>-4.npz`,
`features/frame_face/<movie>.mp4.npy.npz` (key `features`, [T, 3 x D], faces in descending
detection-score order) and one portrait HDF5 (role_id -> group with `features` [D]) at
`metadata/portrait_face.hdf5` (or `features/protrait_face.hdf5`: `portrait_file`).

The signal. Each movie has its own cast (invented names, so a held-out movie's names never
occur in training text) and each role a random face vector; its portrait face feature is
that vector plus noise. A narration `[Name] <verb phrase>.` (or `[A] <verb> [B].` for
interactions) covers a few seconds in which the CLIP and S3D features carry the action's
direction (shared by all movies) and the frame faces hold the acting roles' face vectors
(highest detection score first, plus a low-score distractor). So the action is readable
from the video and the name only by matching frame faces with the cast's portraits:
a captioner can name held-out roles only through a role pointer. Seconds outside the
narrations are noise. Movie ids are drawn until the hashed split
(`parsing.movie_split`) gives the requested number of movies per split.
"""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
from PIL import Image

from tfds_builders.movie101 import parsing

CORPUS_VERSION = 2
SYLLABLES = ("ka", "lo", "mi", "ren", "to", "sa", "vin", "du", "pe", "ra", "zo", "bel", "nu",
             "tri", "go", "han", "li", "mar", "os", "ke")
ACTIONS = (("walks to the door", None), ("opens the window", None), ("sits on the sofa", None),
           ("drinks a cup of tea", None), ("reads a letter", None), ("runs down the street", None),
           ("hugs", "pair"), ("talks to", "pair"), ("follows", "pair"))
GENRES = ("drama", "comedy", "action", "romance")
PRESETS = {
    "tiny": dict(train=6, val=2, test=2, seconds=200, roles=(3, 4), dims=(16, 16, 16)),
    "small": dict(train=24, val=4, test=4, seconds=400, roles=(3, 5), dims=(32, 32, 32)),
    "upstream": dict(train=24, val=4, test=4, seconds=400, roles=(3, 5), dims=(512, 1024, 512)),
}


def _name(rng: np.random.Generator) -> str:
    return "".join(rng.choice(SYLLABLES, size=rng.integers(2, 4))).capitalize()


def _hms(t: int) -> str:
    return f"{t // 3600}:{t // 60 % 60}:{t % 60}"  # not zero-padded, like the release


def _movie_ids(rng: np.random.Generator, want: dict[str, int]) -> list[str]:
    ids, have = [], {k: 0 for k in want}
    while any(have[k] < want[k] for k in want):
        mid = str(7_000_000_000_000_000_000 + int(rng.integers(0, 10**17)) * 10)
        split = parsing.movie_split(mid)
        if have[split] < want[split] and mid not in ids:
            ids.append(mid)
            have[split] += 1
    return ids


def _unit(rng: np.random.Generator, *shape: int) -> np.ndarray:
    v = rng.normal(size=shape)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def write_corpus(out: pathlib.Path | str, seed: int = 0, sizes: str | dict = "tiny",
                 portrait_file: str = "metadata/portrait_face.hdf5") -> None:
    """Writes the corpus (deterministic for a seed); `portrait_file` relative to `out`."""
    import h5py

    p = PRESETS[sizes] if isinstance(sizes, str) else sizes
    out = pathlib.Path(out)
    rng = np.random.default_rng(seed)
    dc, ds, df = p["dims"]
    action_clip = _unit(rng, len(ACTIONS), dc) * 3
    action_s3d = _unit(rng, len(ACTIONS), ds) * 3
    portrait_vecs: dict[str, np.ndarray] = {}
    for mid in _movie_ids(rng, {k: p[k] for k in ("train", "val", "test")}):
        mrng = np.random.default_rng([seed, int(mid) % 2**32])
        n_roles = int(mrng.integers(p["roles"][0], p["roles"][1] + 1))
        names, cast = set(), {}
        while len(names) < n_roles:
            names.add(_name(mrng))
        role_ids = [str(6_538_379_000_000_000_000 + int(mrng.integers(0, 10**12)))
                    for _ in range(n_roles)]
        faces = _unit(mrng, n_roles, df) * 3
        for rid, nm in zip(role_ids, sorted(names)):
            cast[rid] = {"actor": f"Actor {nm}", "role": nm, "role_en": nm}
        meta = {"id": mid, "title": f"Movie {mid[-4:]}", "year": "2021",
                "genre": list(mrng.choice(GENRES, size=2, replace=False)), "role": cast}
        (out / "metadata" / "meta").mkdir(parents=True, exist_ok=True)
        (out / "metadata" / "meta" / f"{mid}.json").write_text(json.dumps(meta, indent=1))
        pdir = out / "metadata" / "portrait" / mid
        pdir.mkdir(parents=True, exist_ok=True)
        for rid in role_ids:
            buf = io.BytesIO()
            colour = tuple(int(c) for c in mrng.integers(0, 255, 3))
            Image.new("RGB", (16, 16), colour).save(buf, format="JPEG")
            (pdir / f"{rid}.jpeg").write_bytes(buf.getvalue())
        T = p["seconds"]
        clip = mrng.normal(size=(T, dc)).astype(np.float32)
        s3d = mrng.normal(size=(T, ds)).astype(np.float32)
        face = np.zeros((T, 3, df), np.float32)
        score = np.zeros((T, 3), np.float32)
        lines, t = [], int(mrng.integers(2, 6))
        names_by_k = [cast[r]["role_en"] for r in role_ids]
        while t < T - 10:
            dur = int(mrng.integers(4, 9))
            a = int(mrng.integers(len(ACTIONS)))
            phrase, kind = ACTIONS[a]
            who = [int(mrng.integers(n_roles))]
            if kind == "pair":
                who.append(int((who[0] + mrng.integers(1, n_roles)) % n_roles))
                text = f"[{names_by_k[who[0]]}] {phrase} [{names_by_k[who[1]]}]."
            else:
                text = f"[{names_by_k[who[0]]}] {phrase}."
            sl = slice(t, t + dur)
            clip[sl] += action_clip[a]
            s3d[sl] += action_s3d[a]
            for j, r in enumerate(who):
                face[sl, j] = faces[r] + 0.3 * mrng.normal(size=(dur, df))
                score[sl, j] = 0.95 - 0.1 * j
            face[sl, len(who)] = mrng.normal(size=(dur, df))  # a distractor face
            score[sl, len(who)] = 0.3
            lines.append(f"{_hms(t)}|{_hms(t + dur)}|{text}")
            t += dur + int(mrng.integers(3, 12))
        ndir = out / "narration" / "short-71k-en"
        ndir.mkdir(parents=True, exist_ok=True)
        (ndir / f"{mid}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        fdir = out / "features"
        for sub in ("clip", "s3d", "frame_face"):
            (fdir / sub).mkdir(parents=True, exist_ok=True)
        np.savez(fdir / "clip" / f"{mid}.mp4.npy.npz", features=clip.astype(np.float16))
        np.savez(fdir / "s3d" / f"{mid}-4.npz", features=s3d.astype(np.float16))
        order = np.argsort(-score, axis=1, kind="stable")  # the release: confidence order
        face = np.take_along_axis(face, order[..., None], 1)
        np.savez(fdir / "frame_face" / f"{mid}.mp4.npy.npz",
                 features=face.reshape(T, -1).astype(np.float16))
        port = faces + 0.2 * mrng.normal(size=faces.shape)
        portrait_vecs.update({rid: port[k].astype(np.float32) for k, rid in enumerate(role_ids)})
    path = out / portrait_file
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        for rid, v in portrait_vecs.items():
            f.create_group(rid).create_dataset("features", data=v)
