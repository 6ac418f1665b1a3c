"""Where the suite's time goes: per test, the seconds JAX spent tracing, lowering and
compiling (XLA backend), how many programs it compiled and what the persistent cache saved,
read from `jax.monitoring`'s events, and the CPU seconds of the worker and its finished
subprocesses (wall seconds well above them: the test waited). Off unless `VNR_COMPILE_LOG`
names a file:

    VNR_COMPILE_LOG=/tmp/compile.jsonl bash launch/test.sh
    python -m tests.compile_log /tmp/compile.jsonl [N]

Every pytest worker appends one JSON line per test to that file; the second command ranks
the N (default 40) test files with the most seconds. Compiles in a test's subprocesses
(multi-host, input workers, `bench`) are not seen. A profile to find what to make cheaper,
never an assertion.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time

import pytest

EVENTS = {"backend": "/jax/core/compile/backend_compile_duration",
          "trace": "/jax/core/compile/jaxpr_trace_duration",
          "lower": "/jax/core/compile/jaxpr_to_mlir_module_duration",
          "saved": "/jax/compilation_cache/compile_time_saved_sec"}
_seconds: collections.Counter = collections.Counter()
_counts: collections.Counter = collections.Counter()
_listening: list[bool] = []


def _listen(event: str, seconds: float, **_: object) -> None:
    _seconds[event] += seconds
    _counts[event] += 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 (pytest's hook signature)
    """Times the test (set-up, call, tear-down) and logs its compile events' totals."""
    if not _listening:
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(_listen)
        _listening.append(True)
    seconds, counts, start = dict(_seconds), dict(_counts), time.perf_counter()
    cpu = _cpu()
    yield
    row = {"test": item.nodeid, "seconds": round(time.perf_counter() - start, 3),
           "cpu": round(_cpu() - cpu, 3),
           "compiles": _counts[EVENTS["backend"]] - counts.get(EVENTS["backend"], 0)}
    row.update({k: round(_seconds[e] - seconds.get(e, 0.0), 3) for k, e in EVENTS.items()})
    with open(os.environ["VNR_COMPILE_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def _cpu() -> float:
    """User + system seconds of this process and its waited-for children."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def summary(lines: list[str], top: int = 40) -> str:
    """The log's test files, most seconds first: seconds, CPU seconds, compiles and the event
    seconds."""
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in lines:
        row = json.loads(line)
        files[row.pop("test").split("::")[0]].update(row)
    keys = ("seconds", "cpu", "compiles", *EVENTS)
    total = sum(files.values(), collections.Counter())
    out = ["| file | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, c in [("all", total), *sorted(files.items(), key=lambda kv: -kv[1]["seconds"])[
            :top]]:
        out.append(f"| {name} | " + " | ".join(f"{c[k]:.0f}" for k in keys) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        print(summary(f.read().splitlines(), *(int(a) for a in sys.argv[2:3])))
