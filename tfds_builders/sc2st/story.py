"""Sc2St story formation (paper §3.1.4) and storyboard splits, pure Python / NumPy.

Clips of one movie, in time order, belong to the same story while the gap from
the end of the previous clip to the start of the next is < `max_gap` seconds
(10 s in the paper). Each clip contributes its keyframe–sentence pairs (one per
sub-sentence, in order). Within a group, whole clips are added to a storyboard
until it holds at least `length` (10) pairs; the extra pairs at its end are
dropped and the next storyboard starts at the *next clip* (so a storyboard always
starts at a clip's first pair, and an overflowing clip's tail is never carried
over). A group's last clips that never reach `length` pairs are dropped. Both
drops and the breaks (gaps >= `max_gap`) are counted for the build summary.
Grouping runs over the clips that have pairs (choice made here): a clip skipped for bad
input leaves a hole, and a hole of 10 s or more is a break.

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


def count_breaks(stories: Sequence[Sequence[Any]]) -> int:
    """Story breaks (gaps of `max_gap` or more inside one movie) among `group_stories`'
    output: every story but the first of each movie starts at one."""
    return len(stories) - len({s[0].movie for s in stories})


def form_storyboards(groups: Sequence[Sequence[Sequence[Any]]], length: int = 10,
                     counts: collections.Counter | None = None,
                     dropped: list[Any] | None = None) -> list[list[Any]]:
    """Storyboards of exactly `length` pairs from clip groups (paper §3.1.4).

    `groups[g][c]` is the ordered pair list of clip c of group g. Walking a group from a
    start clip, whole clips are added until the storyboard holds at least `length` pairs;
    the pairs past `length` (the tail of the last clip added) are dropped, and the next
    storyboard starts at the clip after that one. A group's clips that never fill a
    storyboard are dropped too. `counts` gets `overflow_pairs` (dropped past `length`),
    `short_group_pairs` / `short_group_tails` (pairs / group tails that never filled one);
    `dropped` (optional) gets every dropped pair, in order (the isolated keyframes, §4.1.3).
    """
    counts = counts if counts is not None else collections.Counter()
    out: list[list[Any]] = []
    for clips in groups:
        board: list[Any] = []
        for pairs in clips:
            board.extend(pairs)
            if len(board) >= length:
                out.append(board[:length])
                counts["overflow_pairs"] += len(board) - length
                if dropped is not None:
                    dropped.extend(board[length:])
                board = []  # restart at the next clip
        if board:
            counts["short_group_tails"] += 1
            counts["short_group_pairs"] += len(board)
            if dropped is not None:
                dropped.extend(board)
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
