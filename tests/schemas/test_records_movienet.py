"""Property tests of the raw MovieNet JSON readers (`tfds_builders/moviepuzzle/movienet_build.py`:
`annotation/<imdb>.json` scenes and synopsis story, `meta/<imdb>.json`): mutated records of a
generated movie (../shared/data has no raw MovieNet: its release is not public) give the same
clips, synopsis pairs and frame rate, are skipped with a reason naming the file (the movie, a
story entry or the meta file, read as absent), or stop with one line naming it; never a
traceback, never a silently changed value."""

from __future__ import annotations

import collections
import json
import pathlib

from tests.benchmarks.moviepuzzle.test_movienet import frame_cues, write_movie
from tests.schemas.mutate import check_mutations
from tfds_builders import common
from tfds_builders.moviepuzzle import movienet_build as mb

FPS = 25.0
IMDB = "tt0000042"
# shot ranges are integer pairs; a story entry's frame and duration ranges give the frame
# rate (numbers), its description the synopsis paragraph; scene ids and frames are not read
ANNOTATION = {"scene": "list", "scene[]": "record", "shot": "list", "shot[]": "int",
              "story": "list", "story[]": "record", "description": "text",
              "frame": "list", "frame[]": "time", "duration": "list", "duration[]": "time"}
META = {"fps": "time", "synopsis": "text", "cast": "list", "cast[]": "record", "id": "text"}
RULES = mb.Rules(min_dialogues=0)  # synopsis and cast still required: the meta is read


def _story(k: int, shots: tuple[int, int]) -> dict:
    """A story entry over `shots` whose frame / duration ranges give FPS."""
    f0, f1 = shots[0] * 100, shots[1] * 100 + 99
    return {"shot": list(shots), "description": f"Paragraph {k}: they go home.",
            "frame": [f0, f1], "duration": [f0 / FPS, f1 / FPS]}


def _movie(root: pathlib.Path) -> None:
    story = [_story(k, s) for k, s in enumerate([(0, 3), (4, 7), (8, 11)])]
    meta = {"imdb_id": IMDB, "fps": FPS, "synopsis": "They go home.",
            "cast": [{"id": "nm0000001", "character": "Hero"}]}
    write_movie(root, IMDB, 12, [[0, 5], [6, 11]], frame_cues(12, FPS), meta=meta,
                story=story)


def _read(path: pathlib.Path, counts: collections.Counter) -> dict:
    """Everything the reader makes of the movie, keyed by record: its clips, its synopsis
    pairs and its frame rate (a skipped movie makes nothing)."""
    root = path.parent.parent
    movie = mb.load_movie(root, IMDB, RULES, counts)
    if movie is None:
        return {}
    failed = mb.movie_rule_failure(movie, RULES)
    if failed is not None:
        common.record_skip(counts, failed[0], movie["annotation_path"], failed[1])
        return {}
    out: dict = {("fps",): movie["fps"]}
    out.update({("clip", c["clip_id"]): c for c in mb.movie_clips(movie, RULES, counts)})
    out.update({("pair", p["clip_id"]): p for p in mb.movie_story_pairs(movie, RULES, counts)})
    return out


def test_generated_movie_reads_whole(tmp_path):
    _movie(tmp_path)
    counts = common.Counts()
    got = _read(tmp_path / "annotation" / f"{IMDB}.json", counts)
    assert got[("fps",)] == FPS and sum(k[0] == "pair" for k in got) == 3
    assert sum(k[0] == "clip" for k in got) >= 1
    assert not [k for k in counts if not k.startswith(common.NOTE_PREFIX)], dict(counts)


def test_mutated_annotation(tmp_path):
    _movie(tmp_path)
    path = tmp_path / "annotation" / f"{IMDB}.json"
    record = json.loads(path.read_text())
    outcomes = check_mutations(_read, path, record, ANNOTATION, frozenset({"story"}))
    assert outcomes["skipped"] > 0, outcomes


def test_mutated_meta(tmp_path):
    """A meta file that does not validate is read as absent (`meta_bad_json`), a frame rate
    that is no number in 1-240 skipped (`meta_bad_fps`); the story's rate is the same here,
    so the clips are too, and the skip is what tells."""
    _movie(tmp_path)
    meta = tmp_path / "meta" / f"{IMDB}.json"
    record = json.loads(meta.read_text())

    def read(path: pathlib.Path, counts: collections.Counter) -> dict:
        return _read(tmp_path / "annotation" / f"{IMDB}.json", counts)

    outcomes = check_mutations(read, meta, record, META, frozenset({"fps", "synopsis"}))
    assert outcomes["skipped"] > 0, outcomes


def test_a_bad_meta_fps_is_named_not_read_silently(tmp_path):
    """fps "25" (a string) or 1e9 falls back to the story's rate only with a named skip."""
    for bad in ("25", 1e9, True):
        counts = common.Counts()
        meta = tmp_path / "meta.json"
        fps, source = mb.read_fps({"fps": bad}, {"story": [_story(0, (0, 3))]}, 24.0, counts,
                                  "ann.json", meta)
        assert (fps, source) == (FPS, "annotation.story")
        assert counts == {"meta_bad_fps": 1}
        assert counts.named["meta_bad_fps"][0].startswith(f"{meta} (fps: ")
