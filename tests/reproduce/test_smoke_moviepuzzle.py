"""Every runnable MoviePuzzle row (Tables 1-5, 8-10) trains a few steps on the generated
corpus through `python -m vnr.reproduce`'s planner, executor and report."""

import json

import pytest

from tests.reproduce import smoke


@pytest.mark.e2e
def test_every_moviepuzzle_row_runs_at_smoke_scale(tmp_path):
    p, env, tables = smoke.everything("moviepuzzle", tmp_path)
    cosine = json.loads((tmp_path / "t3-cosine-shot" / "row.json").read_text())
    assert cosine["action"] == "evaluate" and cosine["config"]["eval"]["distance"] == "cosine"
    assert cosine["trained_in"] == str(tmp_path / "t1-hcmc-frame-shot")  # not retrained
    assert not (tmp_path / "t3-cosine-shot" / "checkpoints").exists()
    results = json.loads((tmp_path / "t1-hcmc-frame-shot" / "results.json").read_text())
    assert results["selection"]["mode"] == "last"  # smoke: no validation pass (cheaper)
    shot = next(ln for ln in tables["3"] if ln.row.id == "t3-euclidean-shot")
    assert shot.cells[0].ours == pytest.approx(100 * results["test_in_domain"]["shot_iou"])
