"""metrics.jsonl after a kill -9: one value per (step, metric), a cut line dropped (#44)."""

import json

import pytest

from vnr.reports.writer import MetricWriter, read_jsonl


def _pairs(path):
    return [(r["step"], k) for r in read_jsonl(path) for k in r if k not in ("step", "time")]


@pytest.mark.faults
def test_a_resumed_run_drops_the_rows_it_replays_and_a_cut_line(tmp_path):
    w = MetricWriter(tmp_path)
    for step in range(1, 7):
        w.write(step, {"train/loss": 1.0 / step})
    w.write(5, {"val/acc": 0.5})
    w.close()
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 7, "train/lo')  # the kill cut this row
    assert len(read_jsonl(tmp_path / "metrics.jsonl")) == 7  # a reader skips the cut line

    w = MetricWriter(tmp_path, start=4)  # the checkpoint at step 4 is restored
    assert w.dropped == 4  # steps 5, 6, val at 5, the cut line
    for step in range(5, 9):
        w.write(step, {"train/loss": 2.0 / step})
    w.close()
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, 9))
    assert rows[4]["train/loss"] == 2.0 / 5 and rows[3]["train/loss"] == 1.0 / 4
    assert len(_pairs(tmp_path / "metrics.jsonl")) == len(set(_pairs(tmp_path /
                                                                     "metrics.jsonl")))


def test_a_value_written_again_for_its_step_replaces_the_old_one(tmp_path):
    """A finished run rerun evaluates its selected step again: the row is not doubled."""
    w = MetricWriter(tmp_path)
    w.write(3, {"train/loss": 1.0, "test/acc": 0.25})
    w.write(4, {"train/loss": 0.5})
    w.close()
    w = MetricWriter(tmp_path, start=4)
    assert w.dropped == 0
    w.write(3, {"test/acc": 0.75})
    w.close()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], sorted(set(r) - {"step", "time"})) for r in rows] == [
        (3, ["train/loss"]), (4, ["train/loss"]), (3, ["test/acc"])]
    assert rows[2]["test/acc"] == 0.75


def test_inactive_writer_touches_nothing(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 9, "x": 1}\n{"cut')
    w = MetricWriter(tmp_path, active=False, start=2)
    w.write(3, {"x": 2})
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 9, "x": 1}\n{"cut'
    assert not (tmp_path / "tb").exists()
