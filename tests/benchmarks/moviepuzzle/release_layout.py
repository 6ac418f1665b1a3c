"""The public MoviePuzzle per-clip release layout (`game/` of MoviePuzzle.github.io), written
for tests: from real clips of `../shared/data/moviepuzzle_public`, or generated with the same
file names, keys and quirks, plus the defects the public release is known to have.

    <root>/clip_id.json                       {"in_domain": [ids], "out_domain": [ids]}
    <root>/<split>/<clip>/info.json           {tt_id, img_num, img_id, shot_id, scene_id}
    <root>/<split>/<clip>/info_shuffled.json  the same fields shuffled (+ input_id, gt_id)
    <root>/<split>/<clip>/subtitle.json       [[utterance, ...], ...] one list per frame
    <root>/<split>/<clip>/<clip>_<k>.jpg      240p frames, wider than high
"""

from __future__ import annotations

import io
import json
import pathlib
import shutil

import numpy as np
from PIL import Image

BAD_JSON = "90001"  # a copy of a real clip whose subtitle.json is cut mid-file
NO_DIR = "90002"  # listed in clip_id.json, no directory


def _frame(w: int, h: int, rng: np.random.Generator, tint: int) -> bytes:
    y, x = np.mgrid[0:h, 0:w] / w
    pic = np.stack([np.sin(6 * x + 4 * y + tint + c) for c in range(3)], -1)
    pic = 128 + 100 * pic + rng.normal(0, 8, pic.shape)
    buf = io.BytesIO()
    Image.fromarray(np.clip(pic, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def generated_clips(root: pathlib.Path, n: int = 8, seed: int = 0) -> list[pathlib.Path]:
    """`n` clips in the release's per-clip layout, written under `root/all/`: 240p frames of
    varying widths (1.78:1 to 2.4:1), 10-14 frames, 2-4 shots, 1-2 scenes, subtitles with
    empty strings, frames without dialogue and a non-dialogue cue, as the real ones."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(n):
        clip_id, k = str(100 + 10 * c), int(rng.integers(10, 15))
        d = root / "all" / clip_id
        d.mkdir(parents=True)
        width = int(rng.choice([426, 443, 564, 576]))
        shots = np.sort(rng.integers(0, int(rng.integers(2, 5)), k)) + 7 * c
        scenes = (shots >= shots[k // 2]).astype(int) + 3 * c
        for i in range(k):
            (d / f"{clip_id}_{i}.jpg").write_bytes(_frame(width, 240, rng, int(shots[i])))
        subs = [[f"Line {i} of clip {clip_id}.", ""] if i % 3 else [] for i in range(k)]
        subs[-1] = ["// [Radio Playing Salsa]"]
        info = {"tt_id": f"tt{1000000 + c // 2:07d}", "img_num": k, "img_id": list(range(k)),
                "shot_id": shots.tolist(), "scene_id": scenes.tolist()}
        (d / "info.json").write_text(json.dumps(info, indent=2))
        perm = rng.permutation(k).tolist()
        shuffled = {**{f: [info[f][p] for p in perm] for f in ("img_id", "shot_id", "scene_id")},
                    "tt_id": info["tt_id"], "img_num": k, "input_id": perm, "gt_id": perm}
        (d / "info_shuffled.json").write_text(json.dumps(shuffled))
        (d / "subtitle.json").write_text(json.dumps(subs))
        out.append(d)
    return out


def real_clips(public: pathlib.Path, n: int) -> list[pathlib.Path]:
    """The first `n` clips of the public release (in `clip_id.json` order)."""
    ids = json.loads((public / "clip_id.json").read_text())["in_domain"]
    return [public / "in_domain" / str(c) for c in ids[:n]]


def write_release(root: pathlib.Path, clips: list[pathlib.Path], n_out: int) -> dict:
    """A manual_dir in the release layout: the last `n_out` clips are `out_domain`, the
    others `in_domain`, plus the release's defects: clip `BAD_JSON` (a copy of the first clip
    whose subtitle.json is not valid JSON) and `NO_DIR` (listed, absent), both in_domain.
    Returns {split: readable clip ids}."""
    split_of = {c: "out_domain" if i >= len(clips) - n_out else "in_domain"
                for i, c in enumerate(clips)}
    ids: dict[str, list[str]] = {"in_domain": [], "out_domain": []}
    for src, split in split_of.items():
        shutil.copytree(src, root / split / src.name)
        ids[split].append(src.name)
    readable = {k: list(v) for k, v in ids.items()}
    bad = root / "in_domain" / BAD_JSON
    bad.mkdir()
    first = clips[0]
    for f in first.iterdir():
        name = f.name.replace(f"{first.name}_", f"{BAD_JSON}_", 1)
        (bad / name).write_bytes(f.read_bytes())
    text = (bad / "subtitle.json").read_bytes()
    (bad / "subtitle.json").write_bytes(text[: len(text) * 2 // 3])
    ids["in_domain"] += [BAD_JSON, NO_DIR]
    (root / "clip_id.json").write_text(json.dumps(
        {k: [int(c) for c in v] for k, v in ids.items()}, indent=2))
    return readable
