"""The one results-table writer: split -> metric -> value as a Markdown table.

A task declares every metric it reports as a `Column` (`metric_columns` hook, `vnr/task.py`:
the names `config.select` is checked against and the table's columns, in one list); the trainer
prints the table after the test splits are evaluated. A metric a split lacks prints as "-".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Column:
    """One metric: its `key`, its `header` (default: the key), a format and a scale applied
    before formatting (e.g. 100 for fractions shown as percentages); `table=False`: reported
    (results.json, logs) but not a column of the results table."""

    key: str
    header: str | None = None
    fmt: str = "{:.2f}"
    scale: float = 1.0
    table: bool = True

    def cell(self, metrics: dict[str, float]) -> str:
        v = metrics.get(self.key)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        return self.fmt.format(self.scale * v)


def cols(keys: Sequence[str], fmt: str = "{:.2f}", scale: float = 1.0,
         upper: bool = False, table: bool = True) -> list[Column]:
    """Columns of the same format for `keys`."""
    return [Column(k, k.upper() if upper else None, fmt, scale, table) for k in keys]


def unshown(keys: Sequence[str]) -> list[Column]:
    """Metrics reported but not shown in the results table (counts, thresholds, ...)."""
    return cols(keys, table=False)


def markdown(results: dict[str, dict[str, float]],
             columns: Sequence[Column] | None = None) -> str:
    """One row per split; `columns` None: every metric any split has, in first-seen order."""
    if columns is None:
        keys: dict[str, None] = {}
        for m in results.values():
            keys.update(dict.fromkeys(m))
        columns = cols(list(keys), "{:.4g}")
    head = "| split | " + " | ".join(c.header or c.key for c in columns) + " |"
    rows = [head, "|" + "---|" * (len(columns) + 1)]
    for split, m in results.items():
        rows.append(f"| {split} | " + " | ".join(c.cell(m) for c in columns) + " |")
    return "\n".join(rows)
