"""The task contract (vnr/task.py), the evaluation loop (vnr/evaluation.py) and the
results-table writer (vnr/reports/results.py)."""

from __future__ import annotations

import dataclasses
import types

import jax
import numpy as np
import pytest

from tests.helpers import task_names
from vnr import evaluation, evaluators, sharding
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
                             r"predict, evaluate \(or eval_data and eval_metrics\)"):
        task_lib.check(mod)


def test_hooks_in_the_old_argument_order_are_refused():
    mod = types.ModuleType("old")
    for h in (*task_lib.REQUIRED, "evaluate"):
        setattr(mod, h, lambda config, *a: None)
    mod.loss_fn = lambda model, batch, rngs, config: None
    want = r"loss_fn\(model, batch, rngs, config\) should be loss_fn\(config, model, batch, rngs\)"
    with pytest.raises(task_lib.TaskError, match=want):
        task_lib.check(mod)


def test_the_merged_metric_hooks_are_refused_by_name():
    """`metric_names` / `result_columns` became `metric_columns`: a module still giving them
    is told so, rather than its names and columns being silently ignored."""
    mod = types.ModuleType("older")
    for h in (*task_lib.REQUIRED, "evaluate"):
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


def test_a_half_declared_evaluation_is_named():
    mod = types.ModuleType("half")
    mod.make_model = lambda config, rngs: None
    mod.train_data = lambda config, local_batch, process_index, process_count: None
    mod.loss_fn = lambda config, model, batch, rngs: None
    mod.predict = lambda config, model, batch: None
    mod.eval_data = lambda config, split, max_examples: None
    with pytest.raises(task_lib.TaskError, match=r"half lacks required hook\(s\) evaluate "
                                                 r"\(or eval_data and eval_metrics\)"):
        task_lib.check(mod)
    mod.eval_metrics = lambda config, split, out, report_dir: None
    task_lib.check(mod)


def test_the_evaluation_runs_eval_data_through_predict_into_eval_metrics():
    """`evaluation.evaluate`: the stream's rows through the jitted predict, the stream's text
    columns gathered beside them, the task's metrics of the outputs; a task's own
    `evaluate` replaces all of it."""
    mesh = sharding.make_mesh((-1, 1), ("data", "model"))
    mod = types.ModuleType("vnr.benchmarks.fake.task")
    seen = {}

    def eval_data(config, split, max_examples):
        rows = {"x": np.arange(max_examples, dtype=np.float32),
                "text": np.array([f"t{i}" for i in range(max_examples)], object)}
        stream = evaluation.global_rows(rows, 8)
        return pipeline.EvalStream(stream.batches, stream.n_batches, stream.local_batch,
                                   stream.examples, host_columns=("text",))

    def eval_metrics(config, split, out, report_dir):
        seen.update(split=split, text=list(out["text"]), report_dir=report_dir)
        return {"sum": float(out["y"].sum()), "n": float(len(out))}

    mod.eval_data, mod.eval_metrics = eval_data, eval_metrics
    fn = jax.jit(lambda b: {"y": 3 * b["x"], "valid": b["valid"]})
    got = evaluation.evaluate(mod, None, "val", fn, mesh, max_examples=11, report_dir=None)
    assert got == {"sum": 3.0 * sum(range(11)), "n": 11.0}
    assert seen == {"split": "val", "text": [f"t{i}" for i in range(11)], "report_dir": None}
    mod.evaluate = lambda config, split, predict_fn, mesh, *, max_examples, report_dir: {
        "own": float(max_examples)}
    assert evaluation.evaluate(mod, None, "val", fn, mesh, max_examples=5) == {"own": 5.0}


def test_eval_metrics_reach_another_splits_outputs_once():
    """`SplitOutputs.other(split, cap)`: that split's `eval_data` through the same predict
    function, computed once per (split, cap) however often metrics ask (a threshold tuned on
    the validation split); `SplitOutputs.info`: the stream's."""
    mesh = sharding.make_mesh((-1, 1), ("data", "model"))
    mod = types.ModuleType("vnr.benchmarks.fake.task")
    asked = []

    def eval_data(config, split, max_examples):
        asked.append((split, max_examples))
        start = {"val": 100, "test": 0}[split]
        stream = evaluation.global_rows({"x": np.arange(start, start + 3, dtype=np.float32)}, 8)
        return dataclasses.replace(stream, info=f"{split} layout")

    def eval_metrics(config, split, out, report_dir):
        val = out.other("val", 0)
        assert out.other("val", 0) is val and out.other(split, 5) is out
        assert (out.info, val.info) == ("test layout", "val layout")
        return {"own": float(out["y"].sum()), "val": float(val["y"].sum())}

    mod.eval_data, mod.eval_metrics = eval_data, eval_metrics
    fn = jax.jit(lambda b: {"y": 2 * b["x"], "valid": b["valid"]})
    got = evaluation.evaluate(mod, None, "test", fn, mesh, max_examples=5)
    assert got == {"own": 6.0, "val": 606.0}
    assert asked == [("test", 5), ("val", 0)]


def test_an_evaluator_runs_the_predict_function_it_names():
    """`pred=` picks one of the task's named predict functions (big_vision's evaluators'
    `pred`); a task's own evaluation reaches any by name; an unknown name is one line."""
    mesh = sharding.make_mesh((-1, 1), ("data", "model"))
    fns = {"predict": jax.jit(lambda st, b: {"y": b["x"] + st, "valid": b["valid"]}),
           "twice": jax.jit(lambda st, b: {"y": 2 * b["x"] + st, "valid": b["valid"]})}
    predictor = evaluation.Predictor(fns, 100.0)
    mod = types.ModuleType("vnr.benchmarks.fake.task")
    mod.eval_data = lambda config, split, max_examples: evaluation.global_rows(
        {"x": np.arange(4, dtype=np.float32)}, 8)
    mod.eval_metrics = lambda config, split, out, report_dir: {"sum": float(out["y"].sum())}
    for pred, want in (("predict", 406.0), ("twice", 412.0)):
        e = evaluators.Evaluator("val", mod, ("val",), final=True, pred=pred)
        assert e.run(None, predictor, mesh) == {"val": {"sum": want}}
    np.testing.assert_array_equal(predictor.named("twice")({"x": np.ones(2, np.float32),
                                                           "valid": np.ones(2, bool)})["y"],
                                  [102.0, 102.0])
    with pytest.raises(KeyError, match=r"no predict function 'thrice' \(the task has "
                                       r"predict, twice"):
        predictor.using("thrice")


def test_results_table_columns_and_missing_cells():
    table = results.markdown({"test": {"r1": 0.5, "medr": 3.0}, "val": {"r1": 0.25}},
                             [results.Column("r1", "R@1", "{:.1f}", 100.0),
                              results.Column("medr", "MedR", "{:.1f}")])
    assert table.splitlines() == ["| split | R@1 | MedR |", "|---|---|---|",
                                  "| test | 50.0 | 3.0 |", "| val | 25.0 | - |"]
