"""`python -m vnr.reproduce report` on a root holding one finished row, one row never run and
one directory with a results.json nothing identifies: the table, `--csv` and `--png`."""

import csv
import json
import subprocess
import sys

from tests import ROOT
from vnr.reproduce import execute, plan, registry, runconfig

TEST = {"r1": 1.0, "r5": 4.25, "r10": 9.5, "mean_rank": 50.5, "mrr": 0.05}


def _root(tmp_path):
    """Sc2St Table 3 at --scale smoke: Prior finished (its config.json is the row's), a
    results.json alone under Similarity, the other runnable rows not run."""
    p = plan.make(registry.load("sc2st"), "smoke", tmp_path)
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "reproduce.json").write_text(json.dumps({"scale": "smoke"}))
    env = {**plan.environment(), "LSMDC": "$LSMDC"}
    config = runconfig.build(p, p.runs["t3-prior"], env, str(tmp_path / "_data"))
    for rid in ("t3-prior", "t3-similarity"):
        (tmp_path / rid).mkdir()
        (tmp_path / rid / "results.json").write_text(json.dumps(
            {"test": TEST, "selection": {"metric": None, "mode": "last", "step": 0,
                                         "value": None}}))
    (tmp_path / "t3-prior" / "config.json").write_text(config.to_json_best_effort())
    return p, env


def test_report_command_with_csv_and_png(tmp_path):
    p, env = _root(tmp_path / "root")
    out_csv, out_png = tmp_path / "t3.csv", tmp_path / "t3.png"
    got = subprocess.run(
        [sys.executable, "-m", "vnr.reproduce", "report", "--benchmark", "sc2st", "--table",
         "3", "--root", str(tmp_path / "root"), "--csv", str(out_csv), "--png", str(out_png)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    lines = got.stdout.splitlines()
    prior = next(ln for ln in lines if ln.startswith("| Prior |"))
    assert prior == ("| Prior | 1.00 / 0.51 (+0.49) | 4.25 / 3.30 (+0.95) | 9.50 / 8.01 (+1.49) "
                     "| 50.50 / 49.24 (+1.26) | 0.050 / 0.043 (+0.007) | deviates | ok |")
    similarity = next(ln for ln in lines if ln.startswith("| Similarity |"))
    assert similarity.endswith("| unidentified |") and "n/a" not in similarity
    assert "held out / 7.72" in similarity  # its numbers never enter the table
    assert any(ln.startswith("- t3-similarity: unidentified: t3-similarity holds an "
                             "unidentified run (nothing in it says what ran") for ln in lines)
    assert any(ln.startswith("| V-MoEE |") and ln.endswith("| deviates | missing |")
               for ln in lines)
    assert any(ln.startswith("| Human |") and "n/p / 38.01" in ln for ln in lines)

    rows = {r["row"]: r for r in csv.DictReader(out_csv.open())}
    assert len(rows) == 13
    assert rows["t3-prior"]["state"] == "ok"
    assert (rows["t3-prior"]["R1 ours"], rows["t3-prior"]["R1 paper"],
            rows["t3-prior"]["R1 diff"]) == ("1", "0.51", "0.49")
    assert (rows["t3-prior"]["Mean ours"], rows["t3-prior"]["Mean diff"]) == ("50.5", "1.26")
    for rid, state in (("t3-similarity", "unidentified"), ("t3-v-moee", "missing"),
                       ("t3-human", "not provided")):
        assert rows[rid]["state"] == state
        assert rows[rid]["R1 ours"] == "" and rows[rid]["R1 diff"] == ""
    assert rows["t3-human"]["R1 paper"] == "38.01"
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out_png.stat().st_size > 20_000


def test_run_leaves_an_unidentified_directory_alone(tmp_path):
    p, env = _root(tmp_path)
    said: list[str] = []
    failed = execute.execute(p, [p.runs["t3-similarity"]], env, None, said.append)
    assert failed == [f"t3-similarity: {tmp_path / 't3-similarity'} holds an unidentified run "
                      f"({runconfig.UNIDENTIFIED}); left alone: use another --root or remove "
                      "it"]
    assert sorted(x.name for x in (tmp_path / "t3-similarity").iterdir()) == ["results.json"]
