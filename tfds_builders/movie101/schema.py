"""Typed schemas of the Movie101 release files (what `parsing.py`, `v1.py`, `roles.py`,
`rtemp.py`, `movie101.py` and `features.py` read). Strict types from `tfds_builders/schema.py`:
a number, list or null where text is meant is refused (never str()-ed), so is a float where an
integer is meant; movie ids may be strings or integers.

v1 (`Movie101v1/`):
  public_split.json                 `PublicSplit`: {train, val, test: [movie id]}
  metadata/meta_anno.json           {movie: {role id: `V1Role`}}; a movie whose roles do not
                                    all validate has no cast (a dropped role would shift the
                                    `@k` indices of every later role)
  Movie101-{N,G}/<split>.json       [`Narration`]; Movie101-raw/annotation/*.json rows alike
  narration_role/<split>.json       {entry id: `RoleEntry`} (or a list of them)
  Movie101-R-temp/<split>.json      [`Shot`]
v2 (`Movie101v2/data/`):
  narration/<variant>/<movie>.txt   `H:M:S|H:M:S|text` lines (times as `Time`)
  metadata/meta/<movie>.json        `V2Meta`
Times (`Time`): a JSON number, a numeric string ("51", the role files' whole seconds) or a
clock string `H:M:S` / `M:S` (`schema.Clock`: minutes and seconds below 60); at least 0, at
most a day; a bool, null, NaN or "1:75:0" is refused (`bad_time`).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, field_validator

from tfds_builders import schema
from tfds_builders.schema import Id, Text

_DECIMAL = re.compile(r"^\+?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_INT = re.compile(r"^\d+$")


def seconds(value: Any) -> float:
    """Seconds of a release time (module docstring), or a ValueError saying why not."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"a time must be a number or a string, not {type(value).__name__}")
    if isinstance(value, str):
        s = value.strip()
        if ":" in s:
            *lead, last = s.split(":")
            if len(lead) > 2 or not all(_INT.match(p) for p in lead) or not _DECIMAL.match(last):
                raise ValueError(f"unparsable time {value!r} (H:M:S or M:S)")
            fields = dict(zip(("hours", "minutes")[2 - len(lead):], map(int, lead)))
            try:
                return schema.clock("bad_time", **fields, seconds=float(last))
            except schema.Invalid as e:
                raise ValueError(f"time {value!r}: {e}") from None
        if not _DECIMAL.match(s):
            raise ValueError(f"unparsable time {value!r}")
        value = float(s)
    t = float(value)
    if not math.isfinite(t) or not 0 <= t <= schema.MAX_SECONDS:
        raise ValueError(f"invalid time {value!r} (from 0 to {schema.MAX_SECONDS:.0f} s)")
    return t


def _time(value: Any) -> float:
    try:
        return seconds(value)
    except ValueError as e:
        raise schema.fail("bad_time", str(e)) from None


Time = Annotated[float, PlainValidator(_time)]


class PublicSplit(BaseModel):
    """`public_split.json`: the movies of each v1 split."""

    model_config = ConfigDict(extra="ignore")
    train: list[Id]
    val: list[Id]
    test: list[Id]


class V1Role(BaseModel):
    """A cast member of `meta_anno.json`: `name` is the actor, `rolename` the role."""

    model_config = ConfigDict(extra="ignore")
    name: Text
    rolename: Text


V1Cast = dict[str, V1Role]  # one movie of meta_anno.json: role id -> role, in cast order


class Narration(BaseModel):
    """A Movie101-N / Movie101-G row (and a Movie101-raw row, whose text may be `text`)."""

    model_config = ConfigDict(extra="ignore")
    movie_id: Id
    start_time: Time
    end_time: Time
    content: Text


class RawRow(Narration):
    """A Movie101-raw row: the text under `content` or `text` (actor lines have none)."""

    content: Text = ""
    text: Text = ""


class RoleEntry(BaseModel):
    """A narration_role entry: one `@k` sentence (possibly split in pieces) and its span."""

    model_config = ConfigDict(extra="ignore")
    movie_id: Id
    sentences: Annotated[list[Text], Field(min_length=1)]
    timestamps: Annotated[list[tuple[Time, Time]], Field(min_length=1)]


class Shot(BaseModel):
    """A Movie101-R-temp entry: shot counter, `<movie>_<start>_<end>` and caption."""

    model_config = ConfigDict(extra="ignore")
    video_id: schema.Int
    video: Text
    caption: list[Text] | Text


class V2Role(BaseModel):
    """A v2 cast member: `role` (its name) must be given, null when unknown; a null or absent
    `actor` / `role_en` is unknown too (stored as "")."""

    model_config = ConfigDict(extra="ignore")
    actor: Text | None = None
    role: Text | None
    role_en: Text | None = None


class V2Meta(BaseModel):
    """`metadata/meta/<movie>.json` (the fields the builder reads)."""

    model_config = ConfigDict(extra="ignore")
    genre: list[Text] | Text | None = None
    title: Text | None = None
    role: dict[str, V2Role]  # the cast (`@k` / `[Name]` resolve against it): required

    @field_validator("genre")
    @classmethod
    def _genres(cls, v: list[str] | str | None) -> list[str]:
        return [v] if isinstance(v, str) else list(v or [])
