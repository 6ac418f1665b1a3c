"""The suite's measured test durations, which `conftest.py` uses twice:

* tests that took `SLOW_S` seconds or more are marked `e2e`, so the fast subset
  (`-m "not e2e"`) holds only the quick ones, whatever their kind;
* test files are handed to the pytest-xdist workers longest first (`--dist loadfile`
  sends files out in collection order: a long file collected last leaves the other
  worker idle at the end).

Regenerate `durations.json` on the 2-core CI machine, with nothing else running, after
adding slow tests:

    bash launch/test.sh --durations=0 > /tmp/full.txt
    bash launch/test.sh -m "not e2e" --durations=0 > /tmp/fast.txt
    python -m tests.durations /tmp/full.txt /tmp/fast.txt

The first output (a whole-suite run) orders the files; the slow marks come from the others
(the fast-subset runs; from the first when it is the only one), a test keeping its longest
time, and a test marked before keeping its mark while the whole-suite run still has it (the
fast runs deselect it, so they cannot time it): a module fixture's set-up is charged to the
first test that runs in its module, and once that test is marked the next one may take the
set-up over, which a second fast-subset run shows. Timings are scheduling hints and a
marker, never assertions.
"""

from __future__ import annotations

import collections
import datetime
import json
import pathlib
import re
import sys

PATH = pathlib.Path(__file__).with_name("durations.json")
SLOW_S = 2.0  # seconds (call + setup + teardown of one test) that make a test e2e
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (call|setup|teardown)\s+(tests/\S+)$")


def parse(text: str) -> dict[str, float]:
    """Test id -> seconds (its call, setup and teardown summed) of one `--durations` output."""
    out: dict[str, float] = collections.defaultdict(float)
    for line in text.splitlines():
        if m := _LINE.match(line.strip()):
            out[m[3]] += float(m[1])
    return dict(out)


def load() -> dict:
    """The stored durations ({} when the file is absent: no test marked, files in order)."""
    return json.loads(PATH.read_text()) if PATH.is_file() else {}


def main(paths: list[str]) -> None:
    runs = [parse(pathlib.Path(p).read_text()) for p in paths]
    if not runs or not runs[0]:
        sys.exit(f"no durations in {paths[:1]}: run pytest with --durations=0")
    seconds: dict[str, float] = {}
    for run in runs[1:] or runs:  # the fast-subset runs when given (the full run orders)
        for test, s in run.items():
            seconds[test] = max(s, seconds.get(test, 0.0))
    kept = set(load().get("slow", ())) & set(runs[0])  # marked before: the fast runs
    seconds.update({t: max(SLOW_S, seconds.get(t, 0.0)) for t in kept})  # deselected them
    files: dict[str, float] = collections.defaultdict(float)
    for test, s in runs[0].items():
        files[test.split("::")[0]] += s
    data = {"measured": datetime.date.today().isoformat(), "slow_s": SLOW_S,
            "slow": sorted(t for t, s in seconds.items() if s >= SLOW_S),
            "files_longest_first": [f for f, s in sorted(files.items(), key=lambda x: -x[1])
                                    if s >= 10.0]}
    PATH.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{PATH}: {len(data['slow'])} tests of {SLOW_S} s or more, "
          f"{len(data['files_longest_first'])} files of 10 s or more")


if __name__ == "__main__":
    main(sys.argv[1:])
