#!/usr/bin/env bash
# The README's test command: creates/reuses .venv, then runs the whole suite.
# Tests simulate 8 CPU devices (tests/conftest.py); each test has a timeout so
# a hang fails instead of stalling CI.
source "$(dirname "$0")/venv.sh"
# Two pytest workers, each running whole test files (a file's module fixtures and
# compiled shapes stay in one process): 12-35% faster than one process on the 2-core
# CI machine, measured side by side. Pass -n 0 to run in one process, -m "not e2e" for
# the fast subset (no test that trains or took 2 s or more: tests/durations.py; the e2e
# marker is declared in pyproject.toml). --no-loadscope-reorder keeps tests/conftest.py's
# order, the longest files first (xdist otherwise hands out the files with the most tests
# first, which left the one-test smoke reproductions, the longest files, for the end).
exec python -m pytest -q -p no:cacheprovider --timeout=900 -n 2 --dist loadfile \
    --no-loadscope-reorder tests "$@"
