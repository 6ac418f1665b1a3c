"""Benchmarks, side by side in one run: `python -m launch.benchmark <name> [flags]`.

Each benchmark lives in `launch/bench_<name>.py` and exposes `main(argv)`;
this file only dispatches by name (importlib), so benchmarks stay independent.
"""

import importlib
import pkgutil
import sys

import launch


def available() -> list[str]:
    return sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules(launch.__path__)
        if m.name.startswith("bench_")
    )


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in available():
        names = ", ".join(available()) or "(none yet)"
        got = argv[1] if len(argv) > 1 else "nothing"
        sys.exit(f"usage: python -m launch.benchmark <name> [flags]; got {got!r}; names: {names}")
    importlib.import_module(f"launch.bench_{argv[1]}").main(argv[1:])


if __name__ == "__main__":
    main(sys.argv)
