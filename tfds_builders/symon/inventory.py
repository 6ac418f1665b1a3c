"""What a SYMON release's splits hold, for `vnr.contamination`: the splits the builder
makes (`symon.scan` of the text release: movies, franchises, 80/10/10 by franchise), one
`Held` per video (its YouTube id; its movie title when the builder knows the movie)."""

from __future__ import annotations

import os

from tfds_builders import Held, common
from tfds_builders.symon.symon import Symon, check_manual_dir, scan


def inventory(manual_dir: os.PathLike | str) -> dict[str, list[Held]]:
    """{split: [Held]} of the release at `manual_dir` (`ManualDirError` if it is not one)."""
    root = check_manual_dir(manual_dir, "text_only")
    cfg = next(c for c in Symon.BUILDER_CONFIGS if c.name == "text_only")
    out: dict[str, list[Held]] = {}
    for v in scan(root, cfg, common.Counts()):
        titles = (v["movie_id"],) if v["movie_key"] else ()
        out.setdefault(v["split"], []).append(Held(f"youtube:{v['video_id']}", titles))
    return out
