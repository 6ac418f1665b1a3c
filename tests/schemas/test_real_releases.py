"""Every real release sample in ../shared/data builds with the same counts and the same
examples as before the typed schemas (main 9cf6bfb, recorded in `real_releases.json`): the
schemas refuse nothing the real files hold; their known defects are counted as they were.

`real_releases.json` holds, per `builder/config`, the examples per split, the `skipped`
counts (skips and `kept_*`), the `noted` counts and `digest` (of each split's examples) of
main's build. Regenerate it only for a change that is meant to change what is built (and
say so in its commit).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import Any

import numpy as np
import pytest

from tfds_builders.__main__ import build, find_builder

RELEASE = {"moviepuzzle": "moviepuzzle_public", "msymon": "msymon", "msymon.yms": "yms",
           "symon": "symon", "movie101": "movie101"}

EXPECTED = json.loads(pathlib.Path(__file__).with_name("real_releases.json").read_text())


def _norm(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in sorted(x.items())}
    if isinstance(x, np.ndarray):
        return (str(x.dtype), x.shape, x.tobytes().hex())
    if isinstance(x, list | tuple):
        return [_norm(v) for v in x]
    if isinstance(x, np.generic):
        return (str(x.dtype), x.tobytes().hex())
    return x


def digest(name: str, config: str, data_dir: pathlib.Path) -> dict[str, str]:
    """Per split, a hash of its examples as stored (order-free: TFDS stores them by key)."""
    builder = find_builder(name)(config=config, data_dir=data_dir)
    out = {}
    for split in sorted(builder.info.splits):
        src = builder.as_data_source(split)
        rows = sorted(repr(_norm(src[i])) for i in range(len(src)))
        out[split] = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
    return out


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_real_release_builds_as_before(key, shared_data, tmp_path):
    name, config = key.split("/")
    release = shared_data / RELEASE[name]
    if name == "movie101":
        release /= config.split("_")[0]
    summary = build(name, config, str(tmp_path), str(release))
    want = EXPECTED[key]
    assert summary["examples"] == want["examples"]
    assert summary["skipped"] == want["skipped"]
    assert summary["noted"] == want["noted"]
    assert digest(name, config, tmp_path) == want["digest"], "same counts, other examples"
