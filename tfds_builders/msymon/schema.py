"""Typed schemas of the M-SyMoN and YMS release files (what `parse.py` and `yms/yms.py` read).

M-SyMoN (JSON, read with duplicate keys found, `tfds_builders.schema`):
  annotations/<lang>/<split>.json   {video_id: [Sentence]}: `text` a string, `matched` a
                                    bool or yes/no/true/false/y/n in any case and spacing
                                    (the release's spellings vary: `yes`, ` yes`, `No`);
                                    a matched sentence's times are a `Span` (seconds, at most
                                    a day); an unmatched one's are not read (0 upstream)
  subtitles/<lang>/<id>.json        [SubtitleSentence] with times 0 <= begin <= end
  movies.json                       {video_id: movie name (a string)}
YMS (text, `yms.py` splits the lines; the fields are checked here):
  annotations_*.txt, clip_segmentation.txt   times `hh.mm.ss.mmm` (`schema.Clock`: minutes
                                    and seconds below 60, at most a day)
  *_split.txt                       one video id per line (`#` comments)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from tfds_builders.schema import Seconds, Text, fail

MATCHED = {"yes": True, "true": True, "y": True, "no": False, "false": False, "n": False}
CANONICAL = ("yes", "no")  # the documented spellings; others are counted when respelled


def matched_flag(value: Any) -> bool:
    """A `matched` value as a bool (any case and spacing of yes/no/true/false/y/n), or the
    `unknown_matched_value` error."""
    if isinstance(value, bool):
        return value
    key = value.strip().lower() if isinstance(value, str) else None
    if key not in MATCHED:
        raise fail("unknown_matched_value", "matched must be yes/no (any case and spacing) or "
                   f"a bool, got {value!r}"[:120])
    return MATCHED[key]


class Sentence(BaseModel):
    """One annotated sentence (upstream's `id` and any other field are not read)."""

    model_config = ConfigDict(extra="ignore")
    text: Text
    matched: Annotated[bool, BeforeValidator(matched_flag)]


class Span(BaseModel):
    """The annotated time span of a matched sentence (its order is checked by the parser:
    end < begin is a known defect, kept as unmatched)."""

    model_config = ConfigDict(extra="ignore")
    begin_time: Seconds
    end_time: Seconds


class SubtitleSentence(BaseModel):
    """One timed narration sentence of `subtitles/<lang>/<id>.json`."""

    model_config = ConfigDict(extra="ignore")
    begin_time: Seconds
    end_time: Seconds
    text: Text

    @model_validator(mode="after")
    def _ordered(self) -> SubtitleSentence:
        if self.end_time < self.begin_time:
            raise fail("subtitle_sentence_bad_times",
                       f"ends ({self.end_time}) before it begins ({self.begin_time})")
        return self


Movies = dict[str, Text]  # movies.json: video id -> movie name
