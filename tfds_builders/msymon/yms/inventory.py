"""What a YMS release's splits hold, for `vnr.contamination`: the split files' videos (all
listed ones, annotated or not: the public release annotates the training split only), each
as its YouTube id from `url_list.txt` and its movie from `movie_list.txt` (`<index><TAB>
<YouTube title>`, e.g. "Ant-Man in 4 minutes - ...")."""

from __future__ import annotations

import os
import pathlib
import re

from tfds_builders import Held, common
from tfds_builders import schema as S
from tfds_builders.msymon.yms.yms import SPLIT_FILES, read_split

_URL_ID = re.compile(r"(?:youtu\.be/|[?&]v=|/shorts/|/embed/|/v/)([\w-]+)")
NEEDED = (*SPLIT_FILES.values(), "url_list.txt", "movie_list.txt")


def _indexed(path: pathlib.Path) -> dict[str, str]:
    """`<index><whitespace><value>` lines as {index: value}; a line without both is one
    ManualDirError naming the file and line."""
    out = {}
    for n, line in enumerate(S.read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        parts = line.strip().split(None, 1)
        if len(parts) != 2:
            raise common.ManualDirError(f"{path}:{n}: expected '<index> <value>', got "
                                        f"{line.strip()!r}")
        out[parts[0]] = parts[1].strip()
    return out


def inventory(manual_dir: os.PathLike | str) -> dict[str, list[Held]]:
    """{split: [Held]} of the release at `manual_dir` (`ManualDirError` naming what is
    missing: a video is compared by its YouTube id, so `url_list.txt` is required). A video
    whose URL names no YouTube id is kept as `yms:<index>` (compared with nothing)."""
    root = pathlib.Path(manual_dir)
    missing = [f for f in NEEDED if not (root / f).is_file()]
    if missing:
        raise common.ManualDirError(f"{root} is not a YMS release: it lacks {', '.join(missing)}")
    urls, titles = _indexed(root / "url_list.txt"), _indexed(root / "movie_list.txt")
    out, unresolved = {}, []
    for split, name in SPLIT_FILES.items():
        held = []
        for index in read_split(root / name):
            found = _URL_ID.search(urls.get(index, ""))
            if not found:
                unresolved.append(f"{index} ({urls.get(index, 'no line')!r})")
            video = f"youtube:{found.group(1)}" if found else f"yms:{index}"
            held.append(Held(video, tuple(filter(None, [titles.get(index)]))))
        out[split] = held
    if unresolved:
        common.log.warning("%s: %d listed video(s) have no YouTube id in url_list.txt and are "
                           "compared by title only: %s", root, len(unresolved),
                           "; ".join(unresolved[:5]))
    return out
