"""Property tests of the SYMON metadata reader (yt-dlp `info/<id>.info.json`) and the Sc2St
released-file readers (`released.py`): mutated records parse to the same values, are skipped
with a reason naming the file, or stop with one line naming it."""

from __future__ import annotations

import collections
import pathlib

from tests.schemas.mutate import check_mutations
from tfds_builders.sc2st import released
from tfds_builders.sc2st.skips import Skips
from tfds_builders.symon import movies

IDS = [f"l_1_{c}_{c % 3}" for c in range(10)]


def test_mutated_generated_info_json(tmp_path):
    """The movie identity from yt-dlp's metadata: a title or description that is not a
    string is `info_json:bad_field`, a key given twice `info_json:duplicate_key` (named)."""
    (tmp_path / "info").mkdir()
    info = {"id": "abc", "title": "Alien (1979) Movie Recap",
            "description": "Movie name: Alien\nMore at ...", "uploader": "Recaps",
            "tags": ["alien", "recap"], "duration": 600}

    def identity(path: pathlib.Path, counts: collections.Counter) -> dict:
        problems: dict = collections.defaultdict(list)
        got = movies.from_download(tmp_path, "abc", problems)
        for reason, named in problems.items():
            for what in named:
                counts[reason] += 1
                counts.named.setdefault(reason, []).append(what)
        return {} if problems else {"abc": got}  # a refused info file gives no identity

    outcomes = check_mutations(identity, tmp_path / "info" / "abc.info.json", info,
                               {"title": "opt_text", "description": "opt_text"},
                               frozenset({"title", "description"}))
    assert outcomes["skipped"] > 0, outcomes


def test_mutated_released_stories(tmp_path):
    stories = {"s0": {"images": IDS, "sentences": [f"t{n}" for n in range(10)]},
               "s1": [{"id": i, "text": f"u{n}"} for n, i in enumerate(IDS)]}

    def read(path: pathlib.Path, counts: collections.Counter) -> dict:
        skips = Skips()
        got = {s["key"]: s for s in released.read_stories(path, 10, skips)}
        counts.update(skips)
        counts.named.update(skips.named)
        return got

    outcomes = check_mutations(read, tmp_path / "story10_all_train_no.json", stories, {
        "*": "record", "images": "list", "images[]": "text", "sentences": "list",
        "sentences[]": "text_or_texts", "*[]": "record", "id": "text", "text": "text_or_texts"},
        frozenset({"sentences", "text"}))  # texts are optional (parsed_text.json has them)
    assert outcomes["error"] + outcomes["skipped"] > 0, outcomes


def test_mutated_released_index_and_maps(tmp_path):
    index = {"i2n": {"1": ["0001_American_Beauty", {"2": "0001_American_Beauty_00.00.51.926-"
                                                         "00.00.54.129", "3": "clip3"}],
                     "7": ["0007_Other", {"0": "c0"}]}, "data": {"1": [5, 6]}}

    def read_index(path: pathlib.Path, counts: collections.Counter) -> dict:
        return {str(k): v for k, v in released.read_lsmdc_index(path).items()}

    outcomes = check_mutations(read_index, tmp_path / "lsmdc.json", index,
                               {"i2n": "record", "1": "list", "7": "list",
                                "1[]": "not_text_nor_object", "7[]": "not_text_nor_object",
                                "2": "text", "3": "text", "0": "text"},
                               frozenset({"1", "7", "2", "3", "0"}))  # ids, not fields
    assert outcomes["error"] > 0, outcomes

    def read_map(path: pathlib.Path, counts: collections.Counter) -> dict:
        return released.read_id_map(path, "str")

    outcomes = check_mutations(read_map, tmp_path / "i2chars.json",
                               {"l_1_2": ["Harry", "Ron"], "l_1_3": "Ron"},
                               {"*": "text_or_list", "*[]": "text"})
    assert outcomes["error"] > 0, outcomes
