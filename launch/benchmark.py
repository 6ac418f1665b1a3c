"""Benchmarks, side by side in one run: `python -m launch.benchmark <name> [flags]`.

Each benchmark lives in `launch/bench_<name>.py` and exposes `main(argv)` (`argv[0]` is its
name); this file only dispatches by name (importlib), so benchmarks stay independent.
`python -m launch.benchmark --help` lists them, `<name> --help` names a benchmark's flags;
a bad flag is one `error:` line (`vnr/cli.py`).
"""

import importlib
import pkgutil
import sys

from absl import flags

import launch
from vnr import cli


def available() -> list[str]:
    return sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules(launch.__path__)
        if m.name.startswith("bench_")
    )


def main(argv: list[str]) -> None:
    names = ", ".join(available()) or "(none yet)"
    if len(argv) > 1 and argv[1] in cli.HELP:
        print(f"{__doc__.strip()}\n\nbenchmarks: {names}")
        return
    if len(argv) < 2 or argv[1] not in available():
        got = argv[1] if len(argv) > 1 else "nothing"
        cli.fail(f"usage: python -m launch.benchmark <name> [flags]; got {got!r}; names: "
                 f"{names}")
    module = importlib.import_module(f"launch.bench_{argv[1]}")
    own = flags.FLAGS.get_flags_for_module(module.__name__)  # absl's global FLAGS
    if own and any(a in cli.HELP for a in argv[2:]):
        _help(module, argv[1])
        return
    try:
        module.main(argv[1:])
    except flags.Error as e:  # the benchmarks that parse the global FLAGS themselves
        cli.fail(f"{argv[1]}: {e}")


def _help(module: object, name: str) -> None:
    """The docstring and flags of a benchmark defining them on absl's global FLAGS."""
    text = flags.FLAGS.module_help(module.__name__)
    shown = [line for line in text.splitlines() if line.startswith(" ")]
    if hasattr(module, "flag_config"):  # takes the trainer's --config
        shown.insert(0, "  --config: Config file: path.py[:arg] (the trainer's; "
                        "--config.key=value overrides it).")
    print(f"{(module.__doc__ or '').strip()}\n\nusage: python -m launch.benchmark {name} "
          "[flags]\n\nflags:\n" + "\n".join(shown))


if __name__ == "__main__":
    main(sys.argv)
