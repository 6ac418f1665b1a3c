"""A generated M-SyMoN-layout corpus whose true alignment is known (for tests and smoke runs).

Stories are built from `NUM_CONCEPTS` shared concepts. Every language names each concept
with its own word (Chinese: one CJK character), so the same story reads differently per
language. A sentence mentions 3 concepts plus 2 filler words; its *embedding* is the sum of
its concepts' fixed random vectors. Per second of video, a feature is

- inside a matched sentence's span: that sentence's embedding + Gaussian noise;
- in unmatched footage: the embedding of 3 concepts the video never mentions + noise.

About 15% of sentences are unmatched (narrated, no footage); about 30% of matched sentences
are preceded by 2-5 s of unmatched footage. Narration (the subtitle timestamps) follows the
footage with a per-video lag in [-3, 3] s and a per-sentence jitter in [-1.5, 1.5] s, as a
voice-over drifts from the pictures, and unmatched sentences are narrated over the
neighbouring footage. So timestamps alone are informative but wrong near boundaries, and the
video features carry the rest.

Files: `annotations/<lang>/{train,val,test}.json`, `subtitles/<lang>/<id>.json` (annotated
and `weak` videos), `features/<id>.npy` [T, dim] at 1 row per second.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

from tfds_builders.msymon.parse import LANGUAGES

CORPUS_VERSION = 1  # bump when the generated content changes
NUM_CONCEPTS = 48
SIZES = {"train": 8, "val": 3, "test": 3, "weak": 2}


def _word(lang: str, k: int) -> str:
    if lang == "ch":
        return chr(0x4E00 + 37 * k + 11)
    letters = "bcdfghjklmnpqrstvwz"
    return lang + letters[k % 19] + "a" + letters[(k // 19) % 19] + "o"


def _filler(lang: str, rng: np.random.Generator) -> str:
    return ["the", "and", "then", "so"][rng.integers(4)] + lang


def concept_vectors(dim: int, seed: int = 0) -> np.ndarray:
    """[NUM_CONCEPTS, dim] fixed concept embeddings."""
    rng = np.random.default_rng(10_000 + seed)
    return rng.normal(size=(NUM_CONCEPTS, dim)).astype(np.float32) / np.sqrt(3.0)


def make_video(rng: np.random.Generator, lang: str, vecs: np.ndarray, noise: float = 0.6,
               text_lang: str | None = None) -> tuple[list[dict], list[dict], np.ndarray]:
    """(annotation entries, subtitle entries, features [T, dim]) of one video; `text_lang`
    writes the same story in another language (a perfect translation; same footage)."""
    lang = text_lang or lang
    n = int(rng.integers(8, 15))
    vocab = rng.choice(NUM_CONCEPTS, size=min(NUM_CONCEPTS, 3 * n + 6), replace=False)
    unused = np.setdiff1d(np.arange(NUM_CONCEPTS), vocab)
    feats, entries, spans = [], [], []
    t = 0
    for _ in range(n):
        concepts = rng.choice(vocab, 3, replace=False)
        words = [_word(lang, int(c)) for c in concepts] + [_filler(lang, rng) for _ in range(2)]
        order = rng.permutation(len(words))
        sep = "" if lang == "ch" else " "
        text = sep.join(words[i] for i in order) + ("。" if lang == "ch" else ".")
        matched = rng.random() > 0.15
        if matched and rng.random() < 0.3:  # unmatched footage first
            g = int(rng.integers(2, 6))
            distract = vecs[rng.choice(unused if len(unused) >= 3 else np.arange(NUM_CONCEPTS),
                                       3, replace=False)].sum(0)
            feats += [distract + noise * rng.normal(size=vecs.shape[1]) for _ in range(g)]
            t += g
        if matched:
            ln = int(rng.integers(4, 10))
            emb = vecs[concepts].sum(0)
            feats += [emb + noise * rng.normal(size=vecs.shape[1]) for _ in range(ln)]
            entries.append({"id": "", "begin_time": float(t), "end_time": float(t + ln),
                            "matched": "yes", "text": text})
            spans.append((t, t + ln))
            t += ln
        else:
            entries.append({"id": "", "begin_time": 0, "end_time": 0, "matched": "no",
                            "text": text})
            spans.append(None)
    if not feats:  # every sentence unmatched: give the video some footage
        feats = [noise * rng.normal(size=vecs.shape[1]) for _ in range(5)]
    duration = len(feats)
    lag = rng.uniform(-3, 3)
    subs, prev = [], 0.0
    for k, (e, span) in enumerate(zip(entries, spans, strict=True)):
        if span is None:  # narrated over the neighbouring footage
            nxt = next((s for s in spans[k + 1:] if s is not None), (duration, duration))
            b, ln = max(prev, nxt[0] - 3.0), 2.5
        else:
            ln = (span[1] - span[0]) * rng.uniform(0.6, 1.0)
            b = span[0] + lag + rng.uniform(-1.5, 1.5)
        b = float(np.clip(max(b, prev), 0, max(duration - 0.5, 0)))
        end = float(min(b + ln, duration))
        subs.append({"begin_time": round(b, 2), "end_time": round(max(end, b), 2),
                     "text": e["text"]})
        prev = max(end, b)
    return entries, subs, np.stack(feats).astype(np.float32)


def write_corpus(root: pathlib.Path | str, seed: int = 0, dim: int = 32,
                 languages: tuple[str, ...] = LANGUAGES, sizes: dict | None = None,
                 noise: float = 0.6, translate_to: str | None = None,
                 release_layout: bool = False) -> pathlib.Path:
    """Writes the corpus in the upstream layout under `root` and returns it.

    `translate_to="en"`: every language's sentences written in English (what a perfect
    translation of the release gives; the `translate` regimes' manual_dir).
    `release_layout`: as the public release: val.json is `{}` for every language but ru
    (those videos are not written), and `movies.json` names each video's movie (two
    train videos of each language share one)."""
    root = pathlib.Path(root)
    sizes = dict(SIZES, **(sizes or {}))
    vecs = concept_vectors(dim, seed)
    for li, lang in enumerate(languages):
        rng = np.random.default_rng([seed, li])
        (root / "annotations" / lang).mkdir(parents=True, exist_ok=True)
        (root / "subtitles" / lang).mkdir(parents=True, exist_ok=True)
        (root / "features").mkdir(parents=True, exist_ok=True)
        for split in ("train", "val", "test", "weak"):
            ann = {}
            n = 0 if release_layout and split == "val" and lang != "ru" else sizes[split]
            for k in range(n):
                vid = f"{lang}{split[:2]}{k:03d}"
                entries, subs, feats = make_video(rng, lang, vecs, noise, translate_to)
                for e in entries:
                    e["id"] = vid
                if split != "weak":
                    ann[vid] = entries
                (root / "subtitles" / lang / f"{vid}.json").write_text(
                    json.dumps(subs, ensure_ascii=False))
                np.save(root / "features" / f"{vid}.npy", feats)
            if split != "weak":
                (root / "annotations" / lang / f"{split}.json").write_text(
                    json.dumps(ann, ensure_ascii=False))
    if release_layout:
        movies = {f"{lang}{split[:2]}{k:03d}": f"{lang} {split} movie {k}"
                  for lang in languages for split in ("train", "val", "test", "weak")
                  for k in range(sizes[split])}
        for lang in languages:
            if sizes["train"] >= 2:
                movies[f"{lang}tr001"] = movies[f"{lang}tr000"]
        (root / "movies.json").write_text(json.dumps(movies, indent=0))
    return root
