"""Mutated release records for the property tests, and the one outcome rule they check.

A record (a parsed JSON value) is mutated at one place: a field's value replaced by one its
schema must refuse (`CORRUPT[kind]`, the classes of issue #33: null, a bool or a string
where a number is meant, a fraction where an integer is meant, a string where a list is
meant, NaN / negative / 1e9 times, a container where a scalar is meant), a required field
deleted, or a key given twice with another value (written as JSON text, so the readers'
duplicate-key hook sees it). A spec names each format's fields by key (`name[]`: the
elements of list `name`, `*`: a top-level value under any key, e.g. a video id); a key no
spec names is not read, so anything may happen to it short of a silent change.

`check_outcome` is the rule: the mutated file parses to the same records and counts as the
original, or a skip naming the file is counted (and every record still produced is one the
original produced, unchanged), or the reader raises one line naming the file. Never a
traceback, never a silently changed value.
"""

from __future__ import annotations

import collections
import json
import math
import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tfds_builders import common

NOT_TEXT = [None, False, True, 0, 7, 2.5, [], ["x"], {}, {"a": "b"}]
CORRUPT: dict[str, list] = {
    "text": NOT_TEXT,
    "opt_text": [v for v in NOT_TEXT if v is not None],  # null = absent, documented
    "id": [None, False, True, 2.5, [], ["1"], {}, {"a": 1}],
    "int": [None, False, True, 2.5, -0.5, "3", "x", [], [1], {}],
    "time": [None, False, True, [], [1], {}, "x", "1:75:00", float("nan"), float("inf"),
             -1, -0.5, 1e9],
    "flag": [None, 0, 3, 0.5, [], {}, "maybe", "", "yess"],
    "list": [None, False, 3, 2.5, "abc", "0123456789", {}, {"a": []}],
    "opt_list": [False, 3, 2.5, "abc", {}],
    "record": [None, False, 3, 2.5, "abc", [], ["x"]],  # where an object is meant
    "text_or_list": [False, 3, 2.5, {}, {"a": 1}],  # a field taking a string or a list
    "not_text_nor_object": [False, True, 3, 2.5, [], ["x"]],  # a key naming both
    "text_or_texts": [None, False, True, 0, 7, 2.5, {}, {"a": "b"}, [1], [None], ["a", 2]],
}


class Pairs(list):
    """A JSON object written with its (key, value) pairs in order, repeats included."""


def to_json(x: Any) -> str:
    """JSON text of `x` (`Pairs` may repeat a key; NaN / Infinity as Python writes them)."""
    if isinstance(x, Pairs):
        return "{" + ", ".join(f"{json.dumps(k)}: {to_json(v)}" for k, v in x) + "}"
    if isinstance(x, dict):
        return to_json(Pairs(x.items()))
    if isinstance(x, list):
        return "[" + ", ".join(to_json(v) for v in x) + "]"
    return json.dumps(x, ensure_ascii=False)


def places(x: Any, path: tuple = (), name: str = "", wild: str = ""
           ) -> list[tuple[tuple, str, str, bool]]:
    """(path, field name, name with the top-level key as `*`, is a dict key) of every value
    inside `x` (not `x` itself)."""
    out = []
    if isinstance(x, dict):
        for k, v in x.items():
            w = "*" if not path else str(k)
            out.append(((*path, k), str(k), w, True))
            out += places(v, (*path, k), str(k), w)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out.append(((*path, i), f"{name}[]", f"{wild}[]", False))
            out += places(v, (*path, i), f"{name}[]", f"{wild}[]")
    return out


def _get(x: Any, path: tuple) -> Any:
    for p in path:
        x = x[p]
    return x


def _replace(x: Any, path: tuple, fn: Callable[[Any, Any], Any]) -> Any:
    """A copy of `x` with the container holding `path` replaced by `fn(container, key)`."""
    if len(path) == 1:
        return fn(x, path[0])
    head, rest = path[0], path[1:]
    if isinstance(x, dict):
        return Pairs((k, _replace(v, rest, fn) if k == head else v) for k, v in x.items())
    return [_replace(v, rest, fn) if i == head else v for i, v in enumerate(x)]


def _set(container: Any, key: Any, value: Any) -> Any:
    if isinstance(container, dict):
        return Pairs((k, value if k == key else v) for k, v in container.items())
    return [value if i == key else v for i, v in enumerate(container)]


def _delete(container: dict, key: Any) -> Pairs:
    return Pairs((k, v) for k, v in container.items() if k != key)


def _twice(container: dict, key: Any, other: Any) -> Pairs:
    out = Pairs()
    for k, v in container.items():
        out.append((k, v))
        if k == key:
            out.append((k, other))
    return out


def _other(value: Any) -> Any:
    """Another value of the same JSON type (the second of a duplicated key)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + " (again)"
    return value


@st.composite
def mutations(draw: st.DrawFn, record: Any, spec: dict[str, str], optional: frozenset = frozenset(),
              min_depth: int = 1) -> tuple[str, Any]:
    """(what was done, the mutated record as `Pairs` / lists): one corruption at a place at
    least `min_depth` deep (1: the records of a file are not deleted, only their fields)."""
    where = [p for p in places(record) if len(p[0]) >= min_depth]
    path, name, wild, is_key = draw(st.sampled_from(where))
    kind = spec.get(name, spec.get(wild))
    # Only a named field is deleted: a key that is an id (a video, a role) is a record of its
    # own, and a file without it is another release, not a corrupt one.
    ops = ["replace"] + (["twice"] if is_key else []) + (
        ["delete"] if is_key and name in spec and name not in optional
        and len(path) > min_depth else [])
    op = draw(st.sampled_from(ops))
    if op == "delete":
        return f"delete {path}", _replace(record, path, _delete)
    if op == "twice":
        other = _other(_get(record, path))
        return f"twice {path}", _replace(record, path, lambda c, k: _twice(c, k, other))
    values = CORRUPT[kind] if kind else CORRUPT["text"] + CORRUPT["time"]
    value = draw(st.sampled_from(values))
    return f"{path} = {value!r}", _replace(record, path, lambda c, k: _set(c, k, value))


def norm(x: Any) -> Any:
    """A comparable form of parsed records (arrays by dtype, shape and bytes; NaN == NaN)."""
    if isinstance(x, dict):
        return {k: norm(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, list | tuple):
        return [norm(v) for v in x]
    if isinstance(x, np.ndarray):
        return ("array", str(x.dtype), x.shape, x.tobytes())
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, pathlib.PurePath):
        return str(x)
    return x


def keyed(items: Any) -> dict:
    """{(key, n): value} of (key, value) pairs, n counting repeats of a key: records keyed by
    what they are rather than by position, so a skipped record moves no other one."""
    seen: collections.Counter = collections.Counter()
    out = {}
    for k, v in items:
        out[(k, seen[k])] = v
        seen[k] += 1
    return out


def run(parse: Callable[[pathlib.Path, collections.Counter], Any], path: pathlib.Path
        ) -> tuple[str, Any, common.Counts]:
    """("ok", records, counts) or ("error", message, counts) of `parse(path, counts)`; only
    the builders' one-line errors are caught, anything else is a failing traceback."""
    from tfds_builders.sc2st.released import SchemaError

    counts = common.Counts()
    try:
        return "ok", norm(parse(path, counts)), counts
    except (common.ManualDirError, SchemaError) as e:
        return "error", str(e), counts


def baseline(parse: Callable, path: pathlib.Path, original: Any) -> tuple[Any, common.Counts]:
    """(records, counts) of `original` written to `path` (it must parse)."""
    path.write_text(to_json(original), encoding="utf-8")
    status, records, counts = run(parse, path)
    assert status == "ok", f"the original record does not parse: {records}"
    return records, counts


def check_outcome(parse: Callable, path: pathlib.Path, base: tuple[Any, common.Counts],
                  mutated: Any, what: str) -> str:
    """Writes `mutated` to `path`, parses it and asserts the outcome rule (module docstring)
    against the original's `base` (`baseline`); returns "same", "skipped" or "error"."""
    before, counts0 = base
    path.write_text(to_json(mutated), encoding="utf-8")
    status, after, counts = run(parse, path)
    if status == "error":
        assert "\n" not in after and path.name in after, f"{what}: error not one line: {after}"
        return "error"
    if after == before and counts == counts0:
        return "same"
    new = {k: n - counts0.get(k, 0) for k, n in counts.items() if n > counts0.get(k, 0)}
    skips = [k for k in new if not k.startswith((common.KEPT_PREFIX, common.NOTE_PREFIX))]
    assert skips, f"{what}: silently changed (new counts {new}, no skip)"
    named = [n for k in skips for n in counts.named.get(k, [])]
    assert any(str(path) in n for n in named), f"{what}: skips {skips} do not name {path}"
    if isinstance(before, dict) and isinstance(after, dict):  # records kept are unchanged
        changed = [k for k, v in after.items() if k not in before or before[k] != v]
        assert not changed, f"{what}: records {changed[:3]} changed beside the skip {skips}"
    return "skipped"


def check_mutations(parse: Callable, path: pathlib.Path, record: Any, spec: dict[str, str],
                    optional: frozenset = frozenset(), min_depth: int = 1) -> collections.Counter:
    """Runs the outcome rule over hypothesis' mutations of `record` (the suite's profile sets
    how many); returns how often each outcome came (a caller asserts some were refused)."""
    from hypothesis import given

    base = baseline(parse, path, record)
    outcomes: collections.Counter = collections.Counter()

    @given(mutations(record, spec, optional, min_depth))
    def prop(m: tuple[str, Any]) -> None:
        outcomes[check_outcome(parse, path, base, m[1], m[0])] += 1

    prop()
    return outcomes
