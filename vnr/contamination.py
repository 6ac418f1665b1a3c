"""Contamination across the benchmarks vnr builds: the video ids and movies that one
release's split shares with another's (or with another split of its own).

    python -m vnr.contamination --manual_dir symon=DIR --manual_dir yms=DIR \\
        [--manual_dir msymon=DIR --manual_dir moviepuzzle=DIR --manual_dir movie101=DIR \\
         --manual_dir sc2st=DIR] [--json FILE]

Each `--manual_dir NAME=DIR` is a release as published (a benchmark named twice, e.g.
Movie101 v1 and v2, is labelled `movie101`, `movie101#2`). Its splits are the ones the
builder makes (`tfds_builders.<name>.inventory`: SYMON's franchise split, M-SyMoN's carved
validation sets and weak videos, YMS's split files, MoviePuzzle's `clip_id.json`, Movie101's
public split or v2's hashed one, Sc2St's released story files). One table row per pair of
splits that share anything: the two benchmarks and splits, the relation (`train/eval`: a
training split and an evaluation split, the contamination that inflates a transfer number;
`eval/eval`, `train/train`), and the counts of shared videos and movies; `--json` writes
the ids themselves.

A video is its id in its id space (YouTube for SYMON, M-SyMoN and YMS; Xigua albums for
both Movie101 releases; MoviePuzzle clips; LSMDC clips). A movie is its IMDb id where the
release gives one (MoviePuzzle, Sc2St's `meta.csv`) and its title's key
(`tfds_builders.symon.movie_key`: case, punctuation, "in 4 minutes" recap wording and the
like removed) where it gives a title: two movies with the same key count as one (remakes
too), an over-match on purpose: a test movie must not hide in training. Releases that name
movies in different ways (IMDb ids only vs titles only) cannot share a movie; the
per-release lines say which identities each has.

`refuse_overlap` is the check a zero-shot or transfer run makes before it evaluates: a source
whose training data shares a video or movie with the target's evaluation split is refused
in one line with the counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import itertools
import json
import os
import pathlib
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from absl import flags, logging

from vnr import cli

PROG = "python -m vnr.contamination"
BENCHMARKS = ("symon", "msymon", "yms", "moviepuzzle", "movie101", "sc2st")
_SHOWN = 5  # ids named in a refusal


def reader(name: str) -> Callable[[str], dict[str, list[Any]]]:
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


def inventory(name: str, path: str) -> dict[str, list[Any]]:
    """`reader(name)(path)`, kept on disk under `cache_dir()` keyed by the release's
    fingerprint (file names, sizes, times) and the builder's source: a transfer run checks
    its source on every start, and SYMON's inventory parses every narration file (1.07 s for
    the 40 public sample videos: some 2.3 minutes for the release's 5,193).
    An unwritable cache only costs the recomputation (logged)."""
    from tfds_builders import Held, release_fingerprint

    package = pathlib.Path(inspect.getfile(reader(name))).parent
    code = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(package.glob("*.py"))))
    key = hashlib.sha256(json.dumps([name, os.path.realpath(path), release_fingerprint(path),
                                     code.hexdigest()]).encode()).hexdigest()[:24]
    cached = cache_dir() / f"{name}-{key}.json"
    try:
        return {s: [Held(h[0], tuple(h[1]), h[2]) for h in held]
                for s, held in json.loads(cached.read_text()).items()}
    except (OSError, ValueError, TypeError):
        pass
    out = reader(name)(path)
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


def movies_of(held: Any) -> frozenset[str]:
    """A `Held` video's movie identities: `imdb:<id>` and `title:<movie key>`."""
    from tfds_builders import symon

    keys = {f"title:{k}" for t in held.titles if (k := symon.movie_key(t))}
    if imdb := imdb_key(held.imdb):
        keys.add(f"imdb:{imdb}")
    return frozenset(keys)


def is_training(split: str) -> bool:
    """A split models train on (`train`, `<lang>_train`, `<lang>_weak`, `training`)."""
    return re.search(r"(^|_)(train|training|weak)$", split) is not None


@dataclasses.dataclass(frozen=True)
class Split:
    """One split of one release: video id -> its movie identities."""

    benchmark: str
    split: str
    videos: dict[str, frozenset[str]]

    @property
    def movies(self) -> frozenset[str]:
        return frozenset().union(*self.videos.values())

    @property
    def name(self) -> str:
        return f"{self.benchmark} {self.split}"


def splits_of(label: str, inventory: dict[str, list[Any]]) -> list[Split]:
    return [Split(label, s, {h.video: movies_of(h) for h in held})
            for s, held in inventory.items()]


@dataclasses.dataclass(frozen=True)
class Shared:
    """What two splits share; `a` is the training split of a train/eval pair."""

    a: Split
    b: Split
    videos: tuple[str, ...]
    movies: tuple[str, ...]

    @property
    def relation(self) -> str:
        roles = ["train" if is_training(s.split) else "eval" for s in (self.a, self.b)]
        return "/".join(roles)


def shared(a: Split, b: Split) -> Shared:
    if not is_training(a.split) and is_training(b.split):
        a, b = b, a
    return Shared(a, b, tuple(sorted(a.videos.keys() & b.videos.keys())),
                  tuple(sorted(a.movies & b.movies)))


def overlaps(splits: Sequence[Split]) -> list[Shared]:
    """Every pair of distinct splits that shares a video or a movie, train/eval pairs first."""
    found = [s for a, b in itertools.combinations(splits, 2)
             if (s := shared(a, b)).videos or s.movies]
    return sorted(found, key=lambda s: (s.relation != "train/eval", -len(s.videos),
                                        -len(s.movies), s.a.name, s.b.name))


def read(specs: Sequence[tuple[str, str]]) -> list[Split]:
    """The splits of each (benchmark, release dir); labels `name`, `name#2`, ..."""
    out, seen = [], {}
    for name, path in specs:
        if not pathlib.Path(path).is_dir():
            raise ValueError(f"--manual_dir {name}={path}: no such directory")
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name}#{seen[name]}"
        try:
            out += splits_of(label, inventory(name, path))
        except FileNotFoundError as e:  # the builders' ManualDirError, one line
            raise ValueError(f"--manual_dir {name}={path}: {e}") from None
    return out


def release_lines(splits: Sequence[Split]) -> list[str]:
    """Per release: its splits' video counts and the movie identities it has."""
    lines = []
    for label, group in itertools.groupby(splits, key=lambda s: s.benchmark):
        group = list(group)
        vids = [m for s in group for m in s.videos.values()]
        kinds = [f"{sum(any(k.startswith(p) for k in m) for m in vids)} {p[:-1]}"
                 for p in ("title:", "imdb:")]
        lines.append(f"{label}: " + ", ".join(f"{s.split} {len(s.videos)}" for s in group)
                     + f" videos; movie known by {' and '.join(kinds)} of {len(vids)}")
    return lines


def table(found: Sequence[Shared]) -> str:
    """The overlap table, one row per pair of splits."""
    head = ("training side", "other side", "relation", "videos", "movies")
    rows = [(s.a.name, s.b.name, s.relation, str(len(s.videos)), str(len(s.movies)))
            for s in found]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:{'>' if i > 2 else '<'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [head, *rows])


def as_json(splits: Sequence[Split], found: Sequence[Shared]) -> dict:
    return {"splits": [{"benchmark": s.benchmark, "split": s.split, "videos": len(s.videos),
                        "movies": len(s.movies)} for s in splits],
            "shared": [{"a": {"benchmark": s.a.benchmark, "split": s.a.split},
                        "b": {"benchmark": s.b.benchmark, "split": s.b.split},
                        "relation": s.relation, "videos": list(s.videos),
                        "movies": list(s.movies)} for s in found]}


def _first(ids: Sequence[str]) -> str:
    more = f", ... ({len(ids)} in all)" if len(ids) > _SHOWN else ""
    return ", ".join(ids[:_SHOWN]) + more


def refuse_overlap(source: str, train: Iterable[Any], target: str, test: Iterable[Any]
                   ) -> None:
    """Raises one ValueError line with the counts (and the first ids) when the `Held`
    videos a source trained on share a video or a movie with the target's evaluation
    videos; returns quietly when they share nothing."""
    found = shared(Split("source", "train", {h.video: movies_of(h) for h in train}),
                   Split("target", "test", {h.video: movies_of(h) for h in test}))
    if found.videos or found.movies:
        raise ValueError(
            f"refused: the source's training data ({source}) shares {len(found.videos)} "
            f"video(s) and {len(found.movies)} movie(s) with the target's evaluation split "
            f"({target}); a transfer number from it would be measured on training data "
            f"(videos: {_first(found.videos) or 'none'}; movies: "
            f"{_first(found.movies) or 'none'})")


def _benchmark(config: Any) -> str:
    name = config.data.get("builder") or str(config.get("task", "")).split(".")[0]
    if name not in BENCHMARKS:
        raise ValueError(f"data.builder / task {name!r} names none of {', '.join(BENCHMARKS)}")
    return name


def check_transfer(source: Any, target: Any,
                   exclude: Callable[[list[Any]], list[Any]] | None = None) -> str:
    """Refuses (`refuse_overlap`) a run evaluating `target` (a config) with the model of a
    run trained with config `source` when the source's training split(s) (`data.train_split`,
    `a+b` for several, of its `data.manual_dir`; after `exclude`, the source benchmark's own
    exclusion) share a video or movie with the target's `data.test_splits` (a split the
    release does not list, such as YMS's `new_test` drawn from every annotated video, is
    every video of the release). Returns the line saying what was checked."""
    if not source.data.get("manual_dir") or str(source.data.get("config", "")).startswith(
            "synthetic"):
        return ("contamination not checked: the source run trained on a generated corpus "
                "(no data.manual_dir)")
    if not target.data.get("manual_dir"):
        return "contamination not checked: the target is a generated corpus (no manual_dir)"
    src, dst = _benchmark(source), _benchmark(target)
    try:
        train_inv = inventory(src, source.data.manual_dir)
        test_inv = inventory(dst, target.data.manual_dir)
    except FileNotFoundError as e:
        raise ValueError(f"contamination check: {e}") from None
    names = str(source.data.train_split).split("+")
    lacking = [s for s in names if s not in train_inv]
    if lacking:
        raise ValueError(f"contamination check: the source's train split {lacking[0]!r} is not "
                         f"a split of {src} at {source.data.manual_dir} "
                         f"({', '.join(train_inv)})")
    train = [h for s in names for h in train_inv[s]]
    kept = exclude(train) if exclude is not None else train
    test, where = [], []
    for s in target.data.test_splits:
        if s in test_inv:
            test += test_inv[s]
            where.append(s)
        else:
            test += [h for held in test_inv.values() for h in held]
            where.append(f"{s} = every video")
    src_label = f"{src} {source.data.train_split} of {source.data.manual_dir}"
    if exclude is not None:
        src_label += f", {len(train) - len(kept)} of {len(train)} videos excluded"
    refuse_overlap(src_label, kept, f"{dst} {', '.join(where)}", test)
    return (f"contamination checked: the source's {len(kept)} training videos ({src_label}) "
            f"share no video or movie with the {len(test)} of {dst} {', '.join(where)}")


def _flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_multi_string("manual_dir", [], "NAME=DIR: a benchmark's release "
                              f"({', '.join(BENCHMARKS)}); two or more", flag_values=fv)
    flags.DEFINE_string("json", None, "Also write the shared ids to this JSON file",
                        flag_values=fv)


def main(argv: list[str] | None = None) -> int:
    args = cli.parse(argv, PROG, __doc__, _flags)
    specs = []
    for spec in args.manual_dir:
        name, sep, path = spec.partition("=")
        if not sep or not path or name not in BENCHMARKS:
            cli.fail(f"--manual_dir {spec!r}: expected NAME=DIR with NAME one of "
                     f"{', '.join(BENCHMARKS)}")
        specs.append((name, path))
    if len(specs) < 2:
        cli.fail("--manual_dir: give two releases or more (NAME=DIR each)")
    try:
        splits = read(specs)
    except ValueError as e:
        cli.fail(str(e))
    found = overlaps(splits)
    print("\n".join(release_lines(splits)))
    print(table(found) if found else "no two splits share a video or a movie")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(as_json(splits, found), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
