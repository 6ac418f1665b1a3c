"""TFDS builders of the five benchmarks (`python -m tfds_builders build ...`); code outside
them reads each builder through its package's `__all__` (`from tfds_builders import sc2st`)
and the rule every build applies to its `data_dir` through the names below, as well as the
lock file the builders and the trainer share (`holder`)."""

from typing import NamedTuple

from tfds_builders.data_dir import DataDirError, ManualDirError, failed_write
from tfds_builders.data_dir import check as check_data_dir
from tfds_builders.holder import Holder, LockHeld, alive

# Video files as yt-dlp names them (`<id>.<ext>`; an unfinished download ends in `.part`):
# what `vnr.extract` reads and what builders count as downloaded (`common.missing_features`).
VIDEO_EXTS = (".mp4", ".webm", ".mkv", ".mov", ".m4v", ".avi")



class Held(NamedTuple):
    """One video of a release's split, as `vnr.contamination` compares releases: its id with
    the id space named (`youtube:<id>`, `xigua:<album>`, `moviepuzzle:<clip>`,
    `lsmdc:<movie>/<clip>`), the movie titles it is known by, its IMDb id ("" if unknown)."""

    video: str
    titles: tuple[str, ...] = ()
    imdb: str = ""


__all__ = ["VIDEO_EXTS", "DataDirError", "Held", "Holder", "LockHeld", "ManualDirError", "alive",
           "check_data_dir", "failed_write", "forget_used", "recorded_manual_dirs",
           "release_fingerprint", "used_datasets"]


def used_datasets() -> dict[str, str]:
    """`name/config` -> identity of every dataset this process opened since `forget_used`
    (`tfds_builders.fingerprint.identity`; a run records them, `vnr.workdir.check_data`)."""
    from tfds_builders import fingerprint

    return dict(fingerprint.USED)


def forget_used() -> None:
    """Starts a new list for `used_datasets` (a run's start)."""
    from tfds_builders import fingerprint

    fingerprint.USED.clear()


def release_fingerprint(manual_dir: str) -> str:
    """A digest of a release directory's file names, sizes and modification times (what a
    build records of its `manual_dir`, `tfds_builders.fingerprint.scan`; no file is read)."""
    from tfds_builders import fingerprint

    return fingerprint._digest(fingerprint.scan(manual_dir))  # noqa: SLF001  (the build's)


def recorded_manual_dirs(data_dir: str, name: str) -> list[str]:
    """The distinct release directories that the builds of dataset `name` under `data_dir`
    recorded (`build_source.json` of each config and version), sorted; [] when none."""
    import json
    import pathlib

    from tfds_builders import fingerprint

    found = set()
    for path in pathlib.Path(data_dir, name).glob(f"*/*/{fingerprint.SOURCE_FILE}"):
        try:
            found.add(json.loads(path.read_text()).get("manual_dir") or "")
        except (OSError, ValueError, AttributeError):
            continue
    return sorted(found - {""})
