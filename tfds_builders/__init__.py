"""TFDS builders of the five benchmarks (`python -m tfds_builders build ...`); code outside
them reads each builder through its package's `__all__` (`from tfds_builders import sc2st`)
and the rule every build applies to its `data_dir` through the names below."""

from tfds_builders.data_dir import DataDirError, failed_write
from tfds_builders.data_dir import check as check_data_dir

# Video files as yt-dlp names them (`<id>.<ext>`; an unfinished download ends in `.part`):
# what `vnr.extract` reads and what builders count as downloaded (`common.missing_features`).
VIDEO_EXTS = (".mp4", ".webm", ".mkv", ".mov", ".m4v", ".avi")

__all__ = ["VIDEO_EXTS", "DataDirError", "check_data_dir", "failed_write"]
