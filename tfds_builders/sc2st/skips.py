"""Bad-input counting for the Sc2St builder: by reason and by input file.

`Skips` is the `collections.Counter` the shared build summary stores (reason -> count)
plus `by_file` (file -> reason -> count), which the Sc2St builder adds to its
`build_summary.json` as `skipped_by_file`, so a bad CSV, frame folder or story JSON is
named with its own counts.
"""

from __future__ import annotations

import collections
import os

from tfds_builders import common


class Skips(common.Counts):
    """reason -> count (the first inputs named, `common.Counts`), with `by_file`: file ->
    Counter(reason -> count)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.by_file: dict[str, collections.Counter] = collections.defaultdict(
            collections.Counter)


def record(skips: collections.Counter, reason: str, file: os.PathLike | str,
           where: str = "", detail: str = "") -> None:
    """Counts one skipped input under `reason` (and under `file` when `skips` is a `Skips`),
    warning with `where` (file:line, file[key]) or the file."""
    common.record_skip(skips, reason, where or file, detail)
    if isinstance(skips, Skips):
        skips.by_file[os.fspath(file)][reason] += 1
