"""The release's role-pointer files: `@k` sentences for Movie101-N paragraphs (RMN's data).

The release ships `narration_role/train_merge.json`, `val.json` and `test.json` (under
`Movie101v1/baseline/RMN/data/`), each an object {entry id: {sentences: [one sentence with
`@k` = the k-th role of the movie in meta_anno.json order], timestamps: [[start, end]]
(strings of whole seconds), movie_id}}. For a split the builder reads `{split}.json`; for
train it reads `train_merge.json`, the release's file, when there is one, and `train.json`
only when there is no `train_merge.json` (`role_file`). With both, `train.json` is not read:
train_merge.json holds the train paragraphs' `@k` sentences too, and reading train.json's
for them would silently drop train_merge's augmentation entries (or mix two sources); the
unread file is a counted skip (`role_file_not_read`) naming both files.

`train_merge.json` is Movie101-N train plus augmentation clips: the RMN README says
fine-grained clips from Movie101-raw are added to the training set of Movie101-N, and
upstream's reader (`readers/caption_data.py`) trains on every entry of the file (its
`name_file` is read by nobody). The file itself was not readable in the repository
snapshot we had (a large file); from the entry ids, one running counter over the three
files (val 35833-37248, test 37249-38616), it presumably holds ids 0-35832: 35,833 entries
= 11,325 Movie101-N train paragraphs + 24,508, the size of Movie101-G train (the unmerged
narration clips of the train movies). An entry is a paragraph when its (movie, start, end)
is a Movie101-N row's (the first such entry; a one-clip paragraph and its clip share a
key); every other entry is an augmentation entry, kept as the `train_clips` split.

Entries are matched to Movie101-N rows by (movie id, start, end) in whole seconds (as
upstream's reader reads them, `int(timestamp)`); on the public val and test files every
row matches one entry (and the order agrees too).
"""

from __future__ import annotations

import collections
import pathlib
from typing import Any

from tfds_builders import common
from tfds_builders import schema as S
from tfds_builders.movie101 import parsing, schema

ROLE_DIR = "narration_role"
AUGMENTED = "train_merge.json"  # Movie101-N train + augmentation clips (the release's name)
CLIPS_SPLIT = "train_clips"  # the augmentation entries of train_merge.json


def role_file_names(split: str) -> tuple[str, ...]:
    """File names looked for under narration_role/ for `split`, in order."""
    return (f"{split}.json", AUGMENTED) if split == "train" else (f"{split}.json",)


def role_file(root: pathlib.Path, split: str, skips: collections.Counter | None = None
              ) -> pathlib.Path | None:
    """The split's role file under `root`: for train `train_merge.json` (the release's) when
    it exists, else `train.json`; for the others `{split}.json`; None when there is none.
    Given `skips`, a `train.json` beside `train_merge.json` is counted `role_file_not_read`."""
    found = [root / ROLE_DIR / n for n in role_file_names(split) if (root / ROLE_DIR / n).is_file()]
    if not found:
        return None
    chosen = next((p for p in found if p.name == AUGMENTED), found[0])
    for p in found:
        if p != chosen and skips is not None:
            common.record_skip(skips, "role_file_not_read", p,
                               f"{chosen.name} is read instead: it is the release's train file "
                               "(Movie101-N train paragraphs plus augmentation clips)")
    return chosen


def looked_for(root: pathlib.Path | str, split: str) -> str:
    """`<root>/narration_role/train.json or .../train_merge.json`, for messages."""
    return " or ".join(str(pathlib.Path(root) / ROLE_DIR / n) for n in role_file_names(split))


def key(movie_id: Any, start: float, end: float) -> tuple[str, int, int]:
    """(movie, start, end) in whole seconds, the key entries and narrations are matched by."""
    return str(movie_id), int(start), int(end)


class RoleFile:
    """One role file: its entries in file order, the first entry of each key, and which
    entries narrations used."""

    def __init__(self, path: pathlib.Path, skips: collections.Counter):
        self.path = path
        raw = parsing.load_json(path)
        items = list(raw.items()) if isinstance(raw, dict) else list(enumerate(raw)) \
            if isinstance(raw, list) else None
        if items is None:
            raise common.ManualDirError(f"{path} must be an object {{id: {{sentences, "
                                        "timestamps, movie_id}}}")
        self.entries: list[tuple[str, str, str, float, float]] = []  # id, movie, @k, s, e
        self.first: dict[tuple, int] = {}
        for eid, e in items:
            got = _entry(e, str(eid), path, skips)
            if got is None:
                continue
            k = key(got[0], got[2], got[3])
            if k in self.first:  # e.g. a one-clip paragraph and its clip in train_merge
                common.note(skips, "role_entries_sharing_a_key", what=f"{path} entry {eid}")
            self.first.setdefault(k, len(self.entries))
            self.entries.append((str(eid), *got))
        self.used: set[int] = set()

    def sentence(self, movie_id: str, start: float, end: float) -> str | None:
        """The `@k` sentence of the narration (movie, start, end): the first entry with its
        key; None when none matches."""
        i = self.first.get(key(movie_id, start, end))
        if i is None:
            return None
        self.used.add(i)
        return self.entries[i][2]

    def unused(self) -> list[tuple[str, str, str, float, float]]:
        """(entry id, movie, sentence, start, end) of the entries no narration used, in
        file order (a second entry with a used key included: upstream trains on both)."""
        return [e for i, e in enumerate(self.entries) if i not in self.used]


def _entry(e: Any, eid: str, path: pathlib.Path, skips: collections.Counter
           ) -> tuple[str, str, float, float] | None:
    """(movie, sentence, start, end) of one entry (`schema.RoleEntry`: the pieces of its
    sentence joined, its first timestamp pair in order); None when it is not usable, counted
    as `bad_role_entry` (or `duplicate_key`) naming the entry and key path."""
    try:
        entry = S.check(schema.RoleEntry, e, "bad_role_entry", f"entry {eid}")
    except S.Invalid as err:
        if err.reason == "bad_time":  # a role entry's reason, whatever its field
            err = S.Invalid("bad_role_entry", err.where, err.message)
        S.skip(skips, err, path)
        return None
    s, t, _ = parsing.parse_span(*e["timestamps"][0][:2])
    sentence = "".join(entry.sentences).strip()
    if not sentence:
        common.record_skip(skips, "bad_role_entry", path, f"entry {eid}: empty sentence")
        return None
    return entry.movie_id, sentence, s, t
