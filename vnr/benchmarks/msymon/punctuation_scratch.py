"""A punctuation run where no XLM-R checkpoint is at hand (ours; the paper fine-tunes XLM-R
large on Wiki-40B, Appendix C): a corpus from the release's own punctuated narration and a
small randomly initialised XLM-R-shaped encoder with a tokenizer of one id per unit.

    python -m vnr.benchmarks.msymon.tools punctuation_corpus --manual_dir RELEASE \
        --data_dir D --lang ch --out CORPUS.txt
    python -m vnr.benchmarks.msymon.tools scratch_encoder --corpus CORPUS.txt --out ENC
    python -m vnr.train --config configs/msymon/main.py:punctuation --workdir RUN \
        --config.data.corpus=CORPUS.txt --config.model.encoder=ENC \
        --config.total_steps=600 --config.warmup_steps=50 --config.lr=1e-3
    python -m vnr.benchmarks.msymon.tools punctuate --run RUN --encoder ENC \
        --corpus CORPUS.txt --show 4

The corpus is every sentence of the language's annotated splits, one per line (the
punctuation task cuts lines into its own train / val / test by CRC32, so `--show` prints
lines the run never trained on). The encoder's weights are random: a run from it learns
punctuation from the corpus alone, a scratch model for checking the path and the labels
(e.g. per character in Chinese), not the paper's restorer.
"""

from __future__ import annotations

import pathlib

from vnr.benchmarks.msymon import punctuation

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # XLM-R's ids 0-3: bos, pad, eos, unk


def corpus(data_dir: str, manual_dir: str, lang: str, out: pathlib.Path) -> dict[str, int]:
    """Writes the narration sentences of `lang`'s annotated splits (text_only build of the
    release) to `out`, one per line; counts per split and lines."""
    from tfds_builders import msymon

    splits = [s for s in msymon.split_names("text_only", data_dir, manual_dir)
              if s.startswith(f"{lang}_") and not s.endswith("_weak")]
    if not splits:
        raise ValueError(f"{manual_dir}: no annotated split of language {lang!r}")
    counts: dict[str, int] = {}
    lines = []
    for split in splits:
        recs = msymon.data_source("text_only", split, data_dir, manual_dir, build=False)
        got = [" ".join(s.split()) for rec in recs for s in rec["sentences"] if s.strip()]
        counts[split] = len(got)
        lines += got
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts["lines"] = len(lines)
    return counts


def scratch_encoder(corpus_path: pathlib.Path, out: pathlib.Path, width: int = 128,
                    layers: int = 2, heads: int = 4, max_tokens: int = 128, seed: int = 0
                    ) -> dict[str, int]:
    """Writes to `out` a random XLM-R-shaped Flax checkpoint and a tokenizer with one id per
    lower-cased unit of the corpus (`punctuation.units`; others are <unk>); a
    `model.encoder` for `main.py:punctuation` whose `data.max_tokens` is <= `max_tokens`."""
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    text = corpus_path.read_text(encoding="utf-8")
    vocab = sorted({u.lower() for line in text.splitlines() for u, *_ in punctuation.units(line)})
    if not vocab:
        raise ValueError(f"{corpus_path}: no words or characters to build a vocabulary from")
    ids = {t: i for i, t in enumerate([*SPECIALS, *vocab])}
    cfg = tf.XLMRobertaConfig(vocab_size=len(ids), hidden_size=width,
                              num_hidden_layers=layers, num_attention_heads=heads,
                              intermediate_size=4 * width,
                              max_position_embeddings=max_tokens + 2, type_vocab_size=1,
                              bos_token_id=0, pad_token_id=1, eos_token_id=2)
    out.mkdir(parents=True, exist_ok=True)
    tf.FlaxXLMRobertaModel(cfg, seed=seed).save_pretrained(out)
    core = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # a unit is one piece
    tf.PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", cls_token="<s>",
                               eos_token="</s>", sep_token="</s>", pad_token="<pad>",
                               unk_token="<unk>").save_pretrained(out)
    return {"vocab": len(ids), "width": width, "layers": layers, "max_tokens": max_tokens}
