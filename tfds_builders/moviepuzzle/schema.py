"""Typed schemas of the MoviePuzzle release files and of raw MovieNet (what `moviepuzzle.py`,
`movienet_build.py` and `movienet.py` read); strict types from `tfds_builders/schema.py`.

Public per-clip layout:
  clip_id.json              {split: [clip id]} (ids strings or integers; else one line)
  <clip>/info.json          `Info`: tt_id, img_id / shot_id / scene_id lists of integers
                            (a string is not read digit by digit, 1.5 is not truncated),
                            img_num an integer when given
  <clip>/subtitle.json      `Subtitles`: one list of strings per frame (the public release:
                            empty strings and `// [...]` cues included, kept as they are)
Raw MovieNet:
  annotation/<imdb>.json    `Annotation`: `scene[]` and `story[]` (synopsis alignment) with
                            `shot` ranges [first, last] of integers, story `description`
                            strings, `cast` a list
  meta/<imdb>.json          `Meta`: fps fields numbers, `synopsis` a string, `cast` a list
  shot/<imdb>.txt           `shot_line`: integers (`12.0` is 12, `12.7` is refused)
  subtitle/<imdb>.srt       cue times are `schema.Clock`s (minutes and seconds below 60)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tfds_builders.schema import Count, Id, Int, Invalid, Number, Text

ClipIds = dict[str, list[Id]]
Subtitles = list[list[Text]]
Range = tuple[Int, Int]  # [first, last] shot of a scene or story entry


class Info(BaseModel):
    """A clip's `info.json` (`info_shuffled.json` is not read)."""

    model_config = ConfigDict(extra="ignore")
    tt_id: Id
    img_num: Count | None = None
    img_id: list[Int]
    shot_id: list[Int]
    scene_id: list[Int]


class Scene(BaseModel):
    """One `annotation.scene[]` entry."""

    model_config = ConfigDict(extra="ignore")
    shot: Range


class StoryEntry(BaseModel):
    """One `annotation.story[]` entry: a synopsis paragraph and the shots it covers."""

    model_config = ConfigDict(extra="ignore")
    shot: Range
    description: Text


class StoryTiming(BaseModel):
    """The frame and time range of a story entry (for the frame rate)."""

    model_config = ConfigDict(extra="ignore")
    frame: tuple[Number, Number]
    duration: tuple[Number, Number]


class Annotation(BaseModel):
    """The top level of `annotation/<imdb>.json`: lists where given (entries checked apart)."""

    model_config = ConfigDict(extra="ignore")
    scene: list[Any] | None = None
    story: list[Any] | None = None
    cast: list[Any] | None = None


class Meta(BaseModel):
    """The fields of `meta/<imdb>.json` the curation reads (fps fields are read by path)."""

    model_config = ConfigDict(extra="allow")
    synopsis: Text | None = None
    cast: list[Any] | None = None


def shot_line(text: str, reason: str = "movie_bad_shot_file") -> list[int]:
    """The integers of a shot file line (`start end kf1 kf2 kf3`); a token that is not an
    integer (a decimal with a fraction, `nan`, a word) is `Invalid(reason)`."""
    out = []
    for token in text.split():
        try:
            value = float(token)
        except ValueError:
            raise Invalid(reason, "", f"{token[:20]!r} is not a number") from None
        if not value.is_integer():
            raise Invalid(reason, "", f"{token[:20]!r} is not an integer")
        out.append(int(value))
    return out
