"""Every runnable SYMON row (Tables 2-4, 6, 8, 9) at smoke scale: Table 4's gaps equal the
paper's, Table 6 averages its runs per column, Table 9 reads its source runs."""

import json

import pytest

from tests.reproduce import smoke
from vnr.reproduce import registry


@pytest.mark.e2e
def test_every_symon_row_runs_at_smoke_scale(tmp_path):
    p, env, tables = smoke.everything("symon", tmp_path)
    for ln in tables["4"]:  # the semantic gap from the printed human counts (Eq. 3)
        assert round(ln.cells[-1].ours, 1) == registry.number(ln.cells[-1].paper)
    acc = [json.loads((tmp_path / f"t6-univl-symon-{i}-a_to_b" / "results.json").read_text())
           ["setB"]["accuracy"] for i in ("text_video", "video_only")]
    row = next(ln for ln in tables["6"] if ln.row.id == "t6-univl-symon")
    assert [c.ours for c in row.cells] == pytest.approx(acc)
    src = json.loads((tmp_path / "t9-new-sent-univl-symon-0" / "config.json").read_text())
    assert src["transfer"]["source_run"] == str(tmp_path / "symon-yms-source-0")
