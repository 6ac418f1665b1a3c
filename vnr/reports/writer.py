"""Scalar logging: TensorBoard event files and a JSONL of the same values.

Only the primary process writes (pass `active=False` elsewhere). `metrics.jsonl` holds one
value per (step, name): a run resumed from its checkpoint at step `start` first drops the
rows after `start` (a `kill -9` between a log and the next checkpoint left them, and the
replayed steps write them again) and a line cut by the kill; TensorBoard's events after
`start` are purged the same way (`purge_step`). A value written again for a step it
already has (a finished run's final evaluation, rerun) replaces the old one.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from typing import Any

_META = ("step", "time")


class MetricWriter:
    """Writes `{name: float}` per step to `<workdir>/tb/` and `<workdir>/metrics.jsonl`.

    `start`: the step the run starts from (0 fresh, N resumed): rows after it are dropped
    (`dropped` says how many) and so are TensorBoard's events."""

    def __init__(self, workdir: str | pathlib.Path, active: bool = True, start: int = 0):
        self.active = active
        self.path = pathlib.Path(workdir) / "metrics.jsonl"
        self._tb = None
        self._seen: set[tuple[int, str]] = set()
        self.dropped = 0
        if active:
            from tensorboardX import SummaryWriter

            rows, torn = _read(self.path)
            kept = [r for r in rows if int(r["step"]) <= start]
            self.dropped = len(rows) - len(kept) + torn
            if self.dropped:
                _rewrite(self.path, kept)
            self._seen = {(int(r["step"]), k) for r in kept for k in r if k not in _META}
            self._tb = SummaryWriter(str(pathlib.Path(workdir) / "tb"), purge_step=start + 1)

    def write(self, step: int, scalars: dict[str, Any]) -> None:
        if not self.active or not scalars:
            return
        row = {"step": int(step), "time": time.time()}
        for name, value in scalars.items():
            row[name] = float(value)
            self._tb.add_scalar(name, float(value), int(step))
        again = {(int(step), k) for k in scalars} & self._seen
        if again:
            self._forget(again)
        self._seen |= {(int(step), k) for k in scalars}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        self._tb.flush()

    def _forget(self, pairs: set[tuple[int, str]]) -> None:
        """Removes the stored values of these (step, name) pairs (rows left empty go)."""
        out = []
        for r in _read(self.path)[0]:
            r = {k: v for k, v in r.items() if k in _META or (int(r["step"]), k) not in pairs}
            if len(r) > len(_META):
                out.append(r)
        _rewrite(self.path, out)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _read(path: pathlib.Path) -> tuple[list[dict], int]:
    """The rows of a metrics.jsonl and how many of its lines were cut (not whole JSON rows:
    a `kill -9` during a write leaves at most the last one)."""
    if not path.exists():
        return [], 0
    rows, torn = [], 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            torn += 1
            continue
        if isinstance(row, dict) and "step" in row:
            rows.append(row)
        else:
            torn += 1
    return rows, torn


def _rewrite(path: pathlib.Path, rows: list[dict]) -> None:
    """Replaces `path` with `rows` atomically (a kill leaves the old file or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def read_jsonl(path: str | pathlib.Path) -> list[dict[str, float]]:
    """The rows of a metrics.jsonl (a line cut by a kill is left out)."""
    return _read(pathlib.Path(path))[0]
