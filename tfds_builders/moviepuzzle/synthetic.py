"""Procedural MoviePuzzle corpus: movies whose frame order is recoverable only from narrative cues.

`write_corpus(out_dir, seed=0, sizes="default")` writes the public per-clip layout
(`clip_id.json`, `<split>/<clip>/{info.json, info_shuffled.json, subtitle.json, <clip>_<k>.jpg}`).
See README.md for the cues. Nothing encodes the absolute position: no frame numbers, no clocks.
Everything is drawn from `np.random.default_rng` seeded per movie and per clip, so a seed
always gives byte-identical files.
"""

from __future__ import annotations

import colorsys
import io
import json
import multiprocessing
import os
import pathlib
import time
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from tfds_builders.moviepuzzle import story

CORPUS_VERSION = 1
WORLD = 112  # side of a location's world canvas, in pixels
FRAME = 64  # side of a stored frame
FLOOR_Y = 56  # wall above, floor below; doors stand on this line
DOOR_W, DOOR_H = 12, 22
CHAR_R = 7  # character half size
P_PICK_SCENE_START, P_PICK_IN_SCENE = 0.8, 0.25  # the hero picks up an item (story state)
P_ACTION = 0.5  # share of action scenes (walking to the door, little talk); others are talk scenes
ITEM = 7  # side of a carried item's square

SPLITS = ("train", "val", "test_in_domain", "test_out_domain")
PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(movies=6, heldout=2, train=40, val=8, test_in_domain=10, test_out_domain=10),
    "small": dict(movies=20, heldout=4, train=480, val=40, test_in_domain=60, test_out_domain=60),
    "default": dict(
        movies=60, heldout=12, train=2400, val=200, test_in_domain=300, test_out_domain=300
    ),
}

NAMES = (
    "Ada Ben Cora Dev Eli Fay Gus Hana Ivo Jun Kai Lena Milo Nora Otto Pia Quin Rosa Sami Tess "
    "Uma Vik Wren Xena Yara Zane Abe Bea Cal Dina Ezra Flo Gil Hugo Iris Joel Kira Leo Mae Ned"
).split()
LOCATIONS = (
    "kitchen harbor library garden station market attic cellar bridge forest beach office "
    "hospital school museum bakery garage rooftop tunnel church theater hotel farm castle "
    "lighthouse studio prison diner barn chapel"
).split()
OBJECTS = (
    "key map letter lamp ring coin book knife radio ticket camera bottle box rope phone badge"
).split()
SHAPES = ("circle", "square", "triangle", "diamond", "cross")
PATTERNS = ("plain", "stripes_v", "stripes_h", "checker", "dots", "bricks", "diagonal")


def _preset(sizes: str | dict[str, int]) -> dict[str, int]:
    if isinstance(sizes, str):
        if sizes not in PRESETS:
            raise ValueError(f"unknown sizes preset {sizes!r}; choose one of {sorted(PRESETS)}")
        return dict(PRESETS[sizes])
    missing = set(PRESETS["tiny"]) - set(sizes)
    if missing:
        raise ValueError(f"sizes is missing {sorted(missing)}")
    return dict(sizes)


def _hsv(h: float, s: float, v: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, s, v)
    return int(r * 255), int(g * 255), int(b * 255)


OBJECT_COLOURS = {o: _hsv(i / len(OBJECTS), 0.9, 0.95) for i, o in enumerate(OBJECTS)}


# ----------------------------------------------------------------------------- movies


def movie_id(index: int) -> str:
    """The movie's IMDb-style id (tt9... is outside the range of real titles used here)."""
    return f"tt9{index:06d}"


def make_movie(seed: int, index: int) -> dict[str, Any]:
    """A movie: cast (name, shape, colour), locations (palette, pattern, door), objects."""
    rng = np.random.default_rng([seed, 7919, index])
    n_cast, n_loc = int(rng.integers(3, 6)), int(rng.integers(3, 7))
    hues = rng.permutation(12)[:n_cast] / 12.0 + rng.uniform(0, 1 / 12)
    cast = [
        {
            "name": str(name),
            "shape": SHAPES[int(s)],
            "colour": _hsv(h, rng.uniform(0.75, 1.0), rng.uniform(0.75, 1.0)),
        }
        for name, s, h in zip(
            rng.choice(NAMES, n_cast, replace=False),
            rng.permutation(len(SHAPES)),
            hues,
            strict=False,
        )
    ]
    locations = []
    for name in rng.choice(LOCATIONS, n_loc, replace=False):
        h = rng.uniform()
        locations.append(
            {
                "name": str(name),
                "wall": _hsv(h, rng.uniform(0.1, 0.35), rng.uniform(0.45, 0.8)),
                "wall2": _hsv(
                    h + rng.uniform(-0.1, 0.1), rng.uniform(0.1, 0.4), rng.uniform(0.3, 0.7)
                ),
                "floor": _hsv(rng.uniform(), rng.uniform(0.05, 0.3), rng.uniform(0.2, 0.5)),
                "pattern": PATTERNS[int(rng.integers(len(PATTERNS)))],
                "period": int(rng.integers(6, 15)),
                "door_x": int(rng.integers(8, WORLD - DOOR_W - 8)),
                "door": _hsv(
                    rng.uniform(0.02, 0.12), rng.uniform(0.4, 0.8), rng.uniform(0.15, 0.35)
                ),
                "window": (int(rng.integers(4, WORLD - 24)), int(rng.integers(6, 26))),
            }
        )
    objects = [str(o) for o in rng.choice(OBJECTS, int(rng.integers(5, 9)), replace=False)]
    return {"tt_id": movie_id(index), "cast": cast, "locations": locations, "objects": objects}


def render_location(loc: dict[str, Any]) -> Image.Image:
    """The location's world canvas: patterned wall, floor, a window and the door (landmark)."""
    im = Image.new("RGB", (WORLD, WORLD), loc["wall"])
    d = ImageDraw.Draw(im)
    p, c2, pat = loc["period"], loc["wall2"], loc["pattern"]
    for k in range(0, WORLD, p):
        if pat == "stripes_v":
            d.rectangle((k, 0, k + p // 2 - 1, FLOOR_Y), fill=c2)
        elif pat == "stripes_h" and k < FLOOR_Y:
            d.rectangle((0, k, WORLD, min(k + p // 2 - 1, FLOOR_Y)), fill=c2)
        elif pat == "diagonal":
            d.line((k - FLOOR_Y, FLOOR_Y, k, 0), fill=c2, width=max(1, p // 4))
            d.line((k + WORLD - FLOOR_Y, FLOOR_Y, k + WORLD, 0), fill=c2, width=max(1, p // 4))
        for j in range(0, FLOOR_Y, p):
            if pat == "checker" and (k // p + j // p) % 2:
                d.rectangle((k, j, k + p - 1, min(j + p - 1, FLOOR_Y)), fill=c2)
            elif pat == "dots":
                d.ellipse((k + p // 3, j + p // 3, k + p // 3 + 2, j + p // 3 + 2), fill=c2)
            elif pat == "bricks":
                off = (p // 2) * ((j // p) % 2)
                d.rectangle((k + off, j, k + off + p - 2, j + p // 2 - 1), outline=c2)
    d.rectangle((0, FLOOR_Y, WORLD, WORLD), fill=loc["floor"])
    wx, wy = loc["window"]
    if abs(wx + 9 - loc["door_x"] - DOOR_W // 2) > 20:
        d.rectangle((wx, wy, wx + 18, wy + 14), fill=(220, 235, 245), outline=(60, 60, 60))
    x = loc["door_x"]
    d.rectangle((x, FLOOR_Y - DOOR_H, x + DOOR_W, FLOOR_Y), fill=loc["door"], outline=(20, 15, 10))
    d.rectangle(
        (x + DOOR_W - 4, FLOOR_Y - DOOR_H // 2, x + DOOR_W - 3, FLOOR_Y - DOOR_H // 2 + 1),
        fill=(230, 200, 60),
    )
    return im


def door_point(loc: dict[str, Any]) -> np.ndarray:
    """Where characters walk to: the floor just in front of the door."""
    return np.array([loc["door_x"] + DOOR_W / 2, FLOOR_Y + CHAR_R + 2], np.float64)


# ----------------------------------------------------------------------------- clip layout


def _composition(rng: np.random.Generator, total: int, parts: int, minimum: int) -> list[int]:
    """`parts` positive integers >= minimum summing to total, uniformly-ish at random."""
    extra = total - parts * minimum
    cuts = np.sort(rng.integers(0, extra + 1, parts - 1))
    return [minimum + int(b - a) for a, b in zip(np.r_[0, cuts], np.r_[cuts, extra], strict=True)]


def _camera(rng: np.random.Generator, loc: dict[str, Any]) -> tuple[int, int, int, bool]:
    """A camera setup (crop x, y, size, mirrored) whose view contains the door."""
    size = int(rng.integers(56, WORLD + 1))
    x0, y0 = loc["door_x"], FLOOR_Y - DOOR_H
    lo_x, hi_x = max(0, x0 + DOOR_W + 2 - size), min(WORLD - size, x0 - 2)
    lo_y, hi_y = max(0, FLOOR_Y + 34 - size), min(WORLD - size, y0 - 2)
    x = int(rng.integers(lo_x, max(lo_x, hi_x) + 1))
    y = int(rng.integers(lo_y, max(lo_y, hi_y) + 1))
    return x, y, size, bool(rng.uniform() < 0.3)


def layout_clip(rng: np.random.Generator, movie: dict[str, Any]) -> dict[str, Any]:
    """Frames, scenes, shots, cameras, character paths and item pickups of one clip."""
    n = int(rng.integers(10, 21))
    n_scenes = int(rng.choice([1, 2, 3], p=[0.3, 0.4, 0.3]))
    scene_len = _composition(rng, n, n_scenes, 3)
    n_shots = int(rng.integers(max(3, n_scenes), min(10, n) + 1))
    shots_per = [1] * n_scenes
    for _ in range(n_shots - n_scenes):  # add shots where frames allow
        free = [s for s in range(n_scenes) if shots_per[s] < scene_len[s]]
        shots_per[int(rng.choice(free))] += 1
    locs = rng.choice(len(movie["locations"]), n_scenes, replace=False)
    hero, others = 0, list(range(1, len(movie["cast"])))
    items = [str(o) for o in rng.choice(movie["objects"], int(rng.integers(0, 3)), replace=False)]
    frames, pickups, shot, start = [], [], 0, 0
    for s in range(n_scenes):
        loc = movie["locations"][int(locs[s])]
        m = scene_len[s]
        n_cams = min(shots_per[s], int(rng.integers(1, 4)))
        n_cams = max(n_cams, 2) if shots_per[s] > 1 else 1
        cams = [_camera(rng, loc) for _ in range(n_cams)]
        shot_len = _composition(rng, m, shots_per[s], 1)
        cam_seq, prev = [], -1
        for _ in range(shots_per[s]):
            c = int(rng.choice([c for c in range(n_cams) if c != prev] or [0]))
            cam_seq.append(c)
            prev = c
        shot_of = np.repeat(np.arange(shots_per[s]), shot_len)
        action = bool(rng.uniform() < P_ACTION)
        present = [hero] + [
            int(c) for c in rng.choice(others, int(rng.integers(0, 3)), replace=False)
        ]
        target = door_point(loc)
        paths = {}
        for c in present:
            while True:
                p0 = np.array([rng.uniform(8, WORLD - 8), rng.uniform(FLOOR_Y + 8, FLOOR_Y + 34)])
                if np.linalg.norm(p0 - target) > 35:
                    break
            moves = action and (c == hero or rng.uniform() < 0.7)
            paths[c] = (p0, rng.uniform(0.55, 0.95) if moves else 0.0)
        wander = {c: np.cumsum(rng.normal(0, 1.5, (m, 2)), axis=0) for c in present}
        p_pick = P_PICK_SCENE_START if s > 0 else 0.0
        pick_at = (
            0
            if rng.uniform() < p_pick
            else (int(rng.integers(1, m)) if rng.uniform() < P_PICK_IN_SCENE else -1)
        )
        for t in range(m):
            if t == pick_at:
                new = [o for o in movie["objects"] if o not in items]
                if new:
                    items = items + [str(rng.choice(new))]
                    pickups.append((start + t, items[-1]))
            progress = (t + 0.5 + rng.normal(0, 0.15)) / m
            chars = []
            for c, (p0, speed) in paths.items():
                step = np.clip(speed * progress, 0, 0.95)
                pos = (
                    p0
                    + (target - p0) * step
                    + (wander[c][t] if not speed else rng.normal(0, 1.2, 2))
                )
                chars.append((c, np.clip(pos, 4, WORLD - 4)))
            frames.append(
                {
                    "scene": s,
                    "loc": int(locs[s]),
                    "action": action,
                    "shot": shot + int(shot_of[t]),
                    "camera": cams[cam_seq[int(shot_of[t])]],
                    "chars": chars,
                    "items": list(items),
                }
            )
        shot += shots_per[s]
        start += m
    return {"n": n, "frames": frames, "pickups": pickups, "locs": [int(x) for x in locs]}


# ----------------------------------------------------------------------------- rendering


def _draw_shape(d: ImageDraw.ImageDraw, shape: str, x: float, y: float, colour: tuple) -> None:
    r = CHAR_R
    if shape == "circle":
        d.ellipse((x - r, y - r, x + r, y + r), fill=colour, outline=(0, 0, 0))
    elif shape == "square":
        d.rectangle((x - r, y - r, x + r, y + r), fill=colour, outline=(0, 0, 0))
    elif shape == "triangle":
        d.polygon([(x, y - r), (x + r, y + r), (x - r, y + r)], fill=colour, outline=(0, 0, 0))
    elif shape == "diamond":
        d.polygon([(x, y - r), (x + r, y), (x, y + r), (x - r, y)], fill=colour, outline=(0, 0, 0))
    else:  # cross
        d.rectangle((x - r, y - 2, x + r, y + 2), fill=colour)
        d.rectangle((x - 2, y - r, x + 2, y + r), fill=colour)


def render_frame(movie: dict, backgrounds: dict[int, Image.Image], frame: dict) -> bytes:
    """One frame as JPEG bytes: location view through the shot's camera, characters, items."""
    im = backgrounds[frame["loc"]].copy()
    d = ImageDraw.Draw(im)
    for c, (x, y) in sorted(frame["chars"], key=lambda cp: cp[1][1]):  # far (higher) first
        who = movie["cast"][c]
        _draw_shape(d, who["shape"], x, y, who["colour"])
        if c == 0:  # the hero carries the story's items
            for k, obj in enumerate(frame["items"][:5]):
                ix, iy = x + CHAR_R + 2, y - CHAR_R - 4 + k * (ITEM + 1) - 6
                d.rectangle(
                    (ix, iy, ix + ITEM - 1, iy + ITEM - 1),
                    fill=OBJECT_COLOURS[obj],
                    outline=(0, 0, 0),
                )
    x, y, size, mirror = frame["camera"]
    im = im.resize((FRAME, FRAME), Image.BILINEAR, box=(x, y, x + size, y + size))
    if mirror:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=90, subsampling=0)
    return buf.getvalue()


# ----------------------------------------------------------------------------- corpus


def make_clip(seed: int, split: str, index: int, movie: dict) -> tuple[dict, list[list[str]]]:
    """The layout and dialogue of clip `index` of `split` (deterministic)."""
    rng = np.random.default_rng([seed, SPLITS.index(split), index])
    clip = layout_clip(rng, movie)
    return clip, story.write_dialogue(rng, movie, clip)


def _write_clip(
    clip_dir: pathlib.Path,
    clip_id: int,
    movie: dict,
    clip: dict,
    subtitles: list[list[str]],
    backgrounds: dict[int, Image.Image],
    rng: np.random.Generator,
) -> None:
    clip_dir.mkdir(parents=True, exist_ok=True)
    n = clip["n"]
    scene_base, shot_base = int(rng.integers(0, 300)), int(rng.integers(0, 1500))
    info = {
        "tt_id": movie["tt_id"],
        "img_num": n,
        "img_id": list(range(n)),
        "shot_id": [shot_base + f["shot"] for f in clip["frames"]],
        "scene_id": [scene_base + f["scene"] for f in clip["frames"]],
    }
    perm = [int(i) for i in rng.permutation(n)]
    shuffled = {
        "tt_id": movie["tt_id"],
        "img_num": n,
        "input_id": list(range(n)),
        "gt_id": [int(i) for i in np.argsort(perm)],
        **{k: [info[k][i] for i in perm] for k in ("img_id", "shot_id", "scene_id")},
    }
    for name, value in (
        ("info.json", info),
        ("info_shuffled.json", shuffled),
        ("subtitle.json", subtitles),
    ):
        with open(clip_dir / name, "w") as f:
            json.dump(value, f, indent=2)
    for k, frame in enumerate(clip["frames"]):
        (clip_dir / f"{clip_id}_{k}.jpg").write_bytes(render_frame(movie, backgrounds, frame))


def split_movies(seed: int, sizes: dict[str, int]) -> tuple[list[int], list[int]]:
    """(training movies, held-out movies): disjoint, fixed for a seed."""
    order = [int(i) for i in np.random.default_rng([seed, 4242]).permutation(sizes["movies"])]
    return sorted(order[sizes["heldout"] :]), sorted(order[: sizes["heldout"]])


def corpus_plan(seed: int, sizes: dict[str, int]) -> list[tuple[str, int, int, int]]:
    """Every clip as (split, index in split, clip id, movie index)."""
    train_movies, heldout = split_movies(seed, sizes)
    plan, clip_id = [], 1
    for split in SPLITS:
        pool = heldout if split == "test_out_domain" else train_movies
        for i in range(sizes[split]):
            plan.append((split, i, clip_id, pool[i % len(pool)]))
            clip_id += 1
    return plan


def _write_clips(out: pathlib.Path, seed: int, plan: list[tuple[str, int, int, int]]) -> int:
    """Writes the planned clips; returns their number of frames."""
    movies: dict[int, dict] = {}
    backgrounds: dict[int, dict[int, Image.Image]] = {}
    n_frames = 0
    for split, i, clip_id, m in plan:
        if m not in movies:
            movies[m] = make_movie(seed, m)
            backgrounds[m] = {
                j: render_location(loc) for j, loc in enumerate(movies[m]["locations"])
            }
        clip, subtitles = make_clip(seed, split, i, movies[m])
        rng = np.random.default_rng([seed, SPLITS.index(split), i, 1])
        _write_clip(
            out / split / str(clip_id), clip_id, movies[m], clip, subtitles, backgrounds[m], rng
        )
        n_frames += clip["n"]
    return n_frames


def write_corpus(
    out_dir: os.PathLike | str,
    *,
    seed: int = 0,
    sizes: str | dict[str, int] = "default",
    workers: int | None = None,
) -> dict:
    """Writes the corpus in the public per-clip layout; returns a summary dict.

    `workers` processes (default: up to 2 for corpora of 500+ clips) write disjoint clips;
    the files do not depend on it.
    """
    t0 = time.perf_counter()
    sizes = _preset(sizes)
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = corpus_plan(seed, sizes)
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if len(plan) >= 500 else 1
    if workers > 1:
        chunks = [plan[k::workers] for k in range(workers)]
        ctx = multiprocessing.get_context("spawn")  # safe even if jax is loaded in the parent
        with ctx.Pool(workers) as pool:
            n_frames = sum(pool.starmap(_write_clips, [(out, seed, c) for c in chunks]))
    else:
        n_frames = _write_clips(out, seed, plan)
    clip_ids = {split: [c for s, _, c, _ in plan if s == split] for split in SPLITS}
    with open(out / "clip_id.json", "w") as f:
        json.dump(clip_ids, f, indent=2)
    train_movies, heldout = split_movies(seed, sizes)
    return {
        "out_dir": os.fspath(out),
        "seed": seed,
        "clips": {s: len(v) for s, v in clip_ids.items()},
        "frames": n_frames,
        "train_movies": [movie_id(m) for m in train_movies],
        "heldout_movies": [movie_id(m) for m in heldout],
        "seconds": round(time.perf_counter() - t0, 2),
    }
