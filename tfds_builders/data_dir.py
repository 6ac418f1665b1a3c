"""Whether a `data_dir` can hold a build: one line naming it instead of an OSError traceback.

`check` runs before anything is read or built (the builder command, the trainer before it
compiles): a `data_dir` that cannot be created (a regular file on its path, or its nearest
existing folder not writable by this user) or that is a file. An existing folder is not
checked for writing, since a dataset already built there is only read (a read-only shared
copy is fine); when a build does have to write into it and cannot, `failed_write` turns the
OSError into one line naming the `data_dir`. Note that root may write anywhere, so for root
only the file-on-the-path cases are found before the build. The trainer applies the same rule
to `data.data_dir` through the package's API (`from tfds_builders import check_data_dir`,
`vnr/startup.py`).
"""

from __future__ import annotations

import errno
import os
import pathlib


class DataDirError(ValueError):
    """The data_dir cannot hold a build (one line naming it)."""


class ManualDirError(FileNotFoundError):
    """A builder's manual_dir is missing or lacks what it must contain (one-line message
    saying what it must hold). The trainer names `data.manual_dir` in front of it."""


def out_of_space(error: BaseException) -> str | None:
    """The "no space left" message of `error` or of an error it was raised from (TFDS and
    array_record wrap the writer's ENOSPC in their own exceptions); None otherwise."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"{e.strerror}" + (f": {os.fsdecode(e.filename)}" if e.filename else "")
        text = " ".join(str(e).split())
        if "No space left on device" in text or "Disk quota exceeded" in text:
            return text[:300]
        e = e.__cause__ or e.__context__
    return None


def check(data_dir: str | os.PathLike, name: str = "--data_dir") -> None:
    """Raises DataDirError (naming `name`, the flag or config key) when `data_dir` is a file
    or cannot be created."""
    path = pathlib.Path(data_dir).absolute()
    try:
        if path.exists():
            if not path.is_dir():
                raise DataDirError(f"{name}={data_dir} is a file, not a directory")
            return
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
    except OSError as e:  # e.g. a folder on the path that this user may not enter
        raise DataDirError(f"{name}={data_dir} cannot be created or read: "
                           f"{e.strerror}: {e.filename}") from None
    if not parent.is_dir():
        raise DataDirError(f"{name}={data_dir} cannot be created: {parent} is a file, not a "
                           f"directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataDirError(f"{name}={data_dir} cannot be created: {parent} is not writable "
                           f"by this user")


def failed_write(error: OSError, data_dir: str | os.PathLike, name: str = "--data_dir"
                 ) -> str | None:
    """One line for `error` when it is about a path inside `data_dir` (a build that cannot
    write there); None for any other path (not ours to explain)."""
    if not error.filename:
        return None
    root = pathlib.Path(data_dir).absolute()
    failed = pathlib.Path(os.fsdecode(error.filename)).absolute()
    if failed != root and not failed.is_relative_to(root):
        return None
    return (f"{name}={data_dir}: the build cannot write there ({type(error).__name__}: "
            f"{error.strerror}: {failed})")
