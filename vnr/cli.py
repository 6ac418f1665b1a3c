"""One command-line convention for every tool: absl flags, as `vnr.train` parses them.

    def main(argv: list[str] | None = None) -> int:
        args = cli.parse(argv, "python -m vnr.benchmarks.symon.tools", __doc__,
                         {"movie_keys": ("title -> movie key of a movie list", define)})
        args.command, args.movie_list, args.operands ...

* Flags are defined by a function on a fresh `flags.FlagValues` per call: tools imported
  together (the tests) never clash on a name, and `main(argv)` can run twice.
* A tool with commands takes the command as its first word, as before; `--help` (or `-h`)
  prints the tool's docstring and its commands, `<command> --help` that command's flags,
  then exits 0.
* An unknown flag, a bad value, a missing required flag or a word the tool takes none of:
  one `error:` line naming it (absl's message, no traceback), exit status 2.
* A repeatable flag (`DEFINE_multi_string`) also takes several values after it, as the
  argparse tools' `nargs` did: `--workdirs a b --csv x` is `--workdirs=a --workdirs=b`.
* `--config path.py[:args]` (with `--config.key=value` overrides) is the trainer's flag:
  `config_flag(fv)` defines it; `parse` runs the file once (`vnr.config.load`) and checks
  every `--config.<key>` against it before absl applies the overrides.
* Flags a library reads from absl's global FLAGS (the multi-host flags of
  `vnr.distributed`, absl's logging flags such as `--verbosity`) are taken with
  `shared=(module, ...)`: the same flag objects join the tool's FlagValues, so parsing sets
  them where the library reads them, and FLAGS counts as parsed afterwards. `app(body)`
  then runs the tool's body as absl's `app.run` runs a main (its log handler, its exit
  status).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from absl import flags

Define = Callable[[flags.FlagValues], None]  # defines a (sub)command's flags
HELP = ("--help", "-h", "--helpshort", "--helpfull", "-?")
# The flags `config_flag` defined -> whether the config is locked.
_CONFIG_FILE_FLAGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Args:
    """What `parse` found: `command` (None for a tool without commands), the positional
    `operands` after it, and every flag's value as an attribute."""

    def __init__(self, command: str | None, values: flags.FlagValues, operands: list[str]):
        self.command, self.flags, self.operands = command, values, operands

    def __getattr__(self, name: str) -> Any:
        return getattr(self.flags, name)


def fail(message: str) -> NoReturn:
    """One `error:` line on stderr and exit status 2 (a usage error)."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def parse(argv: Sequence[str] | None, prog: str, doc: str | None,
          define: Define | Mapping[str, tuple[str, Define]], operands: str = "",
          shared: Sequence[str] = ()) -> Args:
    """`argv` (without the program name; None: `sys.argv[1:]`) parsed for the tool `prog`:
    `define` defines its flags, or maps each command to (its one-line help, its flags).
    `operands` names the positional words the tool (or every command) takes (e.g.
    "WORKDIR ..."); "" = none. `shared`: modules whose flags on absl's global FLAGS the
    tool takes too (e.g. "vnr.distributed", "absl.logging")."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = define if isinstance(define, Mapping) else None
    command = None
    if commands is not None:
        if not argv or argv[0] in HELP:
            _usage(prog, doc, commands, exit_code=0 if argv else 2)
        command = argv.pop(0)
        if command not in commands:
            fail(f"{prog}: unknown command {command!r}; choose one of {', '.join(commands)} "
                 f"(--help describes them)")
        define = commands[command][1]
    values = flags.FlagValues()
    define(values)
    _share(values, shared)
    where = f"{prog} {command}" if command else prog
    if any(a in HELP for a in argv):
        _flag_help(where, doc if commands is None else commands[command][0], values, operands)
    if "config" in values and values["config"] in _CONFIG_FILE_FLAGS:  # not a plain flag
        argv = load_config(values, argv)
    try:
        rest = values([prog, *_spread(argv, values)])[1:]
    except flags.Error as e:
        fail(f"{where}: {e}")
    if rest and not operands:
        fail(f"{where}: unexpected argument {rest[0]!r} (--help lists the flags)")
    if shared:  # their readers (e.g. distributed.initialize_from_flags) read FLAGS
        flags.FLAGS.mark_as_parsed()
    return Args(command, values, rest)


def app(body: Callable[[], int | None]) -> NoReturn:
    """Runs `body` (after `parse` with `shared`) as absl's `app.run` runs a main: absl's
    log handler and faulthandler, `--verbosity` defaulting to INFO, the return value as the
    exit status."""
    from absl import app as absl_app

    absl_app.run(lambda _: body(), argv=[sys.argv[0]], flags_parser=lambda argv: argv)
    raise AssertionError("absl's app.run returned")  # it always exits


def _share(values: flags.FlagValues, modules: Sequence[str]) -> None:
    """The global flags `modules` define, added to `values` (reset to their defaults when
    an earlier parse in this process set them)."""
    for module in modules:
        for flag in flags.FLAGS.get_flags_for_module(module):
            if flag.present:
                flag.unparse()
            values[flag.name] = flag
            values.register_flag_by_module(module, flag)


def config_flag(values: flags.FlagValues, help_text: str = "Config file: path.py[:arg].",
                lock: bool = False) -> None:
    """The trainer's `--config path.py[:args]` with `--config.key=value` overrides; `lock`:
    the config refuses keys it does not have (as the trainer's). Until `parse` loads the
    file (`load_config`) the flag is a plain string: absl never executes a config."""
    flags.DEFINE_string("config", None, help_text, flag_values=values)
    _CONFIG_FILE_FLAGS[values["config"]] = lock


def load_config(values: flags.FlagValues, argv: list[str]) -> list[str]:
    """Loads `--config path.py[:args]` once (`vnr.config.load`) and checks every
    `--config.<key>` against it, each problem one `error:` line before absl (whose errors are
    tracebacks); the flag then holds that config, which absl's `--config.key=value`
    overrides. Returns `argv` without the file operand."""
    from ml_collections import config_flags

    from vnr import config as config_lib

    where = next((i for i, a in enumerate(argv) if a.split("=", 1)[0] == "--config"
                  and ("=" in a or i + 1 < len(argv))), None)
    if where is None:
        return argv
    word = argv[where]
    spec, rest = ((word.split("=", 1)[1], argv[:where] + argv[where + 1:]) if "=" in word
                  else (argv[where + 1], argv[:where] + argv[where + 2:]))
    try:
        config = config_lib.load(spec)
        config_lib.check_keys(config, [a[len("--config."):].split("=", 1)[0] for a in rest
                                       if a.startswith("--config.")], spec.partition(":")[0])
    except config_lib.ConfigError as e:
        fail(str(e))
    flag = values["config"]
    lock = _CONFIG_FILE_FLAGS[flag]
    delattr(values, "config")
    config_flags.DEFINE_config_dict("config", config, flag.help, flag_values=values,
                                    lock_config=lock, sys_argv=["", *rest])
    _CONFIG_FILE_FLAGS[values["config"]] = lock  # global FLAGS may load again (tests)
    return rest


def _spread(argv: list[str], values: flags.FlagValues) -> list[str]:
    """`--name a b` -> `--name=a --name=b` for the repeatable flags (argparse's nargs)."""
    multi = {name for name in values if isinstance(values[name], flags.MultiFlag)}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word.startswith("--") and word[2:] in multi:
            taken = 0
            while i < len(argv) and not argv[i].startswith("-"):
                out.append(f"{word}={argv[i]}")
                i, taken = i + 1, taken + 1
            if taken:
                continue
        out.append(word)
    return out


def _usage(prog: str, doc: str | None, commands: Mapping[str, tuple[str, Define]],
           exit_code: int) -> NoReturn:
    if exit_code:
        fail(f"{prog}: name a command: {', '.join(commands)} (--help describes them)")
    lines = [(doc or "").strip(), "", f"usage: {prog} <command> [flags]",
             "(`<command> --help` lists a command's flags)", "", "commands:"]
    lines += [f"  {name:<18} {what}" for name, (what, _) in commands.items()]
    print("\n".join(lines))
    raise SystemExit(0)


def _flag_help(where: str, doc: str | None, values: flags.FlagValues,
               operands: str) -> NoReturn:
    text = values.get_help(prefix="", include_special_flags=False)
    absl_own = {f.name for m, fs in values.flags_by_module_dict().items()
                if m.startswith("absl.") for f in fs}
    shown, keep = [], True
    for line in text.splitlines():  # module names and absl's logging flags left out
        if line.startswith("  -"):
            keep = not any(name in absl_own for name in _names(line))
        if line.startswith(" ") and keep:
            shown.append(line)
    tail = ["", "absl's logging flags (e.g. --verbosity=1) are taken too."] if absl_own \
        else []
    print("\n".join([(doc or "").strip(), "", f"usage: {where} [flags]"
                     + (f" {operands}" if operands else ""), "", "flags:", *shown, *tail]))
    raise SystemExit(0)


def _names(line: str) -> list[str]:
    """The flag names a help line starts with (`  -v,--verbosity: ...`, `  --[no]x: ...`)."""
    head = line.strip().split(":", 1)[0]
    return [n.lstrip("-").removeprefix("[no]") for n in head.split(",")]
