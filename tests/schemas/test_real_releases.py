"""Every real release sample in ../shared/data builds with the same counts and the same
examples as before the typed schemas (main 9cf6bfb, recorded below): the schemas refuse
nothing the real files hold; their known defects are counted as they were.

`EXPECTED[(builder, config)]` = (examples per split, `skipped` counts (skips and `kept_*`),
`noted` counts, a digest of each split's examples). Regenerate only for a change that is
meant to change what is built, and say so in its commit.
"""

from __future__ import annotations

import hashlib
import pathlib
from typing import Any

import numpy as np
import pytest

from tfds_builders.__main__ import build, find_builder

RELEASE = {"moviepuzzle": "moviepuzzle_public", "msymon": "msymon", "msymon.yms": "yms",
           "symon": "symon", "movie101": "movie101"}

EXPECTED = {
    ("movie101", "v1_grounding"): (
        {"val": 2768},
        {"kept_mixed_language": 13, "kept_v1_without_genre": 81, "missing_split_file": 2},
        {"empty_split_test": 1, "empty_split_train": 1, "grounding_queries_with_roles": 1893,
         "grounding_queries_without_roles": 875, "grounding_role_mentions": 2831},
        {"val": "904e8c1789d788cf"}),
    ("movie101", "v1_movies"): (
        {"test": 10, "train": 81, "val": 10},
        {"kept_missing_portrait": 645, "kept_movie_without_cast_test": 1,
         "kept_movie_without_cast_train": 8, "kept_v1_without_genre": 81,
         "kept_without_features": 101},
        {},
        {"test": "9b22478daf10d1de", "train": "0ef5ff43d936d1a1", "val": "511cd796b719b835"}),
    ("movie101", "v1_narration"): (
        {"val": 1416},
        {"kept_mixed_language": 10, "kept_role_pointer_not_in_cast": 1,
         "kept_v1_without_genre": 81, "missing_split_file": 2},
        {"empty_split_test": 1, "empty_split_train": 1, "pointer_targets_val": 1076},
        {"val": "523744469599d266"}),
    ("movie101", "v2_long_en"): (
        {"train": 3662, "val": 519},
        {"kept_mixed_language": 4, "kept_role_not_in_cast": 213},
        {"empty_split_test": 1, "pointer_targets_train": 2777, "pointer_targets_val": 380},
        {"train": "dbf17fe22ffd8b23", "val": "f06d0e6df2ae45a4"}),
    ("movie101", "v2_long_zh"): (
        {"train": 3662, "val": 519},
        {"kept_mixed_language": 326, "kept_role_not_in_cast": 417},
        {"empty_split_test": 1, "pointer_targets_train": 3163, "pointer_targets_val": 425},
        {"train": "430c2c167be5dbc0", "val": "7065f33df6a400ec"}),
    ("movie101", "v2_movies"): (
        {"train": 18, "val": 2},
        {"kept_without_features": 20},
        {"empty_split_test": 1},
        {"train": "473cf85ea1631c15", "val": "549561cf40149e61"}),
    ("movie101", "v2_short_en"): (
        {"train": 4182, "val": 748},
        {"kept_mixed_language": 2, "kept_role_not_in_cast": 221},
        {"empty_split_test": 1, "pointer_targets_train": 3022, "pointer_targets_val": 468},
        {"train": "ca67c3ad7fe3a47e", "val": "f076fc12b58ef267"}),
    ("movie101", "v2_short_zh"): (
        {"train": 4182, "val": 748},
        {"kept_mixed_language": 348, "kept_role_not_in_cast": 417},
        {"empty_split_test": 1, "pointer_targets_train": 3443, "pointer_targets_val": 526},
        {"train": "094a914e2e62109a", "val": "04d5c76f06b5185b"}),
    ("moviepuzzle", "clips"): (
        {"in_domain": 100},
        {"missing_split_dir": 100},
        {},
        {"in_domain": "ef50568bebdf1631"}),
    ("msymon", "text_only"): (
        {"ch_train": 7, "ch_val": 1, "en_train": 22, "en_val": 2, "es_train": 20, "es_val": 2,
         "fr_train": 17, "fr_val": 2, "hi_train": 12, "hi_val": 1, "pt_train": 8, "pt_val": 1,
         "ru_train": 19, "ru_val": 17},
        {"kept_as_unmatched_end_before_begin": 5, "kept_fixed_matched_spelling": 135,
         "kept_times_backwards": 24, "kept_val_carved_from_train": 9},
        {},
        {"ch_train": "dc1bdcee2c47aae4", "ch_val": "bab6c44feaabe503",
         "en_train": "bd5dbcff46e5a769", "en_val": "ab7c7f5010fdfc5b",
         "es_train": "7baa02e501301092", "es_val": "8a5441ece864d950",
         "fr_train": "ad4d407fb9e349ed", "fr_val": "3cc53ec42f16dfa3",
         "hi_train": "1f26089d6522b6e1", "hi_val": "5498010a5ec2c913",
         "pt_train": "a067b73bf71b6204", "pt_val": "f8e50f8a87fc40b3",
         "ru_train": "3893815621efb06c", "ru_val": "486668dd31acc88a"}),
    ("msymon.yms", "phrases_text_only"): (
        {"train": 66},
        {"kept_split_comment_lines": 1, "kept_unmatched_clip_spans": 39,
         "kept_unmatched_marker_spacing": 38, "kept_unmatched_sentences": 124,
         "missing_annotations": 27},
        {},
        {"train": "b7a386241b409055"}),
    ("msymon.yms", "sentences_text_only"): (
        {"train": 66},
        {"kept_split_comment_lines": 1, "kept_unmatched_clip_spans": 36,
         "kept_unmatched_marker_spacing": 21, "kept_unmatched_sentences": 29,
         "missing_annotations": 27},
        {},
        {"train": "37121547b00b74ed"}),
    ("symon", "text_only"): (
        {"test": 4, "train": 32, "val": 4},
        {"cue:rolling_duplicate": 7203, "movie_source:narration": 10, "movie_source:unknown": 30,
         "sentence:non_speech": 17, "sentence:resplit_unpunctuated": 13,
         "text:escaped_utf8_bytes": 8},
        {},
        {"test": "0008e739868c9dd8", "train": "29b9519be6e883c4", "val": "c9dc0293c97d8cd4"}),
}


def _norm(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in sorted(x.items())}
    if isinstance(x, np.ndarray):
        return (str(x.dtype), x.shape, x.tobytes().hex())
    if isinstance(x, list | tuple):
        return [_norm(v) for v in x]
    if isinstance(x, np.generic):
        return (str(x.dtype), x.tobytes().hex())
    return x


def digest(name: str, config: str, data_dir: pathlib.Path) -> dict[str, str]:
    """Per split, a hash of its examples as stored (order-free: TFDS stores them by key)."""
    builder = find_builder(name)(config=config, data_dir=data_dir)
    out = {}
    for split in sorted(builder.info.splits):
        src = builder.as_data_source(split)
        rows = sorted(repr(_norm(src[i])) for i in range(len(src)))
        out[split] = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
    return out


@pytest.mark.parametrize("name, config", sorted(EXPECTED), ids="/".join)
def test_real_release_builds_as_before(name, config, shared_data, tmp_path):
    release = shared_data / RELEASE[name]
    if name == "movie101":
        release /= config.split("_")[0]
    summary = build(name, config, str(tmp_path), str(release))
    examples, skipped, noted, digests = EXPECTED[(name, config)]
    assert summary["examples"] == examples
    assert summary["skipped"] == skipped
    assert summary["noted"] == noted
    assert digest(name, config, tmp_path) == digests, "same counts, other examples"
