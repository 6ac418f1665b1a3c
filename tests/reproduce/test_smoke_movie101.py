"""Every runnable Movie101 row (Tables 3-6) at smoke scale: MCN and TNG trainings, and
Table 6's two-stage tool on the Table 4 and Table 5 runs."""

import json

import pytest

from tests.reproduce import smoke


@pytest.mark.e2e
def test_every_movie101_row_runs_at_smoke_scale(tmp_path):
    p, env, tables = smoke.everything("movie101", tmp_path)
    tool = json.loads((tmp_path / "t6-k2" / "row.json").read_text())
    assert tool["tool"].endswith(f"--global_workdir {tmp_path}/t4-cnclip --local_workdir "
                                 f"{tmp_path}/t5-rnl --k 2")
    k1 = next(ln for ln in tables["6"] if ln.row.id == "t6-k1")
    assert all(0 <= c.ours <= 100 for c in k1.cells)
    rnl = json.loads((tmp_path / "t5-rnl" / "results.json").read_text())
    assert rnl["selection"]["mode"] == "last"  # smoke: no validation pass (cheaper)
