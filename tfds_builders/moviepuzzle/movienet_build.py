"""Reads a raw MovieNet `manual_dir` into MoviePuzzle clips or synopsis pairs, counting skips.

Layout (README.md, "MovieNet"): `annotation/<imdb>.json` (`scene[]` with `shot` ranges,
optional `story[]` synopsis alignment), `shot/<imdb>.txt` (start end kf1 kf2 kf3 per shot),
`subtitle/<imdb>.srt`, optional `meta/<imdb>.json`, keyframes
`<imdb>/shot_%04d_img_%d.jpg` (or `keyf_240p/<imdb>/...`, the release's folder name).

The rules are the pure functions of `movienet.py`; this module reads files and records every
removal in a `collections.Counter` by reason: `movie_*` counts movies (one warning naming the
file each), `frame_*` frames, `cue_*` subtitle cues, `story_*` synopsis paragraphs (and
`story_bad_timing` a story entry's timing left out of the frame rate), `meta_bad_json` a
meta file read as absent. Defects handled without removing anything are `kept_*` counts
(`kept_srt_unordered_cues_sorted`, `kept_cue_overlapping`) and what is only information a
`noted` counter (`srt_decoded_as_<enc>`), so the summary prints neither as a skip. `clip_*`
(clips) are counted by the builder. Every count names its file (and key path or block).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
from typing import Any

import numpy as np

from tfds_builders import common
from tfds_builders import schema as S
from tfds_builders.moviepuzzle import borders, schema
from tfds_builders.moviepuzzle import movienet as rules_mod

LAYOUT = (
    "annotation/<imdb>.json, shot/<imdb>.txt, subtitle/<imdb>.srt, meta/<imdb>.json (optional) "
    "and keyframes <imdb>/shot_%04d_img_%d.jpg"
)
FPS_KEYS = (("fps",), ("frame_rate",), ("video", "fps"), ("video_info", "fps"))
SYNOPSIS_FRACTIONS = {"train": 0.7, "val": 0.1, "test": 0.2}


@dataclasses.dataclass(frozen=True)
class Rules:
    """The curation knobs (paper values by default)."""

    default_fps: float = rules_mod.DEFAULT_FPS
    min_frames: int = rules_mod.MIN_FRAMES
    max_frames: int = rules_mod.MAX_FRAMES
    min_paired: float = rules_mod.MIN_PAIRED
    max_overlap_share: float = 0.2  # more overlapping cues than this: the .srt is broken
    segment_frames: int = 20  # synopsis pairs: keyframes sampled per story segment
    seed: int = 0
    # §2.2 / App. A.1 (clips config only): movies with at least this many dialogues (verbal
    # subtitle cues), with a synopsis (annotation `story[]` or meta `synopsis`) and with an
    # actor list (meta `cast[]` or annotation `cast[]`); which fields hold them is our reading
    min_dialogues: int = 500
    require_synopsis: bool = True
    require_cast: bool = True
    crop_borders: bool = True  # §2.1: black borders cropped (rules in borders.py)


def check_manual_dir(manual_dir: os.PathLike | str | None, config: str) -> pathlib.Path:
    """The manual_dir as a Path, or a one-line `ManualDirError` saying what it must hold."""
    if not manual_dir:
        raise common.ManualDirError(f"moviepuzzle/{config} needs --manual_dir holding {LAYOUT}")
    path = pathlib.Path(manual_dir)
    if not path.is_dir():
        raise common.ManualDirError(f"manual_dir {path} does not exist; it must hold {LAYOUT}")
    for sub in ("annotation", "shot"):
        if not (path / sub).is_dir():
            raise common.ManualDirError(f"manual_dir {path} has no {sub}/ folder; it must hold "
                                        f"{LAYOUT}")
    return path


def movie_ids(root: pathlib.Path) -> list[str]:
    """Every movie named by an annotation, shot or subtitle file."""
    ids = set()
    for sub, ext in (("annotation", ".json"), ("shot", ".txt"), ("subtitle", ".srt")):
        if (root / sub).is_dir():
            ids |= {p.stem for p in (root / sub).iterdir() if p.suffix == ext}
    return sorted(ids)


def _count(skips: collections.Counter, reason: str, n: Any) -> None:
    """Adds n to a count (no zero entries, so the summary lists only what happened)."""
    if int(n):
        skips[reason] += int(n)


def _json(path: pathlib.Path, model: Any) -> tuple[Any, str | None]:
    """(value, problem): the file validated as `model` (a dict of its top level; entries are
    checked where they are read), problem None on success, "missing", the parse error or
    the first key path that does not validate (a key given twice included)."""
    if not path.is_file():
        return None, "missing"
    try:
        data = S.load_json(path)
        S.check(model, data, "bad_json")
    except (S.Unreadable, S.Invalid) as e:
        return None, S.detail(e)
    return data, None


def read_fps(meta: Any, annotation: Any, default: float,
             skips: collections.Counter | None = None,
             annotation_path: os.PathLike | str = "annotation",
             meta_path: os.PathLike | str = "meta") -> tuple[float, str]:
    """(fps, where it came from): a meta field (`fps`, `frame_rate`, `video.fps`,
    `video_info.fps`; one given but not a number in 1-240 is a skip, `meta_bad_fps`, naming
    `meta_path` and the field), else the median frames/second of the annotation's `story[]` entries
    (their `frame` and `duration` ranges, `schema.StoryTiming`: numbers; an entry that has
    them but not as numbers gives no rate: a skip of its timing, `story_bad_timing`, naming
    `annotation_path` and its key path), else `default`."""
    for keys in FPS_KEYS:
        node = meta
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, int | float) and not isinstance(node, bool) and 1 <= node <= 240:
            return float(node), "meta." + ".".join(keys)
        if node is not None and skips is not None:  # given, but no frame rate: never silent
            common.record_skip(skips, "meta_bad_fps", meta_path, f"{'.'.join(keys)}: "
                               f"{str(node)[:40]!r} is not a frame rate (a number in 1-240)")
    rates = []
    for k, s in enumerate((annotation or {}).get("story") or []):
        try:
            timing = S.check(schema.StoryTiming, s, "story_bad_entry", f"story[{k}]")
        except S.Invalid as e:  # an entry without (numeric) frame and time ranges: no rate
            if skips is not None and isinstance(s, dict) and ("frame" in s or "duration" in s):
                common.record_skip(skips, "story_bad_timing", annotation_path,
                                   f"{e}; no frame rate from it")
            continue
        (f0, f1), (t0, t1) = timing.frame, timing.duration
        if t1 - t0 > 1:
            rates.append((f1 - f0) / (t1 - t0))
    if rates and 1 <= float(np.median(rates)) <= 240:
        return float(np.median(rates)), "annotation.story"
    return default, "default"


def read_shots(path: pathlib.Path) -> list[tuple[int, int, list[int]]]:
    """[(start, end, keyframes)] per line of a shot file (`schema.shot_line`: integers);
    ValueError naming the bad line (or the file, when it is not UTF-8 text)."""
    shots = []
    try:
        text = S.read_text(path)
    except S.Unreadable as e:
        raise ValueError(S.first_line(e)) from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            nums = schema.shot_line(line)
        except S.Invalid as e:
            raise ValueError(f"line {n}: {e.message}: {line.strip()[:40]!r}") from None
        if len(nums) < 3 or nums[1] < nums[0]:
            raise ValueError(f"line {n} needs start <= end and keyframes: {line.strip()[:40]!r}")
        shots.append((nums[0], nums[1], nums[2:]))
    if not shots:
        raise ValueError("no shots")
    return shots


def scene_of_shots(annotation: Any, n_shots: int) -> tuple[np.ndarray | None, str, str]:
    """(scene index per shot, -1 where no scene covers it; reason, detail). Scenes are
    numbered in order of their first shot; on a problem the array is None."""
    scenes = annotation.get("scene") if isinstance(annotation, dict) else None
    if not isinstance(scenes, list) or not scenes:
        return None, "movie_no_scenes", "no `scene` list"
    ranges = []
    for k, s in enumerate(scenes):
        try:
            a, b = S.check(schema.Scene, s, "movie_bad_scenes", f"scene[{k}]").shot
        except S.Invalid as e:
            return None, "movie_bad_scenes", f"{e} (expected shot [start, end] integers)"
        if a < 0 or b < a:
            return None, "movie_bad_scenes", f"scene[{k}].shot={[a, b]}"
        ranges.append((a, b))
    ranges.sort()
    for (a0, b0), (a1, b1) in zip(ranges, ranges[1:]):
        if a1 <= b0:
            return None, "movie_bad_scenes", f"scene shot ranges {[a0, b0]} and {[a1, b1]} overlap"
    if ranges[-1][1] >= n_shots:
        return None, "movie_scenes_beyond_shots", (
            f"scene ends at shot {ranges[-1][1]} but the shot file has {n_shots} shots")
    out = np.full(n_shots, -1, np.int64)
    for k, (a, b) in enumerate(ranges):
        out[a : b + 1] = k
    return out, "", ""


def load_cues(path: pathlib.Path, rules: Rules, skips: collections.Counter
              ) -> tuple[list[rules_mod.Cue] | None, str, str]:
    """(verbal cues sorted, cleaned; reason, detail): None and a movie_* reason when the
    subtitles cannot be used."""
    if not path.is_file():
        return None, "movie_no_subtitle", "no such file"
    text, enc = rules_mod.decode_subtitle(path.read_bytes())
    if enc not in ("utf-8", "utf-8-sig"):
        common.note(skips, f"srt_decoded_as_{enc}", what=path)
        common.log.info("%s: decoded as %s", path, enc)
    problems: list[str] = []
    cues, bad = rules_mod.parse_srt(text, problems)
    for problem in problems:
        common.record_skip(skips, "cue_malformed", path, problem)
    if not cues:
        return None, "movie_no_cues", f"no parsable cue ({bad} malformed blocks)"
    if not rules_mod.is_english([c.text for c in cues]):
        a, s, n = rules_mod.english_stats([c.text for c in cues])
        return None, "movie_not_english", f"ascii letters {a:.2f}, stop words {s:.2f}, {n} words"
    verbal = [rules_mod.Cue(c.start, c.end, rules_mod.clean_utterance(c.text)) for c in cues]
    _count(skips, "cue_non_verbal", sum(not c.text for c in verbal))
    verbal = [c for c in verbal if c.text]
    ordered, unordered, overlaps = rules_mod.order_cues(verbal)
    if unordered:
        common.count(skips, f"{common.KEPT_PREFIX}srt_unordered_cues_sorted",
                     f"{path} ({unordered} cue(s) out of time order)")
        common.log.warning("%s: %d cues out of time order; sorted", path, unordered)
    if overlaps > rules.max_overlap_share * max(len(ordered), 1):
        return None, "movie_srt_overlapping", (
            f"{overlaps} of {len(ordered)} cues overlap the previous one")
    if overlaps:  # kept: only a frame inside two cues stays unpaired
        common.count(skips, f"{common.KEPT_PREFIX}cue_overlapping",
                     f"{path} ({overlaps} cue(s) overlap the previous one)", overlaps)
    return ordered, "", ""


def _frame_dir(root: pathlib.Path, imdb: str) -> pathlib.Path | None:
    for d in (root / imdb, root / "keyf_240p" / imdb):
        if d.is_dir():
            return d
    return None


def load_movie(root: pathlib.Path, imdb: str, rules: Rules, skips: collections.Counter,
               require_subtitles: bool = True) -> dict | None:
    """A movie's usable keyframes (as contiguous runs), cues and fps, or None (counted).

    Frames are dropped (counted) when their JPEG is missing, their shot lies outside every
    scene range, or the keyframe index lies outside its shot; each drop ends a run, so no clip
    spans it. With `require_subtitles=False` (synopsis pairs) a subtitle problem only drops the
    subtitles (counted as `srt_unused_<reason>`).
    """
    ann_path = root / "annotation" / f"{imdb}.json"
    annotation, problem = _json(ann_path, schema.Annotation)
    if problem:
        reason = "movie_no_annotation" if problem == "missing" else "movie_bad_annotation"
        common.record_skip(skips, reason, ann_path, problem)
        return None
    shot_path = root / "shot" / f"{imdb}.txt"
    if not shot_path.is_file():
        common.record_skip(skips, "movie_no_shot_file", shot_path, "no such file")
        return None
    try:
        shots = read_shots(shot_path)
    except (OSError, ValueError) as e:
        common.record_skip(skips, "movie_bad_shot_file", shot_path, str(e))
        return None
    scene_of, reason, detail = scene_of_shots(annotation, len(shots))
    if scene_of is None:
        common.record_skip(skips, reason, ann_path, detail)
        return None
    sub_path = root / "subtitle" / f"{imdb}.srt"
    cues, reason, detail = load_cues(sub_path, rules, skips)
    if cues is None:
        if require_subtitles:
            common.record_skip(skips, reason, sub_path, detail)
            return None
        skips[f"srt_unused_{reason}"] += 1
        cues = []
    frame_dir = _frame_dir(root, imdb)
    if frame_dir is None:
        common.record_skip(skips, "movie_no_keyframes", root / imdb, "no keyframe folder")
        return None
    meta_path = root / "meta" / f"{imdb}.json"
    meta, problem = _json(meta_path, schema.Meta)
    if problem and problem != "missing":
        common.count(skips, "meta_bad_json", f"{meta_path} ({problem})")
        common.log.warning("%s: unusable (%s); read as absent (fps from the annotation or "
                           "the default, no synopsis or cast from it)", meta_path, problem)
    fps, fps_from = read_fps(meta, annotation, rules.default_fps, skips, ann_path, meta_path)
    on_disk = set(os.listdir(frame_dir))
    runs, run, ordinal = [], [], 0
    for i, (start, end, kfs) in enumerate(shots):
        for k, frame in enumerate(kfs):
            name = f"shot_{i:04d}_img_{k}.jpg"
            why = ("frame_shot_outside_scenes" if scene_of[i] < 0 else
                   "frame_keyframe_outside_shot" if not start <= frame <= end else
                   "frame_missing_jpeg" if name not in on_disk else "")
            if why:
                skips[why] += 1
                if run:
                    runs.append(run)
                run = []
            else:
                run.append({"shot": i, "img": k, "frame": frame, "scene": int(scene_of[i]),
                            "ordinal": ordinal, "path": frame_dir / name})
            ordinal += 1
    if run:
        runs.append(run)
    return {"imdb": imdb, "fps": fps, "fps_from": fps_from, "cues": cues, "runs": runs,
            "annotation": annotation, "annotation_path": ann_path, "meta_path": meta_path,
            "meta": meta if isinstance(meta, dict) else {}}


def border_crop(movie: dict, skips: collections.Counter) -> dict | None:
    """{"box", "size"}: the movie's black-border crop (`borders.py`, measured on up to
    `borders.SAMPLE` keyframes of its frame size), or None when it has no border."""
    from PIL import Image

    paths = [f["path"] for run in movie["runs"] for f in run]
    size, found = None, []
    for path in borders.sample_paths(paths):
        try:
            with Image.open(path) as im:
                size = size or im.size
                if im.size == size:
                    found.append(borders.frame_borders(np.asarray(im.convert("RGB"))))
        except Exception:  # noqa: BLE001 - an undecodable frame is skipped with its clip later
            continue
    box = borders.movie_box(found, *size) if size else None
    if box is None:
        return None
    skips[f"{common.KEPT_PREFIX}movie_border_cropped"] += 1
    common.log.info("%s: black borders cropped to box %s of %s", movie["imdb"], box, size)
    return {"box": box, "size": size}


def movie_rule_failure(movie: dict, rules: Rules) -> tuple[str, str] | None:
    """(skip reason, detail) when a movie fails a movie-level rule of §2.2 / App. A.1."""
    n = len(movie["cues"])
    if n < rules.min_dialogues:
        return ("movie_few_dialogues",
                f"{n} dialogues (verbal cues), fewer than {rules.min_dialogues}")
    ann, meta = movie["annotation"] or {}, movie["meta"]
    where = movie.get("meta_path", "meta")
    synopsis = bool(ann.get("story")) or bool(str(meta.get("synopsis") or "").strip())
    if rules.require_synopsis and not synopsis:
        return "movie_no_synopsis", f"no synopsis (annotation story[] or {where} synopsis)"
    if rules.require_cast and not (meta.get("cast") or ann.get("cast")):
        return "movie_no_cast", f"no actor list ({where} cast[] or annotation cast[])"
    return None


def _renumber(ids: list[int]) -> list[int]:
    seen: dict[int, int] = {}
    return [seen.setdefault(i, len(seen)) for i in ids]


def _meta(clip_id: str, imdb: str, frames: list[dict], texts: list[str]) -> dict:
    return {
        "clip_id": clip_id,
        "movie_id": imdb,
        "subtitles": texts,
        "img_id": [f["ordinal"] for f in frames],
        "shot_id": _renumber([f["shot"] for f in frames]),
        "scene_id": _renumber([f["scene"] for f in frames]),
        "frame_paths": [f["path"] for f in frames],
    }


def movie_clips(movie: dict, rules: Rules, skips: collections.Counter) -> list[dict]:
    """MoviePuzzle clips of one movie, in time order (pairing, middle frame, greedy cut)."""
    cues, clips = movie["cues"], []
    for run in movie["runs"]:
        cue_of = rules_mod.pair_frames([f["frame"] / movie["fps"] for f in run], cues)
        _count(skips, "frame_unpaired_overlapping_cues", (cue_of == rules_mod.AMBIGUOUS).sum())
        keep = rules_mod.keep_middle(cue_of)
        _count(skips, "frame_same_utterance", (~keep).sum())
        run = [f for f, k in zip(run, keep) if k]
        cue_of = cue_of[keep]
        spans = rules_mod.cut_clips(cue_of >= 0, rules.min_frames, rules.max_frames,
                                    rules.min_paired)
        _count(skips, "frame_not_in_clip", len(run) - sum(b - a for a, b in spans))
        for a, b in spans:
            texts = [cues[c].text if c >= 0 else "" for c in cue_of[a:b]]
            clips.append(_meta(f"{movie['imdb']}_{len(clips):04d}", movie["imdb"],
                               run[a:b], texts))
    return clips


def movie_story_pairs(movie: dict, rules: Rules, skips: collections.Counter) -> list[dict]:
    """(segment, synopsis paragraph) pairs from the annotation's `story[]` alignment: each
    entry's `shot` range gives up to `segment_frames` equally spaced keyframes (subtitles
    paired by time as for clips, "" otherwise; no middle-frame or 80% rule) and its
    `description` the paragraph."""
    story = movie["annotation"].get("story")
    if not isinstance(story, list) or not story:
        common.record_skip(skips, "movie_no_story", movie["annotation_path"],
                           "no `story` list (synopsis alignment: story[].shot, "
                           "story[].description)")
        return []
    by_shot = collections.defaultdict(list)
    for run in movie["runs"]:
        for f in run:
            by_shot[f["shot"]].append(f)
    pairs = []
    for k, entry in enumerate(story):
        try:
            got = S.check(schema.StoryEntry, entry, "story_bad_entry", f"story[{k}]")
            (a, b), desc = got.shot, got.description
            problem = "empty description" if not desc.strip() else "shot range ends before " \
                "it starts" if b < a else ""
        except S.Invalid as e:
            problem = str(e)
        if problem:
            common.count(skips, "story_bad_entry", f"{movie['annotation_path']} story[{k}]")
            common.log.warning("%s: story[%d] lacks a description or a [start, end] shot range"
                               " (%s)", movie["annotation_path"], k, problem)
            continue
        cands = [f for s in range(a, b + 1) for f in by_shot.get(s, [])]
        if len(cands) < 2:
            skips["story_no_frames"] += 1
            continue
        n = min(rules.segment_frames, len(cands))
        frames = [cands[int((j + 0.5) * len(cands) / n)] for j in range(n)]
        cue_of = rules_mod.pair_frames([f["frame"] / movie["fps"] for f in frames],
                                       movie["cues"])
        texts = [movie["cues"][c].text if c >= 0 else "" for c in cue_of]
        meta = _meta(f"{movie['imdb']}_s{k:03d}", movie["imdb"], frames, texts)
        meta["synopsis"] = " ".join(desc.split())
        pairs.append(meta)
    return pairs


def scan(root: pathlib.Path, rules: Rules, skips: collections.Counter,
         synopsis: bool = False) -> dict[str, list[dict]]:
    """{split: [clip metadata]} for the `movienet` (clips) or `movienet_synopsis` configs."""
    per_movie: dict[str, list[dict]] = {}
    for imdb in movie_ids(root):
        movie = load_movie(root, imdb, rules, skips, require_subtitles=not synopsis)
        if movie is None:
            continue
        failed = None if synopsis else movie_rule_failure(movie, rules)
        if failed is not None:
            common.record_skip(skips, failed[0], movie["annotation_path"], failed[1])
            continue
        items = (movie_story_pairs if synopsis else movie_clips)(movie, rules, skips)
        crop = border_crop(movie, skips) if items and rules.crop_borders else None
        for item in items:
            item["crop"] = crop
        if not items:
            if not synopsis:
                common.record_skip(skips, "movie_no_clips", root / "annotation" / f"{imdb}.json",
                                   f"no window of {rules.min_frames}-{rules.max_frames} frames "
                                   f"with at least {rules.min_paired:.0%} paired")
            continue
        per_movie[imdb] = items
    counts = {m: len(v) for m, v in per_movie.items()}
    out: dict[str, list[dict]] = collections.defaultdict(list)
    if synopsis:
        where = rules_mod.split_movies_by_fraction(counts, SYNOPSIS_FRACTIONS, rules.seed)
        for m in sorted(per_movie):
            out[where[m]] += per_movie[m]
        return {s: out[s] for s in SYNOPSIS_FRACTIONS}
    labels = rules_mod.split_clips(counts, rules.seed)
    for m in sorted(per_movie):
        for meta, split in zip(per_movie[m], labels[m]):
            out[split].append(meta)
    return {s: out[s] for s in rules_mod.SPLITS}
