"""Punctuation restoration (M-SyMoN Appendix C, Tables 8-9): a token classifier predicting,
after every word, nothing / period / comma / question mark.

    python -m vnr.train --config configs/msymon/main.py:punctuation --workdir DIR \
        --config.data.corpus=CORPUS.txt --config.model.encoder=XLMR_DIR
    python -m vnr.benchmarks.msymon.tools punctuate --run DIR --src RELEASE --lang <l>

Data: a plain-text corpus with punctuation, one paragraph per line (the paper: Wiki-40B).
A line is cut into units (`units`): in scripts written without spaces (Chinese: Han; and
Japanese kana) every character is a unit, elsewhere a unit is a word (letters, marks and
digits, with inner apostrophes, hyphens and dots such as "U.S" or "3.5"; a comma or other mark
glued between two words separates them). A unit's label is the punctuation that follows it
(`.` `!` `।` `。` `！` -> period, `,` `，` `、` `;` `:` `；` `：` -> comma, `?` `？` -> question;
the strongest when several follow: question > period > comma; folding "!" and ";" into the
three classes is the paper's, the order ours); other punctuation (quotes, brackets, `#`, `@`)
is removed, as in the paper. The model sees the units without any punctuation and
lower-cased (as auto captions come). Each unit is tokenized on its own with the encoder's
tokenizer (a Chinese character becomes its own word-initial piece: ours, the paper does not
say how it labels unspaced scripts); the label sits on its last sub-word, the other positions
are ignored. Every M-SYMON language but Chinese is written with spaces between words (Hindi's
danda `।` is a period). Lines are
split by the CRC32 of their text: 10% test, 10% val, the rest train (ours; the paper built
its evaluation set from Wikipedia plot summaries, not provided). Lines longer than
`data.max_tokens` are cut into consecutive windows of whole words.

Model: the checkpoint encoder (`model.encoder`, the paper's XLM-R large; built by `make_model`,
weights through the `pretrained` hook) + a linear layer on every token. Loss: token cross
entropy. Metrics (Table 8): precision, recall and F1 per class and their macro mean.
"""

from __future__ import annotations

import pathlib
import unicodedata
import zlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import regex
from flax import nnx

from vnr import config as config_lib
from vnr import evaluation
from vnr import task as task_lib
from vnr.data import pipeline
from vnr.reports import results as results_lib

CLASSES = ("none", "period", "comma", "question")
PER_CLASS = ("precision", "recall", "f1")  # reported per class (not "none") as <class>_<m>
MARKS = {".": 1, "!": 1, "।": 1, "。": 1, "！": 1, ",": 2, "，": 2, "、": 2, ";": 2, ":": 2,
         "；": 2, "：": 2, "?": 3, "？": 3}
STRENGTH = {0: 0, 2: 1, 1: 2, 3: 3}  # several marks after a unit: question > period > comma
SYMBOL = {1: ".", 2: ",", 3: "?"}
CODE = {0: "-", 1: "p", 2: "c", 3: "q"}  # a label in printouts: none, period, comma, question
SYMBOL_WIDE = {1: "。", 2: "，", 3: "？"}  # after a Han / kana character
SYMBOL_DEVANAGARI = {1: "।", 2: ",", 3: "?"}
IGNORE = -100
_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\u30fc"
_UNIT = regex.compile(
    rf"[{_UNSPACED}]\p{{M}}*"
    rf"|[\p{{L}}\p{{M}}\p{{N}}--[{_UNSPACED}]]+"
    rf"(?:(?:['’\-]|\.(?=[\p{{L}}\p{{N}}]))[\p{{L}}\p{{M}}\p{{N}}--[{_UNSPACED}]]+)*", regex.V1)
_WIDE = regex.compile(rf"[{_UNSPACED}]")
_DEVANAGARI = regex.compile(r"\p{Devanagari}")


def strip_punctuation(text: str) -> str:
    """`text` as an auto caption gives it: every punctuation character (Unicode P*) gone."""
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def strip_word(word: str) -> tuple[str, int]:
    """(the word without its trailing marks, lower-cased; its class)."""
    label = 0
    while word and word[-1] in MARKS:
        label = label or MARKS[word[-1]]
        word = word[:-1]
    return word.lower(), label


def units(text: str) -> list[tuple[str, int, int, int]]:
    """(unit, label, start, end) of every unit of `text` (module docstring)."""
    found = list(_UNIT.finditer(text))
    out = []
    for i, m in enumerate(found):
        gap = text[m.end():found[i + 1].start() if i + 1 < len(found) else len(text)]
        label = max((MARKS.get(ch, 0) for ch in gap), key=STRENGTH.get, default=0)
        out.append((m.group(0), label, m.start(), m.end()))
    return out


SPLITS = ("train", "val", "test")


def split_of(line: str) -> str:
    """The split of a corpus line (stripped): test 10%, val 10%, train 80%, by CRC32."""
    h = zlib.crc32(line.encode()) % 10
    return "test" if h == 0 else "val" if h == 1 else "train"


def encode_words(tok: Any, words: list[str], labels: list[int], max_tokens: int
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Windows of (ids [max_tokens], labels [max_tokens]) over whole words; padding id 0
    is fixed by the tokenizer's pad id, labels IGNORE off the words' last sub-words."""
    pieces = [tok(w, add_special_tokens=False)["input_ids"] or [tok.unk_token_id]
              for w in words]
    bos = [tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id]
    eos = [tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    room = max_tokens - 2
    out, ids, labs = [], [], []

    def flush():
        if ids:
            row = np.full(max_tokens, pad, np.int32)
            lab = np.full(max_tokens, IGNORE, np.int32)
            seq = bos + ids + eos
            row[:len(seq)] = seq
            lab[1:1 + len(labs)] = labs
            out.append((row, lab))

    for p, y in zip(pieces, labels, strict=True):
        p = p[:room]
        if len(ids) + len(p) > room:
            flush()
            ids, labs = [], []
        ids += p
        labs += [IGNORE] * (len(p) - 1) + [y]
    flush()
    return out


def corpus_examples(path: str, tok: Any, max_tokens: int, split: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(ids [N, L], labels [N, L]) of the corpus lines of `split` (ValueError if none)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or split_of(line) != split:
                continue
            found = units(line)
            if found:
                rows += encode_words(tok, [u.lower() for u, *_ in found],
                                     [y for _, y, _, _ in found], max_tokens)
    if not rows:
        raise ValueError(f"data.corpus={path!r} has no line in split {split!r} (lines go to "
                         "test / val / train by CRC32: 10% / 10% / 80%)")
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


class Restorer(nnx.Module):
    """Checkpoint encoder + a per-token linear classifier."""

    def __init__(self, encoder: str, rngs: nnx.Rngs):
        from vnr.models.encoders import towers

        self.encoder, hf = towers.build(encoder, None, rngs)
        self.head = nnx.Linear(hf.hidden_size, len(CLASSES), rngs=rngs)
        self.pad_id = int(getattr(hf, "pad_token_id", 0) or 0)

    def __call__(self, ids: jax.Array, *, train: bool) -> jax.Array:
        mask = (ids != self.pad_id).astype(jnp.int32)
        h = self.encoder(ids, mask, deterministic=not train).last_hidden_state
        return self.head(h)


def _tokenizer(config: Any) -> Any:
    from vnr.models.encoders import tokenizers

    return tokenizers.load_tokenizer(tokenizers.resolve(config.model.encoder))


def validate(config: Any) -> None:
    from vnr.models.encoders import towers

    if config.total_steps == 0 and config.get("init_from"):
        return  # restoring with a trained run: no corpus needed
    if not config.data.corpus or not pathlib.Path(config.data.corpus).is_file():
        raise ValueError(f"data.corpus={config.data.corpus!r}: a plain-text file, one "
                         "punctuated paragraph per line")
    if not towers.is_checkpoint(config.model.encoder):
        raise ValueError(f"model.encoder={config.model.encoder!r}: a local checkpoint "
                         "directory (XLM-R in the paper) with its tokenizer")
    config_lib.fits_positions(config, "data.max_tokens", "model.encoder")


def check_splits(config: Any) -> None:
    """Every split evaluated (`data.val_split`, `data.test_splits`, every evaluator's) is one
    of `SPLITS` and holds a line of `data.corpus` (read until each has one), so a bad split
    stops before training, not at its first evaluation."""
    task_lib.require_splits(config, SPLITS, f"data.corpus={config.data.corpus!r}")
    if config.total_steps == 0 and config.get("init_from"):
        return  # restoring with a trained run: no corpus (see `validate`)
    wanted = {"train"} if config.total_steps else set()
    wanted |= {config.data.val_split, *config.data.test_splits, *(
        s for e in (config.get("evals") or {}).values()
        for s in ((e.get("split"),) if e.get("split") else e.get("splits") or ()))}
    with open(config.data.corpus, encoding="utf-8") as f:
        for line in f:
            if (line := line.strip()) and units(line):
                wanted.discard(split_of(line))
                if not wanted:
                    return
    raise ValueError(f"data.corpus={config.data.corpus!r} has no line in split(s) "
                     f"{', '.join(sorted(wanted))} (lines go to test / val / train by CRC32: "
                     "10% / 10% / 80%)")


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """A run's whole model (`init_from`, e.g. to restore punctuation), else the encoder."""
    from vnr import pretrained as pretrained_lib

    if config.get("init_from"):
        return {"": pretrained_lib.run_source(config.init_from,
                                              config.get("init_step", "selected"))}
    return {"encoder": (config.model.encoder, None)}


def make_model(config: Any, rngs: nnx.Rngs) -> Restorer:
    return Restorer(config.model.encoder, rngs)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    """Endless reshuffled batches of the corpus's train windows (a grain iterator, so the
    trainer checkpoints its position)."""
    from vnr.data import pipeline

    ids, labels = corpus_examples(config.data.corpus, _tokenizer(config),
                                  config.data.max_tokens, "train")
    rows = [{"ids": i, "labels": y} for i, y in zip(ids, labels, strict=True)]
    return pipeline.train_stream(rows, [], local_batch, config.seed, process_index,
                                 process_count)


def loss_fn(config: Any, model: Restorer, batch: dict, rngs: nnx.Rngs):
    logits = model(batch["ids"], train=True)
    labels = batch["labels"]
    ok = labels != IGNORE
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    nll = -jnp.take_along_axis(logp, jnp.clip(labels, 0)[..., None], -1)[..., 0]
    n = jnp.maximum(ok.sum(), 1)
    acc = jnp.where(ok, logits.argmax(-1) == labels, False).sum() / n
    return jnp.where(ok, nll, 0.0).sum() / n, {"token_accuracy": acc}


def predict(config: Any, model: Restorer, batch: dict) -> dict[str, jax.Array]:
    return {"pred": model(batch["ids"], train=False).argmax(-1).astype(jnp.int32),
            "labels": batch["labels"], "valid": batch["valid"]}


def class_metrics(pred: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Precision / recall / F1 of every punctuation class (Table 8) and their macro mean."""
    ok = labels != IGNORE
    out: dict[str, float] = {}
    for k in range(1, len(CLASSES)):
        tp = float(((pred == k) & (labels == k) & ok).sum())
        p = tp / max(float(((pred == k) & ok).sum()), 1.0)
        r = tp / max(float(((labels == k) & ok).sum()), 1.0)
        f = 2 * p * r / (p + r) if p + r else 0.0
        out.update({f"{CLASSES[k]}_{m}": v for m, v in zip(PER_CLASS, (p, r, f), strict=True)})
    out["macro_f1"] = float(np.mean([out[f"{c}_f1"] for c in CLASSES[1:]]))
    return out


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports: P/R/F1 per punctuation class, then their macro F1."""
    return results_lib.cols((*(f"{c}_{m}" for c in CLASSES[1:] for m in PER_CLASS),
                             "macro_f1"))


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """The corpus's `split` windows, the same rows on every process."""
    ids, labels = corpus_examples(config.data.corpus, _tokenizer(config),
                                  config.data.max_tokens, split)
    if max_examples:
        ids, labels = ids[:max_examples], labels[:max_examples]
    return evaluation.global_rows({"ids": ids, "labels": labels}, config.eval_batch_size)


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None) -> dict[str, float]:
    """Per-class and macro F1 of the predicted punctuation."""
    del report_dir  # no picture
    return class_metrics(np.asarray(out["pred"]), np.asarray(out["labels"]))


def _symbol(unit: str, label: int) -> str:
    if not label:
        return ""
    if _WIDE.search(unit):
        return SYMBOL_WIDE[label]
    return (SYMBOL_DEVANAGARI if _DEVANAGARI.search(unit) else SYMBOL)[label]


def predict_labels(tok: Any, predict_words: Callable[[np.ndarray], np.ndarray], text: str,
                   max_tokens: int) -> list[tuple[str, int, int, int]]:
    """`units(text)` with the model's labels instead of the text's own marks."""
    found = units(text)
    rows = encode_words(tok, [u.lower() for u, *_ in found], [0] * len(found), max_tokens)
    marks: list[int] = []
    for ids, lab in rows:
        pred = predict_words(ids[None])[0]
        marks += [int(p) for p, y in zip(pred, lab, strict=True) if y != IGNORE]
    return [(u, m, a, b) for (u, _, a, b), m in zip(found, marks, strict=True)]


def restore(tok: Any, predict_words: Callable[[np.ndarray], np.ndarray], text: str,
            max_tokens: int) -> str:
    """`text` with the predicted marks after its units (its own marks removed; other
    characters, spacing included, kept): "，。？" after Chinese characters, "।" as the
    period after Devanagari, ". , ?" elsewhere."""
    return with_marks(text, predict_labels(tok, predict_words, text, max_tokens))


def with_marks(text: str, found: list[tuple[str, int, int, int]]) -> str:
    """`text` with the labels of its units `found` written as marks (its own removed)."""
    if not found:
        return text
    out = [text[:found[0][2]]]
    for i, (unit, label, _, end) in enumerate(found):
        nxt = found[i + 1][2] if i + 1 < len(found) else len(text)
        gap = "".join(ch for ch in text[end:nxt] if ch not in MARKS)
        out.append(unit + _symbol(unit, label) + gap)
    return "".join(out).strip()


def show(tok: Any, predict_words: Callable[[np.ndarray], np.ndarray], text: str,
         max_tokens: int) -> list[str]:
    """Printable lines of one punctuated `text`: the text, its stripped input, every unit with
    its predicted label (`CODE`) and, where it differs, its label in `text` ("爱/-(c)"), and
    the restored text."""
    plain = strip_punctuation(text)
    got = predict_labels(tok, predict_words, plain, max_tokens)
    want = [y for _, y, _, _ in units(text)]
    if len(want) == len(got):
        cells = [f"{u}/{CODE[y]}" + (f"({CODE[w]})" if w != y else "")
                 for (u, y, _, _), w in zip(got, want, strict=True)]
        hits = sum(y == w for (_, y, _, _), w in zip(got, want, strict=True))
        note = f"{hits} of {len(got)} units labelled as in the original"
    else:  # a mark inside a unit (e.g. "U.S"): the units differ, no per-unit target
        cells = [f"{u}/{CODE[y]}" for u, y, _, _ in got]
        note = "the original's units differ (a mark inside a word): no per-unit target"
    return [f"original : {text}", f"stripped : {plain}", f"labels   : {' '.join(cells)}",
            f"           ({note}; -/p/c/q = none/period/comma/question, (x) = the "
            "original's label where the model's differs)",
            f"restored : {with_marks(plain, got)}"]
