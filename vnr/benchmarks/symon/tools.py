"""SYMON command-line tools (not the trainer; never imported by a task).

    python -m vnr.benchmarks.symon.tools movie_keys --movie_list YMS/movie_list.txt

`movie_keys`: `title<TAB>movie key` for every line of a movie list (YMS `movie_list.txt`,
`<id>\\t<YouTube title>`, or one title per line): the key of the movie the title is one of,
as the YMS exclusion of `configs/symon/retrieval.py:exclude_yms` groups them
(`exclusion.listed_movies`, rules in `tfds_builders/symon/titles.py`). To stderr: the titles
merged by a non-exact rule or an alias (one line each) and a summary (titles, distinct
movies, titles left without a key).

    python -m vnr.benchmarks.symon.tools contamination --yms_dir YMS --manual_dir SYMON \\
        --data_dir DIR [--config text_only]

`contamination`: how much of YMS (the §7.3 test set) sits inside SYMON: per SYMON split, the
YMS videos there by id (YMS `url_list.txt`), and of the training split what the exclusion
of `exclude_yms` removes by title and by id, and what it would leave (0 is the only
honest count for a transfer row). Builds the SYMON dataset `--config` if needed.

    python -m vnr.benchmarks.symon.tools steps --manual_dir SYMON --data_dir DIR \
        [--config features] [--exclude_movies YMS/movie_list.txt] [--epochs 20]

`steps`: the retrieval train split's clip count and, at `--batch_size` (1024), the
`total_steps` / `warmup_steps` of Appendix E's 20 epochs with 1 of warm-up, as JSON: the
values the univl presets set themselves (`epochs`, `data.resolve_epochs`). With `--task order
--train_split setA --epochs 30 --warmup_epochs 6 --batch_size 128` (256 video only): Table 6's.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from typing import Any

from absl import flags

from vnr import cli
from vnr.benchmarks.symon import data, exclusion


def movie_keys(path: str) -> tuple[list[tuple[str, str]], dict[str, int], list[str]]:
    """([(title, its movie's key)], counts, the non-exact joins) of a movie list."""
    rows = exclusion.read_movie_list(path)
    movies = exclusion.listed_movies(rows)
    key_of = {t: m.key for m in movies for t in m.titles}
    out = [(t, key_of[t] if k else "") for t, k in rows]
    counts = {"titles": len(out), "movies": len(movies),
              "without_key": sum(not k for _, k in out)}
    return out, counts, [j for m in movies for j in m.joined_by]


def _movie_keys_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("movie_list", None, "YMS movie_list.txt or a titles file", required=True,
                        flag_values=fv)


def contamination(yms_dir: str, config: str, data_dir: str, manual_dir: str
                  ) -> dict[str, Any]:
    """{split: YMS videos in it by id}, plus the training split's exclusion: removed by title
    and by id, and the YMS videos it would leave in training."""
    from tfds_builders import symon

    lacking = [f for f in (exclusion.YMS_URLS, "movie_list.txt")
               if not (pathlib.Path(yms_dir) / f).is_file()]
    if lacking:
        raise ValueError(f"--yms_dir {yms_dir} is not the YMS release: it has no "
                         f"{' or '.join(lacking)}")
    ids = exclusion.listed_video_ids(pathlib.Path(yms_dir) / exclusion.YMS_URLS)
    out: dict[str, Any] = {"yms_videos": len(ids), "splits": {}}
    for split in symon.split_names(config, data_dir, manual_dir):
        src = symon.data_source(config, split, data_dir, manual_dir)
        videos = [src[i] for i in range(len(src))]
        out["splits"][split] = sum(v["video_id"] in ids for v in videos)
        if split == "train":
            listed = str(pathlib.Path(yms_dir) / "movie_list.txt")
            keep, info = exclusion.exclude_movies(videos, listed, split)
            by_id = set(info["removed_by_id"])
            out["train_removed_by_title"] = len(info["removed"]) - len(by_id)
            out["train_removed_by_id"] = len(by_id)
            out["train_yms_left"] = sum(videos[i]["video_id"] in ids for i in keep)
    return out


def _contamination_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("yms_dir", None, "YMS release: movie_list.txt and url_list.txt",
                        required=True, flag_values=fv)
    flags.DEFINE_string("manual_dir", None, "SYMON release", required=True, flag_values=fv)
    flags.DEFINE_string("data_dir", None, "TFDS data_dir of the SYMON build", required=True,
                        flag_values=fv)
    flags.DEFINE_string("config", "text_only", "SYMON builder config", flag_values=fv)


def steps(config: str, data_dir: str, manual_dir: str, exclude_movies: str, epochs: int,
          warmup_epochs: int, batch_size: int, task: str = "retrieval",
          train_split: str = "train") -> dict[str, int]:
    """The `task` train split's item count and the step counts of `epochs` and
    `warmup_epochs` epochs at `batch_size` (Appendix E retrieval: 20 and 1 at 1024;
    Appendix D ordering: 30 and 6 at 128 or 256 on setA / setB): what `total_steps` and
    `warmup_steps` are for the paper's schedule."""
    from configs.symon import order as order_config
    from configs.symon import retrieval as retrieval_config
    from tfds_builders.symon import CONFIGS

    if config in CONFIGS and not CONFIGS[config].with_features:
        raise ValueError(f"--config {config}: steps counts the clips of a config with video "
                         f"features (e.g. features); {config} has none")
    if task == "order":
        d = order_config.get_config("").data
    else:
        d = retrieval_config.get_config("exclude_yms" if exclude_movies else "").data
        d.exclude_movies = exclude_movies
    d.update(config=config, data_dir=data_dir, manual_dir=manual_dir)
    items = len(data.ItemSource(d, train_split, task))
    per_epoch = -(-items // batch_size)  # the last partial batch counted as a step
    return {"train_items": items, "batch_size": batch_size, "steps_per_epoch": per_epoch,
            "total_steps": epochs * per_epoch, "warmup_steps": warmup_epochs * per_epoch}


def _steps_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("manual_dir", None, "SYMON release", required=True, flag_values=fv)
    flags.DEFINE_string("data_dir", None, "TFDS data_dir of the SYMON build", required=True,
                        flag_values=fv)
    flags.DEFINE_string("config", "features", "SYMON builder config", flag_values=fv)
    flags.DEFINE_string("exclude_movies", "", "YMS movie_list.txt (the §7.3 source runs)",
                        flag_values=fv)
    flags.DEFINE_integer("epochs", 20, "epochs of training (Appendix E: 20)", flag_values=fv)
    flags.DEFINE_integer("warmup_epochs", 1, "epochs of warm-up (Appendix E: 1)",
                         flag_values=fv)
    flags.DEFINE_integer("batch_size", 1024, "global batch (Appendix E: 1024)", flag_values=fv)
    flags.DEFINE_enum("task", "retrieval", ["retrieval", "order"], "the SYMON task",
                      flag_values=fv)
    flags.DEFINE_string("train_split", "train", "its training split (order: setA or setB)",
                        flag_values=fv)


COMMANDS = {"movie_keys": ("title -> movie key of every line of a movie list",
                           _movie_keys_flags),
            "contamination": ("YMS videos inside SYMON, per split, and what the exclusion "
                              "removes", _contamination_flags),
            "steps": ("total_steps and warmup_steps of the paper's retrieval schedule (20 "
                      "epochs, 1 warm-up) for this release's train clips", _steps_flags)}


def main(argv: list[str] | None = None) -> int:
    args = cli.parse(argv, "python -m vnr.benchmarks.symon.tools", __doc__, COMMANDS)
    if args.command == "steps":
        if args.epochs < 1 or args.warmup_epochs < 0 or args.batch_size < 1:
            cli.fail("--epochs and --batch_size must be >= 1, --warmup_epochs >= 0")
        try:
            report = steps(args.config, args.data_dir, args.manual_dir, args.exclude_movies,
                           args.epochs, args.warmup_epochs, args.batch_size, args.task,
                           args.train_split)
        except (OSError, ValueError) as e:
            cli.fail(str(e))
        print(json.dumps(report, indent=1))
        return 0
    if args.command == "contamination":
        try:
            report = contamination(args.yms_dir, args.config, args.data_dir, args.manual_dir)
        except (OSError, ValueError) as e:
            cli.fail(str(e))
        print(json.dumps(report, indent=1))
        return 0
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
