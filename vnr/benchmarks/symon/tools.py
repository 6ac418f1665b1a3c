"""SYMON command-line tools (not the trainer; never imported by a task).

    python -m vnr.benchmarks.symon.tools movie_keys --movie_list YMS/movie_list.txt

`movie_keys`: `title<TAB>movie key` for every line of a movie list (YMS `movie_list.txt`,
`<id>\\t<YouTube title>`, or one title per line): the key of the movie the title is one of,
as the YMS exclusion of `configs/symon/retrieval.py:exclude_yms` groups them
(`data.listed_movies`, rules in `tfds_builders/symon/titles.py`). To stderr: the titles
merged by a non-exact rule or an alias (one line each) and a summary (titles, distinct
movies, titles left without a key).
"""

from __future__ import annotations

import os
import sys

from absl import flags

from vnr import cli
from vnr.benchmarks.symon import data


def movie_keys(path: str) -> tuple[list[tuple[str, str]], dict[str, int], list[str]]:
    """([(title, its movie's key)], counts, the non-exact joins) of a movie list."""
    rows = data.read_movie_list(path)
    movies = data.listed_movies(rows)
    key_of = {t: m.key for m in movies for t in m.titles}
    out = [(t, key_of[t] if k else "") for t, k in rows]
    counts = {"titles": len(out), "movies": len(movies),
              "without_key": sum(not k for _, k in out)}
    return out, counts, [j for m in movies for j in m.joined_by]


def _movie_keys_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("movie_list", None, "YMS movie_list.txt or a titles file", required=True,
                        flag_values=fv)


COMMANDS = {"movie_keys": ("title -> movie key of every line of a movie list",
                           _movie_keys_flags)}


def main(argv: list[str] | None = None) -> int:
    args = cli.parse(argv, "python -m vnr.benchmarks.symon.tools", __doc__, COMMANDS)
    if os.path.exists(args.movie_list) and not os.path.isfile(args.movie_list):
        cli.fail(f"--movie_list {args.movie_list} is not a regular file (a directory, a FIFO "
                 "or a device: reading it would fail or block)")
    try:
        rows, counts, joins = movie_keys(args.movie_list)
    except OSError as e:
        print(f"error: --movie_list {args.movie_list}: {e.strerror or e}", file=sys.stderr)
        return 2
    for title, key in rows:
        print(f"{title}\t{key}")
    for j in joins:
        print(f"merged: {j}", file=sys.stderr)
    print(f"{counts['titles']} titles, {counts['movies']} distinct movies, "
          f"{counts['without_key']} without a key", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
