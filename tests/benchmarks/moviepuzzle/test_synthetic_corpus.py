"""The synthetic MoviePuzzle corpus: determinism, layout, splits, and that its cues exist."""

from __future__ import annotations

import hashlib
import json
import pathlib
import re

import numpy as np
import pytest
from PIL import Image

from tfds_builders.moviepuzzle import cues, synthetic

MICRO = dict(movies=4, heldout=1, train=6, val=2, test_in_domain=2, test_out_domain=3)


def _digest(root: pathlib.Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_deterministic_per_seed(tmp_path: pathlib.Path) -> None:
    a = synthetic.write_corpus(tmp_path / "a", seed=5, sizes=MICRO)
    synthetic.write_corpus(tmp_path / "b", seed=5, sizes=MICRO)
    synthetic.write_corpus(tmp_path / "c", seed=6, sizes=MICRO)
    da, db, dc = (_digest(tmp_path / k) for k in "abc")
    assert da == db
    assert da != dc and set(da) != set(dc)  # other clip lengths, other pixels
    assert a["clips"] == {k: MICRO[k] for k in synthetic.SPLITS}


def test_workers_do_not_change_files(tmp_path: pathlib.Path) -> None:
    synthetic.write_corpus(tmp_path / "one", seed=1, sizes=MICRO, workers=1)
    synthetic.write_corpus(tmp_path / "two", seed=1, sizes=MICRO, workers=2)
    assert _digest(tmp_path / "one") == _digest(tmp_path / "two")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, dict]:
    root = tmp_path_factory.mktemp("syn")
    return root, synthetic.write_corpus(root, seed=0, sizes="tiny")


def _clips(root: pathlib.Path):
    ids = json.loads((root / "clip_id.json").read_text())
    for split, clip_ids in ids.items():
        for c in clip_ids:
            d = root / split / str(c)
            yield split, str(c), d, json.loads((d / "info.json").read_text())


def test_layout_matches_public_release(tiny) -> None:
    root, summary = tiny
    ids = json.loads((root / "clip_id.json").read_text())
    assert list(ids) == list(synthetic.SPLITS)
    assert {k: len(v) for k, v in ids.items()} == {
        k: synthetic.PRESETS["tiny"][k] for k in synthetic.SPLITS
    }
    silent = frames = 0
    for _, c, d, info in _clips(root):
        n = info["img_num"]
        assert 10 <= n <= 20 and info["img_id"] == list(range(n))
        scenes, shots = np.asarray(info["scene_id"]), np.asarray(info["shot_id"])
        assert 1 <= len(set(scenes)) <= 3 and 3 <= len(set(shots)) <= 10
        assert np.all(np.diff(scenes) >= 0) and np.all(np.diff(shots) >= 0)  # contiguous
        for s in set(shots):  # a shot lies inside one scene
            assert len(set(scenes[shots == s])) == 1
        shuf = json.loads((d / "info_shuffled.json").read_text())
        assert [shuf["img_id"][g] for g in shuf["gt_id"]] == info["img_id"]
        for j, k in enumerate(shuf["img_id"]):
            assert shuf["shot_id"][j] == info["shot_id"][k]
        subs = json.loads((d / "subtitle.json").read_text())
        assert len(subs) == n and all(isinstance(x, list) for x in subs)
        silent += sum(not any(s.strip() for s in x) for x in subs)
        frames += n
        with Image.open(d / f"{c}_{n - 1}.jpg") as im:
            assert im.format == "JPEG" and im.size == (64, 64) and im.mode == "RGB"
    assert frames == summary["frames"]
    assert 0.2 <= silent / frames <= 0.45  # about 30% of frames without dialogue


def test_held_out_movies_are_disjoint(tiny) -> None:
    root, summary = tiny
    movies: dict[str, set] = {}
    for split, _, _, info in _clips(root):
        movies.setdefault(split, set()).add(info["tt_id"])
    seen = movies["train"] | movies["val"] | movies["test_in_domain"]
    assert movies["test_out_domain"].isdisjoint(seen)
    assert movies["test_in_domain"] <= movies["train"]
    assert movies["test_out_domain"] == set(summary["heldout_movies"])
    assert set(summary["train_movies"]).isdisjoint(summary["heldout_movies"])


def test_no_absolute_position_in_text(tiny) -> None:
    root, _ = tiny
    for _, _, d, _ in _clips(root):
        for lines in json.loads((d / "subtitle.json").read_text()):
            for s in lines:
                assert not re.search(r"\d", s), s


def _layouts(split: str = "train", count: int = 60):
    sizes = synthetic.PRESETS["small"]
    for s, index, _, m in synthetic.corpus_plan(0, sizes):
        if s == split and index < count:
            movie = synthetic.make_movie(0, m)
            yield movie, *synthetic.make_clip(0, split, index, movie)


def test_vision_cues_exist() -> None:
    """Door distance shrinks within action scenes; carried items never decrease."""
    steps = []
    for movie, clip, _ in _layouts():
        frames = clip["frames"]
        counts = [len(f["items"]) for f in frames]
        assert all(a <= b for a, b in zip(counts, counts[1:], strict=False))
        for a, b in zip(frames, frames[1:], strict=False):
            if a["scene"] == b["scene"] and a["action"]:
                door = synthetic.door_point(movie["locations"][a["loc"]])
                hero_a, hero_b = dict(a["chars"])[0], dict(b["chars"])[0]
                steps.append(np.linalg.norm(hero_b - door) - np.linalg.norm(hero_a - door))
    steps = np.asarray(steps)
    assert steps.mean() < -2.0 and (steps < 0).mean() > 0.8


def test_text_cues_exist() -> None:
    """Event stages appear in order; the item is found at or after its pickup frame."""
    for _, clip, subs in _layouts(count=40):
        seen: dict[int, int] = {}
        for f, tags in enumerate(clip["tags"]):
            assert len(tags) <= len(subs[f])
            for event, kind, stage, _ in tags:
                assert seen.get(event, -1) <= stage, (kind, f)
                seen[event] = max(seen.get(event, -1), stage)
        for f, obj in clip["pickups"]:
            for g, line_list in enumerate(subs):
                for line in line_list:
                    if line in {s.format(obj=obj) for s in synthetic.story.EVENTS["search"][1]}:
                        assert g >= f


def test_each_modality_carries_part_of_the_order() -> None:
    scores = cues.oracle_scores(sizes="small", split="test_out_domain", clips=60)
    vision, text, both = (scores[k]["os2"] for k in ("vision", "text", "both"))
    assert 0.55 < text < both - 0.08 and 0.55 < vision < both - 0.04
    assert both > 0.75
