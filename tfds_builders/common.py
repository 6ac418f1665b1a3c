"""Helpers shared by the project's TFDS builders: skip counting, build summaries, readers.

A builder records every input it cannot use with `record_skip` (one warning naming the
file and the reason, and a count per reason), and after `download_and_prepare` writes
`build_summary.json` next to the built dataset so that the summary survives re-runs.
One Counter holds three kinds of count, told apart by the key:
  * `<reason>`: inputs skipped (dropped) for that reason;
  * `kept_<what>`: inputs kept although imperfect (repaired or tolerated), not dropped;
  * `noted_<what>` (`note`): information about what was built (e.g. examples with role
    targets), neither a skip nor a repair.
The JSON keeps skips and `kept_*` counts in its `skipped` mapping (as readers expect) and
the information counters, without their prefix, in `noted`; `format_summary` prints the
three apart. A builder whose Counter is a `Counts` also keeps the first `NAMED_MAX` inputs
behind each count (`count(..., what=...)`, and every `record_skip`), stored as `named`.

`SummaryBuilder` is the one piece of TFDS class boilerplate every builder shares (its code
path, ArrayRecord output, `self.skips`, the summary write and the build's lines); `prepare` /
`split_length` / `Source` are the trainer-side reader every builder package exposes.

A build (the trainer's first use or `python -m tfds_builders build`) prints its lines
through `tfds_builders/progress.py`: per split, examples and time, without TFDS's bars.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import pathlib
import shutil
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from etils import epath

from tfds_builders import VIDEO_EXTS, fingerprint, holder, progress
from tfds_builders import data_dir as data_dir_lib
from tfds_builders.data_dir import ManualDirError  # noqa: F401  (builders raise it from here)

SUMMARY_FILE = "build_summary.json"
KEPT_PREFIX = "kept_"  # a count of inputs kept (repaired or tolerated), not of skips
NOTE_PREFIX = "noted_"  # an information counter: neither a skip nor a repair
NAMED_MAX = 10  # inputs named per count in build_summary.json (3 of them printed)

log = logging.getLogger("tfds_builders")


class Counts(collections.Counter):
    """A Counter that also keeps, per key, the first NAMED_MAX inputs counted under it."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.named: dict[str, list[str]] = {}


def manual_dir(dl_manager: Any) -> pathlib.Path | None:
    """This build's `--manual_dir` through TFDS's public `dl_manager.manual_dir`; None when
    none was given or TFDS finds it missing or empty (TFDS's own error is several lines: the
    builder's `check_manual_dir` then says in one line what the folder must hold)."""
    try:
        return pathlib.Path(dl_manager.manual_dir)
    except AssertionError:
        return None


def count(counts: collections.Counter, key: str, what: Any = None, n: int = 1) -> None:
    """Adds `n` to `key`; with a `Counts`, `what` (a file, movie, entry) is named under it
    (once: counting a movie's narrations one by one names the movie once)."""
    counts[key] += n
    if what is not None and isinstance(counts, Counts):
        names = counts.named.setdefault(key, [])
        name = os.fspath(what) if isinstance(what, os.PathLike) else str(what)
        if len(names) < NAMED_MAX and name not in names:
            names.append(name)


def record_skip(
    skips: collections.Counter, reason: str, path: os.PathLike | str, detail: str = ""
) -> None:
    """Counts one skipped input under `reason` and warns naming the file."""
    count(skips, reason, f"{os.fspath(path)}" + (f" ({detail})" if detail else ""))
    msg = f"skipped {path}: {reason}" + (f" ({detail})" if detail else "")
    log.warning(msg)


_VIDEO_IDS: dict[tuple[str, int], frozenset[str]] = {}


def video_ids(directory: pathlib.Path) -> frozenset[str]:
    """The ids (file stems) of the video files in `directory` (memoised by its mtime)."""
    key = (os.fspath(directory), directory.stat().st_mtime_ns)
    if key not in _VIDEO_IDS:
        _VIDEO_IDS[key] = frozenset(p.stem for p in directory.iterdir()
                                    if p.suffix.lower() in VIDEO_EXTS)
    return _VIDEO_IDS[key]


def missing_features(root: pathlib.Path, vid: str) -> tuple[str, pathlib.Path]:
    """(reason, path) for a video whose `features/<vid>.npy` is absent: `missing_video` when
    the release folder has a `videos/` folder (yt-dlp's downloads) without that id, so the
    video was never downloaded; else `missing_features` (downloaded and not extracted yet,
    or features made elsewhere)."""
    videos = root / "videos"
    if videos.is_dir() and vid not in video_ids(videos):
        return "missing_video", videos / f"{vid}.*"
    return "missing_features", root / "features" / f"{vid}.npy"


def jpeg_problem(data: bytes) -> str | None:
    """None if `data` decodes as a JPEG image, else what is wrong with it (empty, another
    format, undecodable): the check of every JPEG a builder stores as bytes."""
    import io

    from PIL import Image, UnidentifiedImageError

    if not data:
        return "empty file"
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format != "JPEG":
                return f"not a JPEG ({im.format})"
            im.load()
    except UnidentifiedImageError:
        return "not a decodable image"
    except Exception as e:  # noqa: BLE001 - any decoder failure means the image is unusable
        return f"{type(e).__name__}: {e}"
    return None


def note(counts: collections.Counter, name: str, n: int = 1, what: Any = None) -> None:
    """Adds `n` to the information counter `name` (stored as `noted_<name>`)."""
    count(counts, NOTE_PREFIX + name, what, n)


def split_counts(counts: dict | None) -> tuple[dict, dict, dict]:
    """(skipped by reason, kept by what, noted by name) of one Counter; the kept and noted
    names lose their prefix."""
    skipped, kept, noted = {}, {}, {}
    for k, n in sorted((counts or {}).items()):
        if k.startswith(NOTE_PREFIX):
            noted[k[len(NOTE_PREFIX):]] = n
        elif k.startswith(KEPT_PREFIX):
            kept[k[len(KEPT_PREFIX):]] = n
        else:
            skipped[k] = n
    return skipped, kept, noted


def make_summary(builder: Any, skips: collections.Counter | dict | None) -> dict:
    """Examples per split (from the built dataset info), skips by reason with the `kept_*`
    counts (`skipped`) and the information counters (`noted`, without their prefix)."""
    splits = {name: int(s.num_examples) for name, s in builder.info.splits.items()}
    counts = dict(sorted((skips or {}).items()))
    return {
        "dataset": builder.name,
        "config": builder.builder_config.name if builder.builder_config else None,
        "version": str(builder.version),
        "data_dir": os.fspath(builder.data_dir),
        "examples": splits,
        "skipped": {k: n for k, n in counts.items() if not k.startswith(NOTE_PREFIX)},
        "noted": split_counts(counts)[2],
        "named": dict(sorted(getattr(skips, "named", {}).items())),
    }


def write_summary(builder: Any, skips: collections.Counter | dict | None) -> dict:
    """Writes `build_summary.json` into the builder's data_dir and returns the summary."""
    summary = make_summary(builder, skips)
    path = os.path.join(os.fspath(builder.data_dir), SUMMARY_FILE)
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def read_summary(builder: Any) -> dict:
    """The stored summary of an already built dataset (examples recomputed from its info)."""
    path = os.path.join(os.fspath(builder.data_dir), SUMMARY_FILE)
    skips = None
    if os.path.exists(path):
        with open(path) as f:
            stored = json.load(f)
        skips = Counts(stored.get("skipped") or {})
        skips.update({NOTE_PREFIX + k: n for k, n in (stored.get("noted") or {}).items()})
        skips.named = dict(stored.get("named") or {})
    summary = make_summary(builder, skips)
    summary["skipped_known"] = skips is not None
    return summary


def format_summary(summary: dict) -> str:
    """Human-readable build summary: examples per split, skips by reason, the inputs that
    were kept although imperfect (`kept_*` counts) and the information counters (`noted`),
    neither of which are skips."""
    lines = [
        f"{summary['dataset']}/{summary['config']}:{summary['version']} -> {summary['data_dir']}"
    ]
    total = sum(summary["examples"].values())
    lines.append(f"examples: {total}")
    for name, n in sorted(summary["examples"].items()):
        lines.append(f"  {name}: {n}")
    counts = summary.get("skipped") or {}
    if summary.get("skipped_known") is False:
        lines.append("skipped: unknown (no build_summary.json)")
        return "\n".join(lines)
    skipped, kept, noted = split_counts(counts)
    noted.update(summary.get("noted") or {})
    named = summary.get("named") or {}

    def line(key: str, shown: str, n: int) -> str:
        eg = named.get(key, [])[:3]
        return f"  {shown}: {n}" + (f"  (e.g. {', '.join(eg)})" if eg else "")

    lines.append(f"skipped: {sum(skipped.values())}")
    for reason, n in skipped.items():
        lines.append(line(reason, reason, n))
    if kept:
        lines.append(f"kept with a fix or warning: {sum(kept.values())}")
        for what, n in kept.items():
            lines.append(line(KEPT_PREFIX + what, what, n))
    if noted:
        lines.append("noted (information, not skips):")
        for name, n in sorted(noted.items()):
            lines.append(line(NOTE_PREFIX + name, name, n))
    return "\n".join(lines)


def write_once(root: pathlib.Path, write: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """`root`, written by `write(tmp_dir)` unless a complete copy exists already.

    Generated corpora are deterministic, so concurrent builders (several processes of one
    run) may both write; the first to finish renames its temporary directory into place
    and the others discard theirs. `root/_COMPLETE` marks a finished corpus.
    """
    if (root / "_COMPLETE").is_file():
        return root
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    try:
        write(tmp)
        (tmp / "_COMPLETE").write_text("ok\n")
        if not root.exists():  # else another process finished first
            os.replace(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def timestamp(sec: float) -> str:
    """`hh.mm.ss.mmm`, the time format of LSMDC clip ids and YMS annotations (for generated
    corpora written in those layouts)."""
    ms = int(round(sec * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}.{m:02d}.{s:02d}.{ms:03d}"


def corpus_dir(download_dir: os.PathLike | str, dataset: str, key: str,
               write: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """`<download_dir>/<dataset>_synthetic/<key>`, a generated corpus written once by
    `write(dir)` (`key` names everything the corpus depends on: sizes, seed, version)."""
    return write_once(pathlib.Path(download_dir) / f"{dataset}_synthetic" / key, write)


def synthetic_corpus(dl_manager: Any, dataset: str, synthetic: Any, key: str,
                     **params: Any) -> pathlib.Path:
    """The generated corpus of `dataset`, written once by `synthetic.write_corpus(dir,
    **params)` under `<download_dir>/<dataset>_synthetic/<key>_seed<seed>_v<CORPUS_VERSION>`
    (`key` names what else than the seed and `synthetic.CORPUS_VERSION` it depends on)."""
    name = f"{key}_seed{params['seed']}_v{synthetic.CORPUS_VERSION}"
    return corpus_dir(dl_manager.download_dir, dataset, name,
                      lambda tmp: synthetic.write_corpus(tmp, **params))


class SummaryBuilder:
    """Mixin for the project's `GeneratorBasedBuilder`s (list it first among the bases).

    Gives what every builder repeats: `code_path` (the builder's own module file; TFDS's
    lookup needs `importlib_resources`, absent here), ArrayRecord output by default, and
    `self.skips`, a Counter that `_split_generators` sets when this call generates data;
    `download_and_prepare` then writes `build_summary.json` beside the dataset.
    """

    skips: collections.Counter | None

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> epath.Path:
        return epath.Path(sys.modules[cls.__module__].__file__)

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("file_format", "array_record")
        super().__init__(**kwargs)
        self.skips = None

    def download_and_prepare(self, *args: Any, **kwargs: Any) -> None:
        """Builds the dataset if needed, with the build's lines (module docstring), and
        stores `build_summary.json` beside it."""
        self.skips = None  # set by _split_generators when this call generates the data
        manual_dir = getattr(kwargs.get("download_config"), "manual_dir", None)
        lock = None
        version_dir = pathlib.Path(self.data_dir)
        if not progress.is_built(self):
            if manual_dir and os.path.isdir(manual_dir):
                fingerprint.check_regular(manual_dir)  # a FIFO would block the build forever
            lock = holder.wait_to_build(  # one build at a time: the others wait
                version_dir.parent / f".{version_dir.name}.building",
                f"{self.name}/{self.builder_config.name}", log.warning)
        try:
            self._build(version_dir, *args, **kwargs)
            if self.skips is not None:  # before the lock goes: a waiter reads them
                write_summary(self, self.skips)
                fingerprint.record(self, manual_dir)
        finally:
            if lock is not None:
                lock.release()

    def _build(self, version_dir: pathlib.Path, *args: Any, **kwargs: Any) -> None:
        """TFDS' build (after a wait, it reuses what the other build made, silently); a full
        disk, which surfaces as TFDS' or array_record's own error, is one line."""
        try:
            with progress.build_lines(self):
                super().download_and_prepare(*args, **kwargs)
        except Exception as e:
            if (full := data_dir_lib.out_of_space(e)) is None:
                raise
            raise data_dir_lib.DataDirError(
                f"{self.name}/{self.builder_config.name}: the build ran out of disk space under "
                f"{version_dir.parents[2]} ({full}); free space or choose another data_dir, "
                "then build again") from None


def named_config(builder_cls: type, name: str) -> Any:
    """The BuilderConfig of `builder_cls` called `name`, or a ValueError listing them."""
    named = {c.name: c for c in builder_cls.BUILDER_CONFIGS}
    if name not in named:
        raise ValueError(f"unknown {builder_cls.name} config {name!r}; choose one of "
                         f"{list(named)}")
    return named[name]


def open_builder(builder_cls: type, config: Any, data_dir: os.PathLike | str) -> Any:
    """`builder_cls` for `config` (one of its config names, or a BuilderConfig) under the
    absolute `data_dir`; an unknown name is a ValueError listing the names."""
    if isinstance(config, str):
        named_config(builder_cls, config)
    return builder_cls(config=config, data_dir=os.path.abspath(data_dir))


def _needs_manual_dir(check: Callable[[Any], None]) -> bool:
    try:
        check(None)
    except ManualDirError:
        return True
    return False


def prepare(builder: Any, data_dir: os.PathLike | str, manual_dir: os.PathLike | str | None,
            build: bool, check: Callable[[Any], None]) -> Any:
    """`builder` with its dataset built: built now if missing and `build` (after `check`, the
    builder's one-line check of `manual_dir`), else a FileNotFoundError giving the command."""
    if progress.is_built(builder):
        fingerprint.check(builder, manual_dir)  # built from another source: one line
        fingerprint.note_used(builder)
        return builder
    name, config = builder.name, builder.builder_config.name
    if not build:
        manual = " --manual_dir DIR" if _needs_manual_dir(check) else ""
        raise FileNotFoundError(
            f"{name}/{config} is not built under {data_dir}; run: python -m tfds_builders "
            f"build {name} --config {config}{manual} --data_dir {data_dir}")
    manual_dir = os.fspath(manual_dir) if manual_dir else None  # "" (unset string) = none
    check(manual_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
    fingerprint.note_used(builder)
    return builder


def split_length(builder: Any, split: str) -> int:
    """Number of examples of a built `split`, or a KeyError naming the splits there are."""
    splits = builder.info.splits
    if split not in splits:
        raise KeyError(f"{builder.name}/{builder.builder_config.name} has no split {split!r}; "
                       f"it has {sorted(splits)}")
    return int(splits[split].num_examples)


def text(x: Any) -> str:
    """A stored Text value (bytes on the NumPy path) as str."""
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


class Source:
    """Random access to one split of a built dataset as plain records (`to_record` of each
    stored example); picklable: the TFDS reader is reopened lazily in each process.

    `config` is a config name or a BuilderConfig; `decoders`, if given, is a module-level
    function returning the TFDS decoders to read with. TFDS stores examples in key-hash
    order; `order_by`, an int field numbering the examples 0..n-1, restores their order.
    """

    def __init__(self, builder_cls: type, config: Any, split: str, data_dir: os.PathLike | str,
                 length: int, to_record: Callable[[dict], dict],
                 decoders: Callable[[], dict] | None = None, order_by: str | None = None):
        self.builder_cls, self.config, self.split = builder_cls, config, split
        self.data_dir, self._len = os.fspath(data_dir), int(length)
        self.to_record, self.decoders, self.order_by = to_record, decoders, order_by
        self._source: Any = None
        self._rows: Any = None

    def __len__(self) -> int:
        return self._len

    def _open(self) -> None:
        builder = self.builder_cls(config=self.config, data_dir=self.data_dir)
        decoders = self.decoders() if self.decoders is not None else None
        source = builder.as_data_source(self.split, decoders=decoders)
        if self.order_by is not None:
            rows = np.empty(len(source), np.int64)
            for row in range(len(source)):
                rows[int(source[row][self.order_by])] = row
            self._rows = rows
        self._source = source

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(f"index {index} out of range for {self._len} records")
        if self._source is None:
            self._open()
        row = index if self._rows is None else int(self._rows[index])
        return self.to_record(self._source[row])

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _source=None, _rows=None)

    def __repr__(self) -> str:
        config = getattr(self.config, "name", self.config)
        return (f"Source({self.builder_cls.name}/{config}, split={self.split!r}, "
                f"data_dir={self.data_dir!r}, len={self._len})")
