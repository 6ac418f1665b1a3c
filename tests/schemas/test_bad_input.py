"""Issue #33's bad-input classes (`bad_input.py`), built here: each is refused with its
reason, naming the file, or stops with one line naming it; no traceback, nothing stored."""

from __future__ import annotations

import pytest

from tests.schemas.bad_input import CASES, Case
from tfds_builders.__main__ import build, main


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
