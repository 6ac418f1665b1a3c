"""From rows to runs: shared trainings, evaluate-only rows, dependencies, smoke commands,
launcher commands, and the command line's one-line errors."""

import pathlib
import subprocess
import sys

import pytest

from tests import ROOT
from vnr.reproduce import plan, registry

R = pathlib.Path("/runs")


def _plan(benchmark: str, scale: str = "paper") -> plan.Plan:
    return plan.make(registry.load(benchmark), scale, R)


def test_rows_that_differ_only_in_evaluation_train_once():
    p = _plan("moviepuzzle")
    r = p.runs
    assert r["t1-hcmc-frame-shot"].action == "train"
    for rid in ("t2-hcmc-frame-shot", "t3-euclidean-frame", "t3-euclidean-shot",
                "t10-lambda-1.00"):  # the same run, printed again
        assert (r[rid].action, r[rid].owner) == ("copy", "t1-hcmc-frame-shot")
    assert (r["t3-cosine-shot"].action, r["t3-cosine-shot"].owner) == \
        ("evaluate", "t1-hcmc-frame-shot")
    assert r["t3-cosine-shot"].eval_set == ("eval.distance=cosine",)
    assert r["t10-lambda-0.00"].owner == "t2-no-cl"  # lambda 0 is the w/o CL run
    assert r["t10-lambda-0.75"].action == "train"
    order = [x.id for x in p.order(["t3-softdtw-shot", "t4-singularity-reordering"])]
    assert order == ["t1-hcmc-frame-shot", "t3-softdtw-shot", "t1-singularity-fusion",
                     "t4-singularity-reordering"]
    assert "init_from=/runs/t1-singularity-fusion" in r["t4-singularity-reordering"].set


def test_smoke_commands_and_shared_smoke_trainings():
    p = _plan("moviepuzzle", "smoke")
    hcmc = p.runs["t1-hcmc-frame-shot"]
    assert hcmc.config == "configs/moviepuzzle/hcmc.py:frame_shot,paper,smoke"
    assert "data.manual_dir=$MOVIENET" not in hcmc.set and "total_steps=2" in hcmc.set
    # at smoke the small-encoder HCMC prerequisite is the Table 1 run (same sizes)
    assert p.runs["hcmc-small-movienet"].owner == "t1-hcmc-frame-shot"
    assert p.runs["t1-bert"].config == "configs/moviepuzzle/baselines.py:nsp_bert,smoke"
    assert p.runs["t1-random"].set[-1] == "total_steps=0"  # its own smoke set comes last


def test_each_expands_and_references_follow_shared_values():
    p = _plan("symon")
    runs = p.by_row["t9-orig-sub-univl-symon"]
    assert runs == [f"t9-orig-sub-univl-symon-{s}" for s in range(5)]
    assert "transfer.source_run=/runs/symon-yms-source-3" in \
        p.runs["t9-orig-sub-univl-symon-3"].set  # seed 3 reads the seed-3 source run
    assert "seed=3" in p.runs["symon-yms-source-3"].set
    assert len(p.by_row["t6-univl-symon"]) == 4
    assert p.runs["t8-v2t-univl-symon"].owner == "t8-t2v-univl-symon"
    smoke = _plan("symon", "smoke")
    assert smoke.by_row["t6-univl-symon"] == ["t6-univl-symon-text_video-a_to_b",
                                              "t6-univl-symon-video_only-a_to_b"]
    # the analysis rows run on inputs made from the generated corpus ([smoke.vars])
    assert smoke.skipped == {} and "$SYMON_ANALYSIS/wikiplots" in smoke.runs["t2-sbert"].tool
    m = _plan("msymon")
    assert "init_from=/runs/t3-two-stage-hi" in m.runs["t3-two-stage-supervision-hi"].set
    assert m.runs["t11-two-stage-supervision-hi"].owner == "t3-two-stage-supervision-hi"
    assert m.runs["t4-two-stage-supervised-time-fr"].action == "evaluate"


def test_launcher_commands():
    p = _plan("moviepuzzle")
    run = p.runs["t1-hcmc-frame-shot"]
    assert plan.command_line(p, run, "slurm") == (
        'CONFIG="configs/moviepuzzle/hcmc.py:frame_shot,paper,movienet,clip=$CLIP" '
        'WORKDIR=/runs/t1-hcmc-frame-shot sbatch launch/slurm_gpu.sbatch '
        '"--config.data.manual_dir=$MOVIENET"')
    assert plan.command_line(p, run, "tpu").startswith(
        'bash launch/tpu_pod.sh "configs/moviepuzzle/hcmc.py:frame_shot,paper,movienet,'
        'clip=$CLIP" /runs/t1-hcmc-frame-shot ')
    assert plan.command_line(p, p.runs["t3-cosine-frame"]) == (
        "python -m vnr.evaluate --workdir /runs/t1-hcmc-frame-shot --step selected --out "
        "/runs/t3-cosine-frame/results.json --config.eval.distance=cosine")
    assert plan.command_line(p, p.runs["t2-hcmc-frame-shot"]).startswith("mkdir -p ")


def test_missing_path_variable_is_one_line():
    with pytest.raises(plan.PlanError, match=r"run t1-bert needs \$BERT \(a bert-base-uncased "
                                             r"checkpoint directory\): export BERT=\.\.\."):
        plan.expand("encoder=$BERT", {}, "moviepuzzle run t1-bert",
                    dict(registry.load("moviepuzzle").vars))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vnr.reproduce", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_command_line_bad_input_is_one_line(tmp_path):
    cases = [
        (("list", "--benchmark", "nope"), "no benchmark 'nope' (benchmarks: movie101, "
                                          "moviepuzzle, msymon, sc2st, symon)"),
        (("list", "--benchmark", "sc2st", "--table", "9"), "sc2st has no table '9' (tables: "
                                                           "3, 4, 5)"),
        (("run", "--benchmark", "movie101", "--table", "5", "--root", str(tmp_path),
          "--rows", "t5-rnl,t5-nope"), "--rows: t5-nope not in movie101 Table 5 (its rows: "
                                       "t5-2d-tan, t5-ia-net, t5-rnl-fv, t5-rnl-ft, t5-rnl)"),
        (("list", "--colour"), "Unknown command line flag 'colour'"),
        (("frobnicate",), "give one command of list, run, report, docs"),
        (("run", "--benchmark", "sc2st", "--table", "3"), "--root is required"),
        (("list", "--table", "99"), "no benchmark has a table '99' (movie101: 2, 3, 4, 5, 6; "
                                    "moviepuzzle: 1, 2, 3, 4, 5, 8, 9, 10; msymon: 3, 4, 5, 6, 8, "
                                    "9, 10, 11, 12, 13, 14, 15, 16; sc2st: 3, 4, 5; symon: 2, "
                                    "3, 4, 6, 7, 8, 9, 10)"),
        (("run", "--benchmark", "sc2st", "--table", "3", "--root", str(tmp_path / "f")),
         f"--root {tmp_path / 'f'} is a file, not a directory of runs"),
    ]
    (tmp_path / "f").write_text("")
    for args, message in cases:
        got = _cli(*args)
        assert got.returncode == 2 and got.stderr.count("\n") == 1, (args, got.stderr)
        assert message in got.stderr, (args, got.stderr)


def test_dry_run_prints_one_command_per_run(tmp_path):
    got = _cli("run", "--benchmark", "moviepuzzle", "--table", "3", "--root", str(tmp_path),
               "--dry_run", "--launcher", "slurm")
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert lines[0] == "# t1-hcmc-frame-shot"
    assert lines[1].startswith('CONFIG="configs/moviepuzzle/hcmc.py:frame_shot,paper,')
    assert "# t3-cosine-shot: evaluate-only, trained by t1-hcmc-frame-shot" in lines
    assert sum(not ln.startswith("#") for ln in lines) == 7  # the training + 6 rows
    assert not list(tmp_path.iterdir())  # nothing ran


def test_set_adds_overrides_to_every_training():
    p = plan.make(registry.load("movie101"), "paper", R, ("total_steps=500",))
    assert p.runs["t5-rnl"].set[-1] == "total_steps=500"
    assert "total_steps" not in p.runs["t6-k1"].tool  # a tool takes no config override
    with pytest.raises(plan.PlanError, match=r"--set '--config.lr=1': give key=value"):
        plan.make(registry.load("movie101"), "paper", R, ("--config.lr=1",))


def test_list_table_without_benchmark_lists_the_benchmarks_having_it():
    for table, want in (("1", ["moviepuzzle"]),
                        ("5", ["movie101", "moviepuzzle", "msymon", "sc2st"])):
        got = _cli("list", "--table", table)
        assert got.returncode == 0, got.stderr
        heads = [ln.split(" Table ")[0] for ln in got.stdout.splitlines()
                 if ln and not ln.startswith(" ")]  # "<benchmark> Table <id>: <title>"
        assert heads == want, got.stdout[:500]


def test_evaluate_only_rows_print_the_command_the_executor_runs(tmp_path, monkeypatch):
    """At --scale smoke the owner selects nothing (select.metric=): the printed command and
    the executor both evaluate the step the owner reports, which that owner has."""
    from flax import nnx

    from tests.trainer.fake_run import write_run
    from vnr import evaluate, run_reader, selection
    from vnr.reproduce import execute, runconfig

    p = plan.make(registry.load("moviepuzzle"), "smoke", tmp_path)
    run = p.runs["t3-cosine-shot"]
    owner = tmp_path / run.owner
    config = runconfig.build(p, p.runs[run.owner], plan.environment(), str(tmp_path / "_data"))
    assert config.select.metric == ""
    write_run(owner, lambda s: nnx.Linear(2, 2, rngs=nnx.Rngs(s)), {2: 0.0, 4: 0.0},
              {"metric": ""}, reported=4)
    (owner / "config.json").write_text(config.to_json_best_effort())
    printed = plan.command_line(p, run)
    assert " --step selected " in printed

    def fake(cfg, workdir, step):  # what vnr.evaluate resolves that step to
        chosen = run_reader.run_step(workdir, step, "--workdir", cfg.select, "--step")
        return {"test_in_domain": {"os2": 1.0}, "selection": chosen.record}

    monkeypatch.setattr(evaluate, "evaluate", fake)
    said: list[str] = []
    assert execute.execute(p, [run], plan.environment(), None, said.append) == []
    assert f"  {printed}" in said
    got = (tmp_path / run.id / "results.json").read_text()
    assert '"step": 4' in got and '"mode": "last"' in got
    with pytest.raises(selection.StepError, match="selects no step"):  # the old `--step best`
        run_reader.run_step(owner, "best", "--workdir", config.select, "--step")
