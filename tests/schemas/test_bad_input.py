"""Issue #33's bad-input classes (`bad_input.py`, `bad_input_runs.py`), run here: each is
refused with its reason, naming the file, or stops with one line naming it (a damaged
checkpoint: one warning line and the previous step); no traceback, nothing stored."""

from __future__ import annotations

import pathlib

import pytest

from tests.schemas import bad_input_runs as runs
from tests.schemas.bad_input import CASES, Case
from tfds_builders.__main__ import build, main

pytestmark = pytest.mark.faults  # the fault-injection suite (-m faults)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.builder}-{c.refused}" for c in CASES])
def test_bad_input_is_refused_by_name(case: Case, request, tmp_path, capsys):
    shared = None if case.generated else request.getfixturevalue("shared_data")
    manual = case.setup(tmp_path, shared)
    if case.refused.startswith("error: "):
        rc = main(["build", case.builder, "--config", case.config, "--manual_dir",
                   str(manual), "--data_dir", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip()
        # besides the build's progress lines ("building X into D"), one line: the error
        lines = [x for x in err.splitlines() if not x.startswith(("building ", "  "))]
        assert rc == 2 and len(lines) == 1 and lines[0].startswith(case.refused), err
        assert str(manual) in lines[0] and "Traceback" not in err
        return
    summary = build(case.builder, case.config, str(tmp_path / "out"), str(manual))
    assert summary["skipped"].get(case.refused, 0) >= 1, summary["skipped"]
    named = summary["named"][case.refused]
    assert any(str(manual) in n for n in named), named


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> runs.Context:
    """One place for the run cases (they share the smoke run the checkpoint cases copy)."""
    return runs.Context(tmp_path_factory.mktemp("runs"), pathlib.Path(__file__).parents[2])


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=[pytest.mark.e2e] if c.trains else [], id=c.cls)
    for c in runs.RUN_CASES])
def test_run_case_is_refused_in_one_line(case: runs.RunCase, context) -> None:
    got = case.run(context)
    assert got.refused, got.text
