"""Benchmarks, side by side in one run: `python -m bench <name> [flags]`.

Each benchmark is a module `bench/<name>.py` exposing `main(argv)` (`argv[0]` is its name);
this file only dispatches by name (importlib), so benchmarks stay independent. `SHARED` are
the modules the benchmarks share, not benchmarks themselves. `python -m bench --help` lists
them, `<name> --help` names a benchmark's flags; a bad flag or a config the trainer's checks
refuse is one `error:` line (`vnr/cli.py`).
"""

import importlib
import pkgutil
import sys

from absl import flags

import bench
from vnr import cli
from vnr.config import ConfigError
from vnr.evaluators import EvaluatorError

SHARED = ("flops", "timing")


def available() -> list[str]:
    """The benchmark names: every module of the package but the shared ones."""
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__)
                  if not m.ispkg and not m.name.startswith("_") and m.name not in SHARED)


def main(argv: list[str]) -> None:
    names = ", ".join(available()) or "(none yet)"
    if len(argv) > 1 and argv[1] in cli.HELP:
        print(f"{__doc__.strip()}\n\nbenchmarks: {names}")
        return
    if len(argv) < 2 or argv[1] not in available():
        got = argv[1] if len(argv) > 1 else "nothing"
        cli.fail(f"usage: python -m bench <name> [flags]; got {got!r}; names: {names}")
    module = importlib.import_module(f"bench.{argv[1]}")
    own = flags.FLAGS.get_flags_for_module(module.__name__)  # absl's global FLAGS
    if own and any(a in cli.HELP for a in argv[2:]):
        _help(module, argv[1])
        return
    try:
        module.main(argv[1:])
    except flags.Error as e:  # the benchmarks that parse the global FLAGS themselves
        cli.fail(f"{argv[1]}: {e}")
    except (ConfigError, EvaluatorError) as e:  # the config the benchmark set up (vnr.train)
        cli.fail(f"{argv[1]}: {e}")


def _help(module: object, name: str) -> None:
    """The docstring and flags of a benchmark defining them on absl's global FLAGS."""
    text = flags.FLAGS.module_help(module.__name__)
    shown = [line for line in text.splitlines() if line.startswith(" ")]
    if hasattr(module, "flag_config"):  # takes the trainer's --config
        shown.insert(0, "  --config: Config file: path.py[:arg] (the trainer's; "
                        "--config.key=value overrides it).")
    print(f"{(module.__doc__ or '').strip()}\n\nusage: python -m bench {name} "
          "[flags]\n\nflags:\n" + "\n".join(shown))


if __name__ == "__main__":
    main(sys.argv)
