"""Every runnable Sc2St row (Tables 3-5) at smoke scale; a run directory holding another
config's run is named by `run` and `report`, never used."""

import json

import pytest

from tests.reproduce import smoke
from vnr.reproduce import execute, report


@pytest.mark.e2e
def test_every_sc2st_row_runs_at_smoke_scale(tmp_path):
    p, env, _ = smoke.everything("sc2st", tmp_path)
    row = json.loads((tmp_path / "t3-ours-sa" / "row.json").read_text())
    assert row["config_spec"] == "configs/sc2st/main.py:paper,sa,smoke,text_encoder=" \
                                 "scratch:bert-tiny"  # the A.1 preset at test sizes
    # another config under a row's name: named, left alone, kept out of the table
    path = tmp_path / "t3-ours-lf" / "config.json"
    other = json.loads(path.read_text())
    other["seed"] = 7
    path.write_text(json.dumps(other))
    table = p.registry.table("3")
    lines = {ln.row.id: ln for ln in report.collect(p, table, report.checker(p, env, None))}
    lf = lines["t3-ours-lf"]
    assert lf.state == "other config" and all(c.ours is None for c in lf.cells)
    assert "t3-ours-lf holds a run of another config (seed is 7 there, the row runs 0)" \
        in lf.detail
    assert lines["t3-ours-gf"].state == "ok"
    failed = execute.execute(p, [p.runs["t3-ours-lf"]], env, None, lambda m: None)
    assert len(failed) == 1 and "holds a run of another config (seed is 7 there" in failed[0]
    assert json.loads(path.read_text())["seed"] == 7  # not overwritten
