"""The YMS exclusion of SYMON training (§7.3): movie lists read as movie keys, YMS's own
video ids from its `url_list.txt`, and the videos a training split loses by either
(`exclude_movies`, logged and counted). `data.ItemSource` applies it for
`data.exclude_movies`; `tools contamination` and `movie_keys` report it."""

from __future__ import annotations

import logging
import pathlib
import re
from typing import Any


def title_key(title: str) -> str:
    """Movie key of a title or movie name (`tfds_builders.symon.titles.movie_key`)."""
    from tfds_builders import symon

    return symon.movie_key(title)


def read_movie_list(path: str) -> list[tuple[str, str]]:
    """(title, movie key) per line of a movie list: YMS `movie_list.txt` (`<id>\\t<YouTube
    title>`) or one title per line; titles that normalise to nothing are logged by name. A
    file that is not UTF-8 text is one line naming it (`tfds_builders.symon.movie_titles`)."""
    from tfds_builders.symon import movie_titles

    out = [(title, title_key(title)) for title in movie_titles(path)]
    empty = [t for t, k in out if not k]
    if empty:
        logging.warning("%s: %d title(s) normalise to no movie key (ignored): %s", path,
                        len(empty), "; ".join(empty[:5]))
    return out


def excluded_movie_keys(path: str) -> set[str]:
    """Keys of the movies of a movie list (`listed_movies`)."""
    return {m.key for m in listed_movies(read_movie_list(path))}


def listed_movies(listed: list[tuple[str, str]]) -> list[Any]:
    """The movies (`tfds_builders.symon.TitleMovie`) of a movie list's (title, key) rows
    (`read_movie_list`): the titles of one movie merged by `group_titles` (exact key, the
    YMS alias table, or a non-exact rule that the movie's `joined_by` names)."""
    from tfds_builders import symon

    return symon.group_titles([t for t, k in listed if k])


def _first(items: list[str], n: int = 10) -> str:
    more = f" (first {n} of {len(items)})" if len(items) > n else ""
    return "; ".join(items[:n]) + more


YMS_URLS = "url_list.txt"  # beside YMS movie_list.txt: the YMS videos' own YouTube URLs


def listed_video_ids(path: str | pathlib.Path) -> set[str]:
    """YouTube ids of a URL list (YMS `url_list.txt`: `<index><TAB><url>` per line; any
    `youtu.be/<id>` or `watch?v=<id>` URL, or a bare id); a line with none is
    one ValueError naming the file and line."""
    ids = set()
    for n, line in enumerate(pathlib.Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        found = re.search(r"(?:youtu\.be/|[?&]v=|/shorts/)([\w-]+)", line) or re.fullmatch(
            r"\s*(?:\d+\s+)?([\w-]+)\s*", line)
        if not found:
            raise ValueError(f"{path}:{n}: no YouTube video id in {line.strip()!r}")
        ids.add(found.group(1))
    return ids


def yms_video_ids(movie_list: str) -> set[str] | None:
    """The YMS videos' ids when `movie_list` is YMS's `movie_list.txt` (read from the
    `url_list.txt` beside it, required then: most YMS videos are SYMON videos themselves,
    and a title never names them), else None (a plain list of titles)."""
    path = pathlib.Path(movie_list)
    if path.name != "movie_list.txt":
        return None
    urls = path.with_name(YMS_URLS)
    if not urls.is_file():
        raise ValueError(f"{urls} is missing: the YMS test videos (most of them SYMON videos) "
                         f"cannot be removed from training by id without it; put YMS's "
                         f"{YMS_URLS} beside {path.name}")
    return listed_video_ids(urls)


def exclude_movies(videos: Any, path: str, split: str) -> tuple[list[int], dict]:
    """Indices of the videos whose movie is not one of the list at `path`, and what was
    removed (logged): the removed video ids, those removed by a non-exact match only
    ("<id> 'movie' ~ 'listed title' (rule)"), the listed movies (keys) that matched no video,
    the videos without a movie identity (kept: nothing to match them by). A video matches a
    movie when its title does by any rule of `tfds_builders.symon.titles.match` (a
    conservative over-match: a test movie must not leak into training)."""
    from tfds_builders import symon

    movies = listed_movies(read_movie_list(path))
    own = yms_video_ids(path) or set()
    keep, removed, non_exact, unknown, matched = [], [], [], 0, set()
    by_id = []
    for v in range(len(videos)):
        rec = videos[v]
        if rec["video_id"] in own:  # a YMS video itself, whatever its title says
            removed.append(rec["video_id"])
            by_id.append(rec["video_id"])
            continue
        if not rec["movie_key"]:
            unknown += 1
            keep.append(v)
            continue
        hits = symon.movies_of(symon.title_of(rec["movie_id"], rec["movie_key"]), movies)
        if not hits:
            keep.append(v)
            continue
        removed.append(rec["video_id"])
        matched.update(m.key for m, _, _ in hits)
        if not any(rule in ("exact", "alias") for _, rule, _ in hits):
            non_exact += [f"{rec['video_id']} {rec['movie_id']!r} ~ {listed!r} ({rule})"
                          for _, rule, listed in hits]
    unmatched = [m.key for m in movies if m.key not in matched]
    logging.warning("symon %s: removed %d of %d videos whose movie is one of the %d movies of "
                    "%s (first: %s); %d listed movies matched no video (%s); %d videos have "
                    "no movie identity and stay", split, len(removed), len(videos), len(movies),
                    path, ", ".join(removed[:10]), len(unmatched), _first(unmatched), unknown)
    if non_exact:
        logging.warning("symon %s: %d removal(s) by a non-exact title match only: %s", split,
                        len(non_exact), _first(non_exact, 20))
    if own:
        logging.warning("symon %s: %d of the removed videos are YMS videos themselves (by id, "
                        "of the %d in %s): %s", split, len(by_id), len(own), YMS_URLS,
                        _first(by_id))
    return keep, {"removed": removed, "movies": len(movies), "unmatched": unmatched,
                  "non_exact": non_exact, "unknown_movie_videos": unknown,
                  "removed_by_id": by_id, "listed_videos": len(own)}


def excluded_held(path: str) -> Any:
    """A function keeping the `tfds_builders.common.Held` SYMON videos (`symon.inventory`)
    that `exclude_movies` keeps for the movie list at `path`: what `vnr.contamination`
    checks of a source run trained with `data.exclude_movies`."""
    from tfds_builders import symon

    def keep(held: list[Any]) -> list[Any]:
        recs = [{"video_id": h.video.split(":", 1)[-1], "movie_id": h.titles[0] if h.titles
                 else "", "movie_key": symon.movie_key(h.titles[0]) if h.titles else ""}
                for h in held]
        kept, _ = exclude_movies(recs, path, "train (contamination check)")
        return [held[i] for i in kept]

    return keep
