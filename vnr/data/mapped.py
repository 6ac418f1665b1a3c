"""Rows of one split of a store on disk, by record: `<split>.offsets.npy` (record i's rows are
`offsets[i]:offsets[i + 1]`), `<split>.ids.json` (record ids, checked on every read) and the
rows array a subclass maps. Shared by the frame store (`vnr/data/frame_store.py`) and the
feature cache (`vnr/feature_cache.py`); picklable, so each grain worker reopens the maps."""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np


class MappedRows:
    """One split of a store at `directory`; `rows(index, record_id)` reads a record's rows."""

    what = "store"  # the store's name in errors ("frame store", "feature cache")
    noun = "store"
    fix = "delete the store to rebuild it"
    error: type[Exception] = ValueError

    def __init__(self, directory: str | os.PathLike, split: str):
        self.directory, self.split = str(directory), split
        self._arrays: tuple[np.ndarray, np.ndarray, list[str]] | None = None

    def _rows_array(self, directory: pathlib.Path, offsets: np.ndarray) -> np.ndarray:
        """The split's rows, memory-mapped ([total rows, ...])."""
        raise NotImplementedError

    def _open(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        if self._arrays is None:
            d = pathlib.Path(self.directory)
            offsets = np.load(d / f"{self.split}.offsets.npy")
            self._arrays = (self._rows_array(d, offsets), offsets,
                            json.loads((d / f"{self.split}.ids.json").read_text()))
        return self._arrays

    def __len__(self) -> int:
        return len(self._open()[2])

    def _record(self, index: int, record_id: str) -> np.ndarray:
        """Record `index`'s rows (a view of the map), after checking its id."""
        rows, offsets, ids = self._open()
        if index >= len(ids) or ids[index] != record_id:
            got = ids[index] if index < len(ids) else "nothing"
            raise self.error(f"{self.what} {self.directory} ({self.split}): record {index} is "
                             f"{record_id!r} in the dataset but {got!r} in the {self.noun} "
                             f"(the dataset was rebuilt): {self.fix}")
        return rows[offsets[index]:offsets[index + 1]]

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _arrays=None)
