"""TFDS builders of the five benchmarks (`python -m tfds_builders build ...`); code outside
them reads each builder through its package's `__all__` (`from tfds_builders import sc2st`)
and the rule every build applies to its `data_dir` through the names below, as well as the
lock file the builders and the trainer share (`holder`)."""

from tfds_builders.data_dir import DataDirError, failed_write
from tfds_builders.data_dir import check as check_data_dir
from tfds_builders.holder import Holder, LockHeld, alive

# Video files as yt-dlp names them (`<id>.<ext>`; an unfinished download ends in `.part`):
# what `vnr.extract` reads and what builders count as downloaded (`common.missing_features`).
VIDEO_EXTS = (".mp4", ".webm", ".mkv", ".mov", ".m4v", ".avi")

__all__ = ["VIDEO_EXTS", "DataDirError", "Holder", "LockHeld", "alive", "check_data_dir",
           "failed_write", "forget_used", "used_datasets"]


def used_datasets() -> dict[str, str]:
    """`name/config` -> identity of every dataset this process opened since `forget_used`
    (`tfds_builders.fingerprint.identity`; a run records them, `vnr.workdir.check_data`)."""
    from tfds_builders import fingerprint

    return dict(fingerprint.USED)


def forget_used() -> None:
    """Starts a new list for `used_datasets` (a run's start)."""
    from tfds_builders import fingerprint

    fingerprint.USED.clear()
