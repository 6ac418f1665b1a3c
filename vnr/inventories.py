"""What the releases' splits hold, and what two splits share: the comparison behind
`vnr.contamination` (the report and the transfer check).

A release is read by its builder's `inventory` (`tfds_builders.<name>.inventory`: the splits
the builder makes, one `tfds_builders.Held` per video) and kept on disk (`inventory`: keyed
by the release's file names, sizes and times, the builder config and the reading code).
Two splits share a video when the same id (in the same id space: `youtube:`, `xigua:`,
`moviepuzzle:`, `lsmdc:`) is in both, and a movie when both name it: by IMDb id where both
give one, and by title under the rules of the SYMON/YMS exclusion
(`tfds_builders.symon.group_titles` / `movies_of`: the same movie key, a YMS alias, or a
non-exact rule such as a year given on one side only or a franchise prefix), so "Avengers
Age of Ultron" and "Avengers: Age of Ultron (2015)" are one movie. The rules over-match on
purpose (remakes of one title count as one movie): a test movie must not hide in training.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from absl import logging

BENCHMARKS = ("symon", "msymon", "yms", "moviepuzzle", "movie101", "sc2st")
CONFIGURED = ("symon", "msymon")  # their splits depend on the builder config
CACHE_FORMAT = 2  # bump when what an inventory holds changes


def reader(name: str) -> Callable[..., dict[str, list[Any]]]:
    """The builder's `inventory` of benchmark `name` ({split: [Held]} of a release dir)."""
    from tfds_builders import movie101, moviepuzzle, msymon, sc2st, symon
    from tfds_builders.msymon import yms

    readers = {"symon": symon.inventory, "msymon": msymon.inventory, "yms": yms.inventory,
               "moviepuzzle": moviepuzzle.inventory, "movie101": movie101.inventory,
               "sc2st": sc2st.inventory}
    if name not in readers:
        raise ValueError(f"unknown benchmark {name!r}: one of {', '.join(BENCHMARKS)}")
    return readers[name]


def cache_dir() -> pathlib.Path:
    """Where inventories are kept: `$VNR_CACHE_DIR/inventory` (default ~/.cache/vnr)."""
    return pathlib.Path(os.environ.get("VNR_CACHE_DIR", "~/.cache/vnr")).expanduser() / \
        "inventory"


@functools.lru_cache(maxsize=8)
def _code_digest(package: str) -> str:
    """The reading code: the builder package's files and the shared readers they use."""
    files = sorted(pathlib.Path(package).glob("*.py")) + [
        _builders_root() / f for f in ("__init__.py", "common.py", "schema.py")]
    return hashlib.sha256(b"".join(p.read_bytes() for p in files if p.is_file())).hexdigest()


def _builders_root() -> pathlib.Path:
    from tfds_builders import release_fingerprint

    return pathlib.Path(release_fingerprint.__code__.co_filename).parent


def _decode(raw: Any) -> dict[str, list[Any]]:
    """A cached inventory back to Held tuples (ValueError for anything else)."""
    from tfds_builders import Held

    if not isinstance(raw, dict):
        raise ValueError("not an object")
    out = {}
    for split, rows in raw.items():
        if not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == 3 and isinstance(r[0], str)
                and isinstance(r[1], list) and all(isinstance(t, str) for t in r[1])
                and isinstance(r[2], str) for r in rows):
            raise ValueError(f"split {split!r} is not a list of [video, [titles], imdb]")
        out[split] = [Held(r[0], tuple(r[1]), r[2]) for r in rows]
    return out


def inventory(name: str, path: str, config: str = "", dim: int = 0, fps: float = 1.0
              ) -> dict[str, list[Any]]:
    """{split: [Held]} of the release of benchmark `name` at `path` (SYMON and M-SyMoN: as
    builder `config` splits it, default text_only), kept on disk under `cache_dir()`: a
    transfer run checks its source on every start, and SYMON's inventory parses every
    narration file (1.07 s for the 40 public sample videos: some 2.3 minutes for the
    release's 5,193). A release with no video is a `ManualDirError`; an unreadable or
    unwritable cache costs only the recomputation (logged)."""
    from tfds_builders import release_fingerprint
    from tfds_builders.symon import ManualDirError

    kwargs: dict[str, Any] = {}
    if name in CONFIGURED:
        kwargs["config"] = config or "text_only"
        if name == "msymon":
            kwargs.update(dim=int(dim), fps=float(fps))
    read = reader(name)
    package = str(pathlib.Path(read.__code__.co_filename).parent)
    key = hashlib.sha256(json.dumps([CACHE_FORMAT, name, os.path.realpath(path), kwargs,
                                     release_fingerprint(path), _code_digest(package)],
                                    sort_keys=True).encode()).hexdigest()[:24]
    cached = cache_dir() / f"{name}-{key}.json"
    try:
        return _decode(json.loads(cached.read_text()))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        logging.warning("inventory cache %s unreadable (%s): read again", cached, e)
    out = read(path, **kwargs)
    if not any(out.values()):
        raise ManualDirError(f"{path}: no video in any split of this {name} release "
                             f"({', '.join(f'{s} 0' for s in out) or 'no split'})")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
        tmp.write_text(json.dumps(out))
        tmp.replace(cached)
    except OSError as e:
        logging.warning("inventory cache %s not written (%s): it is recomputed next time",
                        cached, e)
    return out


def imdb_key(text: str) -> str:
    """`tt0414387` from an IMDb id or URL (leading zeros beyond 7 digits dropped, as in
    Sc2St's `tt00000414387`); "" when there is none."""
    found = re.search(r"tt(\d+)", text or "")
    return f"tt{int(found.group(1)):07d}" if found else ""


def is_training(split: str) -> bool:
    """A split models train on (`train`, `<lang>_train`, `<lang>_weak`, `train_clips`)."""
    return re.search(r"(^|_)(train|training|weak)(_clips)?$", split) is not None


@dataclasses.dataclass(frozen=True, eq=False)
class Split:
    """One split of one release: video id -> its `Held`."""

    benchmark: str
    split: str
    videos: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.benchmark} {self.split}"

    @functools.cached_property
    def titles(self) -> frozenset[str]:
        return frozenset(t for h in self.videos.values() for t in h.titles)

    @functools.cached_property
    def imdb(self) -> frozenset[str]:
        return frozenset(k for h in self.videos.values() if (k := imdb_key(h.imdb)))


def splits_of(label: str, inv: dict[str, list[Any]]) -> list[Split]:
    return [Split(label, s, {h.video: h for h in held}) for s, held in inv.items()]


@functools.lru_cache(maxsize=256)
def _movies(titles: frozenset[str]) -> tuple[Any, ...]:
    from tfds_builders import symon

    return tuple(symon.group_titles(sorted(titles)))


def title_movies(a: Iterable[str], b: Iterable[str]) -> set[str]:
    """Keys of the movies both title sets name: the smaller set grouped into movies, each
    title of the other matched to them (`movies_of`, the YMS exclusion's rules)."""
    from tfds_builders import symon

    small, big = sorted((frozenset(a), frozenset(b)), key=len)
    if not small:
        return set()
    movies = list(_movies(small))
    return {m.key for t in big for m, _, _ in
            symon.movies_of(symon.title_of(t, symon.movie_key(t)), movies)}


@dataclasses.dataclass(frozen=True)
class Shared:
    """What two splits share; `a` is the training split of a train/eval pair."""

    a: Split
    b: Split
    videos: tuple[str, ...]
    movies: tuple[str, ...]

    @property
    def relation(self) -> str:
        return "/".join("train" if is_training(s.split) else "eval" for s in (self.a, self.b))


def shared(a: Split, b: Split) -> Shared:
    if not is_training(a.split) and is_training(b.split):
        a, b = b, a
    movies = {f"imdb:{k}" for k in a.imdb & b.imdb}
    movies |= {f"title:{k}" for k in title_movies(a.titles, b.titles)}
    return Shared(a, b, tuple(sorted(a.videos.keys() & b.videos.keys())),
                  tuple(sorted(movies)))
