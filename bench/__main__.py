"""Benchmarks, side by side in one run: `python -m bench <name> [flags]`.

Each benchmark is a module `bench/<name>.py` exposing `main(argv)`; this file only
dispatches by name (importlib), so benchmarks stay independent. `SHARED` are the modules
the benchmarks share, not benchmarks themselves.
"""

import importlib
import pkgutil
import sys

import bench

SHARED = ("flops", "timing")


def available() -> list[str]:
    """The benchmark names: every module of the package but the shared ones."""
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__)
                  if not m.ispkg and not m.name.startswith("_") and m.name not in SHARED)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in available():
        names = ", ".join(available()) or "(none yet)"
        got = argv[1] if len(argv) > 1 else "nothing"
        sys.exit(f"usage: python -m bench <name> [flags]; got {got!r}; names: {names}")
    importlib.import_module(f"bench.{argv[1]}").main(argv[1:])


if __name__ == "__main__":
    main(sys.argv)
