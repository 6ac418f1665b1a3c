"""Evaluators declared in the config, model selection by validation, evaluate-only runs."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import shutil
import subprocess
import sys
import types

import ml_collections
import pytest

from configs.moviepuzzle.main import get_config
from tests.helpers import override
from tests.trainer import counting_evaluator
from vnr import evaluate, evaluators, train, workdir
from vnr import task as task_lib

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    """The tiny corpus, built here (its build's own output is not the trainer's)."""
    from tfds_builders import moviepuzzle

    path = str(tmp_path_factory.mktemp("tfds"))
    moviepuzzle.prepare("synthetic_tiny", path)
    return path


def smoke(data_dir: str, **overrides):
    c = get_config("smoke")
    c.data.data_dir = data_dir
    return override(c, overrides)


def selecting(data_dir: str):
    """Two evaluators at different cadences; the model is selected by `probe/calls` (min),
    i.e. the first probe step (3), not the last (6)."""
    c = smoke(data_dir, keep_ckpts=1, eval_every=2)
    c.evals.probe = dict(type="tests.trainer.counting_evaluator", split="val", every=3,
                         max_examples=4)
    c.select = dict(metric="probe/calls", mode="min")
    return c


@pytest.fixture(scope="module")
def selected(data_dir, tmp_path_factory) -> tuple[pathlib.Path, dict, str]:
    """One 6-step run with `val` every 2 steps and `probe` every 3; its stderr."""
    counting_evaluator.CALLS[0] = 0
    wd = tmp_path_factory.mktemp("selected")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        results = train.run(selecting(data_dir), str(wd))
    return wd, results, err.getvalue()


@pytest.mark.e2e
def test_two_evaluators_run_at_their_own_steps(selected):
    wd, _, _ = selected
    rows = [json.loads(x) for x in (wd / "metrics.jsonl").read_text().splitlines()]
    steps = lambda key: sorted(r["step"] for r in rows if key in r)  # noqa: E731
    assert steps("val/os2") == [2, 4, 6]
    assert steps("probe/calls") == [3, 6]
    assert steps("probe/eval_seconds") == [3, 6]
    assert [r["probe/calls"] for r in rows if "probe/calls" in r] == [1.0, 2.0]


@pytest.mark.e2e
def test_results_come_from_the_selected_step(selected):
    wd, results, _ = selected
    saved = json.loads((wd / "results.json").read_text())
    assert saved["selection"] == {"metric": "probe/calls", "mode": "min", "step": 3,
                                  "value": 1.0}
    # the best checkpoint (3) is kept besides the newest (6) although keep_ckpts=1
    assert sorted(int(p.name) for p in (wd / "checkpoints").iterdir()
                  if p.name.isdigit()) == [3, 6]
    config = workdir.load_config(wd)
    best = evaluate.evaluate(config, wd, "best")
    last = evaluate.evaluate(config, wd, "last")
    assert best == saved  # evaluate-only reproduces results.json exactly at the selected step
    assert best["selection"]["step"] == 3 and last["selection"]["step"] == 6
    assert workdir.split_results(last) != workdir.split_results(best)
    assert workdir.split_results(best) == results


@pytest.mark.e2e
def test_evaluate_command_writes_results_json_layout(selected, tmp_path):
    wd, _, _ = selected
    out = tmp_path / "again.json"
    run = subprocess.run(
        [sys.executable, "-m", "vnr.evaluate", f"--workdir={wd}", "--step=best",
         f"--out={out}", "--config.evals.test.max_examples=10"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(out.read_text()) == json.loads((wd / "results.json").read_text())
    assert "| test_in_domain |" in run.stdout


@pytest.mark.e2e
def test_evaluate_command_with_a_step_number_and_splits(selected, tmp_path):
    """`--step 6` (the newest, not the selected 3) on a declared split and on `val`, which no
    final evaluator names (evaluated like the first final evaluator's splits)."""
    wd, _, _ = selected
    out = tmp_path / "step6.json"
    run = subprocess.run(
        [sys.executable, "-m", "vnr.evaluate", f"--workdir={wd}", "--step=6",
         "--splits=test_in_domain,val", f"--out={out}"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"{wd}: step 6 (asked for step 6)" in run.stderr
    got = json.loads(out.read_text())
    assert set(got) == {"test_in_domain", "val", "selection"}
    assert got["selection"] == {"metric": "probe/calls", "mode": "step", "step": 6,
                                "value": 2.0}
    assert set(got["val"]) == set(got["test_in_domain"])  # the test evaluator's metrics
    config = workdir.load_config(wd)
    last = evaluate.evaluate(config, wd, "last", splits=["test_in_domain"])
    assert last["test_in_domain"] == got["test_in_domain"]  # step 6 is the newest
    saved = json.loads((wd / "results.json").read_text())
    assert got["test_in_domain"] != saved["test_in_domain"]  # not the selected step's


@pytest.mark.e2e
def test_evaluate_restores_onto_another_mesh(selected):
    """The run trained on an (8, 1) mesh; evaluated on (4, 2) and on (2, 4) at its selected
    step it reproduces results.json."""
    wd, _, _ = selected
    saved = json.loads((wd / "results.json").read_text())
    for shape in ((4, 2), (2, 4)):
        config = workdir.load_config(wd)
        config.mesh.shape = shape
        got = evaluate.evaluate(config, wd)
        assert got["selection"] == saved["selection"]
        for split, metrics in workdir.split_results(saved).items():
            assert got[split] == pytest.approx(metrics, rel=1e-5, abs=1e-6), (shape, split)


@pytest.mark.e2e
def test_resume_continues_from_the_newest_step_not_the_kept_best(selected, tmp_path):
    """The run keeps its best step (3) beside its newest (6); lengthened to 8 steps it
    resumes from 6, and still reports 3."""
    wd, _, _ = selected
    again = tmp_path / "again"
    shutil.copytree(wd, again)
    config = workdir.load_config(again)
    config.total_steps = 8
    counting_evaluator.CALLS[0] = 2  # the probe ran twice in the first 6 steps
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        train.run(config, str(again))
    assert f"resumed from step 6 ({again / 'checkpoints'})" in err.getvalue()
    # Appended to, from step 7 on: nothing redone, but the final evaluation of step 3 (its
    # test/ rows), which the lengthened run makes again: one value per (step, metric).
    before = [x for x in (wd / "metrics.jsonl").read_text().splitlines()
              if not any(k.startswith("test/") for k in json.loads(x))]
    after = (again / "metrics.jsonl").read_text().splitlines()
    assert after[:len(before)] == before
    pairs = [(r["step"], k) for r in map(json.loads, after) for k in r if k not in ("step", "time")]
    assert len(pairs) == len(set(pairs))
    new = [json.loads(x) for x in after[len(before):]]  # training and validation rows
    steps = [r["step"] for r in new if any(k.startswith(("train/", "val/")) for k in r)]
    assert steps and min(steps) > 6 and max(steps) == 8
    assert sorted(int(p.name) for p in (again / "checkpoints").iterdir()
                  if p.name.isdigit()) == [3, 8]
    assert json.loads((again / "results.json").read_text())["selection"]["step"] == 3


@pytest.mark.e2e
def test_progress_lines_in_a_log_file(selected):
    _, _, err = selected
    assert "\r" not in err
    lines = [x for x in err.splitlines() if x.startswith("step ")]
    assert any(x.startswith("step 6/6 (100.0 %) loss ") and " examples/s " in x
               and " ETA " in x for x in lines), lines
    assert "eval probe on val: done in " in err
    assert "selected step 3 (probe/calls = 1, min)" in err


@pytest.mark.e2e  # its fixture trains (train.run), as the marker says
def test_evaluate_refuses_what_it_cannot_mean(selected, tmp_path):
    wd, _, _ = selected
    config = workdir.load_config(wd)
    with pytest.raises(evaluate.EvaluateError, match=r"--step=99: no checkpoint of that step "
                                                     r"\(there are 3, 6\)"):
        evaluate.evaluate(config, wd, "99")
    config.select.metric = ""
    with pytest.raises(evaluate.EvaluateError, match="--step best: this run selects no step"):
        evaluate.evaluate(config, wd, "best")
    with pytest.raises(ValueError, match="no config.json"):
        workdir.load_config(tmp_path)


@pytest.mark.e2e  # trains (train.run), as the marker says
def test_best_on_a_run_that_never_validated(data_dir, tmp_path):
    """A run cut (e.g. preempted) after step 2, before its first validation at step 3."""
    c = smoke(data_dir, keep_ckpts=1, total_steps=2, eval_every=3, ckpt_every=2)
    c.evals.test.max_examples = 2
    train.run(c, str(tmp_path))
    config = workdir.load_config(tmp_path)
    config.update(total_steps=6, select=dict(metric="val/os2", mode="max"))
    with pytest.raises(evaluate.EvaluateError, match="never validated a saved step"):
        evaluate.evaluate(config, tmp_path, "best")


@pytest.mark.parametrize("key, value, message", [
    ("evals.extra.split", "nope", r"evals.extra.split='nope' is not a split of moviepuzzle/"),
    ("evals.val.oops", 1, r"evals.val.oops: unknown key"),
    ("evals.extra.every", 0, r"evals.extra: never runs"),
    ("evals.extra.every", -1, r"evals.extra.every=-1: a whole number >= 0"),
    ("evals.val.pred", "pairs", r"evals.val.pred='pairs': the task's predict functions are "
                                r"predict \(vnr/task.py `predictors`\)"),
    ("select.mode", "maximum", r"select.mode='maximum'"),
    ("select.metric", "test/os2", r"evals.test never runs during training"),
    ("select.metric", "val/os2|test/os2", r"alternatives must be metrics of one evaluator"),
    ("select.metric", "val/nope|val/nix", r"reports no 'nope' or 'nix'"),
])
def test_bad_evaluator_is_one_line(data_dir, tmp_path, key, value, message):
    c = smoke(data_dir)
    if key in ("evals.val.oops", "evals.val.pred"):
        c.evals.val[key.rpartition(".")[2]] = value
    elif key == "evals.extra.split":
        c.evals.extra = dict(split=value, every=3)
    elif key == "evals.extra.every":
        c.evals.extra = dict(split="val", every=value)
    else:
        override(c, {key: value})
    with pytest.raises((train.ConfigError, evaluators.EvaluatorError), match=message):
        if key == "evals.extra.split":  # known once the dataset is built: before compiling
            train.run(c, str(tmp_path))
        else:
            train.setup(c, workdir=tmp_path)
    assert not (tmp_path / "checkpoints").exists()


def test_select_alternatives_rank_by_the_first_reported():
    """`select.metric="a|b"`: a checkpoint is ranked by the first alternative the evaluator
    reported; results.json names the one used; none reported is one error naming them."""
    select = {"metric": "val/f1|val/estimated_f1", "mode": "max"}
    assert evaluators.ranked({"val/estimated_f1": 0.5, "val/r1": 0.1}, select) == {
        "val/f1|val/estimated_f1": 0.5, "val/estimated_f1": 0.5}
    assert evaluators.ranked({"val/f1": 0.7, "val/estimated_f1": 0.5}, select) == {
        "val/f1|val/estimated_f1": 0.7, "val/f1": 0.7}
    with pytest.raises(evaluators.EvaluatorError, match=r"select.metric='val/f1\|val/estim"):
        evaluators.ranked({"val/r1": 0.1}, select)
    saved = {2: {"val/f1|val/estimated_f1": 0.4, "val/estimated_f1": 0.4},
             4: {"val/f1|val/estimated_f1": 0.6, "val/estimated_f1": 0.6}}
    mgr = types.SimpleNamespace(all_steps=lambda: [2, 4, 6], metrics=saved.get,
                                best_step=lambda: 4)
    config = ml_collections.ConfigDict({"select": select, "total_steps": 6})
    assert evaluators.selected_step(mgr, config) == {
        "metric": "val/estimated_f1", "mode": "max", "step": 4, "value": 0.6}


def test_evaluator_type_names_a_module_of_a_home():
    """`type` names a module relative to vnr.benchmarks; one that does not exist is one
    line."""
    c = get_config("smoke")
    c.select.metric = ""
    c.evals.val.type = "sc2st.task"
    parsed = {e.name: e.module for e in evaluators.parse(c, None)}
    assert parsed["val"] is task_lib.load("sc2st.task")
    c.evals.val.type = "moviepuzzle.nope"
    with pytest.raises(evaluators.EvaluatorError, match=r"^evals.val.type='moviepuzzle.nope': "
                                                        r"no module vnr/benchmarks/moviepuzzle/"
                                                        r"nope.py$"):
        evaluators.parse(c, None)


@pytest.mark.parametrize("process", [0, 1])
def test_evaluate_only_draws_its_pictures_on_process_0(process, tmp_path, monkeypatch):
    """`vnr.evaluate` passes `--report_dir` to the evaluators of process 0 only (as the
    trainer does): with several processes, every process evaluates, one draws."""
    import types

    import jax
    import ml_collections

    seen = []

    def drawing(config, split, predict_fn, mesh, *, max_examples=0, report_dir=None):
        seen.append(report_dir)
        if report_dir is not None:
            (report_dir / f"{split}.png").write_bytes(b"png")
        return {"acc": 1.0}

    final = evaluators.Evaluator("test", types.SimpleNamespace(evaluate=drawing), ("a", "b"),
                                 final=True, report=True)
    setup = types.SimpleNamespace(evaluators=[final], task=types.SimpleNamespace(), mesh=None,
                                  predictor=lambda state: None)
    model = evaluate.Model(ml_collections.ConfigDict(), setup, None,
                           {"metric": None, "mode": "last", "step": 6, "value": None})
    monkeypatch.setattr(jax, "process_index", lambda: process)
    results = evaluate.final_results(model, None, tmp_path)
    assert results["a"] == results["b"] == {"acc": 1.0}  # every process evaluates
    assert seen == ([tmp_path] * 2 if process == 0 else [None, None])
    assert sorted(p.name for p in tmp_path.iterdir()) == (["a.png", "b.png"] if process == 0
                                                          else [])
