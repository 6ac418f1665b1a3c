"""A Movie101v1 manual_dir in the release's shape, for the release-shaped end-to-end test.

`derive_release(src, dst)` starts from a copy of the release's *public* annotation files
(`src`: the real `../shared/data/movie101/v1`, or `generated_annotations`, which writes the
same files and keys for invented movies when ../shared is absent) and writes what the
public sample lacks, in the release's names and formats:

  * Movie101-N/{train,val,test}.json, Movie101-G/{train,val,test}.json and
    narration_role/{train_merge,val,test}.json (no narration_role/train.json, as the
    release): the public sample has val files only, so train and test rows are val rows
    of other movies given the ids of real train / test movies of public_split.json (their
    `content` re-expanded with the new movie's cast), times shifted to start near 0 and
    cut at `seconds` so the generated features stay small;
  * train_merge.json = the train paragraphs' entries plus augmentation entries, the train
    movies' Movie101-G clips with their cast names replaced by `@k` (what the release adds
    from Movie101-raw);
  * the features the RMN README describes, in its names, keys and widths:
    features/clip/<m>.mp4.npy.npz, features/s3d/<m>-4.npz, features/frame_face/<m>.mp4.npy.npz
    (key `features`: [T, 512], [T, 1024], [T, 3 x 512]; float16: the release does not
    document its dtype and upstream casts to float32 on load) and features/protrait_face.hdf5
    (role_id -> group with `features` [512] float32) for every meta_anno role but one.

The release's awkward cases occur: one train and one test movie of public_split.json
without a meta_anno.json entry (the real ones where the real files are used), a train movie
whose feature files are absent (its narrations are left out by the trainer's rule), every
other split movie without features, a cast member without a portrait feature.
"""

from __future__ import annotations

import collections
import json
import pathlib
import shutil

import h5py
import numpy as np

from tfds_builders.movie101 import parsing

SOURCES = 6  # val movies used: 1 stays val, 2 become test movies, 3 train movies


def generated_annotations(root: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """The public sample's files (public_split.json, metadata/meta_anno.json, Movie101-N,
    Movie101-G and narration_role val files) for invented movies, same keys and types."""
    rng = np.random.default_rng(seed)
    ids = [str(7_100_000_000_000_000_000 + 1000 * i) for i in range(12)]
    split = {"train": ids[:4], "val": ids[4:10], "test": ids[10:]}
    given = "李王张赵刘陈杨黄周吴徐孙马朱胡郭"
    anno, n_rows, g_rows, role = {}, [], [], {}
    for mid in ids:
        if mid in (ids[1], ids[11]):  # a train and a test movie without a cast entry
            continue
        names = ["".join(rng.choice(list(given), 2)) for _ in range(int(rng.integers(3, 6)))]
        anno[mid] = {str(6_538_000_000_000_000_000 + 100 * int(mid[-4:]) + k):
                     {"name": f"演员{k}", "rolename": nm} for k, nm in enumerate(names)}
    acts = ("走进房间。", "看向窗外，", "拿起电话。", "转身离开。", "坐在桌前，")
    for mid in split["val"]:
        names = [r["rolename"] for r in anno[mid].values()]
        t = int(rng.integers(30, 60))
        for _ in range(8):
            ks = rng.choice(len(names), 2, replace=False)
            sentence = f"@{ks[0]}{rng.choice(acts)}@{ks[1]}{rng.choice(acts)}"
            end = t + int(rng.integers(6, 30))
            content = parsing.expand_pointers(sentence, names)[0]
            n_rows.append({"movie_id": mid, "start_time": t, "end_time": end, "content": content})
            role[str(35833 + len(role))] = {"sentences": [sentence],
                                            "timestamps": [[str(t), str(end)]], "movie_id": mid}
            for a in range(t, end - 3, 8):  # the unmerged clips of the paragraph
                g_rows.append({"movie_id": mid, "start_time": a, "end_time": a + 4,
                               "content": f"{names[ks[0]]}{rng.choice(acts)}"})
            t = end + int(rng.integers(5, 20))
    for rel, obj in (("public_split.json", split), ("metadata/meta_anno.json", anno),
                     ("Movie101-N/val.json", n_rows), ("Movie101-G/val.json", g_rows),
                     ("narration_role/val.json", role)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(obj, ensure_ascii=False, indent=1), encoding="utf-8")
    return root


def _load(path: pathlib.Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _pointer(text: str, names: list[str]) -> str:
    """`text` with each cast name replaced by `@k` (longer names first)."""
    for k in sorted(range(len(names)), key=lambda k: -len(names[k])):
        if names[k]:
            text = text.replace(names[k], f"@{k}")
    return text


def derive_release(src: pathlib.Path, dst: pathlib.Path, seconds: int = 240) -> dict:
    """Writes the manual_dir (module docstring); returns what the test checks against:
    {"movies": featured movie ids, "no_cast": {split: movie}, "no_features": movie,
    "rows": {file: count}, "augmentation": count, "missing_portrait_role": role id}."""
    split = _load(src / "public_split.json")
    anno = _load(src / "metadata" / "meta_anno.json")
    (dst / "metadata").mkdir(parents=True)
    for rel in ("public_split.json", "metadata/meta_anno.json"):
        shutil.copy(src / rel, dst / rel)
    n_val, g_val = _load(src / "Movie101-N" / "val.json"), _load(src / "Movie101-G" / "val.json")
    roles_val = list(_load(src / "narration_role" / "val.json").values())
    val_movies = sorted({r["movie_id"] for r in n_val} & {r["movie_id"] for r in g_val})
    sources = val_movies[:SOURCES]
    # movies with the largest casts take the relabelled rows, so most `@k` stay in the cast
    cast = sorted((m for m in split["train"] if m in anno), key=lambda m: -len(anno[m]))
    no_cast = {s: next(m for m in split[s] if m not in anno) for s in ("train", "test")}
    test_cast = max((m for m in split["test"] if m in anno), key=lambda m: len(anno[m]))
    target = {sources[0]: ("val", sources[0]), sources[1]: ("test", test_cast),
              sources[2]: ("test", no_cast["test"]), sources[3]: ("train", cast[0]),
              sources[4]: ("train", no_cast["train"]), sources[5]: ("train", cast[1])}
    names = {m: [r["rolename"] for r in anno.get(m, {}).values()] for m in set(anno)}
    out = {s: {"N": [], "G": [], "role": {}} for s in ("train", "val", "test")}
    aug = 0
    for s_mid, (sp, mid) in target.items():
        rows = [(r, p) for r, p in zip(n_val, roles_val) if r["movie_id"] == s_mid]
        clips = [r for r in g_val if r["movie_id"] == s_mid]
        shift = min(int(r["start_time"]) for r in [*(r for r, _ in rows), *clips]) - 5
        new = names.get(mid, [])
        for r, p in rows:
            a, b = int(r["start_time"]) - shift, int(r["end_time"]) - shift
            if b > seconds:
                continue
            sentence = p["sentences"][0]
            expanded, _, bad = parsing.expand_pointers(sentence, new)
            content = expanded if new and not bad else r["content"]
            if not new:  # the release's test file: no @k for a movie without a cast entry
                sentence = content
            out[sp]["N"].append({"movie_id": mid, "start_time": a, "end_time": b,
                                 "content": content})
            out[sp]["role"][str(len(out[sp]["role"]))] = {
                "sentences": [sentence], "timestamps": [[str(a), str(b)]], "movie_id": mid}
        for r in clips:
            a, b = int(r["start_time"]) - shift, int(r["end_time"]) - shift
            if b > seconds:
                continue
            out[sp]["G"].append({"movie_id": mid, "start_time": a, "end_time": b,
                                 "content": r["content"]})
            if sp == "train":  # the augmentation clips of train_merge.json
                text = _pointer(r["content"], names.get(s_mid, [])) if new else r["content"]
                out[sp]["role"][str(len(out[sp]["role"]))] = {
                    "sentences": [text], "timestamps": [[str(a), str(b)]], "movie_id": mid}
                aug += 1
    role_names = {"train": "train_merge.json", "val": "val.json", "test": "test.json"}
    for sp, files in out.items():
        for folder, key in (("Movie101-N", "N"), ("Movie101-G", "G")):
            (dst / folder).mkdir(exist_ok=True)
            (dst / folder / f"{sp}.json").write_text(json.dumps(files[key], ensure_ascii=False),
                                                     encoding="utf-8")
        (dst / "narration_role").mkdir(exist_ok=True)
        (dst / "narration_role" / role_names[sp]).write_text(
            json.dumps(files["role"], ensure_ascii=False), encoding="utf-8")
    featured = sorted(mid for _, mid in target.values() if mid != cast[1])
    # role ids are per person: the same id can be in several movies' casts (real files)
    uses = collections.Counter(r for m in anno for r in anno[m])
    missing_role = next(r for r in anno[cast[0]] if uses[r] == 1)
    write_features(dst, featured, seconds + 10, [r for r in uses if r != missing_role])
    return {"movies": featured, "no_cast": no_cast, "no_features": cast[1],
            "rows": {f"{f}/{sp}": len(out[sp][k]) for sp in out for f, k in
                     (("Movie101-N", "N"), ("Movie101-G", "G"))},
            "augmentation": aug, "missing_portrait_role": missing_role}


def write_features(root: pathlib.Path, movies: list[str], seconds: int, role_ids: list[str],
                   seed: int = 0) -> None:
    """The release's feature files for `movies` and its portrait HDF5 for `role_ids`."""
    rng = np.random.default_rng(seed)
    feat = root / "features"
    for sub in ("clip", "s3d", "frame_face"):
        (feat / sub).mkdir(parents=True, exist_ok=True)
    for mid in movies:
        for path, width in ((feat / "clip" / f"{mid}.mp4.npy.npz", 512),
                            (feat / "s3d" / f"{mid}-4.npz", 1024),
                            (feat / "frame_face" / f"{mid}.mp4.npy.npz", 3 * 512)):
            np.savez(path, features=rng.normal(size=(seconds, width)).astype(np.float16))
    with h5py.File(feat / "protrait_face.hdf5", "w") as f:
        for rid in role_ids:
            f.create_group(rid).create_dataset(
                "features", data=rng.normal(size=512).astype(np.float32))
