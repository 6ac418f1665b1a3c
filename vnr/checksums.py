"""Checksum manifests of a directory's files: written once its files are final, verified
before they are read.

Orbax (0.12) gives the array chunks it writes no checksum (TensorStore checksums only the
shard index and OCDBT's own nodes), so bytes changed inside a chunk restore silently. A
manifest `vnr_checksums.json` in the directory lists every file below it with its size and
SHA-256; `verify` finds a missing file, a file of another size (truncated or grown) and a
file whose bytes changed, and raises `Mismatch` naming the file. Sizes are checked in full
(one `stat` per file); hashing may be split over several processes (`part` of `parts`), each
reading its share of the bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib

MANIFEST = "vnr_checksums.json"
_HASH = "sha256"


class Mismatch(ValueError):
    """A file differs from the manifest (one line naming it)."""


def _digest(path: pathlib.Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, _HASH).hexdigest()


def _files(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST)


def write(directory: os.PathLike | str) -> dict[str, list]:
    """Writes the manifest of every file below `directory` ({relative path: [size, hash]})
    and returns it."""
    directory = pathlib.Path(directory)
    files = {p.relative_to(directory).as_posix(): [p.stat().st_size, _digest(p)]
             for p in _files(directory)}
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"hash": _HASH, "files": files}, indent=0, sort_keys=True))
    tmp.replace(directory / MANIFEST)
    return files


def has_manifest(directory: os.PathLike | str) -> bool:
    return (pathlib.Path(directory) / MANIFEST).is_file()


def verify(directory: os.PathLike | str, part: int = 0, parts: int = 1) -> None:
    """Raises Mismatch naming the first file below `directory` that is missing, of another
    size or of other bytes than its manifest lists (every size; the hashes of the files
    `part`, `part + parts`, ... in name order). FileNotFoundError without a manifest."""
    directory = pathlib.Path(directory)
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
        files = manifest["files"]
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Mismatch(f"{MANIFEST} is unreadable ({type(e).__name__}: {e})") from None
    names = sorted(files)
    for name in names:
        size = _size(directory / name)
        if size is None:
            raise Mismatch(f"{name} is missing")
        if size != files[name][0]:
            raise Mismatch(f"{name} has {size} bytes, {files[name][0]} were written")
    for name in names[part::parts]:
        if _digest(directory / name) != files[name][1]:
            raise Mismatch(f"{name} has other bytes than were written ({_HASH} differs)")


def _size(path: pathlib.Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None
