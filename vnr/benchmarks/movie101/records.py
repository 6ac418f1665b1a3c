"""Movie101 records as the trainer reads them: narration splits (joined with "+"), their
movies (`MovieTable`), which narrations can be used, and the per-split counts of the run's log.

The rule (MCN and TNG, training and evaluation alike): a narration is used when its movie
has a record in the movies config with CLIP and S3D seconds and the narration starts within
them. Otherwise it is left out, counted per split and reason, and its first ids are named
in the run's log:
  no_movie_record     the movie is in no split of the movies config (e.g. not listed in
                      public_split.json);
  no_video_features   the movie's clip / s3d files are absent or unreadable;
  span_past_features  the narration starts after the movie's last feature second.
A missing cast (a movie without a meta_anno.json entry), frame faces or portrait features
never leave a narration out: zeros and empty masks stand in, as in upstream's reader, and
the narrations concerned are counted per split. Evaluation reports `narrations` (scored)
and `left_out`.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from typing import Any

import numpy as np

log = logging.getLogger("vnr.benchmarks.movie101")
_LOCK = threading.Lock()
_USABLE: dict[tuple, tuple[np.ndarray, dict[str, int], dict[str, list[str]]]] = {}
REASONS = ("no_movie_record", "no_video_features", "span_past_features")


class Concat:
    """Random access over several sources, one after the other (a split "a+b")."""

    def __init__(self, sources: list[Any]):
        self.sources = sources
        self.bounds = np.cumsum([0] + [len(s) for s in sources])

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def __getitem__(self, index: int) -> dict:
        index = int(index) % len(self)
        k = int(np.searchsorted(self.bounds, index, side="right")) - 1
        return self.sources[k][index - int(self.bounds[k])]


class Subset:
    """The records of `source` at `indices`, in that order."""

    def __init__(self, source: Any, indices: np.ndarray):
        self.source, self.indices = source, np.asarray(indices, np.int64)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> dict:
        return self.source[int(self.indices[int(index)])]


def source(cfg: Any, config: str, split: str) -> Any:
    """The records of `split` of movie101/`config` ("a+b" joins splits, in that order)."""
    from tfds_builders import movie101

    parts = [movie101.data_source(config, s, cfg.data_dir, manual_dir=cfg.manual_dir or None)
             for s in split.split("+")]
    return parts[0] if len(parts) == 1 else Concat(parts)


class MovieTable:
    """movie_id -> movie record of the `*_movies` config (all splits), picklable, lazily
    indexed per process, with a small cache of recently used movies. `info[movie]` =
    (feature seconds, has frame faces, portrait mask, cast size)."""

    def __init__(self, cfg: Any):
        self.config, self.data_dir = cfg.movies_config, os.path.abspath(cfg.data_dir)
        self.manual_dir = cfg.manual_dir or None
        self._index: dict[str, tuple[str, int]] | None = None
        self._sources: dict[str, Any] = {}
        self._cache: collections.OrderedDict = collections.OrderedDict()
        self.info: dict[str, tuple[int, bool, np.ndarray, int]] = {}

    def _open(self) -> None:
        from tfds_builders import movie101

        with _LOCK:  # grain maps in threads: index once, publish when complete
            if self._index is not None:
                return
            index, sources, info = {}, {}, {}
            for split in movie101.split_names(self.config, self.data_dir, self.manual_dir):
                src = movie101.data_source(self.config, split, self.data_dir, self.manual_dir)
                sources[split] = src
                for i in range(len(src)):
                    rec = src[i]
                    index[rec["movie_id"]] = (split, i)
                    info[rec["movie_id"]] = (
                        min(len(rec["clip"]), len(rec["s3d"])), bool(len(rec["face"])),
                        np.asarray(rec["portrait_face_mask"], bool), len(rec["cast_ids"]))
            self._sources, self.info = sources, info
            self._index = index

    def __contains__(self, movie_id: str) -> bool:
        if self._index is None:
            self._open()
        return movie_id in self._index

    def __getitem__(self, movie_id: str) -> dict:
        if movie_id in self._cache:
            self._cache.move_to_end(movie_id)
            return self._cache[movie_id]
        if self._index is None:
            self._open()
        if movie_id not in self._index:
            raise KeyError(f"movie {movie_id} is not in movie101/{self.config}")
        split, i = self._index[movie_id]
        rec = self._sources[split][i]
        self._cache[movie_id] = rec
        if len(self._cache) > 8:
            self._cache.popitem(last=False)
        return rec

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _index=None, _sources={}, _cache=collections.OrderedDict(),
                    info={})


def _reason(table: MovieTable, rec: dict) -> str | None:
    mid = rec["movie_id"]
    if mid not in table:
        return "no_movie_record"
    seconds = table.info[mid][0]
    if not seconds:
        return "no_video_features"
    if int(np.floor(float(rec["start"]))) >= seconds:
        return "span_past_features"
    return None


def usable(cfg: Any, split: str) -> tuple[np.ndarray, dict[str, int], dict[str, list[str]]]:
    """(indices of the split's usable narrations, left-out count per reason, the first ids
    left out per reason), computed once per process and dataset."""
    key = (cfg.config, cfg.movies_config, os.path.abspath(cfg.data_dir), split)
    if key not in _USABLE:
        src, table = source(cfg, cfg.config, split), MovieTable(cfg)
        keep, counts, named = [], collections.Counter(), collections.defaultdict(list)
        for i in range(len(src)):
            rec = src[i]
            why = _reason(table, rec)
            if why is None:
                keep.append(i)
                continue
            counts[why] += 1
            if len(named[why]) < 5:
                named[why].append(f"{rec['id']} (movie {rec['movie_id']})")
        _USABLE[key] = (np.asarray(keep, np.int64), dict(counts), dict(named))
    return _USABLE[key]


def usable_source(cfg: Any, split: str) -> Subset:
    """The usable narrations of `split` (`usable`), in the split's order."""
    return Subset(source(cfg, cfg.config, split), usable(cfg, split)[0])


def coverage(cfg: Any, splits: list[str]) -> dict[str, dict[str, int]]:
    """split -> counts of its narrations: all, used, left out per reason, and of the used
    ones those whose movie has no cast / frame faces / a portrait feature, and those that
    name a role with a portrait feature (k < data.max_roles): MCN's role-pointer targets,
    TNG's portrait tokens."""
    table = MovieTable(cfg)
    table._open()
    out = {}
    for split in splits:
        src = source(cfg, cfg.config, split)
        idx, left, _ = usable(cfg, split)
        c = collections.Counter(narrations=len(src), used=len(idx))
        c.update({f"left_out_{k}": n for k, n in left.items()})
        max_roles = cfg.get("max_roles", 0)
        for i in idx:
            rec = src[int(i)]
            _, faces, mask, cast = table.info[rec["movie_id"]]
            c["without_cast"] += cast == 0
            c["with_faces"] += faces
            c["with_portraits"] += bool(mask.any())
            c["with_role_targets"] += any(
                int(k) < min(max_roles, len(mask)) and mask[int(k)] for k in rec["roles"])
        out[split] = dict(c)
    return out


def log_coverage(cfg: Any, cov: dict[str, dict[str, int]]) -> None:
    """One line per split: a warning when narrations are left out or lack a cast, faces or
    portraits, else info."""
    for split, c in cov.items():
        left = {k[len("left_out_"):]: n for k, n in c.items() if k.startswith("left_out_")}
        msg = (f"movie101/{cfg.config} {split}: {c['used']} of {c['narrations']} narrations "
               f"used; {c.get('without_cast', 0)} of them without a cast, "
               f"{c.get('with_faces', 0)} with frame faces, {c.get('with_portraits', 0)} with "
               f"portrait features, {c.get('with_role_targets', 0)} naming a role that has "
               "one (role-pointer targets / portrait tokens)")
        if left:
            named = usable(cfg, split)[2]
            msg += "; left out: " + ", ".join(
                f"{n} {k} (e.g. {', '.join(named.get(k, [])[:2])})" for k, n in left.items())
        problem = left or c.get("without_cast") or c["used"] > c.get("with_faces", 0) or \
            c["used"] > c.get("with_portraits", 0)
        (log.warning if problem else log.info)(msg)
