"""Feature arrays of the releases (`.npy`, `.npz`): real, finite, of the documented shape.

`load(path, shape, key=None, store=np.float32)` is the one reader the builders use for
feature files. It returns the array as the file holds it (a real dtype; the builder casts it
to `store`, the dtype it stores, as before), or raises `ArrayError` whose `kind` says what is
wrong (the builder maps it to its skip reason) and whose message names the file:

  unreadable  not an array file (truncated, a pickle, another format), a `.npz` archive
              saved under a `.npy` name (or the reverse)
  key         a `.npz` without the array `key`
  dtype       not real numbers: complex, bool, string, object, date values (never cast:
              complex would lose its imaginary part, strings would be parsed, bools be 0/1)
  shape       another rank or width than `shape` (None = any length), or fewer rows than
              `min_rows` (1 unless a format allows empty arrays)
  nonfinite   NaN or infinite values, also after the cast to `store` (float32: |x| > 3.4e38,
              float16: |x| > 65504)
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence

import numpy as np

REAL_KINDS = "fiu"  # float, signed and unsigned integers: real numbers


class ArrayError(ValueError):
    """A feature file that cannot be used; `kind` in unreadable/key/dtype/shape/nonfinite."""

    def __init__(self, kind: str, path: os.PathLike | str, detail: str):
        super().__init__(f"{os.fspath(path)}: {detail}")
        self.kind, self.path, self.detail = kind, os.fspath(path), detail


def _raw(path: os.PathLike | str, key: str | None) -> np.ndarray:
    try:
        got = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        msg = (str(e).splitlines() or [type(e).__name__])[0]
        raise ArrayError("unreadable", path, f"not a NumPy array file ({msg})") from None
    if isinstance(got, np.lib.npyio.NpzFile):
        with got:
            if key is None:
                raise ArrayError("unreadable", path, f"a .npz archive (arrays {got.files}) "
                                 "where one .npy array is expected")
            if key not in got.files:
                raise ArrayError("key", path, f"keys {got.files}, no `{key}`")
            try:
                return got[key]
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
                msg = (str(e).splitlines() or [type(e).__name__])[0]
                raise ArrayError("unreadable", path, f"array `{key}` unreadable ({msg})"
                                 ) from None
    if key is not None:
        raise ArrayError("unreadable", path, f"one .npy array where a .npz archive with "
                         f"`{key}` is expected")
    return got


def check(x: np.ndarray, path: os.PathLike | str, shape: Sequence[int | None],
          store: type = np.float32, min_rows: int = 1) -> np.ndarray:
    """`x` if it is real, of `shape` (None = any size) with at least `min_rows` rows and
    finite once cast to `store`, else ArrayError naming `path`."""
    names = iter("TDEF")  # sizes left open: T rows, then D, E, F
    want = "[" + ", ".join(next(names) if n is None else str(n) for n in shape) + "]"
    if x.dtype.kind not in REAL_KINDS:
        raise ArrayError("dtype", path, f"dtype {x.dtype} is not real numbers (expected "
                         f"float {want})")
    if x.ndim != len(shape) or any(n is not None and n != m for n, m in zip(shape, x.shape)):
        raise ArrayError("shape", path, f"shape {list(x.shape)}, expected {want}")
    if x.shape[0] < min_rows:
        raise ArrayError("shape", path, f"{x.shape[0]} rows (shape {list(x.shape)}), expected "
                         f"{want} with at least {min_rows}")
    with np.errstate(over="ignore"):
        finite = np.isfinite(x.astype(store))
    if not finite.all():
        raise ArrayError("nonfinite", path, f"{int((~finite).sum())} non-finite value(s) "
                         f"(NaN, infinite or beyond {np.dtype(store).name})")
    return x


def load(path: os.PathLike | str, shape: Sequence[int | None], key: str | None = None,
         store: type = np.float32, min_rows: int = 1) -> np.ndarray:
    """The array of a `.npy` file (or array `key` of a `.npz`), checked by `check`."""
    return check(_raw(path, key), path, shape, store, min_rows)
