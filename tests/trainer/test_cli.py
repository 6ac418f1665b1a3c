"""The one command-line convention (`vnr/cli.py`): absl flags on a fresh FlagValues per
call, `--help` naming the flags, one `error:` line and exit status 2 for a bad command line,
argparse-style lists after a repeatable flag."""

from __future__ import annotations

import pytest
from absl import flags

from vnr import cli

DOC = "A tool.\n\n    python -m tool build NAME"


def _build(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("data_dir", None, "where it goes", flag_values=fv, required=True)
    flags.DEFINE_integer("k", 1, "how many", flag_values=fv, lower_bound=1)
    flags.DEFINE_multi_string("workdirs", [], "runs", flag_values=fv)
    flags.DEFINE_bool("rebuild", False, "build again", flag_values=fv)


COMMANDS = {"build": ("build one dataset", _build), "show": ("print it", lambda fv: None)}


def _error(capsys: pytest.CaptureFixture, argv: list[str], **kw) -> str:
    with pytest.raises(SystemExit) as e:
        cli.parse(argv, "python -m tool", DOC, kw.pop("define", COMMANDS), **kw)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.strip()


def test_flags_commands_and_lists() -> None:
    a = cli.parse(["build", "--data_dir=d", "--k", "3", "--workdirs", "a", "b", "--rebuild"],
                  "python -m tool", DOC, COMMANDS)
    assert (a.command, a.data_dir, a.k, a.workdirs, a.rebuild) == ("build", "d", 3,
                                                                   ["a", "b"], True)
    again = cli.parse(["build", "--data_dir", "e", "--workdirs=x"], "python -m tool", DOC,
                      COMMANDS)  # a fresh FlagValues: nothing left from the last call
    assert (again.data_dir, again.k, again.workdirs, again.rebuild) == ("e", 1, ["x"], False)
    ops = cli.parse(["r1", "--k=2", "r2"], "python -m tool", DOC,
                    lambda fv: flags.DEFINE_integer("k", 0, "k", flag_values=fv), "RUN ...")
    assert (ops.command, ops.k, ops.operands) == (None, 2, ["r1", "r2"])


def test_bad_command_lines_are_one_error_line(capsys: pytest.CaptureFixture) -> None:
    assert "Unknown command line flag 'bogus'" in _error(
        capsys, ["build", "--data_dir=d", "--bogus=1"])
    assert "--data_dir" in _error(capsys, ["build"])  # required
    assert "--k" in _error(capsys, ["build", "--data_dir=d", "--k=0"])  # below its bound
    assert "unknown command 'bild'" in _error(capsys, ["bild"])
    assert "name a command: build, show" in _error(capsys, [])
    assert "unexpected argument 'extra'" in _error(capsys, ["show", "extra"])


def test_help_names_the_commands_and_flags(capsys: pytest.CaptureFixture) -> None:
    for argv in (["--help"], ["build", "--help"], ["build", "-h", "--bogus"]):
        with pytest.raises(SystemExit) as e:
            cli.parse(argv, "python -m tool", DOC, COMMANDS)
        assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m tool <command> [flags]" in out and "  build" in out
    assert "usage: python -m tool build [flags]" in out and "build one dataset" in out
    for flag in ("--data_dir: where it goes", "--k: how many", "--workdirs: runs",
                 "--[no]rebuild: build again"):
        assert flag in out, flag
