"""A generated corpus in the YMS release layout with known alignment (for tests).

Videos come from `tfds_builders.msymon.synthetic.make_video` (same concepts and features, so
a model trained on the generated M-SyMoN English corpus transfers zero-shot). Each video is
written as time-ordered annotation lines: matched sentences with their footage span,
`UNMATCHED` for footage between spans, `UNMATCHED: <sentence>` (with varying spacing) for
sentences without footage, placed at their narration time. `clip_segmentation.txt` cuts the
video into clips of 1-4 s; split files carry `#` comment lines like the real ones.
"""

from __future__ import annotations

import pathlib

import numpy as np

from tfds_builders.common import timestamp
from tfds_builders.msymon import synthetic as msy


def write_corpus(root: pathlib.Path | str, seed: int = 0, dim: int = 32,
                 sizes: dict | None = None) -> pathlib.Path:
    root = pathlib.Path(root)
    sizes = {"train": 4, "val": 2, "test": 2, **(sizes or {})}
    (root / "features").mkdir(parents=True, exist_ok=True)
    vecs = msy.concept_vectors(dim, seed)
    rng = np.random.default_rng([seed, 99])
    lines, clips, splits, k = [], [], {}, 0
    for split, n in sizes.items():
        splits[split] = []
        for _ in range(n):
            vid = f"{k:04d}"
            k += 1
            splits[split].append(vid)
            entries, subs, feats = msy.make_video(rng, "en", vecs)
            np.save(root / "features" / f"{vid}.npy", feats)
            items, t = [], 0.0
            for e, s in zip(entries, subs, strict=True):
                if e["matched"] == "yes":
                    if e["begin_time"] > t:
                        items.append((t, e["begin_time"], "UNMATCHED"))
                    items.append((e["begin_time"], e["end_time"], e["text"]))
                    t = e["end_time"]
                else:
                    sep = [":", ": ", ":  "][rng.integers(3)]
                    items.append((s["begin_time"], s["end_time"], f"UNMATCHED{sep}{e['text']}"))
            if t < len(feats):
                items.append((t, float(len(feats)), "UNMATCHED"))
            lines += [f"{vid}_{timestamp(b)}-{timestamp(e)}\t{x}" for b, e, x in items]
            c = 0.0
            while c < len(feats) - 1e-6:
                d = min(float(rng.integers(1, 5)), len(feats) - c)
                clips.append(f"{vid}/{vid}_{timestamp(c)}-{timestamp(c + d)}")
                c += d
    (root / "annotations_sentences.txt").write_text("\n".join(lines) + "\n")
    (root / "annotations_phrases.txt").write_text("\n".join(lines) + "\n")
    (root / "clip_segmentation.txt").write_text("\n".join(clips) + "\n")
    names = {"train": "training_split.txt", "val": "val_split.txt", "test": "test_split.txt"}
    for split, fname in names.items():
        vids = splits.get(split, [])
        body = vids[:1] + ["# 9999  # a duplicate, commented out upstream"] + vids[1:]
        (root / fname).write_text("\n".join(body) + "\n")
    (root / "movie_list.txt").write_text("".join(f"{v}\tMovie {v}\n" for v in
                                                 sum(splits.values(), [])))
    (root / "url_list.txt").write_text("".join(f"{v}    https://youtu.be/x{v}\n" for v in
                                               sum(splits.values(), [])))
    return root
