"""Typed schemas of the SYMON release files (what `symon.py`, `vtt.py` and `movies.py` read).

  timestamped_text/<id>.en.vtt  cue timings and word tags `[HH:]MM:SS.mmm` are `schema.Clock`s
                                (minutes and seconds below 60, at most a day); a cue with
                                another time is `cue:bad_timing` / `cue:bad_word_timing`
  cuts/<id>.txt                 one `Cut` per line: a decimal number of seconds (0 .. a day)
  info/<id>.info.json           yt-dlp metadata: `InfoJson` (`title`, `description`: strings
                                or absent; a list or number is refused, never str()-ed)
  features/<id>.npy             float [T, D] (`tfds_builders.arrays`: real, finite)
Text files are UTF-8 (`schema.read_text`): a per-video file that is not is a skipped video
naming it; a release-wide one (url.txt, asr_label.txt, movies.tsv) stops the build with one
line.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from tfds_builders import schema

_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


class InfoJson(BaseModel):
    """The fields of yt-dlp's `--write-info-json` the movie identity reads."""

    model_config = ConfigDict(extra="ignore")
    title: schema.Text | None = None
    description: schema.Text | None = None


def cut_seconds(token: str, reason: str = "cuts:bad_line") -> float:
    """One cut time: a plain decimal number (not `nan`, `inf` or `1_0`) of seconds from 0 to
    a day, else `schema.Invalid(reason)`."""
    if not _DECIMAL.match(token):
        raise schema.Invalid(reason, "", f"{token[:40]!r} is not a decimal number of seconds")
    return schema.check(schema.Seconds, float(token), reason)


def clock(groups: tuple[str | None, ...], reason: str) -> float:
    """`[H:]MM:SS.mmm` regex groups (hours or None, minutes, seconds, milliseconds) as
    seconds, checked as a `schema.Clock`."""
    h, m, s, ms = groups
    return schema.clock(reason, hours=int(h or 0), minutes=int(m), seconds=int(s),
                        fraction=int(ms) / 1000)
