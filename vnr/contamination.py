"""Contamination across the benchmarks vnr builds: the video ids and movies that one
release's split shares with another's (or with another split of its own).

    python -m vnr.contamination --manual_dir symon=DIR --manual_dir yms=DIR \\
        [--manual_dir msymon=DIR --manual_dir moviepuzzle=DIR --manual_dir movie101=DIR \\
         --manual_dir sc2st=DIR] [--json FILE]

Each `--manual_dir NAME[:CONFIG]=DIR` is a release as published (a benchmark named twice,
e.g. Movie101 v1 and v2, is labelled `movie101`, `movie101#2`); CONFIG is the builder config
whose splits to take where they depend on it (SYMON's franchise split and M-SyMoN's carved
validation sets are made over the videos a config can use: `symon:features=DIR`; default
text_only). The splits are the ones the builder makes (`tfds_builders.<name>.inventory`;
`vnr.inventories` says how videos and movies are compared). One table row per pair of
splits that share anything: the two benchmarks and splits, the relation (`train/eval`: a
training split and an evaluation split, the contamination that inflates a transfer number;
`eval/eval`, `train/train`) and the counts of shared videos and movies; `--json` writes the
ids themselves.

`check_transfer` is what a run that evaluates another benchmark's model makes before it
evaluates (SYMON -> YMS `symon.yms_transfer`, M-SyMoN -> YMS `msymon.alignment`): a source
whose training data (its training splits and those of the runs it started from, after its
own exclusion) shares a video or a movie with the target's evaluation splits is refused in
one line with the counts.
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from absl import flags

from vnr import cli
from vnr import workdir as workdir_lib
from vnr.inventories import BENCHMARKS, Shared, Split, inventory, shared, splits_of

PROG = "python -m vnr.contamination"
_SHOWN = 5  # ids named in a refusal


def overlaps(splits: Sequence[Split]) -> list[Shared]:
    """Every pair of distinct splits that shares a video or a movie, train/eval pairs first."""
    found = [s for a, b in itertools.combinations(splits, 2)
             if (s := shared(a, b)).videos or s.movies]
    return sorted(found, key=lambda s: (s.relation != "train/eval", -len(s.videos),
                                        -len(s.movies), s.a.name, s.b.name))


def read(specs: Sequence[tuple[str, str, str]]) -> list[Split]:
    """The splits of each (benchmark, builder config, release dir); labels `name`, `name#2`."""
    out, seen = [], {}
    for name, config, path in specs:
        where = f"--manual_dir {name}{':' + config if config else ''}={path}"
        if not pathlib.Path(path).is_dir():
            raise ValueError(f"{where}: no such directory")
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name}#{seen[name]}"
        try:
            out += splits_of(label, inventory(name, path, config))
        except (OSError, ValueError) as e:  # the builders' ManualDirError among them
            raise ValueError(f"{where}: {e}") from None
    return out


def release_lines(splits: Sequence[Split]) -> list[str]:
    """Per release: its splits' video counts and the movie identities it has."""
    lines = []
    for label, group in itertools.groupby(splits, key=lambda s: s.benchmark):
        group = list(group)
        held = [h for s in group for h in s.videos.values()]
        sizes = ", ".join(f"{s.split} {len(s.videos)}" for s in group)
        lines.append(f"{label}: {sizes} videos; a movie title for "
                     f"{sum(bool(h.titles) for h in held)} and an IMDb id for "
                     f"{sum(bool(h.imdb) for h in held)} of {len(held)}")
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
    return {"splits": [{"benchmark": s.benchmark, "split": s.split, "videos": len(s.videos)}
                       for s in splits],
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
    found = shared(Split("source", "train", {h.video: h for h in train}),
                   Split("target", "test", {h.video: h for h in test}))
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


def release_of(config: Any, where: str) -> str | None:
    """The release directory a run config's data came from: `data.manual_dir`, else the one
    its dataset's build recorded under `data.data_dir`; None for a generated corpus."""
    from tfds_builders import recorded_manual_dirs

    d = config.data
    if str(d.get("config", "")).startswith("synthetic"):
        return None
    path = d.get("manual_dir") or ""
    if not path:
        known = recorded_manual_dirs(str(d.get("data_dir", "")), _benchmark(config))
        if len(known) != 1:
            raise ValueError(
                f"contamination check: {where} names no data.manual_dir and its builds under "
                f"data.data_dir={d.get('data_dir')!r} record {len(known)} release directories "
                f"({', '.join(known) or 'none'}): set data.manual_dir in {where} to the "
                "release the run read")
        path = known[0]
    if not pathlib.Path(path).is_dir():
        raise ValueError(f"contamination check: {where}: data.manual_dir={path!r} is not a "
                         f"directory here (relative paths are read from {os.getcwd()})")
    return path


def _read(config: Any, path: str, where: str) -> dict[str, list[Any]]:
    d = config.data
    try:
        return inventory(_benchmark(config), path, str(d.get("config", "")),
                         int(d.get("dim", 0) or 0), float(d.get("fps", 1.0) or 1.0))
    except OSError as e:
        raise ValueError(f"contamination check: {where} data.manual_dir: {e}") from None


def trained_on(config: Any, where: str, exclude_for: Callable[[Any], Any] | None = None,
               seen: frozenset[str] = frozenset()) -> tuple[list[str], list[Any]]:
    """(what was read, the `Held` videos) a run with `config` trained on: its training
    split(s) (`data.train_split`, `a+b` for several) after `exclude_for(config)` (its
    benchmark's exclusion, or None), and those of the run it started from (`init_from`),
    recursively. A run on a generated corpus adds nothing."""
    path = release_of(config, where)
    labels, held = [], []
    if path is not None:
        inv = _read(config, path, where)
        names = str(config.data.train_split).split("+")
        if lacking := [s for s in names if s not in inv]:
            raise ValueError(f"contamination check: {where}: train split {lacking[0]!r} is not "
                             f"a split of {_benchmark(config)} at {path} ({', '.join(inv)})")
        train = [h for s in names for h in inv[s]]
        exclude = exclude_for(config) if exclude_for is not None else None
        kept = exclude(train) if exclude is not None else train
        dropped = f", {len(train) - len(kept)} excluded" if exclude is not None else ""
        labels.append(f"{_benchmark(config)} {config.data.train_split} of {path}{dropped}")
        held += kept
    parent = config.get("init_from") or ""
    if parent and os.path.realpath(parent) not in seen:
        src = workdir_lib.load_config(pathlib.Path(parent))
        more = trained_on(src, f"{parent}/config.json", exclude_for,
                          seen | {os.path.realpath(parent)})
        labels, held = labels + more[0], held + more[1]
    return labels, held


def check_transfer(source: Any, target: Any, where: str,
                   exclude_for: Callable[[Any], Any] | None = None) -> str:
    """Refuses (`refuse_overlap`) a run with config `target` evaluating the model of a run
    trained with config `source` (read from `where`) on another benchmark when what the
    source trained on (`trained_on`) shares a video or movie with the target's
    `data.test_splits` (a split the release does not list, such as YMS's `new_test` drawn from
    every annotated video, is every video of the release). Returns what was checked."""
    if _benchmark(source) == _benchmark(target):
        return "contamination not checked: source and target are one benchmark"
    dst = _benchmark(target)
    path = release_of(target, "the target config")
    if path is None:
        return "contamination not checked: the target is a generated corpus"
    labels, train = trained_on(source, where, exclude_for)
    if not labels:
        return "contamination not checked: the source trained on a generated corpus"
    test_inv = _read(target, path, "the target config")
    test, named = [], []
    for s in target.data.test_splits:
        every = s not in test_inv
        test += [h for held in test_inv.values() for h in held] if every else test_inv[s]
        named.append(f"{s} = every video" if every else s)
    refuse_overlap("; ".join(labels), train, f"{dst} {', '.join(named)}", test)
    return (f"contamination checked: the source's {len(train)} training videos "
            f"({'; '.join(labels)}) share no video or movie with the {len(test)} of {dst} "
            f"{', '.join(named)}")


def check_source_run(run: str, target: Any,
                     exclude_for: Callable[[Any], Any] | None = None) -> str:
    """`check_transfer` of the finished run at `run` (its config.json) into `target`."""
    return check_transfer(workdir_lib.load_config(pathlib.Path(run)), target,
                          f"{run}/config.json", exclude_for)


def _flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_multi_string("manual_dir", [], "NAME[:CONFIG]=DIR: a benchmark's release "
                              f"({', '.join(BENCHMARKS)}); two or more", flag_values=fv)
    flags.DEFINE_string("json", None, "Also write the shared ids to this JSON file",
                        flag_values=fv)


def main(argv: list[str] | None = None) -> int:
    args = cli.parse(argv, PROG, __doc__, _flags)
    specs = []
    for spec in args.manual_dir:
        name, sep, path = spec.partition("=")
        name, _, config = name.partition(":")
        if not sep or not path or name not in BENCHMARKS:
            cli.fail(f"--manual_dir {spec!r}: expected NAME[:CONFIG]=DIR with NAME one of "
                     f"{', '.join(BENCHMARKS)}")
        specs.append((name, config, path))
    if len(specs) < 2:
        cli.fail("--manual_dir: give two releases or more (NAME=DIR each)")
    out = pathlib.Path(args.json) if args.json else None
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        cli.fail(f"--json {args.json}: {'a directory' if out.is_dir() else 'no such folder'}")
    try:
        splits = read(specs)
    except ValueError as e:
        cli.fail(str(e))
    found = overlaps(splits)
    print("\n".join(release_lines(splits)))
    print(table(found) if found else "no two splits share a video or a movie")
    if out is not None:
        try:
            out.write_text(json.dumps(as_json(splits, found), indent=1))
        except OSError as e:
            cli.fail(f"--json {args.json}: {e.strerror or e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
