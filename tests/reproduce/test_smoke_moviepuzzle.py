"""Every runnable MoviePuzzle row (Tables 1-5, 8-10) trains a few steps on the generated
corpus through `python -m vnr.reproduce`'s planner, executor and report. The rows' runs are
also where the pretrained-checkpoint rows' end-to-end checks look (one training each)."""

import json
import pathlib

import numpy as np
import pytest
from flax import nnx

from tests.helpers import checkpoint_arrays, params_under
from tests.reproduce import smoke
from vnr import workdir as workdir_lib

pytestmark = pytest.mark.e2e
ORDER_METRICS = {"lsd", "lmd", "sd", "ssd", "os2", "os3", "pair_acc", "clips"}


runs = smoke.module_runs("moviepuzzle")


def test_every_moviepuzzle_row_runs_at_smoke_scale(runs):
    tables, root = runs.tables, runs.root
    cosine = json.loads((root / "t3-cosine-shot" / "row.json").read_text())
    assert cosine["action"] == "evaluate" and cosine["config"]["eval"]["distance"] == "cosine"
    assert cosine["trained_in"] == str(root / "t1-hcmc-frame-shot")  # not retrained
    assert not (root / "t3-cosine-shot" / "checkpoints").exists()
    results = json.loads((root / "t1-hcmc-frame-shot" / "results.json").read_text())
    assert results["selection"]["mode"] == "last"  # smoke: no validation pass (cheaper)
    shot = next(ln for ln in tables["3"] if ln.row.id == "t3-euclidean-shot")
    assert shot.cells[0].ours == pytest.approx(100 * results["test_in_domain"]["shot_iou"])


def _ordered(root: pathlib.Path, run: str) -> dict:
    """The run's test results: the order metrics in range, as many clips as it evaluated."""
    results = json.loads((root / run / "results.json").read_text())
    cap = workdir_lib.load_config(root / run).evals.test.max_examples
    for split in ("test_in_domain", "test_out_domain"):
        m = results[split]
        assert ORDER_METRICS <= set(m) and m["clips"] == cap, (run, split, m)
        assert 0 <= m["os2"] <= 100 and 0 <= m["pair_acc"] <= 1
    return results


def _encoder_loaded(root: pathlib.Path, run: str, want: dict[str, np.ndarray]) -> None:
    """The run's config loads `want` as its encoder (every parameter equal), and its two
    training steps changed it."""
    from vnr import train

    got = params_under(train.setup(workdir_lib.load_config(root / run)).state, "encoder")
    assert set(got) == set(want)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)
    trained = checkpoint_arrays(root / run, 2)
    assert any(not np.array_equal(trained[f"0.encoder.{k}"], v) for k, v in want.items())


def _reports(root: pathlib.Path, run: str, out: pathlib.Path) -> pathlib.Path:
    """A finished run's test_out_domain reports (per-clip lengths, the orders picture),
    drawn into `out` by `vnr.evaluate` with reports on: the smoke rule switches them off,
    as drawing them for every row cost about 70 s of the 460 s the rows take."""
    from vnr import evaluate

    config = workdir_lib.load_config(root / run)
    config.evals.test.report = True
    evaluate.evaluate(config, root / run, splits=["test_out_domain"], report_dir=out)
    return out


@pytest.mark.parametrize("family,seed", [("videomae", 1), ("timesformer", 2)])
def test_video_pair_rows_train_with_the_checkpoint_loaded(runs, family, seed, tmp_path):
    """build -> the hook loads the tiny checkpoint (every encoder parameter equal to the
    file's, as its writer made it) -> 2 training steps that change it -> test clips ordered
    and scored."""
    from vnr.benchmarks.moviepuzzle import smoke_inputs

    root = runs.root
    run = f"t1-{family}"
    ckpt = pathlib.Path(workdir_lib.load_config(root / run).model.checkpoint)
    want = smoke_inputs.write_checkpoint(tmp_path, family, seed=seed)
    assert (tmp_path / "model.safetensors").read_bytes() == \
        (ckpt / "model.safetensors").read_bytes(), f"the smoke input {ckpt} has another seed"
    _encoder_loaded(root, run, want)
    _ordered(root, run)
    reports = _reports(root, run, tmp_path / "reports")
    assert (reports / "test_out_domain_orders.png").is_file()
    clips = (reports / "test_out_domain_clips.jsonl").read_text().splitlines()
    assert len(clips) == workdir_lib.load_config(root / run).evals.test.max_examples


def test_singularity_rows_run_end_to_end(runs):
    """Table 1's row: the hook loads the golden checkpoint (every encoder parameter equal to
    upstream's model read from it), 2 steps change it, test clips ordered. Table 4:
    +reordering's synopsis model starts from that Table 1 run's trained encoder."""
    from flax import nnx

    from vnr import train
    from vnr.benchmarks.moviepuzzle import smoke_inputs
    from vnr.models.encoders import singularity as sg

    root = runs.root
    reference = sg.from_checkpoint(smoke_inputs.GOLDEN_SINGULARITY)
    want = {".".join(map(str, p)): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(nnx.state(reference, nnx.Param))}
    want = {k: v for k, v in want.items() if k != "temp" and not k.startswith("itm_head")}
    _encoder_loaded(root, "t1-singularity-fusion", want)
    _ordered(root, "t1-singularity-fusion")
    c = workdir_lib.load_config(root / "t4-singularity-reordering")
    assert c.init_from == str(root / "t1-singularity-fusion")
    trained = checkpoint_arrays(root / "t1-singularity-fusion", 2)
    got = params_under(train.setup(c).state, "encoder")
    assert got
    for k in got:  # the whole encoder is the Table 1 run's
        np.testing.assert_array_equal(got[k], trained[f"0.encoder.{k}"], err_msg=k)


@pytest.mark.parametrize("run,lam", [
    ("t1-hcmc-frame-shot", 1.0), ("t1-hcmc-frame-scene", 1.0), ("t1-hcmc-frame-shot-scene", 1.0),
    ("t2-no-shot", 1.0), ("t2-no-cl", 0.0), ("t2-no-text", 1.0), ("t2-no-vision", 1.0),
    ("t10-lambda-0.75", 0.75)])
def test_paper_rows_train_two_steps(runs, run, lam):
    """A paper row's two steps through the trainer (its optimizer: for `paper`, AdamW eps
    1e-6, constant lr, no clipping): a finite loss that is Eq. 4, the order loss plus lambda
    times the contrastive losses of the row's levels ("w/o CL": lambda 0; the logged values
    are means, and Eq. 4 is linear), a pair accuracy per level, and a frame head that moved."""
    from vnr import train

    root = runs.root
    config = workdir_lib.load_config(root / run)
    logged = [json.loads(ln) for ln in (root / run / "metrics.jsonl").read_text().splitlines()]
    m = next(r for r in logged if "train/loss" in r)
    levels = set(config.model.levels)
    assert {f"train/{lv}_pair_acc" for lv in levels} <= set(m) and np.isfinite(m["train/loss"])
    cl = sum(m[f"train/{lv}_cl"] for lv in ("shot", "scene") if lv in levels)
    assert m["train/loss"] == pytest.approx(m["train/order_loss"] + lam * cl, rel=1e-5)
    assert cl > 0 or levels == {"frame"}
    name = "0.pairs.frame.heads.frame.kernel"
    init = train.setup(config, load_pretrained=False).state
    before = {".".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(init)}[name]
    assert not np.array_equal(np.asarray(before), checkpoint_arrays(root / run, 2)[name])


def test_distance_rows_evaluate_the_frame_shot_run(runs):
    """Table 3's rows re-evaluate the frame+shot run with each distance (Algorithm 1): the
    shot row's matched IoU and shot-stage OS, the frame row's OS, all in range."""
    root = runs.root
    for distance in ("euclidean", "cosine", "softdtw"):
        for level in ("shot", "frame"):
            run = f"t3-{distance}-{level}"
            row = json.loads((root / run / "row.json").read_text())
            assert row["trained_in"] == str(root / "t1-hcmc-frame-shot"), run
            got = json.loads((root / run / "results.json").read_text())
            for split in ("test_in_domain", "test_out_domain"):
                m = got[split]
                assert 0 < m["shot_iou"] <= 1 and 0 <= m["shot_os2"] <= 100, (run, m)
                assert np.isfinite(m["os2"]) and 0 <= m["os2"] <= 100, (run, m)
            distance_set = row["config"]["eval"]["distance"]
            assert distance_set == distance, (run, distance_set)


def test_hcmc_row_runs_end_to_end_and_reaches_the_table(runs, capsys, tmp_path):
    """The Table 1 HCMC frame+shot row (paper preset) through the trainer reports the
    Table 3 columns (shot IoU, shot-stage OS) and a per-clip report (length_report's input,
    Figures 9-11); then the Random row (no training by design) is the expectation over the
    clips it scored, and the table generator prints both and names a missing run."""
    from tfds_builders import moviepuzzle as builder
    from vnr.benchmarks.moviepuzzle import tables
    from vnr.benchmarks.moviepuzzle.order_metrics import random_expectation

    root = runs.root
    hcmc, rand = root / "t1-hcmc-frame-shot", root / "t1-random"
    results = _ordered(root, "t1-hcmc-frame-shot")
    cap = workdir_lib.load_config(hcmc).evals.test.max_examples
    for split in ("test_in_domain", "test_out_domain"):
        m = results[split]
        assert {"shot_iou", "shot_os2", "shot_os3", "shot_os3_clips"} <= set(m)
        assert 0 < m["shot_iou"] <= 1 and 0 <= m["shot_os3"] <= 100
        assert 0 <= m["shot_os3_clips"] <= cap
    reports = _reports(root, "t1-hcmc-frame-shot", tmp_path)
    clips = (reports / "test_out_domain_clips.jsonl").read_text().splitlines()
    assert len(clips) == cap and (reports / "test_out_domain_orders.png").is_file()
    tables.main(["--workdirs", str(hcmc), str(rand), str(root / "missing"),
                 "--csv", str(root / "t.csv")])
    out = capsys.readouterr().out.splitlines()
    assert "HCMC frame+shot" in out[2] and "random" in out[3]
    assert "λ=" not in out[2]  # the default λ = 1 (Table 1/2 rows) is not labelled
    assert "missing" in out[4]
    config = workdir_lib.load_config(rand)
    src = builder.data_source(config.data.config, "test_out_domain",
                              data_dir=config.data.data_dir)
    n = config.evals.test.max_examples
    want = random_expectation([len(src[k]["frames"]) for k in range(n)])
    got = json.loads((rand / "results.json").read_text())["test_out_domain"]
    assert got["clips"] == n and got["lsd"] == pytest.approx(want["lsd"])
