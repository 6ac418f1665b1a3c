"""Sc2St story formation (paper §3.1.4) and storyboard splits, pure Python / NumPy.

Clips of one movie, in time order, belong to the same story while the gap from
the end of the previous clip to the start of the next is < `max_gap` seconds
(10 s in the paper). Each clip contributes its keyframe–sentence pairs (one per
sub-sentence, in order). Walking a story, every `length` (10) consecutive pairs
form a storyboard and collection restarts empty; the pairs left over at the end
of a story (fewer than `length`) are dropped and counted (`short_storyboard`).
A storyboard may therefore start or end in the middle of a clip's pairs.

Splits (`_no` protocol): storyboards are shuffled with the seed and cut 80/5/15
into train/val/test. Storyboards never share a pair, and pairs never share a
frame, so no frame is used in two splits; `check_no_overlap` verifies it.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import numpy as np

SPLITS = ("train", "val", "test")


def group_stories(clips: Sequence[Any], max_gap: float = 10.0) -> list[list[Any]]:
    """Groups clips (objects with `.movie`, `.start`, `.end`) into stories.

    Clips are sorted by (movie, start, end); a new story starts at a new movie or
    when `start - previous end >= max_gap`. Overlapping clips (negative gap) stay
    together.
    """
    stories: list[list[Any]] = []
    prev = None
    for c in sorted(clips, key=lambda c: (c.movie, c.start, c.end)):
        if prev is None or c.movie != prev.movie or c.start - prev.end >= max_gap:
            stories.append([])
        stories[-1].append(c)
        prev = c if prev is None or c.movie != prev.movie or c.end >= prev.end else prev
    return stories


def form_storyboards(story_pairs: Sequence[Sequence[Any]], length: int = 10,
                     skips: collections.Counter | None = None) -> list[list[Any]]:
    """Cuts each story's pair list into consecutive storyboards of exactly `length` pairs.

    Leftovers shorter than `length` are dropped; `skips["short_storyboard"]` counts
    them and `skips["short_storyboard_pairs"]` the pairs they held.
    """
    out = []
    for pairs in story_pairs:
        full = len(pairs) // length
        out.extend(list(pairs[i * length:(i + 1) * length]) for i in range(full))
        rest = len(pairs) - full * length
        if rest and skips is not None:
            skips["short_storyboard"] += 1
            skips["short_storyboard_pairs"] += rest
    return out


def split_storyboards(n: int, seed: int, fractions: Sequence[float] = (0.8, 0.05, 0.15)
                      ) -> dict[str, np.ndarray]:
    """Storyboard indices per split: a seeded permutation cut by `fractions` (sum 1).

    Split sizes are `round(f * n)` for val and test (at least 1 each when n >= 3),
    the rest train; indices within a split are sorted (generation order).
    """
    if abs(sum(fractions) - 1) > 1e-6 or len(fractions) != 3:
        raise ValueError(f"split fractions {tuple(fractions)} must be 3 numbers summing to 1")
    perm = np.random.default_rng(seed).permutation(n)
    n_val = int(round(fractions[1] * n))
    n_test = int(round(fractions[2] * n))
    if n >= 3:
        n_val, n_test = max(n_val, 1), max(n_test, 1)
    n_train = n - n_val - n_test
    cuts = np.split(perm, [n_train, n_train + n_val])
    return {s: np.sort(c) for s, c in zip(SPLITS, cuts, strict=True)}


def check_no_overlap(frames_by_split: dict[str, Sequence[Sequence[str]]]) -> None:
    """Raises ValueError naming a frame used by two splits (or twice in one split)."""
    owner: dict[str, str] = {}
    for split, boards in frames_by_split.items():
        for board in boards:
            for f in board:
                if f in owner:
                    raise ValueError(f"frame {f} is used in split {owner[f]} and {split}")
                owner[f] = split
