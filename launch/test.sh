#!/usr/bin/env bash
# The README's test command: creates/reuses .venv, then runs the whole suite.
# Tests simulate 8 CPU devices (tests/conftest.py); each test has a timeout so
# a hang fails instead of stalling CI.
source "$(dirname "$0")/venv.sh"
exec python -m pytest -q -p no:cacheprovider --timeout=900 tests "$@"
