"""M-SYMON paper rows: the paper's model (no context layers), Eq. 2 as printed, tuned drop
costs reported with their validation size, the §6.5 window on estimated times labelled."""

import logging

import jax
import numpy as np
import pytest
from flax import nnx

from configs.msymon import main, yms
from vnr import evaluation
from vnr import task as task_lib
from vnr.benchmarks.msymon import alignment

PAPER_ROWS = ["multilingual", "translate", "translate_supervision", "paper", "window",
              "multilingual,paper,window", "translate,paper", *(
                  f"{r}:{lang}{extra}" for r in ("individual", "two_stage",
                                                  "two_stage_supervision")
                  for lang in ("en", "ch") for extra in ("", ",paper", ",window"))]
YMS_ROWS = ["supervised", "zeroshot", "zeroshot,dtw", "supervised,phrases"]


def _layers(config) -> tuple[int, int, list[str]]:
    model = nnx.eval_shape(lambda: alignment.make_model(config, nnx.Rngs(0)))
    paths = [".".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(model, nnx.Param))]
    ctx = [p for p in paths if p.startswith(("clip_ctx", "sent_ctx"))]
    return len(model.clip_ctx.blocks), len(model.sent_ctx.blocks), ctx


@pytest.mark.parametrize("arg", [*PAPER_ROWS, *(f"{r},synthetic" for r in PAPER_ROWS[:3])])
def test_every_paper_row_encodes_each_clip_and_sentence_on_its_own(arg):
    assert _layers(main.get_config(arg)) == (0, 0, [])


@pytest.mark.parametrize("arg", YMS_ROWS)
def test_yms_rows_have_no_context_layers(arg):
    assert _layers(yms.get_config(arg)) == (0, 0, [])


def test_context_layers_are_our_named_option():
    clips, sents, params = _layers(main.get_config("individual:en,context"))
    assert (clips, sents) == (2, 1) and params
    assert main.get_config("annotated,context,synthetic").model.clip_layers == 1


def test_eq2_sums_the_two_directions():
    rng = np.random.default_rng(0)
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    v, t = unit(rng.normal(size=(2, 6, 8))), unit(rng.normal(size=(2, 5, 8)))
    batch = {"labels": np.array([[0, 1, -1, 2, 3, -1], [4, -1, 0, 1, -2, 2]]),
             "clip_mask": np.ones((2, 6), bool), "sent_mask": np.ones((2, 5), bool)}
    key = jax.random.key(0)
    total, parts = alignment.info_nce(v, t, batch, key, 0.1, 3)
    mean, _ = alignment.info_nce(v, t, batch, key, 0.1, 3, "mean")
    assert float(total) == pytest.approx(float(parts["loss_c2t"] + parts["loss_t2c"]), rel=1e-6)
    assert float(mean) == pytest.approx(float(total) / 2, rel=1e-6)
    c = main.get_config("smoke")
    assert c.loss.directions == "sum"
    c.loss.directions = "max"
    with pytest.raises(ValueError, match="loss.directions"):
        alignment.validate(c)


def _outputs(videos: int, known: bool, seed: int = 0) -> dict:
    """Outputs of `predict` for `videos` videos of 6 clips and 3 sentences."""
    rng = np.random.default_rng(seed)
    labels = np.tile([0, 0, 1, 1, 2, -1], (videos, 1))
    sim = rng.uniform(-0.2, 0.2, (videos, 6, 3))
    sim[np.arange(videos)[:, None], np.arange(5), labels[:, :5]] += 0.6
    v = rng.normal(size=(videos, 6, 4))
    t = rng.normal(size=(videos, 3, 4))
    begin = np.tile(np.arange(6.0) * 2, (videos, 1))
    return {"sim": sim.astype(np.float32), "v": v, "t": t, "labels": labels,
            "clip_mask": np.ones((videos, 6), bool), "sent_mask": np.ones((videos, 3), bool),
            "clip_begin": begin, "clip_end": begin + 2,
            "narr_begin": np.tile([0.0, 4, 8], (videos, 1)),
            "narr_end": np.tile([4.0, 8, 10], (videos, 1)),
            "narr_known": np.full((videos, 3), known), "matched": np.ones((videos, 3), bool),
            "language": np.zeros(videos, int), "valid": np.ones(videos, bool)}


def _predicted(splits: dict[str, dict], split: str) -> evaluation.SplitOutputs:
    """`split`'s outputs as the trainer's loop hands them to `eval_metrics`; the other
    splits' from `splits`."""
    return evaluation.SplitOutputs(splits[split], None,
                                   other=lambda s, cap: _predicted(splits, s))


def _evaluate(args: str, test: dict, val: dict) -> dict:
    c = main.get_config(f"smoke,annotated,individual:en{args}")
    c.eval.drop_grid = (0.3, 0.7)
    return alignment.eval_metrics(c, "en_test", _predicted({"en_test": test, "en_val": val},
                                                           "en_test"))


def test_tuned_drop_costs_name_their_validation_size(caplog):
    alignment._WARNED.clear()  # noqa: SLF001
    with caplog.at_level(logging.WARNING):
        res = _evaluate("", _outputs(3, True), _outputs(2, True, seed=1))
        _evaluate("", _outputs(3, True), _outputs(2, True, seed=1))
    assert res["tuned_on_videos"] == 2 and res["d_v"] in (0.3, 0.7)
    assert caplog.text.count("tuned for F1 on 2 validation video(s) of en_val (fewer than 10)") == 1
    assert "f1" in res and "estimated_f1" not in res  # no window: nothing estimated
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        res = _evaluate("", _outputs(3, True), _outputs(12, True, seed=1))
    assert res["tuned_on_videos"] == 12 and "validation video" not in caplog.text


def test_window_on_estimated_times_is_labelled(caplog):
    alignment._WARNED.clear()  # noqa: SLF001
    with caplog.at_level(logging.WARNING):
        est = _evaluate(",window", _outputs(3, False), _outputs(12, False))
        _evaluate(",window", _outputs(3, False), _outputs(12, False))
    assert caplog.text.count("uses estimated narration times") == 1
    assert {"estimated_f1", "estimated_clip_accuracy", "estimated_sentence_iou",
            "estimated_f1_video_mean"} <= set(est)
    assert not {"f1", "clip_accuracy", "sentence_iou"} & set(est)
    assert est["estimated_narration_fraction"] == 1.0
    config = main.get_config("smoke,annotated,individual:en,window")
    cols = [col.key for col in task_lib.columns(alignment, config, {"en_test": est})]
    assert cols[:3] == ["estimated_clip_accuracy", "estimated_sentence_iou", "estimated_f1"]
    real = _evaluate(",window", _outputs(3, True), _outputs(12, True))
    assert "f1" in real and real["estimated_narration_fraction"] == 0.0
    assert real["pool_clips"] == 18 and real["queries"] == 9


def test_paper_window_selects_on_the_metric_the_evaluator_reports(caplog):
    """`paper,window` on a release without subtitle times: validation reports only
    `estimated_f1`, and model selection ranks by it (named in results.json and in the window
    warning); with subtitle times it ranks by `f1`. Before, `select.metric="val/f1"` stopped
    the run at its first validation."""
    from vnr import evaluators

    c = main.get_config("smoke,annotated,individual:en,paper,window")
    alignment._WARNED.clear()  # noqa: SLF001
    with caplog.at_level(logging.WARNING):
        est = alignment.eval_metrics(c, c.data.val_split, _predicted(
            {c.data.val_split: _outputs(12, False)}, c.data.val_split))
    assert "f1" not in est and "model selection ranks by val/estimated_f1" in caplog.text
    assert evaluators.ranked({f"val/{k}": v for k, v in est.items()}, c.select) == {
        c.select.metric: est["estimated_f1"], "val/estimated_f1": est["estimated_f1"]}
    real = _evaluate(",paper,window", _outputs(3, True), _outputs(12, True))
    assert evaluators.ranked({f"val/{k}": v for k, v in real.items()}, c.select) == {
        c.select.metric: real["f1"], "val/f1": real["f1"]}
    with pytest.raises(evaluators.EvaluatorError, match="select.metric='val/f1': the evaluat"):
        evaluators.ranked({f"val/{k}": v for k, v in est.items()}, {"metric": "val/f1"})
    assert main.get_config("individual:en,paper").select.metric == "val/f1"


def test_punctuation_paper_row_defaults_to_xlmr_large():
    """Appendix C's model: the punctuation task's default encoder is XLM-R large."""
    assert main.get_config("punctuation").model.encoder == "FacebookAI/xlm-roberta-large"
    assert main.get_config("punctuation,smoke").model.encoder == "FacebookAI/xlm-roberta-large"
