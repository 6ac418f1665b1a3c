"""Scalar logging: TensorBoard event files and a JSONL of the same values.

Only the primary process writes (pass `active=False` elsewhere).
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any


class MetricWriter:
    """Writes `{name: float}` per step to `<workdir>/tb/` and `<workdir>/metrics.jsonl`."""

    def __init__(self, workdir: str | pathlib.Path, active: bool = True):
        self.active = active
        self.path = pathlib.Path(workdir) / "metrics.jsonl"
        self._tb = None
        if active:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(pathlib.Path(workdir) / "tb"))

    def write(self, step: int, scalars: dict[str, Any]) -> None:
        if not self.active or not scalars:
            return
        row = {"step": int(step), "time": time.time()}
        for name, value in scalars.items():
            row[name] = float(value)
            self._tb.add_scalar(name, float(value), int(step))
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_jsonl(path: str | pathlib.Path) -> list[dict[str, float]]:
    p = pathlib.Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
