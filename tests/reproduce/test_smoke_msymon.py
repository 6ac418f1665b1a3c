"""Every runnable M-SYMON row (Tables 3, 4, 10-13) at smoke scale: the training chain
translate -> two-stage -> two-stage-supervision, Table 4's time window evaluated again."""

import json

import pytest

from tests.reproduce import smoke


@pytest.mark.e2e
def test_every_msymon_row_runs_at_smoke_scale(tmp_path):
    p, env, tables = smoke.everything("msymon", tmp_path)
    two = json.loads((tmp_path / "t3-two-stage-supervision-en" / "config.json").read_text())
    assert two["init_from"] == str(tmp_path / "t3-two-stage-en")
    timed = json.loads((tmp_path / "t4-two-stage-supervised-time-en" / "row.json").read_text())
    assert timed["action"] == "evaluate" and timed["config"]["eval"]["window"] == 1.0
    multi = next(ln for ln in tables["3"] if ln.row.id == "t3-multilingual")
    assert multi.cells[-1].ours == pytest.approx(sum(c.ours for c in multi.cells[:7]) / 7)
