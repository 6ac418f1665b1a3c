"""What a SYMON release's splits hold, for `vnr.contamination`: the splits the builder
makes of it under one config (`symon.scan`: movies, franchises, 80/10/10 by franchise over
the usable videos, so `features` and `text_only` can split differently), one `Held` per
video (its YouTube id; its movie's title when the builder knows the movie)."""

from __future__ import annotations

import os

from tfds_builders import Held, common
from tfds_builders.symon.symon import Symon, check_manual_dir, scan


def inventory(manual_dir: os.PathLike | str, config: str = "text_only"
              ) -> dict[str, list[Held]]:
    """{split: [Held]} of the release at `manual_dir` as builder config `config` splits it
    (`ManualDirError` if it is not a release or has no usable video)."""
    configs = {c.name: c for c in Symon.BUILDER_CONFIGS if c.source == "manual"}
    if config not in configs:
        raise common.ManualDirError(f"symon config {config!r} does not read a release "
                                    f"(one of {', '.join(configs)})")
    root = check_manual_dir(manual_dir, config)
    out: dict[str, list[Held]] = {}
    for v in scan(root, configs[config], common.Counts()):
        titles = (v["movie_id"],) if v["movie_key"] else ()
        out.setdefault(v["split"], []).append(Held(f"youtube:{v['video_id']}", titles))
    return out
