"""Typed schemas of the Sc2St inputs (what `lsmdc.py`, `sc2st.py` and `released.py` read);
strict types from `tfds_builders/schema.py`.

  meta.csv                     `MetaLine`: movie title, IMDb URL, genres, colour (`color` or
                               `wb`, any case); a movie given on two lines is refused
  LSMDC16_annos_*.csv          times `hh.mm.ss.mmm` (`timestamp`: a `schema.Clock`, minutes
                               and seconds below 60)
  features/<movie>/<clip>.npy  float [frames, D] (`tfds_builders.arrays`: real, finite)
  lsmdc.json (release)         `i2n` {movie index: `I2nEntry` [movie folder, {clip index: clip
                               folder}]}, indices digit strings, folders strings
The released story files' shapes are undocumented: `released.py` accepts the plausible ones
and names the file and key path where one stops matching (keys given twice included).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, Field, field_validator

from tfds_builders import schema
from tfds_builders.schema import Text

NonEmpty = Annotated[str, Field(min_length=1, pattern=r"\S")]
Index = Annotated[str, Field(pattern=r"^\d+$")]  # a JSON key holding a non-negative integer
_TS = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+)$")


class MetaLine(BaseModel):
    """One line of `meta.csv` (fields stripped)."""

    title: NonEmpty
    url: Annotated[str, Field(pattern=r"^https?://\S+$")]
    genres: Text
    colour: Annotated[str, Field(pattern=r"(?i)^(color|wb)$")]

    @field_validator("colour")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.lower()


# One `i2n` entry of the release's `data/lsmdc.json` with its key: (movie index, [movie
# folder, {clip index: clip folder}]).
I2nEntry = tuple[Index, tuple[Text, dict[Index, Text]]]


def timestamp(ts: str) -> float:
    """``hh.mm.ss.mmm`` -> seconds; a ValueError saying why when it is not one (minutes or
    seconds past 59, longer than a day)."""
    m = _TS.match(ts.strip())
    if not m:
        raise ValueError(f"timestamp {ts!r} is not hh.mm.ss.mmm")
    h, mi, s, ms = m.groups()
    try:
        return schema.clock("malformed_csv_line", hours=int(h), minutes=int(mi),
                            seconds=int(s), fraction=int(ms) / 10 ** len(ms))
    except schema.Invalid as e:
        raise ValueError(f"timestamp {ts!r}: {e}") from None
