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
