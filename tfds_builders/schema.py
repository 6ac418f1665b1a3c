"""What every builder's release schemas share: typed values, JSON with duplicate keys found,
undecodable files as one line, and a failed record as (reason, key path).

Each builder declares the records of the files it reads as pydantic models in its own
`schema.py`, from the types below (strict: a number where text is meant, a string where a
list is meant, a bool or a string where a number is meant, a float where an integer is meant
and null anywhere are refused, never converted), and validates every record with `check`.
A record that fails raises `Invalid(reason, where, message)`: the builder's reason for that
kind of record (or the reason a validator gives with `fail`), the key path inside the file
(`vid[3].begin_time`) and pydantic's message; `skip` counts it naming the file and key path.
A file that cannot be read at all (undecodable bytes, not JSON) raises `Unreadable`, one line
naming the file, which a builder either counts as a skipped input or lets stop the build.

JSON objects are read with `object_pairs_hook`: a key given twice is not silently
last-wins; its value becomes a `Duplicate`, and `check` refuses the record holding it
(reason `duplicate_key`, at that key path).
"""

from __future__ import annotations

import collections
import functools
import json
import os
import pathlib
import re
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tfds_builders import common

# No movie or summary video lasts a day: a longer time is a defect, not a duration (a 1e9 s
# "duration" would size arrays in the pipeline and its tools).
MAX_SECONDS = 86_400.0
DUPLICATE_KEY = "duplicate_key"

Text = Annotated[str, Strict()]
Int = Annotated[int, Strict()]
Count = Annotated[int, Strict(), Field(ge=0)]
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]  # int or float, finite
Seconds = Annotated[float, Strict(), Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]


def _id(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("an id must be a string or an integer")
    return str(value)


# An identifier given as a string or an integer (the releases use both), stored as text;
# null, bools, floats, lists are refused (a null id never becomes the text "None").
Id = Annotated[str, PlainValidator(_id)]

T = TypeVar("T")
_TYPE_TAG = re.compile(r"^(?:str|int|float|bool|none|list|dict|tuple|[\w-]+\[.*\])$")
_CUSTOM: set[str] = set()


class Clock(BaseModel):
    """A clock reading of a text format (`H:M:S`, `hh.mm.ss.mmm`, `HH:MM:SS.mmm`): minutes
    and seconds below 60, the whole at most MAX_SECONDS. `seconds` may carry the fraction
    (Movie101's `0:3:33.5`) or `fraction` hold it (milliseconds of a fixed-width field)."""

    model_config = ConfigDict(frozen=True)
    hours: Count = 0
    minutes: Annotated[int, Strict(), Field(ge=0, lt=60)] = 0
    seconds: Annotated[float, Strict(), Field(ge=0, lt=60, allow_inf_nan=False)]
    fraction: Annotated[float, Strict(), Field(ge=0, lt=1)] = 0.0

    @property
    def total(self) -> float:
        """Seconds (summed in the order the format's readers always did, so values stay
        bit-identical)."""
        return self.hours * 3600 + self.minutes * 60 + self.seconds + self.fraction

    @model_validator(mode="after")
    def _plausible(self) -> Clock:
        if self.total > MAX_SECONDS:
            raise ValueError(f"{self.total:.0f} s is longer than a day (at most "
                             f"{MAX_SECONDS:.0f} s)")
        return self


class Unreadable(common.ManualDirError):
    """A release file that cannot be read at all (undecodable bytes, not JSON): one line
    naming the file (`path`), then what is wrong (`detail`)."""

    def __init__(self, path: os.PathLike | str, detail: str):
        super().__init__(f"{os.fspath(path)}: {detail}")
        self.path, self.detail = os.fspath(path), detail


class Invalid(ValueError):
    """One record that does not match its schema: `reason`, key path `where`, `message`."""

    def __init__(self, reason: str, where: str, message: str):
        super().__init__(f"{where}: {message}" if where else message)
        self.reason, self.where, self.message = reason, where, message


class Duplicate:
    """The value of a JSON key given more than once in one object (all its values)."""

    def __init__(self, key: str, values: list):
        self.key, self.values = key, values

    def __repr__(self) -> str:
        return f"<key {self.key!r} given {len(self.values)} times>"


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            prev = out[k]
            out[k] = Duplicate(k, [*(prev.values if isinstance(prev, Duplicate) else [prev]), v])
        else:
            out[k] = v
    return out


def first_line(e: BaseException) -> str:
    """An exception's message, first line only (a warning stays one line)."""
    return (str(e).splitlines() or [type(e).__name__])[0]


def detail(e: BaseException) -> str:
    """What went wrong, one line, without the file name an `Unreadable` starts with (for a
    skip that names the file itself)."""
    return e.detail if isinstance(e, Unreadable) else first_line(e)


def parse_json(text: str) -> Any:
    """JSON text with repeated keys as `Duplicate` values (ValueError if not JSON)."""
    return json.loads(text, object_pairs_hook=_pairs)


def load_json(path: os.PathLike | str) -> Any:
    """A JSON file (UTF-8, a BOM allowed) with repeated keys as `Duplicate` values;
    `Unreadable` naming the file when it is missing, undecodable or not JSON."""
    try:
        return parse_json(read_text(path, "utf-8-sig"))
    except ValueError as e:
        raise Unreadable(path, f"not JSON ({first_line(e)})") from None


def read_text(path: os.PathLike | str, encoding: str = "utf-8") -> str:
    """A text file's content; `Unreadable` naming the file when it cannot be read or holds
    bytes that are not `encoding`."""
    try:
        return pathlib.Path(path).read_text(encoding=encoding)
    except UnicodeDecodeError as e:
        raise Unreadable(path, f"not {encoding} text (byte {e.start}: "
                         f"{e.object[e.start:e.start + 4]!r})") from None
    except OSError as e:
        raise Unreadable(path, e.strerror or first_line(e)) from None


def fail(reason: str, message: str) -> PydanticCustomError:
    """The error a validator raises to give a failed record its own `reason`."""
    _CUSTOM.add(reason)
    return PydanticCustomError(reason, message)


def find_duplicate(value: Any, where: str = "", depth: int = -1) -> str | None:
    """The key path of the first `Duplicate` inside `value` (at most `depth` levels down;
    -1: any), or None."""
    if isinstance(value, Duplicate):
        return where or "."
    if depth == 0:
        return None
    if isinstance(value, dict):
        items: Any = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((p for w, v in items if (p := find_duplicate(v, w, depth - 1)) is not None),
                None)


def key_path(loc: tuple, where: str = "") -> str:
    """`where` extended by a pydantic error location: ("vid", 3, "text") -> `vid[3].text`."""
    out = where
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _TYPE_TAG.match(str(part)):  # pydantic's tag of a union member, not a key
            out += f".{part}" if out else str(part)
    return out


@functools.cache
def _cached(schema: Any) -> TypeAdapter:
    return TypeAdapter(schema)


_ADAPTERS: dict[int, tuple[Any, TypeAdapter]] = {}  # for unhashable schemas, by identity


def _adapter(schema: Any) -> TypeAdapter:
    """One TypeAdapter per schema (building one costs more than validating a record)."""
    try:
        return _cached(schema)
    except TypeError:  # an Annotated type with unhashable metadata (pydantic's FieldInfo)
        got = _ADAPTERS.get(id(schema))
        if got is None or got[0] is not schema:
            got = _ADAPTERS[id(schema)] = (schema, TypeAdapter(schema))
        return got[1]


def check(schema: Any, value: Any, reason: str, where: str = "", depth: int = -1) -> Any:
    """`value` validated against `schema` (a model or a type), or `Invalid`: `reason` (the
    record kind's skip reason, or the one a validator gave with `fail`; `duplicate_key` for
    a key given twice, looked for `depth` levels down: 1 for a container whose entries are
    checked one by one) at the key path below `where`."""
    dup = find_duplicate(value, where, depth)
    if dup is not None:
        raise Invalid(DUPLICATE_KEY, dup, "key given more than once in one object: which "
                      "value is meant is unknown")
    try:
        return _adapter(schema).validate_python(value)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        got = repr(err.get("input"))
        got = got if len(got) <= 40 else got[:37] + "..."
        msg = err["msg"] + ("" if err["type"] == "missing" else f", got {got}")
        raise Invalid(err["type"] if err["type"] in _CUSTOM else reason,
                      key_path(err["loc"], where), msg) from None


def clock(reason: str, where: str = "", **fields: Any) -> float:
    """Seconds of a `Clock` given its fields (`hours`, `minutes`, `seconds`, `fraction`), or
    `Invalid(reason)` at `where` when a field is out of range."""
    return check(Clock, fields, reason, where).total


def skip(counts: collections.Counter, err: Invalid, file: os.PathLike | str) -> None:
    """Counts one refused record under its reason, naming the file and the key path."""
    common.record_skip(counts, err.reason, file, str(err))


def each(schema: Any, items: Any, reason: str, file: os.PathLike | str,
         counts: collections.Counter, where: Callable[[Any], str] = str, depth: int = -1
         ) -> list[tuple[Any, Any]]:
    """(key, validated record) of every valid record of `items` (`(key, value)` pairs);
    the others are counted by reason, naming `file` and `where(key)`."""
    out = []
    for k, v in items:
        try:
            out.append((k, check(schema, v, reason, where(k), depth)))
        except Invalid as e:
            skip(counts, e, file)
    return out
