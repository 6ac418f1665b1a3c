"""Where a built dataset came from, recorded when it is built and checked before it is reused.

TFDS reuses `<data_dir>/<name>/<config>/<version>` whenever it exists, whatever it was built
from. Each build therefore writes `build_source.json` beside the dataset: the `manual_dir`
(absolute), a fingerprint of its files, the builder options (the BuilderConfig's own
fields) and the model functions the build was handed and used (`functions`: role ->
`module:qualname`, e.g. Sc2St's `embedder` and `feature_embedder`). Every later open of
the dataset with a `manual_dir` (the trainer's `prepare`, a `python -m tfds_builders build`
that would reuse it) compares: another source stops with one `SourceChanged` line saying what
differs and how to rebuild.

`--verify` (`VERIFY`) adds the contents: a build records a digest of every file's bytes, and
a reuse reads them all again and compares, for releases edited in place where sizes and
times cannot be trusted (a build made without `--verify` is then refused: nothing to
compare with).

The fingerprint of a `manual_dir` is the relative name, size and modification time (ns) of
every file under it (symbolic links followed; a `data_dir` inside it excluded), hashed per
top-level entry, so a mismatch names the entries that differ. File contents are not read: a
large release costs one `stat` per file, once per process (the result is cached), never a
byte-by-byte hash. A copy that keeps names, sizes and times (`cp -a`, `rsync -a`) is the
same source; a copy that resets the times reads as another one (rebuild, or copy with
`-a`). Generated configs read no `manual_dir`: their fingerprint is the builder options.

A caller that names no `manual_dir` (a reader of an existing build) checks the options only.
A caller that hands model functions (one that would build: the trainer, the build CLI) is
checked against all the recorded ones, so the same data_dir and config built with another
embedder stops with the same kind of line; a reader that hands none is not (it embeds
nothing). A build made before sources were recorded is adopted with one warning: the source
given now is recorded as its source; one recorded before functions were has them unchecked.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import pathlib
import stat
from collections.abc import Iterable
from typing import Any

SOURCE_FILE = "build_source.json"

log = logging.getLogger("tfds_builders")

# Fields of tfds.core.BuilderConfig that document a config and change no example.
_DOC_FIELDS = ("version", "release_notes", "supported_versions", "description", "tags")
_checked: set[tuple[str, str | None, str]] = set()  # (dataset dir, manual_dir, record digest)


class SpecialFile(ValueError):
    """A release holds a FIFO, socket or device where files are read (one line)."""


class SourceChanged(ValueError):
    """A built dataset was made from another source than the one given now (one line)."""


def options(builder: Any) -> dict[str, Any]:
    """The builder config's own fields as JSON values (what, besides the files, the build
    depends on); documentation fields (description, release notes, ...) are left out."""
    config = builder.builder_config
    if config is None:
        return {}
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
              if f.name not in _DOC_FIELDS}
    return json.loads(json.dumps(fields, sort_keys=True, default=repr))


def function_name(fn: Any) -> str:
    """`module:qualname` of a function (of its class for a callable object; a partial with its
    arguments): the same in every process, never an address."""
    if isinstance(fn, functools.partial):
        args = [repr(a) for a in fn.args] + [f"{k}={v!r}" for k, v in sorted(fn.keywords.items())]
        return f"functools.partial({function_name(fn.func)}{''.join(', ' + a for a in args)})"
    target = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{getattr(target, '__module__', '?')}:{target.__qualname__}"


def functions(builder: Any) -> dict[str, str]:
    """The model functions the builder was handed and its config uses, role -> name
    (`model_functions()` of builders that take any; empty for a reader that hands none)."""
    get = getattr(builder, "model_functions", None)
    return {k: function_name(f) for k, f in get().items()} if get is not None else {}


def scan(root: os.PathLike | str, exclude: Iterable[os.PathLike | str] = (),
         contents: bool = False) -> dict[str, list]:
    """{top-level entry of `root`: [files, bytes, digest]}: every file below it by relative
    name, size and mtime (ns), symbolic links followed (each directory once); directories
    in `exclude` (e.g. a data_dir kept inside the release) are skipped. With `contents` the
    digest is of every file's name and bytes instead (`--verify`: reads the whole release)."""
    root = pathlib.Path(root)
    skip = {os.path.realpath(p) for p in exclude}
    seen: set[tuple[int, int]] = set()
    out: dict[str, list] = {}
    for top in sorted(os.listdir(root)):
        if os.path.realpath(root / top) in skip:
            continue
        h, count, size = hashlib.sha256(), 0, 0
        for rel, st in _files(os.path.join(root, top), top, skip, seen):
            if contents:
                h.update(f"{rel}\0{_content(os.path.join(root, rel), st)}\n".encode())
            else:
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            count, size = count + 1, size + st.st_size
        out[top] = [count, size, h.hexdigest()[:16]]
    return out


def _content(path: str, st: os.stat_result) -> str:
    """sha256 of a regular file's bytes ("" for anything else or an unreadable file)."""
    if st is _UNREADABLE or not stat.S_ISREG(st.st_mode):
        return ""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    except OSError:
        return ""
    return h.hexdigest()


def special_files(root: os.PathLike | str) -> list[str]:
    """Entries under `root` that are neither regular files nor directories (a FIFO, a
    socket, a device), by relative name: opening one to read blocks or reads a stream, so
    a build refuses them before it starts (`check_regular`)."""
    out = []
    for rel, st in _files(os.fspath(root), ".", set(), set()):
        if st is not _UNREADABLE and not stat.S_ISREG(st.st_mode):
            out.append(rel.removeprefix("./"))
    return out


def check_regular(manual_dir: os.PathLike | str) -> None:
    """`SpecialFile` naming the first non-regular file of a release, and how many there are."""
    bad = special_files(manual_dir)
    if bad:
        kind = _kind(os.stat(os.path.join(manual_dir, bad[0])).st_mode)
        more = f" ({len(bad)} such entries)" if len(bad) > 1 else ""
        raise SpecialFile(f"{os.path.join(manual_dir, bad[0])} is a {kind}, not a regular file"
                         f"{more}: a build would block or read garbage on it; remove it or "
                         "put the release's file there")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


_UNREADABLE = os.stat_result((0,) * 10)  # a dangling link or an unreadable entry, as is


def _files(path: str, rel: str, skip: set[str], seen: set[tuple[int, int]]
           ) -> Iterable[tuple[str, os.stat_result]]:
    try:
        st = os.stat(path)
    except OSError:
        yield rel, _UNREADABLE
        return
    if not stat.S_ISDIR(st.st_mode):
        yield rel, st
        return
    if (st.st_dev, st.st_ino) in seen or os.path.realpath(path) in skip:
        return
    seen.add((st.st_dev, st.st_ino))
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        yield rel + "/", _UNREADABLE
        return
    for entry in entries:
        name = f"{rel}/{entry.name}"
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            yield from _files(entry.path, name, skip, seen)
            continue
        try:
            yield name, entry.stat()
        except OSError:
            yield name, _UNREADABLE


def _digest(files: dict[str, list] | None) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def _reads_manual_dir(builder: Any) -> bool:
    """Whether the builder's config builds from a manual_dir (its `check_inputs` refuses
    none); builders without `check_inputs` are taken to read one."""
    check = getattr(type(builder), "check_inputs", None)
    if check is None or builder.builder_config is None:
        return True
    try:
        check(builder.builder_config.name, None)
    except Exception:  # noqa: BLE001 (ManualDirError, or any refusal of a missing dir)
        return True
    return False


def describe(builder: Any, manual_dir: os.PathLike | str | None,
             contents: bool = False) -> dict[str, Any]:
    """The source record of a build of `builder` from `manual_dir` (with `contents`, also
    the digests of its files' bytes: `contents`, top-level entry -> digest)."""
    source = None
    files = None
    rec: dict[str, Any] = {}
    if manual_dir and _reads_manual_dir(builder):
        source = os.path.realpath(manual_dir)
        files = scan(source, exclude=[builder.data_dir_root])
        if contents:
            rec["contents"] = {k: v[2] for k, v in scan(
                source, exclude=[builder.data_dir_root], contents=True).items()}
    return {"dataset": builder.name, "config": _config_name(builder),
            "version": str(builder.version), "manual_dir": source, "files": files,
            "files_digest": _digest(files), "options": options(builder),
            "functions": functions(builder), **rec}


USED: dict[str, str] = {}  # "<name>/<config>" -> identity: the datasets this process opened


def identity(builder: Any) -> str:
    """What a built dataset was made from, as one digest: its source files' digest (names,
    sizes, times: an `rsync -a` copy is the same source), builder options and functions,
    version and split sizes. A run records it (`used`) so that resuming it on other data is
    refused; "" when the build has no `build_source.json`."""
    path = pathlib.Path(os.fspath(builder.data_dir)) / SOURCE_FILE
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    splits = {k: int(v.num_examples) for k, v in builder.info.splits.items()}
    keep = {k: rec.get(k) for k in ("files_digest", "options", "functions", "version")}
    return hashlib.sha256(json.dumps([keep, splits], sort_keys=True, default=repr)
                          .encode()).hexdigest()[:16]


def note_used(builder: Any) -> None:
    """Adds a dataset this process opened to `USED` (`tfds_builders.common.prepare`)."""
    USED[f"{builder.name}/{_config_name(builder)}"] = identity(builder)


VERIFY = False  # `python -m tfds_builders build --verify`: record and compare file contents


def record(builder: Any, manual_dir: os.PathLike | str | None) -> dict[str, Any]:
    """Writes `build_source.json` beside the dataset `builder` just built (atomically); with
    `VERIFY`, with its files' content digests."""
    rec = describe(builder, manual_dir, contents=VERIFY)
    path = pathlib.Path(os.fspath(builder.data_dir)) / SOURCE_FILE
    tmp = path.with_name(f".{SOURCE_FILE}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True))
    tmp.replace(path)
    _checked.add((os.fspath(builder.data_dir), rec["manual_dir"], rec["files_digest"]))
    return rec


def check(builder: Any, manual_dir: os.PathLike | str | None) -> None:
    """Raises SourceChanged when the built dataset of `builder` was made from another
    source than `manual_dir` (another file listing) or with other builder options."""
    where = os.fspath(builder.data_dir)
    path = pathlib.Path(where) / SOURCE_FILE
    manual_dir = os.fspath(manual_dir) if manual_dir else None
    try:
        old = json.loads(path.read_text())
    except FileNotFoundError:
        _adopt(builder, manual_dir)
        return
    except (OSError, ValueError) as e:
        raise SourceChanged(f"{_name(builder)}: {path} is unreadable ({e}); "
                            f"{rebuild_hint(builder, manual_dir)}") from None
    now = functions(builder)
    if now and "functions" in old and old["functions"] != now:
        raise SourceChanged(f"{_name(builder)} in {where} was built with other model functions "
                            f"({_first_diff(old['functions'], now)}); "
                            f"{rebuild_hint(builder, manual_dir or old.get('manual_dir'))}")
    key = (where, os.path.realpath(manual_dir) if manual_dir else None, old.get("files_digest"))
    if VERIFY and manual_dir and _reads_manual_dir(builder):
        _verify(builder, manual_dir, old)
    elif key in _checked:
        return
    if old.get("options") != options(builder):
        raise SourceChanged(f"{_name(builder)} in {where} was built with other builder options "
                            f"({_first_diff(old.get('options') or {}, options(builder))}); "
                            f"{rebuild_hint(builder, manual_dir or old.get('manual_dir'))}")
    if manual_dir and old.get("manual_dir") and _reads_manual_dir(builder):
        new = describe(builder, manual_dir)
        if new["files_digest"] != old.get("files_digest"):
            raise SourceChanged(f"{_name(builder)} in {where} was built from "
                                f"{_differs(old, new)}; {rebuild_hint(builder, manual_dir)}")
    _checked.add(key)


def _verify(builder: Any, manual_dir: str, old: dict) -> None:
    """SourceChanged when the release's bytes differ from those recorded at the build (an
    edit that kept sizes and times), or when the build recorded none."""
    where = os.fspath(builder.data_dir)
    if "contents" not in old:
        raise SourceChanged(f"{_name(builder)} in {where} was built without --verify, so the "
                            "contents of its files were not recorded; "
                            f"{rebuild_hint(builder, manual_dir, verify=True)}")
    now = describe(builder, manual_dir, contents=True)["contents"]
    changed = sorted(k for k in set(old["contents"]) | set(now)
                     if old["contents"].get(k) != now.get(k))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise SourceChanged(f"{_name(builder)} in {where} was built from other file contents "
                            f"({', '.join(changed[:3])}{more} changed since, whatever their "
                            f"sizes and times); {rebuild_hint(builder, manual_dir, verify=True)}")


def _adopt(builder: Any, manual_dir: str | None) -> None:
    """A build without a record (made before sources were recorded): records the source
    given now, with one warning; without a manual_dir for a config that needs one, warns."""
    if manual_dir is None and _reads_manual_dir(builder):
        key = (os.fspath(builder.data_dir), None, "")
        if key not in _checked:
            _checked.add(key)
            log.warning("%s in %s has no record of its source (built before sources were "
                        "recorded); give its manual_dir to record it", _name(builder),
                        builder.data_dir)
        return
    rec = record(builder, manual_dir)
    log.warning("%s in %s had no record of its source (built before sources were recorded); "
                "recorded %s as its source: if it was built from another, %s", _name(builder),
                builder.data_dir, rec["manual_dir"] or "its builder options",
                rebuild_hint(builder, manual_dir))


def _differs(old: dict, new: dict) -> str:
    """What differs between the recorded source and this one, in a few words."""
    a, b = old.get("files") or {}, new.get("files") or {}
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    then, now = old.get("manual_dir"), new["manual_dir"]
    if then != now:
        return (f"manual_dir {then} ({_size(a)}), not {now} ({_size(b)}; {len(changed)} of "
                f"{len(set(a) | set(b))} top-level entries differ, e.g. {changed[0]})")
    shown = ", ".join(f"{k} {_state(a.get(k), b.get(k))}" for k in changed[:3])
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return f"manual_dir {then} whose files changed since ({shown}{more})"


def _state(a: list | None, b: list | None) -> str:
    if a is None:
        return "added"
    if b is None:
        return "missing"
    if a[:2] != b[:2]:
        return f"{a[0]} files {a[1]} B -> {b[0]} files {b[1]} B"
    return "modified (same sizes, other modification times)"


def _size(files: dict[str, list]) -> str:
    return (f"{sum(v[0] for v in files.values())} files, "
            f"{sum(v[1] for v in files.values()) / 1e6:.3g} MB")


def _first_diff(a: dict, b: dict) -> str:
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(f"{k}: {a.get(k)!r} then, {b.get(k)!r} now" for k in keys[:2])


def _config_name(builder: Any) -> str | None:
    return builder.builder_config.name if builder.builder_config else None


def _name(builder: Any) -> str:
    config = _config_name(builder)
    return f"{builder.name}{'/' + config if config else ''}:{builder.version}"


_FLAGS = {"embedder": "--embedder {}", "candidate_embedder": "--candidate_embedder {}",
          "feature_embedder": "--feature_embedder {}"}


def rebuild_hint(builder: Any, manual_dir: str | None, verify: bool = False) -> str:
    """How to rebuild the dataset of `builder` in place (or where else to build it), with
    the flags naming the model functions handed now (those the command line can name)."""
    parts = type(builder).__module__.split(".")
    module = ".".join(parts[1:-1]) if parts[0] == "tfds_builders" and len(parts) > 2 \
        else builder.name
    config = _config_name(builder)
    flags = "".join(
        " " + (_FLAGS[role].format(name) if role in _FLAGS else
               f"--expert {role.removeprefix('expert:')}={name}")
        for role, name in functions(builder).items()
        if "<" not in name and "(" not in name and (role in _FLAGS or role.startswith("expert:")))
    return (f"rebuild it: python -m tfds_builders build {module}"
            f"{f' --config {config}' if config else ''}"
            f"{f' --manual_dir {manual_dir}' if manual_dir else ''} "
            f"--data_dir {builder.data_dir_root}{flags} --rebuild{' --verify' if verify else ''}"
            " (or use another data_dir)")
