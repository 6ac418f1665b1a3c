"""Appendix C punctuation restoration: labels from a punctuated corpus, per-class P/R/F1,
training through the trainer with a tiny XLM-R and word-level tokenizer written here, and
restoring punctuation in subtitle files."""

import json

import numpy as np
import pytest

from configs.msymon.main import get_config
from vnr import train
from vnr.benchmarks.msymon import punctuation as task
from vnr.benchmarks.msymon import tools

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "zeta", "kappa", "sigma"]


def test_labels_and_class_metrics():
    assert task.strip_word("Hello,") == ("hello", 2)
    assert task.strip_word("why?") == ("why", 3)
    assert task.strip_word("फिल्म।") == ("फिल्म", 1)
    assert task.strip_word("plain") == ("plain", 0)
    pred = np.array([[0, 1, 2, 3, 1, -100]])
    labels = np.array([[0, 1, 2, 1, 3, -100]])
    m = task.class_metrics(pred, labels)
    assert m["period_precision"] == 0.5 and m["period_recall"] == 0.5
    assert m["comma_f1"] == 1.0 and m["question_f1"] == 0.0
    assert m["macro_f1"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)


@pytest.fixture(scope="module")
def tiny_xlmr(tmp_path_factory):
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    from vnr.models.encoders.testing import write_tiny_checkpoint

    d = tmp_path_factory.mktemp("tiny_xlmr")
    write_tiny_checkpoint("xlm-roberta", d, "msgpack", seed=3)
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", *WORDS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tf.PreTrainedTokenizerFast(tokenizer_object=core, cls_token="<s>", sep_token="</s>",
                               pad_token="<pad>", unk_token="<unk>").save_pretrained(d)
    return d


@pytest.mark.e2e
def test_train_evaluate_and_restore(tiny_xlmr, tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(120):  # "... sigma," ends a clause; "... omega?" a question
        ws = [WORDS[i] for i in rng.integers(0, 5, 6)]
        lines.append(" ".join(ws[:2]) + " sigma, " + " ".join(ws[2:]) + " omega? kappa.")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    c = get_config("punctuation,smoke")
    c.data.corpus, c.model.encoder = str(corpus), str(tiny_xlmr)
    res = train.run(c, str(tmp_path / "run"))["test"]
    assert set(res) >= {"period_f1", "comma_precision", "question_recall", "macro_f1"}
    assert all(0 <= v <= 1 for v in res.values())
    subs = tmp_path / "release" / "subtitles" / "en"
    subs.mkdir(parents=True)
    (subs / "v.json").write_text(json.dumps([{"begin_time": 0, "end_time": 2,
                                              "text": "Alpha sigma beta omega"}]))
    (subs / "bad.json").write_text("{")
    # The restore command with the trained run's weights (through the pretrained hook).
    c.init_from = str(tmp_path / "run")
    counts = tools.punctuate(c, tmp_path / "release", "en", tmp_path / "out")
    assert counts == {"files": 1, "sentences": 1, "bad_subtitles": 1}
    out = json.loads((tmp_path / "out/subtitles/en/v.json").read_text())
    assert [w.rstrip(".,?") for w in out[0]["text"].split()] == ["Alpha", "sigma", "beta",
                                                                  "omega"]
    assert out[0]["begin_time"] == 0 and out[0]["end_time"] == 2
