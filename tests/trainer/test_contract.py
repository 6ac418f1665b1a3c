"""The task contract (vnr/task.py), the evaluation loop (vnr/evaluation.py) and the
results-table writer (vnr/reports/results.py)."""

from __future__ import annotations

import types

import jax
import numpy as np
import pytest

from tests.helpers import task_names
from vnr import evaluation, sharding
from vnr import task as task_lib
from vnr.data import pipeline
from vnr.reports import results


def test_every_task_module_is_found():
    assert {"moviepuzzle.pairwise", "moviepuzzle.hcmc", "moviepuzzle.synopsis", "symon.order",
            "symon.retrieval", "symon.yms_transfer", "msymon.alignment", "msymon.punctuation",
            "movie101.mcn", "movie101.tng", "sc2st.task"} <= set(task_names())


@pytest.mark.parametrize("name", task_names())
def test_every_task_meets_the_contract(name):
    task_lib.check(task_lib.load(name))


def test_missing_hooks_are_named_before_anything_compiles():
    mod = types.ModuleType("vnr.benchmarks.fake.task")
    mod.make_model = lambda config, rngs: None
    mod.loss_fn = lambda config, model, batch, rngs: None
    with pytest.raises(task_lib.TaskError,
                       match=r"vnr.benchmarks.fake.task lacks required hook\(s\) train_data, "
                             r"predict, evaluate"):
        task_lib.check(mod)


def test_hooks_in_the_old_argument_order_are_refused():
    mod = types.ModuleType("old")
    for h in task_lib.REQUIRED:
        setattr(mod, h, lambda config, *a: None)
    mod.loss_fn = lambda model, batch, rngs, config: None
    want = r"loss_fn\(model, batch, rngs, config\) should be loss_fn\(config, model, batch, rngs\)"
    with pytest.raises(task_lib.TaskError, match=want):
        task_lib.check(mod)


def test_the_merged_metric_hooks_are_refused_by_name():
    """`metric_names` / `result_columns` became `metric_columns`: a module still giving them
    is told so, rather than its names and columns being silently ignored."""
    mod = types.ModuleType("older")
    for h in task_lib.REQUIRED:
        setattr(mod, h, lambda config, *a: None)
    mod.metric_names = lambda config: ("acc",)
    with pytest.raises(task_lib.TaskError, match=r"older: metric_names is part of "
                                                 r"metric_columns\(config\) now"):
        task_lib.check(mod)


def test_unknown_task_is_one_line():
    want = r"task='nope.x': no module vnr/benchmarks/nope/x.py"
    with pytest.raises(task_lib.TaskError, match=want):
        task_lib.load("nope.x")


def test_predict_split_pads_short_and_missing_batches():
    """A shard that runs out early feeds all-padding batches; only valid rows come back,
    in order, and text columns stay on the host."""
    mesh = sharding.make_mesh((-1, 1), ("data", "model"))
    local = 8
    rows = np.arange(11, dtype=np.float32)
    batches = [{"x": rows[:8], "valid": np.ones(8, bool), "text": np.array(["a"] * 8, object)},
               {"x": rows[8:], "valid": np.ones(3, bool), "text": np.array(["b"] * 3, object)}]
    fn = jax.jit(lambda b: {"y": 2 * b["x"], "valid": b["valid"]})
    out = evaluation.predict_split(pipeline.EvalStream(batches, 4, local, 11), fn, mesh,
                                   host_columns=("text",))
    np.testing.assert_array_equal(out["y"], 2 * rows)
    assert list(out["text"]) == ["a"] * 8 + ["b"] * 3
    assert out.first["text"][0] == "a" and len(out) == 11
    assert "y" in out and "z" not in out and out.get("z") is None


def test_predict_split_needs_a_valid_column():
    mesh = sharding.make_mesh((-1, 1), ("data", "model"))
    with pytest.raises(ValueError, match="no `valid` column"):
        evaluation.predict_split(pipeline.EvalStream([{"x": np.zeros(8, np.float32)}], 1, 8, 8),
                                 jax.jit(lambda b: {"y": b["x"]}), mesh)


def test_global_rows_keep_row_order():
    mesh = sharding.make_mesh((-1, 1), ("data", "model"))
    stream = evaluation.global_rows({"x": np.arange(20, dtype=np.float32)}, 8)
    out = evaluation.predict_split(stream, jax.jit(lambda b: {"y": b["x"], "valid": b["valid"]}),
                                   mesh)
    assert (stream.n_batches, stream.local_batch, stream.examples) == (3, 8, 20)
    np.testing.assert_array_equal(out["y"], np.arange(20))


def test_results_table_columns_and_missing_cells():
    table = results.markdown({"test": {"r1": 0.5, "medr": 3.0}, "val": {"r1": 0.25}},
                             [results.Column("r1", "R@1", "{:.1f}", 100.0),
                              results.Column("medr", "MedR", "{:.1f}")])
    assert table.splitlines() == ["| split | R@1 | MedR |", "|---|---|---|",
                                  "| test | 50.0 | 3.0 |", "| val | 25.0 | - |"]
