"""Property tests of the MoviePuzzle clip readers (`tfds_builders/moviepuzzle/moviepuzzle.py`):
mutated real clips (../shared/data/moviepuzzle_public) and generated ones load to the same
values, are skipped with a reason naming the file, or stop with one line naming it."""

from __future__ import annotations

import collections
import json
import pathlib
import shutil

from tests.schemas.mutate import check_mutations
from tfds_builders.moviepuzzle import moviepuzzle, synthetic

INFO = {"tt_id": "id", "img_num": "int", "img_id": "list", "img_id[]": "int",
        "shot_id": "list", "shot_id[]": "int", "scene_id": "list", "scene_id[]": "int"}
SUBTITLES = {"[]": "list", "[][]": "text"}


def _clip(src: pathlib.Path, root: pathlib.Path) -> pathlib.Path:
    """A copy of one clip folder as the only clip of split `s` under `root`."""
    shutil.copytree(src, root / "s" / src.name)
    (root / "clip_id.json").write_text(json.dumps({"s": [int(src.name)]}))
    return root / "s" / src.name


def _clips(path: pathlib.Path, counts: collections.Counter) -> dict:
    clip = path.parent
    metas = moviepuzzle.scan_split(clip.parent.parent, "s", [clip.name], counts)
    return {m["clip_id"]: m for m in metas}


def _check_clip(clip: pathlib.Path) -> None:
    info = json.loads((clip / "info.json").read_text())
    subs = json.loads((clip / "subtitle.json").read_text())
    for name, record, spec in (("info.json", info, INFO), ("subtitle.json", subs, SUBTITLES)):
        outcomes = check_mutations(_clips, clip / name, record, spec, frozenset({"img_num"}))
        assert outcomes["skipped"] > 0, (name, outcomes)
        (clip / name).write_text(json.dumps(record))


def test_mutated_real_clip(shared_data, tmp_path):
    """Clip 1060 of the public release: empty strings and a `// [...]` cue among its
    subtitles (kept as they are)."""
    _check_clip(_clip(shared_data / "moviepuzzle_public" / "in_domain" / "1060", tmp_path))


def test_mutated_generated_clip(tmp_path):
    synthetic.write_corpus(tmp_path / "gen", seed=5, sizes=dict(
        movies=2, heldout=1, train=1, val=0, test_in_domain=0, test_out_domain=0))
    _check_clip(_clip(next((tmp_path / "gen" / "train").iterdir()), tmp_path / "one"))


def test_mutated_clip_ids_are_one_line(shared_data, tmp_path):
    shutil.copy(shared_data / "moviepuzzle_public" / "clip_id.json", tmp_path)
    ids = json.loads((tmp_path / "clip_id.json").read_text())

    def read(path: pathlib.Path, counts: collections.Counter) -> dict:
        return moviepuzzle.read_clip_ids(path.parent)

    outcomes = check_mutations(read, tmp_path / "clip_id.json", ids, {"*": "list",
                                                                      "*[]": "id"})
    assert outcomes["error"] > 0, outcomes
