"""What an M-SyMoN release's splits hold, for `vnr.contamination`: the builder's splits
(`<lang>_<split>`, a carved `<lang>_val`, `<lang>_weak`) from `msymon.scan` of the text
release, one `Held` per video (its YouTube id; its movie from `movies.json`, which the
public release does not ship, so usually none)."""

from __future__ import annotations

import os

from tfds_builders import Held, common
from tfds_builders.msymon.msymon import MSymon, check_manual_dir, read_movies, scan


def inventory(manual_dir: os.PathLike | str) -> dict[str, list[Held]]:
    """{split: [Held]} of the release at `manual_dir` (`ManualDirError` if it is not one)."""
    root = check_manual_dir(manual_dir)
    cfg = next(c for c in MSymon.BUILDER_CONFIGS if c.name == "text_only")
    counts = common.Counts()
    movies = read_movies(root, counts)
    return {split: [Held(f"youtube:{v['video_id']}", tuple(
                filter(None, [movies.get(v["video_id"])]))) for v in videos]
            for split, videos in scan(root, cfg, counts).items()}
