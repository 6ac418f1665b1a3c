"""Helpers shared by the project's TFDS builders: skip counting and build summaries.

A builder records every input it cannot use with `record_skip` (one warning naming the
file and the reason, and a count per reason), and after `download_and_prepare` writes
`build_summary.json` next to the built dataset so that the summary survives re-runs.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import pathlib
import shutil
from collections.abc import Callable
from typing import Any

SUMMARY_FILE = "build_summary.json"

log = logging.getLogger("tfds_builders")


class ManualDirError(FileNotFoundError):
    """A builder's manual_dir is missing or lacks what it must contain (one-line message)."""


def record_skip(
    skips: collections.Counter, reason: str, path: os.PathLike | str, detail: str = ""
) -> None:
    """Counts one skipped input under `reason` and warns naming the file."""
    skips[reason] += 1
    msg = f"skipped {path}: {reason}" + (f" ({detail})" if detail else "")
    log.warning(msg)


def make_summary(builder: Any, skips: collections.Counter | dict | None) -> dict:
    """Examples per split (from the built dataset info) and skips by reason."""
    splits = {name: int(s.num_examples) for name, s in builder.info.splits.items()}
    return {
        "dataset": builder.name,
        "config": builder.builder_config.name if builder.builder_config else None,
        "version": str(builder.version),
        "data_dir": os.fspath(builder.data_dir),
        "examples": splits,
        "skipped": dict(sorted((skips or {}).items())),
    }


def write_summary(builder: Any, skips: collections.Counter | dict | None) -> dict:
    """Writes `build_summary.json` into the builder's data_dir and returns the summary."""
    summary = make_summary(builder, skips)
    path = os.path.join(os.fspath(builder.data_dir), SUMMARY_FILE)
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def read_summary(builder: Any) -> dict:
    """The stored summary of an already built dataset (examples recomputed from its info)."""
    path = os.path.join(os.fspath(builder.data_dir), SUMMARY_FILE)
    skips = None
    if os.path.exists(path):
        with open(path) as f:
            skips = json.load(f).get("skipped")
    summary = make_summary(builder, skips)
    summary["skipped_known"] = skips is not None
    return summary


def format_summary(summary: dict) -> str:
    """Human-readable build summary: examples per split and skips by reason."""
    lines = [
        f"{summary['dataset']}/{summary['config']}:{summary['version']} -> {summary['data_dir']}"
    ]
    total = sum(summary["examples"].values())
    lines.append(f"examples: {total}")
    for name, n in sorted(summary["examples"].items()):
        lines.append(f"  {name}: {n}")
    skipped = summary.get("skipped") or {}
    if summary.get("skipped_known") is False:
        lines.append("skipped: unknown (no build_summary.json)")
    else:
        lines.append(f"skipped: {sum(skipped.values())}")
        for reason, n in sorted(skipped.items()):
            lines.append(f"  {reason}: {n}")
    return "\n".join(lines)


def write_once(root: pathlib.Path, write: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """`root`, written by `write(tmp_dir)` unless a complete copy exists already.

    Generated corpora are deterministic, so concurrent builders (several processes of one
    run) may both write; the first to finish renames its temporary directory into place
    and the others discard theirs. `root/_COMPLETE` marks a finished corpus.
    """
    if (root / "_COMPLETE").is_file():
        return root
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    try:
        write(tmp)
        (tmp / "_COMPLETE").write_text("ok\n")
        if not root.exists():  # else another process finished first
            os.replace(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root
