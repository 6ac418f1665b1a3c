"""A generated Sc2St corpus in the LSMDC layout, with per-frame feature arrays.

Written by the `synthetic*` builder configs (and by tests), then built by the
same code as real data. Keyframe features are designed so that the next keyframe
is predictable only from BOTH the storyboard's visual history and its sentence:

    v_t = normalise(0.6 m + c_t s + a(sentence_t) + 0.3 n_t)

* `m`: the movie's look (shared by all its storyboards; same-movie candidates share it);
* `s`: the storyboard's setting, one of `num_settings` shared across movies. It is
  visible only in the images (the sentences never name it), and is hidden
  (`c_t = 0`) in close-ups (~25% of keyframes, whose sentence ends with
  "closely"), so a model must remember it from earlier keyframes;
* `a(sentence)` = verb vector + object vector: what the sentence says
  (`SOMEONE <verb>s the <object>.`), compositional, never in the history;
* `n_t`: per-keyframe noise (unit norm in expectation).

So text alone cannot tell the setting, the history alone cannot tell the action,
and the previous keyframe alone (the similarity baseline) ranks candidates of the
same movie and setting but any action equally. Every clip's frames are its
keyframe feature plus small noise (so the keyframe encoder's choice does not
matter); clips of two sub-sentences ("..., then ...") have two frames, one per
keyframe. Times: clips 2-4 s, gaps < 10 s within a story, 15-30 s between stories.
Story lengths: mostly 10 or 20 pairs, some 13 (one storyboard plus a short
leftover that the builder drops and counts); a two-pair clip that crosses the 10th pair
overflows a storyboard (its second pair is dropped and the next storyboard starts at the
next clip, so a 20-pair story then yields one storyboard and a short tail).
"""

from __future__ import annotations

import pathlib

import numpy as np

from tfds_builders.common import timestamp

VERBS = ("open", "close", "grab", "drop", "watch", "push", "pull", "throw", "kick", "lift",
         "paint", "clean", "carry", "hide", "break", "fix")
OBJECTS = ("door", "box", "letter", "phone", "bag", "cup", "book", "chair", "window", "car",
           "gun", "key", "lamp", "coat", "bottle", "map")
GENRES = ("Drama", "Comedy", "Action", "Romance", "Thriller", "Family")
SIZES = {  # movies, stories per movie, feature dim, settings
    "default": dict(movies=40, stories=14, dim=32, settings=40),
    "tiny": dict(movies=8, stories=6, dim=32, settings=6),
}
CORPUS_VERSION = 1


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def write_corpus(root: pathlib.Path, seed: int = 0, sizes: str = "default") -> dict:
    """Writes CSVs, meta.csv and features/<movie>/<clip>.npy under `root`; returns counts."""
    cfg = SIZES[sizes]
    rng = np.random.default_rng(seed)
    d = cfg["dim"]
    verb_vec = _unit(rng.normal(size=(len(VERBS), d)))
    obj_vec = _unit(rng.normal(size=(len(OBJECTS), d)))
    settings = _unit(rng.normal(size=(cfg["settings"], d)))
    root.mkdir(parents=True, exist_ok=True)
    rows = {"training": [], "val": [], "test": []}
    meta_lines, n_pairs = [], 0
    for mi in range(cfg["movies"]):
        movie = f"{9001 + mi}_Synthetic_Movie_{mi:02d}"
        meta_lines.append(f"Synthetic Movie {mi:02d}\thttps://www.imdb.com/title/tt9{mi:06d}/\t"
                          f"{','.join(rng.choice(GENRES, 2, replace=False))}\tcolor")
        m_vec = _unit(rng.normal(size=d))
        file = ("training", "training", "training", "val", "test")[mi % 5]
        (root / "features" / movie).mkdir(parents=True, exist_ok=True)
        t = 5.0
        for _ in range(cfg["stories"]):
            s_vec = settings[rng.integers(cfg["settings"])]
            n = int(rng.choice([10, 10, 20, 13]))
            k = 0
            while k < n:
                two = k + 1 < n and rng.random() < 0.15
                feats, texts = [], []
                for _ in range(2 if two else 1):
                    vi, oi = rng.integers(len(VERBS)), rng.integers(len(OBJECTS))
                    close = rng.random() < 0.25
                    v = 0.6 * m_vec + (0.0 if close else 1.0) * s_vec + verb_vec[vi] + obj_vec[oi]
                    feats.append(_unit(v + 0.3 * rng.normal(size=d) / np.sqrt(d)))
                    texts.append(f"{VERBS[vi]}s the {OBJECTS[oi]}" + (" closely" if close else ""))
                k += len(feats)
                dur = rng.uniform(2, 4)
                clip_id = f"{movie}_{timestamp(t)}-{timestamp(t + dur)}"
                if two:
                    frames = np.stack(feats)
                    sentence = f"SOMEONE {texts[0]}, then {texts[1]}."
                else:
                    frames = np.stack([feats[0]] * 3)
                    sentence = f"SOMEONE {texts[0]}."
                frames = _unit(frames + 0.01 * rng.normal(size=frames.shape))
                np.save(root / "features" / movie / f"{clip_id}.npy", frames.astype(np.float32))
                times = f"{timestamp(t)}\t{timestamp(t + dur)}"
                rows[file].append(f"{clip_id}\t{times}\t{times}\t{sentence}")
                t += dur + rng.uniform(0.5, 3.0)
            n_pairs += n
            t += rng.uniform(15, 30)
    for split, lines in rows.items():
        (root / f"LSMDC16_annos_{split}.csv").write_text("\n".join(lines) + "\n",
                                                         encoding="iso-8859-1")
    (root / "meta.csv").write_text("\n".join(meta_lines) + "\n")
    return {"movies": cfg["movies"], "pairs": n_pairs}
