"""Translate a release to English (the `translate` regimes of §5.2) with a local seq2seq model.

    python -m vnr.benchmarks.msymon.translate --src RELEASE --out RELEASE_EN \
        --model DIR | --model ch=DIR --model es=DIR ... \
        [--src_code ch=zh_CN ...] [--forced_bos en_XX] [--batch_size 16] [--num_beams 1]

Writes `RELEASE_EN/annotations/<lang>/{train,val,test}.json` and
`RELEASE_EN/subtitles/<lang>/<id>.json` with every `text` translated and every other field
(times, matched, ids) unchanged, copies English files as they are, links `features/` and
`videos/` and copies `movies.json`: the result is a release the builder reads like the original (the
`translate` configs build it under data/tfds_translated). A file already in `--out` with as
many sentences as its source is kept (resumable); one whose count differs is counted as
`translated_count_mismatch`, named, and translated again.

Models: the paper's NLLB-200 (a Hugging Face directory of facebook/nllb-200-*, e.g.
nllb-200-distilled-600M: `model_type` m2m_100, run by vnr's NNX port
`vnr.models.encoders.m2m100`; each language's source code defaults to NLLB's (`NLLB_CODES`:
ch = zho_Hans, ...) and the target to eng_Latn), or any other local seq2seq checkpoint that
transformers loads with `FlaxAutoModelForSeq2SeqLM` (Marian opus-mt-*-en, mBART-50, T5/mT5,
BART, Pegasus), with its tokenizer. `--src_code <lang>=<code>` sets `tokenizer.src_lang`
and `--forced_bos <code>` the target language token (mBART-50: `en_XX`). Decoding (the paper
is silent): greedy (`--num_beams 1`, transformers' default; `vnr.ops.beam_decode` with one
beam is exactly greedy), at most `--max_length` tokens a sentence counting the decoder's
start token as transformers does, the source cut there too.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import pathlib
import shutil
import sys
from collections.abc import Callable
from typing import Any

from absl import flags

from tfds_builders.msymon import LANGUAGES, SPLITS
from vnr import cli, progress

Translator = Callable[[list[str]], list[str]]
# M-SYMON's languages as NLLB-200's FLORES-200 codes (Chinese: the simplified script)
NLLB_CODES = {"en": "eng_Latn", "ch": "zho_Hans", "es": "spa_Latn", "fr": "fra_Latn",
              "pt": "por_Latn", "hi": "hin_Deva", "ru": "rus_Cyrl"}


def model_type(model_dir: str) -> str:
    """config.json's model_type of a local checkpoint directory ('' without one)."""
    path = pathlib.Path(model_dir) / "config.json"
    try:
        return str(json.loads(path.read_text()).get("model_type", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def nllb_translator(model_dir: str, src_code: str | None = None, forced_bos: str | None = None,
                    batch_size: int = 16, max_length: int = 128, num_beams: int = 1
                    ) -> Translator:
    """A function translating a list of sentences with NLLB-200 (an M2M100 checkpoint) on
    vnr's NNX port: the source code set on the tokenizer, the target code forced first."""
    import numpy as np
    from transformers import AutoTokenizer

    from vnr.models.encoders import m2m100

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if src_code:
        tok.src_lang = src_code
    target = forced_bos or NLLB_CODES["en"]
    forced = tok.convert_tokens_to_ids(target)
    if forced is None or forced == tok.unk_token_id:
        raise ValueError(f"--forced_bos {target}: not a token of {model_dir}'s tokenizer")
    model = _m2m100(str(pathlib.Path(model_dir).absolute()))

    def gen(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        # transformers' max_length counts the decoder's start token: max_length - 1 new
        return m2m100.generate(model, ids, mask, max_len=max(max_length - 1, 1),
                               beam_size=num_beams, forced_bos=forced)[0]

    return _batched(tok, gen, batch_size, max_length)


@functools.lru_cache(maxsize=1)
def _m2m100(model_dir: str) -> Any:
    """One NLLB model per directory: every language's translator shares it (only the
    tokenizer's source code differs)."""
    from vnr.models.encoders import m2m100

    return m2m100.from_pretrained(model_dir)


def _batched(tok: Any, gen: Callable, batch_size: int, max_length: int) -> Translator:
    """Sentences -> `gen(ids, mask)` token rows -> text, `batch_size` at a time, every batch
    padded to one shape (rows and tokens) so generation compiles once."""
    import numpy as np

    def translate(texts: list[str]) -> list[str]:
        out: list[str] = []
        for i in range(0, len(texts), batch_size):
            chunk = texts[i:i + batch_size]
            enc = tok(chunk + [""] * (batch_size - len(chunk)), return_tensors="np",
                      padding="max_length", truncation=True, max_length=max_length)
            ids = gen(enc["input_ids"], enc["attention_mask"])
            out += [t.strip() for t in tok.batch_decode(np.asarray(ids)[:len(chunk)],
                                                         skip_special_tokens=True)]
        return out

    return translate


def hf_translator(model_dir: str, src_code: str | None = None, forced_bos: str | None = None,
                  batch_size: int = 16, max_length: int = 128, num_beams: int = 1
                  ) -> Translator:
    """A function translating a list of sentences with a local seq2seq checkpoint: NLLB-200
    (M2M100) through `nllb_translator`, any other through transformers' Flax classes."""
    if model_type(model_dir) == "m2m_100":
        return nllb_translator(model_dir, src_code, forced_bos, batch_size, max_length,
                               num_beams)
    from transformers import AutoTokenizer, FlaxAutoModelForSeq2SeqLM

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    try:
        model = FlaxAutoModelForSeq2SeqLM.from_pretrained(model_dir, local_files_only=True)
    except (ValueError, KeyError) as e:
        raise ValueError(f"--model {model_dir}: not a Flax seq2seq architecture ({e}) nor "
                         "NLLB-200 (model_type m2m_100)") from e
    if src_code:
        tok.src_lang = src_code
    kw: dict[str, Any] = {"max_length": max_length, "num_beams": num_beams}
    if forced_bos:
        kw["forced_bos_token_id"] = tok.convert_tokens_to_ids(forced_bos)

    import jax

    gen = jax.jit(lambda ids, mask: model.generate(ids, attention_mask=mask, **kw).sequences)
    return _batched(tok, gen, batch_size, max_length)


def _texts_of(data: Any, kind: str) -> list[str]:
    if kind == "annotations":
        return [e["text"] for entries in data.values() for e in entries]
    return [e["text"] for e in data]


def _with_texts(data: Any, kind: str, texts: list[str]) -> Any:
    it = iter(texts)
    if kind == "annotations":
        return {vid: [{**e, "text": next(it)} for e in entries] for vid, entries in data.items()}
    return [{**e, "text": next(it)} for e in data]


def _files(root: pathlib.Path, lang: str) -> list[tuple[str, pathlib.Path]]:
    ann = [("annotations", root / "annotations" / lang / f"{s}.json") for s in SPLITS]
    subs = sorted((root / "subtitles" / lang).glob("*.json"))
    return [x for x in ann if x[1].is_file()] + [("subtitles", p) for p in subs]


def translate_release(src: pathlib.Path, out: pathlib.Path,
                      translators: dict[str, Translator]) -> collections.Counter:
    """Every non-English file of `src` translated into `out` (module docstring); counts."""
    counts: collections.Counter = collections.Counter()
    for lang in LANGUAGES:
        files, every = _files(src, lang), progress.Every()
        before = counts.copy()
        for i, (kind, path) in enumerate(files):
            every.tick(f"translate {lang}: {i} of {len(files)} files")
            dest = out / path.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                texts = _texts_of(data, kind)
            except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError,
                    AttributeError) as e:
                counts["bad_source"] += 1
                print(f"skipped {path}: bad_source ({type(e).__name__}: {e})", file=sys.stderr)
                continue
            if lang == "en":
                shutil.copyfile(path, dest)
                counts["copied_english"] += 1
                continue
            if dest.is_file():
                try:
                    have = len(_texts_of(json.loads(dest.read_text(encoding="utf-8")), kind))
                except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError,
                        AttributeError):
                    have = -1
                if have == len(texts):
                    counts["kept_existing"] += 1
                    continue
                counts["translated_count_mismatch"] += 1
                print(f"{dest}: {have} sentences, its source {path} has {len(texts)}; "
                      "translating again", file=sys.stderr)
            if lang not in translators:
                raise ValueError(f"no --model for language {lang!r} (needed by {path})")
            new = translators[lang](texts) if texts else []
            if len(new) != len(texts):
                counts["translated_count_mismatch"] += 1
                print(f"skipped {path}: the model returned {len(new)} sentences for "
                      f"{len(texts)}", file=sys.stderr)
                continue
            dest.write_text(json.dumps(_with_texts(data, kind, new), ensure_ascii=False,
                                       indent=0), encoding="utf-8")
            counts["translated_files"] += 1
            counts["translated_sentences"] += len(new)
        if files:
            done = counts - before
            progress.say(f"translate {lang}: {len(files)} files ({done['translated_files']} "
                         f"translated, {done['translated_sentences']} sentences; "
                         f"{done['kept_existing']} kept, {done['copied_english']} copied) in "
                         f"{every.took()}")
    for folder in ("features", "videos"):  # the same footage: per-second features, videos
        if (src / folder).is_dir() and not (out / folder).exists():
            os.symlink((src / folder).resolve(), out / folder)
    if (src / "movies.json").is_file():
        shutil.copyfile(src / "movies.json", out / "movies.json")
    return counts


def _pairs(items: list[str], name: str) -> dict[str, str]:
    bad = [x for x in items if "=" not in x or x.split("=")[0] not in LANGUAGES]
    if bad:
        cli.fail(f"{name} takes <lang>=VALUE with lang in {LANGUAGES}: {bad}")
    return dict(x.split("=", 1) for x in items)


def _flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("src", None, "the release to translate", required=True, flag_values=fv)
    flags.DEFINE_string("out", None, "the translated release", required=True, flag_values=fv)
    flags.DEFINE_multi_string("model", None, "DIR (one model for every language) or "
                              "<lang>=DIR, repeated", required=True, flag_values=fv)
    flags.DEFINE_multi_string("src_code", [], "<lang>=<tokenizer code>", flag_values=fv)
    flags.DEFINE_string("forced_bos", None, "target language token, e.g. en_XX (NLLB-200: "
                        "eng_Latn by default)",
                        flag_values=fv)
    flags.DEFINE_integer("batch_size", 16, "sentences per generate call", lower_bound=1,
                         flag_values=fv)
    flags.DEFINE_integer("max_length", 128, "longest translation (tokens)", lower_bound=1,
                         flag_values=fv)
    flags.DEFINE_integer("num_beams", 1, "beam width", lower_bound=1, flag_values=fv)


def main(argv: list[str] | None = None) -> int:
    a = cli.parse(argv, "python -m vnr.benchmarks.msymon.translate", __doc__, _flags)
    per_lang = [m for m in a.model if "=" in m]
    shared = [m for m in a.model if "=" not in m]
    models = {lang: shared[0] for lang in LANGUAGES if shared}
    models.update(_pairs(per_lang, "--model"))
    codes = _pairs(a.src_code, "--src_code")
    for lang, d in models.items():  # NLLB-200: the language's FLORES-200 code by default
        if model_type(d) == "m2m_100":
            codes.setdefault(lang, NLLB_CODES[lang])
    translators = {lang: hf_translator(d, codes.get(lang), a.forced_bos, a.batch_size,
                                       a.max_length, a.num_beams)
                   for lang, d in models.items() if lang != "en"}
    counts = translate_release(pathlib.Path(a.src), pathlib.Path(a.out), translators)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
