"""A generated SYMON-like corpus in the upstream layout, with known ground truth.

`write_corpus(root, sizes, seed, defects)` writes what a SYMON user's manual_dir holds
(`url.txt`, `asr_label.txt`, `timestamped_text/<id>.en.vtt`, `preprocessed_text/<id>.txt`,
`features/<id>.npy`, `cuts/<id>.txt` for half the videos, `movies.tsv`) so the builder is
tested on exactly the code path real data takes. Half the videos get YouTube auto-caption
VTT (rolling two-line cues with word tags, lower-case, no punctuation), half uploaded
caption cues.

Ground truth. Movies have four capitalised character names and 1-2 summary videos.
Narration sentences are "<words> <Name> <words> ." from a 240-word lower-case vocabulary.
Each word has a fixed random vector (dim 16); a sentence's vector is the mean of its
words'. Features at 1 fps, dim 32, for second t:

    f_t = A e(sentence at t) + 3 g(shot) + 3 (progress in shot - 0.5) u + 0.3 noise

with a fixed random A [32, 16] (|A e| ~ 1.5 < the shot term), and the unit
direction u and a fresh random unit shot vector g per shot drawn from the
16-dim subspace orthogonal to A's columns (narration and shots are linearly
separable on the video side, as a trained feature extractor would make them).
So a segment's features are noisy projections of its narration's embedding
(retrieval is learnable), shots change abruptly at cuts (cuts are detectable from
features) and the end of a shot differs from the start of the next one along u
(the order of two segments across a cut is learnable from video alone).
"""

from __future__ import annotations

import itertools
import pathlib

import numpy as np

FEATURE_DIM, WORD_DIM, FPS = 32, 16, 1.0
CORPUS_VERSION = 2  # bump when the generated content changes
SIZES = {  # movies, seconds per video (min, max)
    "default": (48, (150, 240)),
    "tiny": (24, (70, 100)),
}
_SYL = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "ben", "dor", "fa", "gu", "pel", "zan"]


def word_shapes() -> list[str]:
    """Every word `_vocab` can make (2 or 3 syllables), lower-case and capitalised: what a
    smoke tokenizer learns so the corpus's words are a token or two, not their letters."""
    words = ["".join(c) for n in (2, 3) for c in itertools.product(_SYL, repeat=n)]
    return words + [w.capitalize() for w in words]


def _vocab(rng: np.random.Generator, n: int, capital: bool) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        w = "".join(rng.choice(_SYL, size=rng.integers(2, 4)))
        out.add(w.capitalize() if capital else w)
    return sorted(out)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _ts(t: float) -> str:
    h, rem = divmod(max(t, 0.0), 3600)
    m, s = divmod(rem, 60)
    return f"{int(h):02d}:{int(m):02d}:{s:06.3f}"


def _asr_vtt(words: list[tuple[str, float]], end: float) -> str:
    """YouTube auto-caption style: rolling two-line cues with word tags + 10 ms repeats."""
    out = ["WEBVTT", "Kind: captions", "Language: en", ""]
    lines = [words[i:i + 7] for i in range(0, len(words), 7)]
    prev = ""
    for k, line in enumerate(lines):
        start = line[0][1]
        stop = lines[k + 1][0][1] if k + 1 < len(lines) else end
        tagged = line[0][0] + "".join(f"<{_ts(t)}><c> {w}</c>" for w, t in line[1:])
        out += [f"{_ts(start)} --> {_ts(stop - 0.01)} align:start position:0%",
                prev if prev else " ", tagged, ""]
        prev = " ".join(w for w, _ in line)
        out += [f"{_ts(stop - 0.01)} --> {_ts(stop)} align:start position:0%", prev, " ", ""]
    return "\n".join(out) + "\n"


def _manual_vtt(sentences: list[tuple[str, float, float]]) -> str:
    out = ["WEBVTT", "Kind: captions", "Language: en", ""]
    for text, start, end in sentences:
        ws = text.split()
        half = len(ws) // 2
        out += [f"{_ts(start)} --> {_ts(end)}", " ".join(ws[:half]), " ".join(ws[half:]), ""]
    return "\n".join(out) + "\n"


def write_corpus(root: pathlib.Path | str, sizes: str = "default", seed: int = 0,
                 defects: bool = False) -> dict:
    """Writes the corpus; returns ground truth {video_id: {movie, cuts, sentences}}.

    `defects` adds one of each defect the builder must count: a malformed cue,
    a feature file of the wrong dimension, one shorter than its narration, a
    missing feature file, escaped UTF-8 bytes in a preprocessed text, a video
    missing from asr_label.txt, a cuts file with a cut after its video's end.
    """
    root = pathlib.Path(root)
    for d in ("timestamped_text", "preprocessed_text", "features", "cuts"):
        (root / d).mkdir(parents=True, exist_ok=True)
    n_movies, (t_min, t_max) = SIZES[sizes]
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng, 240, capital=False)
    word_vec = {w: rng.normal(size=WORD_DIM) for w in vocab}
    # Narration lives in the first WORD_DIM feature dims (after a random rotation), shots
    # and the progress direction in the rest: the video side of each is linearly separable.
    rot, _ = np.linalg.qr(rng.normal(size=(FEATURE_DIM, FEATURE_DIM)))
    proj = rot[:, :WORD_DIM] @ (rng.normal(size=(WORD_DIM, WORD_DIM)) / np.sqrt(WORD_DIM) * 0.6)
    other = rot[:, WORD_DIM:]
    u = other @ rng.normal(size=FEATURE_DIM - WORD_DIM)
    u /= np.linalg.norm(u)
    names_pool = _vocab(rng, 4 * n_movies, capital=True)
    truth, urls, labels, movies = {}, [], ["Video_id Is_ASR"], []
    vid_no = 0
    for m in range(n_movies):
        names = names_pool[4 * m: 4 * m + 4]
        for _ in range(1 + int(rng.random() < 0.5)):
            vid = f"syn{vid_no:04d}_{m:03d}x"
            vid_no += 1
            asr = vid_no % 2 == 0
            dur = int(rng.integers(t_min, t_max + 1))
            cuts, t = [], float(rng.uniform(2, 4))
            while t < dur - 5:
                cuts.append(round(t))
                t += float(rng.uniform(2, 4.5))  # shots ~3 s (SYMON: 2.2 s)
            sents, t = [], 2.0
            while t < dur - 6:
                length = float(rng.uniform(3, 7))
                ws = list(rng.choice(vocab, size=int(rng.integers(4, 7)), replace=False))
                pos = int(rng.integers(1, len(ws)))
                name = str(rng.choice(names))
                text = " ".join(ws[:pos] + [name] + ws[pos:]) + "."
                sents.append((text, round(t, 3), round(t + length, 3), ws))
                t += length + float(rng.uniform(0.2, 1.0))
            feats = np.zeros((dur, FEATURE_DIM))
            bounds = [0, *cuts, dur]
            for a, b in zip(bounds, bounds[1:]):
                g = other @ rng.normal(size=FEATURE_DIM - WORD_DIM)
                g /= np.linalg.norm(g)
                prog = (np.arange(a, b) - a + 0.5) / (b - a) - 0.5
                feats[a:b] = 3 * g + 3.0 * prog[:, None] * u
            for _text, s, e, ws in sents:
                vec = np.mean([word_vec[w] for w in ws], 0)
                feats[int(s):int(np.ceil(e))] += proj @ vec
            feats += 0.3 * rng.normal(size=feats.shape)
            feats = feats.astype(np.float32)
            pre = " ".join(_cap(s[0]) for s in sents)
            if asr:
                timed = []
                for text, s, e, _ in sents:
                    ws = text.rstrip(".").split()
                    timed += [(w, s + (e - s) * i / len(ws)) for i, w in enumerate(ws)]
                vtt_text = _asr_vtt(timed, dur - 1.0)
            else:
                vtt_text = _manual_vtt([(_cap(s[0]), s[1], s[2]) for s in sents])
            (root / "timestamped_text" / f"{vid}.en.vtt").write_text(vtt_text, encoding="utf-8")
            (root / "preprocessed_text" / f"{vid}.txt").write_text(pre + "\n", encoding="utf-8")
            np.save(root / "features" / f"{vid}.npy", feats)
            if vid_no % 2:  # half the videos give their cuts; the rest are detected
                (root / "cuts" / f"{vid}.txt").write_text("".join(f"{c}\n" for c in cuts))
            urls.append(f"https://www.youtube.com/watch?v={vid}")
            labels.append(f"{vid} {'Yes' if asr else 'No'}")
            movies.append(f"{vid}\tmovie {m}")
            truth[vid] = {"movie": f"movie {m}", "cuts": cuts, "duration": dur,
                          "sentences": [(s[0], s[1], s[2]) for s in sents]}
    if defects:
        ids = list(truth)
        bad_cue = root / "timestamped_text" / f"{ids[0]}.en.vtt"
        bad_cue.write_text(bad_cue.read_text().replace(
            "WEBVTT\nKind: captions\nLanguage: en\n",
            "WEBVTT\nKind: captions\nLanguage: en\n\n00:00:0x.000 --> 00:00:01.000\nbroken\n\n"
            "00:00:09.000 --> 00:00:08.000\nbackwards\n", 1))
        np.save(root / "features" / f"{ids[1]}.npy", np.zeros((200, FEATURE_DIM + 1), np.float32))
        np.save(root / "features" / f"{ids[2]}.npy", np.zeros((10, FEATURE_DIM), np.float32))
        (root / "features" / f"{ids[3]}.npy").unlink()
        pre = root / "preprocessed_text" / f"{ids[4]}.txt"
        pre.write_text(pre.read_text().replace(".", r".\xe2\x80\x9d", 1))
        labels = [ln for ln in labels if not ln.startswith(ids[5])]
        cut6 = root / "cuts" / f"{ids[6]}.txt"  # a cuts file reaching past its video
        cut6.write_text("".join(f"{c}\n" for c in truth[ids[6]]["cuts"])
                        + f"{truth[ids[6]]['duration'] + 50}\n")
    (root / "url.txt").write_text("\n".join(urls) + "\n")
    (root / "asr_label.txt").write_text("\n".join(labels) + "\n")
    (root / "movies.tsv").write_text("\n".join(movies) + "\n")
    return truth
