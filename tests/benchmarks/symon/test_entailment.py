"""SYMON Table 2's symmetric-entailment row: the NNX RoBERTa NLI classifier against
transformers' Flax class, the symmetric cost, the tool end to end, one-line errors."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest
from flax import nnx

from vnr.benchmarks.symon import analysis, entailment


@pytest.mark.parametrize("layout", ["flax-safetensors", "pt-safetensors"])
def test_classifier_matches_flax_roberta_for_sequence_classification(tmp_path, layout):
    ref, params = entailment.write_tiny_classifier(tmp_path, layout=layout, seed=3)
    model, _, cfg, label = entailment.load_nli(str(tmp_path), entailment_label=2)
    assert label == 2 and cfg.num_labels == 3
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 96, size=(3, 11)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 0, 2
    ids[1, 7:] = 1  # padding: RoBERTa positions count only real tokens
    mask = (ids != 1).astype(np.int32)
    want = jax.jit(lambda p, ids, mask: ref(ids, attention_mask=mask, params=p).logits)(
        params, ids, mask)
    got = nnx.jit(lambda m, ids, mask: m(ids, mask, deterministic=True))(model, ids, mask)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5, rtol=1e-5)


def test_entailment_label_from_id2label_and_errors(tmp_path):
    entailment.write_tiny_classifier(tmp_path / "mnli")
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(tmp_path / "mnli"))
    assert entailment.entailment_index(cfg) == 2  # roberta-large-mnli's order
    # Nie et al.'s checkpoint (ynie/roberta-large-snli_mnli_fever_anli_R1_R2_R3-nli) orders
    # its labels entailment, neutral, contradiction (its config.json's id2label, as the
    # configs of models fine-tuned from it repeat): found by name, not by position.
    nie = {0: "entailment", 1: "neutral", 2: "contradiction"}
    entailment.write_tiny_classifier(tmp_path / "nie", id2label=nie,
                                     label2id={v: k for k, v in nie.items()})
    assert entailment.entailment_index(AutoConfig.from_pretrained(str(tmp_path / "nie"))) == 0
    entailment.write_tiny_classifier(tmp_path / "plain", id2label={0: "LABEL_0", 1: "LABEL_1"},
                                     label2id={"LABEL_0": 0, "LABEL_1": 1})
    with pytest.raises(ValueError, match="not an NLI checkpoint") as e:
        entailment.load_nli(str(tmp_path / "plain"))
    assert "\n" not in str(e.value)
    with pytest.raises(FileNotFoundError, match="--nli=") as e:
        entailment.load_nli(str(tmp_path / "missing"))
    assert "\n" not in str(e.value)


def test_symmetric_cost_averages_both_directions():
    p = {("a", "x"): 0.9, ("x", "a"): 0.5, ("a", "y"): 0.0, ("y", "a"): 0.2}
    probs = lambda prem, hyp: np.array([p[(u, v)] for u, v in zip(prem, hyp)])  # noqa: E731
    cost = entailment.symmetric_cost(probs)(["a"], ["x", "y"])
    np.testing.assert_allclose(cost, [[1 - 0.7, 1 - 0.1]])


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    from vnr.benchmarks.symon import smoke_inputs

    root = tmp_path_factory.mktemp("symon_nli")
    smoke_inputs.analysis_inputs(root / "analysis")
    return root / "analysis", entailment.smoke_checkpoint(root / "nli")


def test_entailment_coverage_tool_end_to_end(smoke, capsys):
    inputs, nli = smoke
    probs = entailment.entailment_prober(str(nli))
    p = probs(["the story", "a movie of a story"], ["a movie", "the narration"])
    assert p.shape == (2,) and ((p > 0) & (p < 1)).all()
    out = analysis.main(["entailment", "--config", "synthetic_tiny",
                         "--data_dir", str(inputs / "tfds"), "--wikiplots",
                         str(inputs / "wikiplots"), "--nli", str(nli),
                         "--max_len", "48"])  # the generated sentences' pairs fit
    printed = json.loads(capsys.readouterr().out)
    assert printed["coverage"] == pytest.approx(out["coverage"])
    assert 0.0 <= out["coverage"] <= 100.0 and out["movies"] >= 1
    assert out["plots_without_video_titles"] == ["Nobody Filmed This"]


@pytest.mark.e2e
def test_cost_cache_gives_the_same_coverage_without_the_classifier(smoke, tmp_path, capsys,
                                                                   monkeypatch):
    """`--cost_cache DIR`: the first run stores each video's cost matrix, a rerun with other
    skip costs reads every one back (the classifier is not called), a damaged entry is
    recomputed, and another checkpoint never reads the first one's matrices."""
    inputs, nli = smoke
    cache = tmp_path / "costs"
    argv = ["entailment", "--config", "synthetic_tiny", "--data_dir", str(inputs / "tfds"),
            "--wikiplots", str(inputs / "wikiplots"), "--nli", str(nli), "--max_len", "48",
            "--cost_cache", str(cache)]
    plain = analysis.main(argv[:-2])
    first = analysis.main(argv)
    assert first["coverage"] == pytest.approx(plain["coverage"])
    n = first["cost_cache"]["computed"]
    assert n >= 1 and first["cost_cache"]["hits"] == 0 and len(list(cache.glob("*.npy"))) == n

    def no_classifier(*a, **k):
        raise AssertionError("the classifier ran although every matrix is cached")

    with monkeypatch.context() as m:
        m.setattr(entailment, "symmetric_cost", lambda probs: no_classifier)
        again = analysis.main([*argv, "--delta_a", "0.3", "--delta_b", "0.9"])
    assert again["cost_cache"] == {"dir": str(cache), "hits": n, "computed": 0}
    damaged = sorted(cache.glob("*.npy"))[0]
    damaged.write_bytes(b"not an array")
    assert analysis.main(argv)["cost_cache"]["computed"] == 1
    other = entailment.smoke_checkpoint(tmp_path / "other", seed=1)
    assert analysis.main([*argv[:7], "--nli", str(other), *argv[-4:]])["cost_cache"][
        "hits"] == 0
    capsys.readouterr()


def test_tool_fails_in_one_line_on_a_non_nli_checkpoint(smoke, tmp_path, capsys):
    inputs, _ = smoke
    entailment.write_tiny_classifier(tmp_path, id2label={0: "positive", 1: "negative"},
                                     label2id={"positive": 0, "negative": 1})
    with pytest.raises(SystemExit) as e:
        analysis.main(["entailment", "--data_dir", str(inputs / "tfds"), "--wikiplots",
                       str(inputs / "wikiplots"), "--nli", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "not an NLI checkpoint" in err and "\n" not in err
