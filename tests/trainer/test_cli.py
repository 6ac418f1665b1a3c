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


def test_a_plain_config_flag_is_not_a_config_file() -> None:
    """A tool's own `--config` (e.g. a SYMON builder config, `--config text_only`) is read
    as its value; only `config_flag`'s `--config` is checked as a path.py[:args] file."""
    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_string("config", "text_only", "builder config", flag_values=fv)

    assert cli.parse(["mental", "--config", "synthetic_tiny"], "python -m tool", DOC,
                     {"mental": ("count words", define)}).config == "synthetic_tiny"


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


# Every tool's entry point: (module, the words before the flags, a flag its --help names).
TOOLS = [
    ("vnr.benchmarks.symon.tools", ["movie_keys"], "--movie_list"),
    ("vnr.benchmarks.symon.tools", ["contamination"], "--yms_dir"),
    ("vnr.benchmarks.symon.analysis", ["coverage"], "--wikiplots"),
    ("vnr.benchmarks.symon.order_mean", [], ""),
    ("vnr.benchmarks.movie101.tools", ["two_stage"], "--global_workdir"),
    ("vnr.benchmarks.msymon.tools", ["baseline"], "--builder_config"),
    ("vnr.benchmarks.msymon.tools", ["evaluate"], "--init_from"),
    ("vnr.benchmarks.msymon.tools", ["crosslingual"], "--workdirs"),
    ("vnr.benchmarks.msymon.tools", ["table3_generate"], "--sizes"),
    ("vnr.benchmarks.msymon.tools", ["table3"], "--finetune_set"),
    ("vnr.benchmarks.msymon.tools", ["punctuate"], "--encoder"),
    ("vnr.benchmarks.msymon.tools", ["punctuate"], "--show"),
    ("vnr.benchmarks.msymon.tools", ["punctuation_corpus"], "--manual_dir"),
    ("vnr.benchmarks.msymon.tools", ["scratch_encoder"], "--max_tokens"),
    ("vnr.benchmarks.msymon.translate", [], "--src_code"),
    ("vnr.benchmarks.msymon.subtitles", [], "--vtt_dir"),
    ("vnr.benchmarks.moviepuzzle.length_report", [], "--by"),
    ("vnr.benchmarks.moviepuzzle.tables", [], "--layout"),
    ("tfds_builders.__main__", ["build"], "--manual_dir"),
    ("vnr.train", [], "--multihost"),
    ("vnr.cache_features", [], "--towers"),
    ("vnr.evaluate", [], "--report_dir"),
    ("vnr.contamination", [], "--manual_dir"),
    *((f"bench.{name}", [name], flag) for name, flag in (
        ("contrastive", "--repeats"), ("decode", "--loop_examples"), ("dtw", "--quick"),
        ("encoders", "--patch"), ("ordering", "--gap_batch"), ("retrieval", "--dense_sizes"),
        ("sc2st", "--fusion"), ("scan", "--depths"))),
]


def test_every_command_of_a_benchmark_home_is_listed_here() -> None:
    """A benchmark's commands are its `tools.py` or modules named for their one job
    (docs/command_lines.md); each one is in TOOLS, so its flags are tested."""
    from tests import ROOT

    home = ROOT / "vnr" / "benchmarks"
    found = {".".join(("vnr", "benchmarks", *p.relative_to(home).with_suffix("").parts))
             for p in home.glob("*/*.py") if '__name__ == "__main__"' in p.read_text()}
    assert found and found <= {m for m, _, _ in TOOLS}, found - {m for m, _, _ in TOOLS}


@pytest.mark.parametrize(("module", "words", "flag"), TOOLS,
                         ids=[f"{m}:{' '.join(w)}" for m, w, _ in TOOLS])
def test_every_tool_names_its_flags_and_refuses_unknown_ones(
        module: str, words: list[str], flag: str, capsys: pytest.CaptureFixture) -> None:
    import importlib

    main = importlib.import_module(module).main

    def run(argv: list[str]) -> int:
        try:
            return main(argv)
        except SystemExit as e:
            return e.code

    assert run([*words, "--help"]) in (0, None)
    out = capsys.readouterr().out
    named = not flag or f"{flag}:" in out or f"--[no]{flag[2:]}:" in out  # a bool: --[no]x
    assert "usage: " in out and "flags:" in out and named, out
    assert run([*words, "--bogus_flag=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "bogus_flag" in err, err


def test_shared_global_flags_are_set_where_their_library_reads_them() -> None:
    """`shared`: the trainer's multi-host flags live on absl's global FLAGS (read by
    `vnr.distributed`); a tool's parse sets them there, and the next parse starts afresh."""
    import vnr.distributed  # noqa: F401 (defines --multihost ... on the global FLAGS)

    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_integer("k", 0, "k", flag_values=fv)

    try:
        a = cli.parse(["--multihost=off", "--k=2", "--num_processes", "3"], "python -m tool",
                      DOC, define, shared=("vnr.distributed",))
        assert (a.k, a.multihost, a.num_processes) == (2, "off", 3)
        assert flags.FLAGS.is_parsed() and flags.FLAGS.multihost == "off"
        assert flags.FLAGS.num_processes == 3
        cli.parse(["--k=1"], "python -m tool", DOC, define, shared=("vnr.distributed",))
        assert (flags.FLAGS.multihost, flags.FLAGS.num_processes) == ("auto", None)
    finally:
        flags.FLAGS.unparse_flags()  # as before the test: nothing parsed


@pytest.mark.parametrize("argv", [
    ["vnr.train", "--config", "configs/moviepuzzle/main.py:smoke", "--workdir", "w", "--bogus"],
    ["vnr.benchmarks.msymon.tools", "crosslingual", "--bogus"],
    ["bench", "train", "--bogus"],  # a benchmark on absl's global FLAGS
])
def test_a_bad_flag_in_a_shell_is_one_line_and_exit_2(argv: list[str]) -> None:
    import subprocess
    import sys

    from tests import ROOT

    r = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "Unknown command line flag 'bogus'" in r.stderr


@pytest.mark.parametrize("error", ["corrupt", "incompatible", "restore_run"])
def test_checkpoint_errors_end_a_run_or_an_evaluation_in_one_line(
        error: str, tmp_path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """A checkpoint that cannot be restored (`vnr.checkpoint` names the step and the
    directory), reaching `python -m vnr.train` or `python -m vnr.evaluate`: one `error:`
    line and exit status 2, never a traceback. Another run's checkpoint (`restore_run`,
    read by a task's pretrained hook) reaches the trainer as a ConfigError."""
    import functools

    from vnr import checkpoint, evaluate, train, workdir
    from vnr import config as config_lib

    where = f"checkpoint step 6 in {tmp_path}/checkpoints"
    raised = {"corrupt": checkpoint.CorruptCheckpoint(f"{where} is unreadable: bad chunk"),
              "incompatible": checkpoint.IncompatibleCheckpoint(
                  f"{where}: checkpoint parameter 0.w has shape (3,), model expects (5,)"),
              "restore_run": train.ConfigError(f"init_from={tmp_path}: {where} is corrupt: "
                                               f"state/d/x is missing")}[error]

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(train, "run", fail)
    monkeypatch.setattr(evaluate, "evaluate", fail)
    monkeypatch.setattr(train.distributed, "initialize_from_flags", lambda: False)
    workdir.check_workdir(tmp_path, config_lib.load("configs/moviepuzzle/main.py:smoke"))
    try:
        argv = ["--config", "configs/moviepuzzle/main.py:smoke", "--workdir", str(tmp_path)]
        bodies = [functools.partial(train._main, cli.parse(
            argv, train.PROG, None, train._flags, shared=train.RUNTIME_FLAGS))]
        if error != "restore_run":  # evaluation restores its own run (`restore`)
            argv = ["--workdir", str(tmp_path)]
            bodies.append(functools.partial(evaluate._main, cli.parse(
                argv, evaluate.PROG, None, functools.partial(evaluate._flags, argv),
                shared=("absl.logging",))))
        for body in bodies:
            with pytest.raises(SystemExit) as e:
                body()
            assert e.value.code == 2
            assert capsys.readouterr().err == f"error: {raised}\n"
    finally:
        flags.FLAGS.unparse_flags()
