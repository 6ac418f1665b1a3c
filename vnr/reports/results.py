"""The one results-table writer: split -> metric -> value as a Markdown table.

Tasks name their columns (`result_columns` hook, `vnr/task.py`); the trainer prints the
table after the test splits are evaluated. A metric a split lacks prints as "-".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Column:
    """One table column: metric `key`, its `header` (default: the key), a format and a
    scale applied before formatting (e.g. 100 for fractions shown as percentages)."""

    key: str
    header: str | None = None
    fmt: str = "{:.2f}"
    scale: float = 1.0

    def cell(self, metrics: dict[str, float]) -> str:
        v = metrics.get(self.key)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        return self.fmt.format(self.scale * v)


def cols(keys: Sequence[str], fmt: str = "{:.2f}", scale: float = 1.0,
         upper: bool = False) -> list[Column]:
    """Columns of the same format for `keys`."""
    return [Column(k, k.upper() if upper else None, fmt, scale) for k in keys]


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
