"""The vnr test suite; `ROOT` is the repository root (tests run from any folder depth)."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
