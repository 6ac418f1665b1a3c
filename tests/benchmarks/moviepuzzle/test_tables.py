"""The Table 1 / Table 3 generator over finished and missing runs."""

import csv
import json

from vnr.benchmarks.moviepuzzle import tables

RESULTS = {s: {"lsd": 10.0 + k, "lmd": 2.0, "sd": 9.0, "ssd": 20.0, "os2": 70.0 + k,
               "os3": 45.0, "pair_acc": 0.7, "clips": 300.0}
           for k, s in enumerate(("test_in_domain", "test_out_domain"))}


def _run(root, name, cfg, results=None):
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    if results is not None:
        (d / "results.json").write_text(json.dumps(results))
    return d


def test_table_lists_finished_runs_and_marks_missing_ones(tmp_path, capsys):
    hcmc = {"task": "moviepuzzle.hcmc", "use_cl": False, "cl_lambda": 0.75,
            "model": {"kind": "hcmc", "levels": ["frame", "shot"],
                      "modalities": ["vision", "text"]}, "eval": {"distance": "cosine"}}
    main = {"task": "moviepuzzle.pairwise", "model": {"modalities": ["vision", "text"]}}
    runs = [_run(tmp_path, "hcmc_no_cl", hcmc, RESULTS), _run(tmp_path, "fusion", main, RESULTS),
            _run(tmp_path, "crashed", main)]
    out_csv = tmp_path / "t" / "table1.csv"
    assert tables.main(["--workdirs", *map(str, runs), str(tmp_path / "never_started"),
                       "--csv", str(out_csv)]) == 0
    text = capsys.readouterr()
    lines = text.out.strip().splitlines()
    assert lines[0].startswith("| run | model | steps | in LSD↓") and "out OS3↑" in lines[0]
    assert len(lines) == 2 + 4
    assert "HCMC frame+shot, w/o CL, cosine" in lines[2] and "| 71.00 |" in lines[2]
    assert "late fusion; main job" in lines[3] and "| 70.00 |" in lines[3]
    assert "missing" in lines[4] and "crashed" in lines[4]
    assert "never_started" in lines[5] and "no config.json" in lines[5]
    assert "2 run(s) without results" in text.err
    rows = list(csv.reader(out_csv.open()))
    assert len(rows) == 5 and len(rows[0]) == 3 + 12 and rows[1][3] == "10.00"


def test_a_run_without_a_split_shows_dashes(tmp_path, capsys):
    only_in = {"test_in_domain": RESULTS["test_in_domain"]}
    d = _run(tmp_path, "clips", {"task": "moviepuzzle.hcmc", "model": {"kind": "random"}},
             only_in)
    tables.main(["--workdirs", str(d), "--csv", str(tmp_path / "x.csv")])
    row = capsys.readouterr().out.strip().splitlines()[2]
    assert "random" in row and row.count("| - ") == 6


def test_runs_with_the_same_name_are_told_apart_by_their_parent(tmp_path, capsys):
    cfg = {"task": "moviepuzzle.pairwise", "total_steps": 300, "model": {}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    runs = [_run(tmp_path / p, "fusion", cfg, RESULTS) for p in ("a", "b")]
    tables.main(["--workdirs", *map(str, runs), "--csv", str(tmp_path / "x.csv")])
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("| a/fusion | ") and out[3].startswith("| b/fusion | ")
    assert "| 300 |" in out[2]


def test_pretrained_encoders_are_named_by_checkpoint_and_frozen_state() -> None:
    hcmc = {"task": "moviepuzzle.hcmc", "frozen": [r"encoders\.\w+\.image\."],
            "model": {"kind": "hcmc", "levels": ["frame", "shot"],
                      "image_encoder": "/ckpt/clip-vit-base-patch32/"}}
    assert tables.describe(hcmc) == "HCMC frame+shot, clip-vit-base-patch32, frozen"
    hcmc["frozen"] = []
    assert tables.describe(hcmc) == "HCMC frame+shot, clip-vit-base-patch32"
    nsp = {"task": "moviepuzzle.hcmc", "model": {"kind": "text_pair", "head": "nsp",
                                                 "encoder": "/ckpt/bert-base-uncased"}}
    assert tables.describe(nsp) == "text pair NSP-style (bert-base-uncased)"
    nsp["model"]["encoder"] = "scratch:bert-small"
    assert tables.describe(nsp) == "text pair NSP-style (bert-small)"


def test_table3_layout_shows_shot_iou_in_percent_and_both_stages(tmp_path, capsys):
    res = {s: dict(m, shot_iou=0.3756, shot_os2=54.93, shot_os3=21.41)
           for s, m in RESULTS.items()}
    cfg = {"task": "moviepuzzle.hcmc", "model": {"kind": "hcmc", "levels": ["frame", "shot"]}}
    d = _run(tmp_path, "fs", cfg, res)
    tables.main(["--workdirs", str(d), "--csv", str(tmp_path / "x.csv"), "--layout", "table3"])
    head, _, row = capsys.readouterr().out.strip().splitlines()[:3]
    assert "in SHOT_IOU↑ | in SHOT_OS2↑ | in SHOT_OS3↑ | in OS2↑ | in OS3↑" in head
    assert "| 37.56 | 54.93 | 21.41 | 70.00 | 45.00 |" in row
