"""The translate command with a tiny Flax BART and word-level tokenizer written here."""

import json

import pytest

from tfds_builders.msymon import synthetic
from vnr.benchmarks.msymon import translate


@pytest.fixture(scope="module")
def tiny_seq2seq(tmp_path_factory):
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    d = tmp_path_factory.mktemp("tiny_bart")
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "a", "b", "c"])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>",
                                     pad_token="<pad>", unk_token="<unk>")
    tok.save_pretrained(d)
    cfg = tf.BartConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2,
                        encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
                        pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        decoder_start_token_id=2, forced_eos_token_id=2)
    tf.FlaxBartForConditionalGeneration(cfg, seed=0).save_pretrained(d)
    return d


@pytest.mark.e2e  # runs a (tiny) seq2seq model: ~50 s on the shared CPU
def test_translate_release_keeps_layout_times_and_counts(tiny_seq2seq, tmp_path, capfd):
    src = synthetic.write_corpus(tmp_path / "src", seed=0, dim=4, languages=("en", "fr"),
                                 sizes={"train": 1, "val": 0, "test": 1, "weak": 1})
    fn = translate.hf_translator(str(tiny_seq2seq), batch_size=8, max_length=6)
    out = tmp_path / "out"
    counts = translate.translate_release(src, out, {"fr": fn})
    assert counts["copied_english"] == 3 + 3  # en: 3 annotation files, 3 subtitle files
    assert counts["translated_files"] == 6 and counts["translated_sentences"] > 0
    said = capfd.readouterr().err  # a line per language with its time (vnr/progress.py)
    assert "translate en: 6 files (0 translated, 0 sentences; 0 kept, 6 copied) in " in said
    assert f"translate fr: 6 files (6 translated, {counts['translated_sentences']} " in said
    a = json.loads((src / "annotations/fr/test.json").read_text())
    b = json.loads((out / "annotations/fr/test.json").read_text())
    assert a.keys() == b.keys()
    for vid in a:
        assert [(e["begin_time"], e["matched"]) for e in a[vid]] == \
            [(e["begin_time"], e["matched"]) for e in b[vid]]
        assert all(isinstance(e["text"], str) for e in b[vid])
    assert (out / "features").resolve() == (src / "features").resolve()
    # Resumable; a stored file whose sentence count differs is named and redone.
    sub = sorted((out / "subtitles/fr").glob("*.json"))[0]
    sub.write_text(json.dumps(json.loads(sub.read_text())[:1]))
    again = translate.translate_release(src, out, {"fr": fn})
    assert again["translated_count_mismatch"] == 1 and again["translated_files"] == 1
    assert again["kept_existing"] == 5
    (src / "annotations/fr/val.json").write_text("{broken")
    assert translate.translate_release(src, out, {"fr": fn})["bad_source"] == 1


def test_nllb_checkpoints_run_on_the_nnx_port(tmp_path):
    """A directory with model_type m2m_100 (NLLB-200's; here the golden tiny M2M100 of
    tests/golden/make_m2m100.py with a word-level tokenizer) translates through
    `vnr.models.encoders.m2m100`: the target code forced first, the same tokens as the
    port's own generate, one line for a target code the tokenizer lacks."""
    import pathlib
    import shutil

    import numpy as np
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    from vnr.models.encoders import m2m100

    d = tmp_path / "nllb"
    shutil.copytree(pathlib.Path(__file__).resolve().parents[2] / "golden" / "m2m100", d)
    words = ["<s>", "<pad>", "</s>", "<unk>", "eng_Latn", "fra_Latn", "x", *"abcdefghij"]
    words += [f"w{i}" for i in range(48 - len(words))]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>",
                                     pad_token="<pad>", unk_token="<unk>",
                                     additional_special_tokens=["eng_Latn", "fra_Latn"])
    tok.save_pretrained(d)
    assert translate.model_type(str(d)) == "m2m_100"
    fn = translate.hf_translator(str(d), batch_size=2, max_length=6)
    texts = ["a b c", "d e", "f g h i"]
    got = fn(texts)
    enc = tok(texts + [""], return_tensors="np", padding="max_length", truncation=True,
              max_length=6)
    seqs, _ = m2m100.generate(m2m100.from_pretrained(d), enc["input_ids"],
                              enc["attention_mask"], max_len=5, forced_bos=4)  # 6 - start
    assert (seqs[:, 0] == 4).all()  # eng_Latn first
    assert got == [t.strip() for t in tok.batch_decode(np.asarray(seqs)[:3],
                                                        skip_special_tokens=True)]
    with pytest.raises(ValueError, match="--forced_bos deu_Latn: not a token of"):
        translate.hf_translator(str(d), forced_bos="deu_Latn")
