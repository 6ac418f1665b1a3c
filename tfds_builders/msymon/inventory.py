"""What an M-SyMoN release's splits hold, for `vnr.contamination`: the splits the builder
makes of it under one config (`<lang>_<split>`, a carved `<lang>_val`, `<lang>_weak`:
`msymon.scan`, which keeps only the videos the config can use), one `Held` per video (its
YouTube id; its movie from `movies.json`, which the public release does not ship)."""

from __future__ import annotations

import os
from typing import Any

from tfds_builders import Held, common
from tfds_builders.msymon.msymon import check_manual_dir, read_movies, scan


def inventory(manual_dir: os.PathLike | str, cfg: Any) -> dict[str, list[Held]]:
    """{split: [Held]} of the release at `manual_dir` as builder config `cfg` (an
    `MSymonConfig`: `tfds_builders.msymon.inventory` resolves a name, dim and fps) splits it
    (`ManualDirError` if it is not a release)."""
    if cfg.source != "manual":
        raise common.ManualDirError(f"msymon config {cfg.name!r} does not read a release")
    root = check_manual_dir(manual_dir)
    counts = common.Counts()
    movies = read_movies(root, counts)
    return {split: [Held(f"youtube:{v['video_id']}", tuple(
                filter(None, [movies.get(v["video_id"])]))) for v in videos]
            for split, videos in scan(root, cfg, counts).items()}
