"""Appendix C punctuation restoration: labels from a punctuated corpus, per-class P/R/F1,
training through the trainer with a tiny XLM-R and word-level tokenizer written here, and
restoring punctuation in subtitle files."""

import json
import re

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


def test_bad_or_empty_split_stops_before_anything_compiles(tiny_xlmr, tmp_path, monkeypatch):
    """A split name the corpus cannot have, or one none of its lines falls in, is one line
    before the model is built (not a traceback at the first evaluation)."""
    from vnr import sharding

    def compiled(*args, **kwargs):
        raise AssertionError("the model was built before the split check")

    monkeypatch.setattr(sharding, "create_sharded", compiled)
    lines = [f"{a} {b}, {c}." for a in WORDS for b in WORDS for c in WORDS[:2]]
    train_only = [x for x in lines if task.split_of(x) == "train"]
    corpus = tmp_path / "corpus.txt"
    for text, override, message in [
        (lines, {"test_splits": ("nope",)}, r"^data.test_splits='nope' is not a split of "
                                            r"data.corpus='.*corpus.txt' \(it has train, val, "
                                            r"test\)$"),
        (train_only, {}, r"^data.corpus='.*corpus.txt' has no line in split\(s\) test, val "),
    ]:
        corpus.write_text("\n".join(text), encoding="utf-8")
        c = get_config("punctuation,smoke")
        c.data.corpus, c.model.encoder = str(corpus), str(tiny_xlmr)
        c.data.update(override)
        with pytest.raises(train.ConfigError, match=message):
            train.run(c, str(tmp_path / "run"))
        assert not (tmp_path / "run" / "config.json").exists()
    c.evals.extra = dict(split="val", every=1)  # a val line is enough again
    corpus.write_text("\n".join(lines), encoding="utf-8")
    task.check_splits(c)


@pytest.mark.e2e
def test_train_evaluate_and_restore(tiny_xlmr, tmp_path, capfd):
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
    assert "punctuate en: 1 files, 1 sentences in " in capfd.readouterr().err
    out = json.loads((tmp_path / "out/subtitles/en/v.json").read_text())
    assert [w.rstrip(".,?") for w in out[0]["text"].split()] == ["Alpha", "sigma", "beta",
                                                                  "omega"]
    assert out[0]["begin_time"] == 0 and out[0]["end_time"] == 2


def _strip(text: str) -> str:
    """The sentence as an auto caption would give it: every punctuation character gone."""
    import unicodedata

    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def _oracle_tokenizer(units: set[str], directory):
    """A word-level tokenizer with one id per unit (each unit is one piece)."""
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", *sorted(units)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tf.PreTrainedTokenizerFast(tokenizer_object=core, cls_token="<s>", sep_token="</s>",
                               pad_token="<pad>", unk_token="<unk>").save_pretrained(directory)
    return tf.PreTrainedTokenizerFast.from_pretrained(directory)


def _oracle(labels: list[int]):
    """A model stand-in that predicts the given labels, unit after unit (ids >= 4)."""
    queue = list(labels)

    def predict(ids: np.ndarray) -> np.ndarray:
        return np.array([[queue.pop(0) if t >= 4 else 0 for t in row] for row in ids])

    return predict


def test_real_chinese_sentences_are_labelled_per_character(shared_data, tmp_path):
    """M-SYMON Chinese narration (the release's ch/train.json): with its punctuation stripped,
    every Han character is a unit with its own label; restoring the original labels (a model
    stand-in) puts full-width marks back after the right characters."""
    import regex

    ann = json.loads((shared_data / "msymon/annotations/ch/train.json").read_text("utf-8"))
    sentences = [e["text"] for v in ann.values() for e in v if e["text"].strip()][:200]
    assert len(sentences) == 200
    tok = _oracle_tokenizer({u.lower() for s in sentences for u, *_ in task.units(s)},
                            tmp_path / "tok")
    han = regex.compile(r"\p{Han}")
    labelled = 0
    for s in sentences:
        orig, plain = task.units(s), task.units(_strip(s))
        assert [u for u, *_ in orig] == [u for u, *_ in plain], s
        assert all(y == 0 for _, y, _, _ in plain)
        assert sum(len(u) == 1 for u, *_ in plain if han.match(u)) == len(han.findall(s))
        assert not any(ch in task.MARKS for u, *_ in orig for ch in u)
        labels = [y for _, y, _, _ in orig]
        labelled += sum(y > 0 for y in labels)
        out = task.restore(tok, _oracle(labels), _strip(s), max_tokens=24)  # several windows
        assert [y for _, y, _, _ in task.units(out)] == labels, (s, out)
        assert "".join(ch for ch in out if ch not in task.MARKS) == _strip(s).strip()
        assert not regex.search(r"\p{Han}[,.?]", out)  # full-width marks after characters
    assert labelled > 300  # commas and full stops inside sentences, not one per chunk


def test_unspaced_chinese_is_labelled_per_character(tmp_path):
    """A generated line in the release's style (no test data needed): one label per
    character, brackets dropped, the restored marks full-width."""
    line = "他来了，我们走吧！（以下简称格雷）你好吗？好。"
    got = [(u, y) for u, y, _, _ in task.units(line)]
    assert got == [("他", 0), ("来", 0), ("了", 2), ("我", 0), ("们", 0), ("走", 0), ("吧", 1),
                   ("以", 0), ("下", 0), ("简", 0), ("称", 0), ("格", 0), ("雷", 0),
                   ("你", 0), ("好", 0), ("吗", 3), ("好", 1)]
    tok = _oracle_tokenizer({u for u, _ in got}, tmp_path)
    plain = _strip(line)
    assert plain == "他来了我们走吧以下简称格雷你好吗好"
    out = task.restore(tok, _oracle([y for _, y in got]), plain, max_tokens=8)
    assert out == "他来了，我们走吧。以下简称格雷你好吗？好。"


def test_other_scripts_are_labelled_per_word():
    ru = "А сейчас пересказ фильма Дикость,приятного просмотра!"
    assert [(u, y) for u, y, _, _ in task.units(ru)][-3:] == [
        ("Дикость", 2), ("приятного", 0), ("просмотра", 1)]  # a glued comma still splits
    hi = "यह आदमी असल में बैंक का मैनेजर था। और उसे पीटने वाले लोग"
    assert [(u, y) for u, y, _, _ in task.units(hi)][6:9] == [("मैनेजर", 0), ("था", 1),
                                                              ("और", 0)]
    en = 'He said: "Wait, the U.S. budget is 3.5 billion?!" Then left.'
    assert [(u, y) for u, y, _, _ in task.units(en)] == [
        ("He", 0), ("said", 2), ("Wait", 2), ("the", 0), ("U.S", 1), ("budget", 0), ("is", 0),
        ("3.5", 0), ("billion", 3), ("Then", 0), ("left", 1)]


@pytest.fixture(scope="module")
def tiny_xlmr_han(tmp_path_factory):
    """A tiny random XLM-R whose tokenizer knows eight Han characters (one id each)."""
    from vnr.models.encoders.testing import write_tiny_checkpoint

    d = tmp_path_factory.mktemp("tiny_xlmr_han")
    write_tiny_checkpoint("xlm-roberta", d, "msgpack", seed=5)
    _oracle_tokenizer(set(HAN), d)
    return d


HAN = "他来了我们走吧好"


@pytest.mark.e2e
def test_chinese_restoration_through_a_trained_run(tiny_xlmr_han, tmp_path):
    """Per-character labels end to end: train the tiny XLM-R (2 steps) on unspaced Chinese
    lines, restore a subtitle file with the run; marks land between characters."""
    rng = np.random.default_rng(1)
    lines = ["".join(rng.choice(list(HAN), 5)) + "，" + "".join(rng.choice(list(HAN), 4)) + "。"
             for _ in range(150)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    c = get_config("punctuation,smoke")
    c.data.corpus, c.model.encoder = str(corpus), str(tiny_xlmr_han)
    res = train.run(c, str(tmp_path / "run"))["test"]
    assert 0 <= res["comma_f1"] <= 1
    ids, labels = task.corpus_examples(str(corpus), task._tokenizer(c), 16, "train")
    assert ((labels == 2).sum(1) == 1).all() and ((labels == 1).sum(1) == 1).all()
    assert ((labels != task.IGNORE).sum(1) == 9).all()  # one label per character
    subs = tmp_path / "release" / "subtitles" / "ch"
    subs.mkdir(parents=True)
    (subs / "v.json").write_text(json.dumps([{"begin_time": 0, "end_time": 2,
                                              "text": "他来了我们走吧"}], ensure_ascii=False))
    c.init_from = str(tmp_path / "run")
    assert tools.punctuate(c, tmp_path / "release", "ch", tmp_path / "out")["sentences"] == 1
    out = json.loads((tmp_path / "out/subtitles/ch/v.json").read_text("utf-8"))[0]["text"]
    assert "".join(ch for ch in out if ch not in task.MARKS) == "他来了我们走吧"
    assert not any(ch in ".,?" for ch in out)  # full-width marks only
    # --show: held-out corpus lines with their stripped input, per-character labels and the
    # restored text, through the same run.
    shown = tools.show_punctuation(c, corpus, 2)
    assert [ln for ln in shown if ln.startswith("[")] == ["[1/2]", "[2/2]"]
    labels = [ln for ln in shown if ln.startswith("labels   : ")]
    assert len(labels) == 2 and all(len(ln.split(": ", 1)[1].split()) == 9 for ln in labels)
    held = [ln for ln in lines if task.split_of(ln) == "test"][:2]
    assert [ln[len("original : "):] for ln in shown if ln.startswith("original")] == held


def test_show_prints_per_character_labels_of_real_chinese(shared_data, tmp_path):
    """`punctuation.show` on a real ch/train.json sentence (the release's test.json is not
    public): the stripped input, one label per character, the model's disagreements with the
    original marked, the restored text."""
    ann = json.loads((shared_data / "msymon/annotations/ch/train.json").read_text("utf-8"))
    s = next(e["text"] for v in ann.values() for e in v if "《" in e["text"])
    found = task.units(s)
    tok = _oracle_tokenizer({u.lower() for u, *_ in found}, tmp_path)
    right = [y for _, y, _, _ in found]
    lines = task.show(tok, _oracle(right), s, max_tokens=32)
    assert lines[0] == f"original : {s}" and lines[1] == f"stripped : {_strip(s)}"
    cells = lines[2].removeprefix("labels   : ").split()
    assert cells == [f"{u}/{task.CODE[y]}" for u, y, _, _ in found]
    assert f"{len(found)} of {len(found)} units labelled as in the original" in lines[3]
    plain = [(u, y, a, b) for (u, _, a, b), y in zip(task.units(_strip(s)), right, strict=True)]
    assert lines[4] == "restored : " + task.with_marks(_strip(s), plain)
    assert lines[4].removeprefix("restored : ") == s.replace("《", "").replace("》", "").strip()
    wrong = [0] * len(right)  # a model that predicts nothing: every mark shown as missed
    cells = task.show(tok, _oracle(wrong), s, max_tokens=32)[2].split()[2:]
    assert sum(c.endswith(("(p)", "(c)", "(q)")) for c in cells) == sum(y > 0 for y in right)


def test_scratch_encoder_and_corpus(shared_data, tmp_path):
    """The corpus of a language's annotated sentences (the real release) and a random
    encoder whose tokenizer gives every unit of it one id: what a scratch punctuation run
    needs where no XLM-R checkpoint is at hand."""
    from vnr.benchmarks.msymon import punctuation_scratch as scratch
    from vnr.models.encoders import tokenizers, towers

    corpus = tmp_path / "ch.txt"
    counts = scratch.corpus(str(tmp_path / "tfds"), str(shared_data / "msymon"), "ch", corpus)
    lines = corpus.read_text("utf-8").splitlines()
    assert counts["lines"] == len(lines) == counts["ch_train"] + counts["ch_val"] > 500
    small = tmp_path / "small.txt"
    small.write_text("\n".join(lines[:20]), encoding="utf-8")
    info = scratch.scratch_encoder(small, tmp_path / "enc", width=16, layers=1, max_tokens=32)
    assert towers.is_checkpoint(str(tmp_path / "enc"))
    tok = tokenizers.load_tokenizer(str(tmp_path / "enc"))
    units = {u.lower() for ln in lines[:20] for u, *_ in task.units(ln)}
    assert info["vocab"] == len(units) + 4
    ids = [tok(u, add_special_tokens=False)["input_ids"] for u in sorted(units)]
    assert all(len(i) == 1 and i[0] >= 4 for i in ids) and len({i[0] for i in ids}) == len(units)
    with pytest.raises(ValueError, match="no annotated split of language 'xx'"):
        scratch.corpus(str(tmp_path / "tfds"), str(shared_data / "msymon"), "xx", corpus)


def test_punctuate_command_says_what_it_needs(tmp_path, capsys):
    """One error line, before anything is built: --show without --corpus, neither subtitles
    nor --show; scratch_encoder on a corpus that does not exist."""
    base = ["punctuate", "--run", str(tmp_path), "--encoder", str(tmp_path)]
    for extra, want in ((["--show", "2"], "--show prints held-out lines of --corpus"),
                        ([], "punctuate restores --src's subtitles of --lang")):
        with pytest.raises(SystemExit) as e:
            tools.main(base + extra)
        assert e.value.code == 2 and want in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        tools.main(["scratch_encoder", "--corpus", str(tmp_path / "none.txt"), "--out",
                    str(tmp_path / "enc")])
    assert e.value.code == 2  # bad input, as every tool's error line
    assert re.match(r"error: scratch_encoder: .*No such file.*none\.txt", capsys.readouterr().err)
