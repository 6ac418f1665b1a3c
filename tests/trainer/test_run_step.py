"""Readers of another run take the step the run reports (its model selected by validation),
not its newest checkpoint, unless told otherwise (`selected | best | last | N`, one chooser:
`vnr.selection.choose_step`): `vnr.run_reader.restore_run`, `init_from` through the trainer's
`pretrained` hook, `vnr.evaluate.from_config` (M-SYMON's evaluate / crosslingual tools) and
the SYMON -> YMS zero-shot source."""

from __future__ import annotations

import pathlib

import ml_collections
import numpy as np
import pytest
from flax import nnx

from tests import ROOT
from tests.trainer.fake_run import params, write_run
from vnr import checkpoint, evaluate, pretrained, run_reader, selection, train
from vnr import config as config_lib

BEST_FIRST = {2: 0.9, 4: 0.1}  # val metric by step: the best (2) is not the newest (4)
SELECT = {"metric": "val/f1", "mode": "max"}


def _linear_run(workdir: pathlib.Path, select=SELECT, reported: int | None = 2):
    return write_run(workdir, lambda step: nnx.Linear(4, 3, rngs=nnx.Rngs(step)), BEST_FIRST,
                     select, reported)


def _same(got: dict, want: dict) -> bool:
    return set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want)


def test_restore_run_reads_the_reported_step_unless_told(tmp_path):
    saved = _linear_run(tmp_path)
    flat = {k: {".".join(map(str, p)): v for p, v in ps.items()} for k, ps in saved.items()}
    for step, want in (("selected", 2), ("best", 2), ("last", 4), ("4", 4), (2, 2)):
        n, got = run_reader.restore_run(tmp_path, step=step)
        assert n == want and _same(got, flat[want]), step
    chosen = run_reader.run_step(tmp_path)
    assert chosen.why == "the step its results.json reports: best val/f1 = 0.9 (max)"
    assert chosen.record == {"metric": "val/f1", "mode": "max", "step": 2, "value": 0.9}
    with pytest.raises(selection.StepError, match=rf"^init_from={tmp_path}: step=3: no "
                                                  r"checkpoint of that step \(there are 2, 4\)$"):
        run_reader.restore_run(tmp_path, step="3")
    with pytest.raises(selection.StepError, match=r"step='newest': use selected, best, last"):
        run_reader.run_step(tmp_path, "newest")


def test_a_run_without_results_json_gives_its_best_else_its_newest(tmp_path):
    _linear_run(tmp_path / "unfinished", reported=None)
    chosen = run_reader.run_step(tmp_path / "unfinished")
    assert chosen.step == 2 and chosen.why == "best val/f1 = 0.9 (max); no results.json yet"
    _linear_run(tmp_path / "last", select={"metric": "", "mode": "max"}, reported=None)
    chosen = run_reader.run_step(tmp_path / "last")
    assert chosen.step == 4 and chosen.why.startswith("the newest: no results.json yet")
    with pytest.raises(selection.StepError, match=r"step best: this run selects no step"):
        run_reader.run_step(tmp_path / "last", "best")
    # a run that reports its last step (nothing selects): that step
    _linear_run(tmp_path / "reports_last", select={"metric": "", "mode": "max"}, reported=4)
    assert run_reader.run_step(tmp_path / "reports_last").step == 4


def test_a_reported_step_that_is_gone_is_one_line(tmp_path):
    _linear_run(tmp_path, reported=2)
    (tmp_path / "results.json").write_text((tmp_path / "results.json").read_text().replace(
        '"step": 2', '"step": 3'))
    with pytest.raises(selection.StepError, match=r"step=selected: results.json reports step "
                                                  r"3, but no checkpoint of it is kept .*"
                                                  r"\(there are 2, 4\); give last or a step"):
        run_reader.run_step(tmp_path)
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"results.json is unreadable"):
        run_reader.run_step(tmp_path)


def test_best_names_the_alternative_that_ranked_as_results_json_does(tmp_path):
    """select.metric "a|b": `best` (and `selected` before results.json exists) record the
    alternative the checkpoints were ranked by, as the trainer's results.json does."""
    from vnr import evaluators

    select = {"metric": "val/f1|val/estimated_f1", "mode": "max"}
    write_run(tmp_path, lambda step: nnx.Linear(4, 3, rngs=nnx.Rngs(step)), BEST_FIRST,
              select, reported=None, used="val/estimated_f1")
    want = {"metric": "val/estimated_f1", "mode": "max", "step": 2, "value": 0.9}
    assert run_reader.run_step(tmp_path, "best").record == want
    assert run_reader.run_step(tmp_path).record == want
    with checkpoint.reader(tmp_path / "checkpoints", select["metric"], "max") as mgr:
        assert evaluators.selected_step(mgr, ml_collections.ConfigDict(
            {"select": select, "total_steps": 4})) == want


# ----------------------------------------------------------------------------- consumers


def _msymon(tmp_path: pathlib.Path, run: pathlib.Path, step: str | None = None):
    from configs.msymon.main import get_config

    c = get_config("smoke")
    c.data.data_dir = str(tmp_path / "tfds")
    c.model.update(clip_layers=1, sentence_layers=1, text_layers=1)
    c.init_from = str(run)
    if step is not None:
        c.init_step = step
    return c


def test_msymon_init_from_and_from_config_read_the_best_step(tmp_path, capsys):
    """M-SYMON's two-stage chain (`init_from` through the trainer) and its evaluate /
    crosslingual tools (`vnr.evaluate.from_config`) read the source's selected step."""
    from vnr.benchmarks.msymon import alignment

    run = tmp_path / "run"
    saved = write_run(run, lambda s: alignment.make_model(_msymon(tmp_path, run), nnx.Rngs(s)),
                      BEST_FIRST, SELECT, reported=2)
    model = evaluate.from_config(_msymon(tmp_path, run))
    assert _same(params(model.state, (0,)), saved[2])
    assert model.selection["init_step"] == 2
    out = capsys.readouterr()
    assert (f"pretrained: <model> <- run {run} (step 2: the step its results.json reports: "
            f"best val/f1 = 0.9 (max))") in out.out + out.err
    for step, want in (("last", 4), ("4", 4), ("best", 2)):
        state = train.setup(_msymon(tmp_path, run, step)).state  # a fresh run's init_from
        assert _same(params(state, (0,)), saved[want]), step
    bad = _msymon(tmp_path, run, "7")
    with pytest.raises(train.ConfigError, match=r"init_from=.*step=7: no checkpoint of that "
                                                r"step \(there are 2, 4\)"):
        train.setup(bad)


def test_yms_zero_shot_reads_the_symon_runs_best_step(tmp_path):
    """SYMON Table 9: the retrieval run's model through `yms_transfer.pretrained`."""
    from vnr.benchmarks.symon import yms_transfer

    c = config_lib.load(f"{ROOT / 'configs/symon/yms_transfer.py'}:smoke")
    run = tmp_path / "symon"
    saved = write_run(run, lambda s: yms_transfer.make_model(c, nnx.Rngs(s)), BEST_FIRST,
                      {"metric": "val/v2t_r@5", "mode": "max"}, reported=2)
    c.transfer.source_run = str(run)
    assert yms_transfer.pretrained(c) == {"": (str(run), pretrained.RUN, "selected")}
    assert _same(params(train.setup(c).state, (0,)), saved[2])
    c.transfer.source_step = "last"
    assert _same(params(train.setup(c).state, (0,)), saved[4])
