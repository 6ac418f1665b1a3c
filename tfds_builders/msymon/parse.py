"""Parsing and validation of the M-SyMoN release (annotations, subtitles, features).

Everything here is plain Python/NumPy so the transcript baseline and the tests can use it
without building a dataset. Each problem is counted in a `collections.Counter` under a fixed
reason name (see README.md, "Defects and skips"): either a *skip* (the input is left out) or a
*fix* (kept, with a stated repair).
"""

from __future__ import annotations

import collections
import json
import math
import pathlib
from typing import Any

import numpy as np

from tfds_builders import common

LANGUAGES = ("en", "ch", "es", "fr", "pt", "hi", "ru")
SPLITS = ("train", "val", "test")
# Seconds a feature array may fall short of the last annotated/narrated end time
# (rounding of the feature rate, a last partial second).
SHORT_TOLERANCE = 1.0


def normalise_matched(value: Any, counts: collections.Counter) -> bool | None:
    """`matched` as a bool: case and surrounding spaces are ignored ("yes", " yes", "No ").

    Non-canonical spellings are counted under `kept_fixed_matched_spelling`; anything else
    (not yes/no/true/false) returns None.
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("yes", "true", "y"):
        out = True
    elif text in ("no", "false", "n"):
        out = False
    else:
        return None
    if str(value) not in ("yes", "no"):
        counts["kept_fixed_matched_spelling"] += 1
    return out


def _time(x: Any) -> float | None:
    try:
        t = float(x)
    except (TypeError, ValueError):
        return None
    return t if math.isfinite(t) and t >= 0 else None


def parse_video(video_id: str, entries: Any, path: pathlib.Path,
                counts: collections.Counter) -> dict | None:
    """One video's sentence list -> {sentences, begin, end, matched} or None (counted skip).

    Rules: `matched` is normalised; an unmatched sentence keeps its text and has no span
    (its times, 0 upstream, are ignored); a matched sentence with `end_time < begin_time`
    is kept as text but has no usable span, so it is stored as unmatched
    (`kept_as_unmatched_end_before_begin`); a matched sentence that starts before the previous
    matched one ends (by more than 0.5 s) is kept as annotated and counted
    (`kept_times_backwards`): ground-truth clip labels then follow `gt_clip_labels`.
    """
    if not isinstance(entries, list):
        common.record_skip(counts, "malformed_video", path, f"{video_id}: not a list")
        return None
    sentences, begin, end, matched = [], [], [], []
    prev_end = None
    for k, e in enumerate(entries):
        where = f"{video_id}[{k}]"
        if not isinstance(e, dict) or not isinstance(e.get("text"), str):
            common.record_skip(counts, "malformed_sentence", path, f"{where}: no text")
            continue
        m = normalise_matched(e.get("matched"), counts)
        if m is None:
            common.record_skip(counts, "unknown_matched_value", path,
                               f"{where}: matched={e.get('matched')!r}")
            continue
        b, t = _time(e.get("begin_time")), _time(e.get("end_time"))
        if m and (b is None or t is None):
            common.record_skip(counts, "malformed_sentence", path, f"{where}: bad times")
            continue
        if m and t < b:
            counts["kept_as_unmatched_end_before_begin"] += 1
            common.log.warning("%s %s: matched sentence ends (%s) before it begins (%s); "
                               "kept as unmatched", path, where, t, b)
            m = False
        if m and prev_end is not None and b < prev_end - 0.5:
            counts["kept_times_backwards"] += 1
        if m:
            prev_end = t
        sentences.append(e["text"].strip())
        begin.append(b if m else 0.0)
        end.append(t if m else 0.0)
        matched.append(m)
    if not sentences:
        common.record_skip(counts, "no_sentences", path, video_id)
        return None
    return {"sentences": sentences, "begin": np.asarray(begin, np.float32),
            "end": np.asarray(end, np.float32), "matched": np.asarray(matched, bool)}


def read_annotations(path: pathlib.Path, counts: collections.Counter) -> dict[str, dict]:
    """`annotations/<lang>/<split>.json` -> {video_id: parsed video}; bad files are skips."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        common.record_skip(counts, "bad_json", path, str(e).splitlines()[0])
        return {}
    if not isinstance(data, dict):
        common.record_skip(counts, "bad_json", path, "not an object {video_id: [...]}")
        return {}
    out = {}
    for vid, entries in data.items():
        video = parse_video(str(vid), entries, path, counts)
        if video is not None:
            out[str(vid)] = video
    return out


def read_subtitles(path: pathlib.Path, counts: collections.Counter) -> dict | None:
    """`subtitles/<lang>/<id>.json`: [{begin_time, end_time, text}] timed narration sentences."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        items = [(float(e["begin_time"]), float(e["end_time"]), str(e["text"]).strip())
                 for e in data]
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as e:
        common.record_skip(counts, "bad_subtitles", path, f"{type(e).__name__}: {e}")
        return None
    items = [x for x in items if x[2]]
    bad = [x for x in items if not (0 <= x[0] <= x[1]) or not math.isfinite(x[1])]
    if bad:
        counts["subtitle_sentence_bad_times"] += len(bad)
        items = [x for x in items if x not in bad]
    if not items:
        common.record_skip(counts, "bad_subtitles", path, "no timed sentences")
        return None
    return {"sentences": [x[2] for x in items],
            "begin": np.asarray([x[0] for x in items], np.float32),
            "end": np.asarray([x[1] for x in items], np.float32)}


def _norm_text(s: str) -> str:
    return " ".join(s.lower().split())


def narration_times(sentences: list[str], subs: dict | None,
                    counts: collections.Counter) -> tuple[np.ndarray, np.ndarray]:
    """Per annotated sentence, when it is narrated (NaN where unknown).

    With as many subtitle sentences as annotated ones they pair by position; otherwise by
    equal (case/space-normalised) text, in order. Sentences left without a time are counted
    under `narration_time_unknown`.
    """
    n = len(sentences)
    nb, ne = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    if subs is None:
        return nb, ne
    if len(subs["sentences"]) == n:
        return subs["begin"].copy(), subs["end"].copy()
    j = 0
    keys = [_norm_text(s) for s in subs["sentences"]]
    for i, s in enumerate(sentences):
        key = _norm_text(s)
        for jj in range(j, len(keys)):
            if keys[jj] == key:
                nb[i], ne[i], j = subs["begin"][jj], subs["end"][jj], jj + 1
                break
    counts["kept_narration_time_unknown"] += int(np.isnan(nb).sum())
    return nb, ne


def read_features(path: pathlib.Path, dim: int, counts: collections.Counter
                  ) -> np.ndarray | None:
    """`features/<id>.npy` as float32 [T, dim], or None (counted `bad_features` /
    `features_wrong_dim`)."""
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        common.record_skip(counts, "bad_features", path, f"{type(e).__name__}: {e}")
        return None
    if x.ndim != 2 or x.shape[0] == 0:
        common.record_skip(counts, "bad_features", path, f"shape {x.shape}, expected [T, {dim}]")
        return None
    if x.shape[1] != dim:
        common.record_skip(counts, "features_wrong_dim", path,
                           f"dim {x.shape[1]}, the config expects {dim}")
        return None
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        common.record_skip(counts, "bad_features", path, "non-finite values")
        return None
    return x


def video_features(root: pathlib.Path, vid: str, dim: int, fps: float, need: float,
                   counts: collections.Counter, what: str) -> np.ndarray | None:
    """`root/features/<vid>.npy` as float32 [T, dim] covering `need` seconds at `fps` rows/s
    (within SHORT_TOLERANCE), or None counted as `missing_features`, `features_too_short` or
    a `read_features` reason; `what` names the video in the warning."""
    fpath = root / "features" / f"{vid}.npy"
    if not fpath.is_file():
        common.record_skip(counts, "missing_features", fpath, what)
        return None
    feats = read_features(fpath, dim, counts)
    if feats is None:
        return None
    if len(feats) / fps + SHORT_TOLERANCE < need:
        common.record_skip(counts, "features_too_short", fpath,
                           f"{what}: {len(feats) / fps:.1f} s of features, the annotation or "
                           f"narration spans {need:.1f} s")
        return None
    return feats


def spans_end(video: dict) -> float:
    """The last second the annotation or the narration refers to."""
    ends = [float(video["end"][video["matched"]].max()) if video["matched"].any() else 0.0]
    ne = video.get("narr_end")
    if ne is not None and np.isfinite(ne).any():
        ends.append(float(np.nanmax(ne)))
    return max(ends)


def gt_clip_labels(begin: np.ndarray, end: np.ndarray, matched: np.ndarray,
                   clip_begin: np.ndarray, clip_end: np.ndarray) -> np.ndarray:
    """Ground truth per clip: the matched sentence whose span holds the clip's midpoint.

    Spans are [begin, end); sentences are applied in order, so where annotated spans overlap
    (times going backwards) the later sentence wins. Clips no span covers get -1.
    """
    mid = (clip_begin + clip_end) / 2
    labels = np.full(len(mid), -1, np.int32)
    for s in np.flatnonzero(matched):
        labels[(mid >= begin[s]) & (mid < end[s])] = s
    return labels


def fixed_clips(duration: float, clip_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Cuts [0, duration) into consecutive clips of `clip_seconds` (the last one shorter)."""
    n = max(1, math.ceil(duration / clip_seconds - 1e-6))
    b = np.arange(n, dtype=np.float32) * clip_seconds
    return b, np.minimum(b + clip_seconds, duration).astype(np.float32)
