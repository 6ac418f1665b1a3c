"""Parsing and validation of the M-SyMoN release (annotations, subtitles, features, videos).

Everything here is plain Python/NumPy so the transcript baseline and the tests can use it
without building a dataset. Each problem is counted in a `collections.Counter` under a fixed
reason name (see README.md, "Defects and skips"): either a *skip* (the input is left out) or a
*fix* (kept, with a stated repair).
"""

from __future__ import annotations

import collections
import glob
import math
import pathlib
from typing import Any

import numpy as np
from pydantic_core import PydanticCustomError

from tfds_builders import VIDEO_EXTS, arrays, common
from tfds_builders.msymon import schema
from tfds_builders.schema import Invalid, Unreadable, check, detail, each, load_json, skip

LANGUAGES = ("en", "ch", "es", "fr", "pt", "hi", "ru")
SPLITS = ("train", "val", "test")
# Seconds a feature array may fall short of the last annotated/narrated end time
# (rounding of the feature rate, a last partial second).
SHORT_TOLERANCE = 1.0


def normalise_matched(value: Any, counts: collections.Counter) -> bool | None:
    """`matched` as a bool (`schema.Sentence`: case and surrounding spaces are ignored, "yes",
    " yes", "No "); non-canonical spellings are counted under `kept_fixed_matched_spelling`;
    anything else returns None."""
    try:
        out = schema.matched_flag(value)
    except PydanticCustomError:
        return None
    _count_spelling(value, counts)
    return out


def _count_spelling(value: Any, counts: collections.Counter) -> None:
    if not isinstance(value, bool) and value not in schema.CANONICAL:
        counts["kept_fixed_matched_spelling"] += 1


def parse_video(video_id: str, entries: Any, path: pathlib.Path,
                counts: collections.Counter) -> dict | None:
    """One video's sentence list -> {sentences, begin, end, matched} or None (counted skip).

    Each sentence is a `schema.Sentence` (a failure skips the sentence, counted by reason with
    its key path: `malformed_sentence`, `unknown_matched_value`, `duplicate_key`); a matched
    one also needs a `schema.Span`. Rules: `matched` is normalised; an unmatched sentence
    keeps its text and has no span (its times, 0 upstream, are not read); a matched sentence
    with `end_time < begin_time` is kept as text but has no usable span, so it is stored as
    unmatched (`kept_as_unmatched_end_before_begin`); a matched sentence that starts before
    the previous matched one ends (by more than 0.5 s) is kept as annotated and counted
    (`kept_times_backwards`): ground-truth clip labels then follow `gt_clip_labels`.
    """
    try:
        check(list[Any], entries, "malformed_video", video_id, depth=0)
    except Invalid as e:
        skip(counts, e, path)
        return None
    sentences, begin, end, matched = [], [], [], []
    prev_end = None
    for k, e in enumerate(entries):
        where = f"{video_id}[{k}]"
        try:
            sent = check(schema.Sentence, e, "malformed_sentence", where)
            m = sent.matched
            span = check(schema.Span, e, "malformed_sentence", where) if m else None
        except Invalid as err:
            skip(counts, err, path)
            continue
        _count_spelling(e["matched"], counts)
        b, t = (span.begin_time, span.end_time) if span else (0.0, 0.0)
        if m and t < b:
            counts["kept_as_unmatched_end_before_begin"] += 1
            common.log.warning("%s %s: matched sentence ends (%s) before it begins (%s); "
                               "kept as unmatched", path, where, t, b)
            m = False
        if m and prev_end is not None and b < prev_end - 0.5:
            counts["kept_times_backwards"] += 1
        if m:
            prev_end = t
        sentences.append(sent.text.strip())
        begin.append(b if m else 0.0)
        end.append(t if m else 0.0)
        matched.append(m)
    if not sentences:
        common.record_skip(counts, "no_sentences", path, video_id)
        return None
    return {"sentences": sentences, "begin": np.asarray(begin, np.float32),
            "end": np.asarray(end, np.float32), "matched": np.asarray(matched, bool)}


def read_annotations(path: pathlib.Path, counts: collections.Counter) -> dict[str, dict]:
    """`annotations/<lang>/<split>.json` -> {video_id: parsed video}; a file that is not a
    JSON object is one `bad_json` skip naming it; a video id given twice is `duplicate_key`."""
    try:
        data = check(dict[str, Any], load_json(path), "bad_json", depth=0)
    except (Unreadable, Invalid) as e:
        common.record_skip(counts, "bad_json", path, detail(e) if isinstance(
            e, Unreadable) else f"not an object {{video_id: [...]}}: {e}")
        return {}
    out = {}
    for vid, entries in data.items():
        video = parse_video(vid, entries, path, counts)
        if video is not None:
            out[vid] = video
    return out


def read_subtitles(path: pathlib.Path, counts: collections.Counter) -> dict | None:
    """`subtitles/<lang>/<id>.json`: a list of `schema.SubtitleSentence`. A sentence that
    fails is left out and counted (`bad_subtitle_sentence`, `subtitle_sentence_bad_times`,
    `duplicate_key`), as is one with empty text (`empty_subtitle_sentence`); a file that is
    not a JSON list, or has no sentence left, is one `bad_subtitles` skip."""
    try:
        data = check(list[Any], load_json(path), "bad_subtitles", depth=0)
    except (Unreadable, Invalid) as e:
        common.record_skip(counts, "bad_subtitles", path, detail(e))
        return None
    items = []
    for _, x in each(schema.SubtitleSentence, enumerate(data), "bad_subtitle_sentence", path,
                     counts, lambda k: f"[{k}]"):
        if x.text.strip():
            items.append((x.begin_time, x.end_time, x.text.strip()))
        else:
            counts["empty_subtitle_sentence"] += 1
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
    """`features/<id>.npy` as float32 [T, dim] (`tfds_builders.arrays`: real, finite), or
    None (counted `bad_features`, or `features_wrong_dim` for a [T, D] array of another D)."""
    try:
        x = arrays.load(path, (None, None)).astype(np.float32)
        if x.shape[1] != dim:
            common.record_skip(counts, "features_wrong_dim", path,
                               f"dim {x.shape[1]}, the config expects {dim}")
            return None
    except arrays.ArrayError as e:
        common.record_skip(counts, "bad_features", path, e.detail)
        return None
    return x


def video_features(root: pathlib.Path, vid: str, dim: int, fps: float, need: float,
                   counts: collections.Counter, what: str) -> np.ndarray | None:
    """`root/features/<vid>.npy` as float32 [T, dim] covering `need` seconds at `fps` rows/s
    (within SHORT_TOLERANCE), or None counted as `missing_features` (`missing_video` when
    `root/videos/` lacks it), `features_too_short` or a `read_features` reason; `what` names
    the video in the warning."""
    fpath = root / "features" / f"{vid}.npy"
    if not fpath.is_file():
        common.record_skip(counts, *common.missing_features(root, vid), what)
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


def video_file(root: pathlib.Path, vid: str) -> pathlib.Path | None:
    """`root/videos/<vid>.<ext>` (yt-dlp's layout; of several extensions the first in
    alphabetical order, as `vnr.extract` picks), or None."""
    folder = root / "videos"
    if not folder.is_dir() or vid not in common.video_ids(folder):
        return None
    return min(p for p in folder.glob(f"{glob.escape(vid)}.*")
               if p.suffix.lower() in VIDEO_EXTS and p.stem == vid)


def probe_duration(path: pathlib.Path) -> float:
    """Seconds of the first video stream (its own duration, else the container's), read
    from the container without decoding; ValueError (one line) when it cannot be read."""
    import av

    try:
        with av.open(str(path)) as c:
            if not c.streams.video:
                raise ValueError("no video stream")
            s = c.streams.video[0]
            if s.duration is not None and s.time_base is not None:
                seconds = float(s.duration * s.time_base)
            else:
                seconds = (c.duration or 0) / 1_000_000
    except (av.error.FFmpegError, UnicodeDecodeError) as e:
        raise ValueError(f"not a readable video ({str(e).splitlines()[0]})") from None
    if not seconds > 0:
        raise ValueError("the container states no duration")
    return seconds


def video_duration(root: pathlib.Path, vid: str, need: float, counts: collections.Counter,
                   what: str) -> tuple[str, float] | None:
    """(file name under `root/videos/`, duration in seconds) of video `vid`, or None counted
    as `missing_video` (no file), `unreadable_video` or `video_too_short` (more than
    SHORT_TOLERANCE shorter than the annotated/narrated spans); `what` names the video."""
    path = video_file(root, vid)
    if path is None:
        common.record_skip(counts, "missing_video", root / "videos" / f"{vid}.*", what)
        return None
    try:
        seconds = probe_duration(path)
    except ValueError as e:
        common.record_skip(counts, "unreadable_video", path, f"{what}: {e}")
        return None
    if seconds + SHORT_TOLERANCE < need:
        common.record_skip(counts, "video_too_short", path,
                           f"{what}: {seconds:.1f} s of video, the annotation or narration "
                           f"spans {need:.1f} s")
        return None
    return path.name, seconds


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
