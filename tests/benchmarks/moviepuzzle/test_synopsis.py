"""Movie Synopsis Association: metrics, synopsis builder configs, task end to end, init_from."""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from tfds_builders import common
from tfds_builders import moviepuzzle as mp
from tfds_builders.moviepuzzle import synopsis_corpus
from vnr.benchmarks.moviepuzzle.synopsis_metrics import answer_counts, retrieval_metrics
from vnr.workdir import split_results

# ----------------------------------------------------------------------------- metrics


def test_metrics_perfect_constant_and_known_ranks() -> None:
    m = retrieval_metrics(jnp.eye(12))
    assert float(m["r1"]) == 1.0 and float(m["medr"]) == 1.0
    m = retrieval_metrics(jnp.zeros((12, 12)))  # all tied: expected values
    assert float(m["r1"]) == pytest.approx(1 / 12) and float(m["r5"]) == pytest.approx(5 / 12)
    assert float(m["r10"]) == pytest.approx(10 / 12) and float(m["medr"]) == 6.5
    # answer of query i ranked i + 1 (candidates j < i scored higher)
    n = 15
    sim = jnp.asarray(np.where(np.arange(n)[None] < np.arange(n)[:, None], 2.0, 0.0)
                      + np.eye(n))
    m = jax.jit(retrieval_metrics)(sim)
    assert float(m["r1"]) == pytest.approx(1 / n) and float(m["r5"]) == pytest.approx(5 / n)
    assert float(m["r10"]) == pytest.approx(10 / n) and float(m["medr"]) == 8.0
    assert float(m["mean_rank"]) == pytest.approx((n + 1) / 2)


def test_metrics_with_ties_and_padding_are_pinned() -> None:
    """Values of the hand-counted implementation (before the shared ranking op), pinned:
    integer scores in 0..3 tie often; the last two rows and columns are padding."""
    sim = jnp.asarray(np.random.default_rng(7).integers(0, 4, (9, 9)), jnp.float32)
    valid = jnp.asarray([True] * 7 + [False] * 2)
    g, e = answer_counts(sim, valid)
    assert np.asarray(g)[:7].tolist() == [0, 3, 0, 1, 4, 3, 5]
    assert np.asarray(e)[:7].tolist() == [3, 2, 0, 3, 1, 3, 1]
    m = {k: float(v) for k, v in retrieval_metrics(sim, valid).items()}
    assert m == pytest.approx({"r1": 0.1785714328289032, "r5": 0.6666666865348816, "r10": 1.0,
                               "medr": 5.0, "mean_rank": 4.214285850524902, "count": 7.0},
                              rel=1e-6)
    m = {k: float(v) for k, v in jax.jit(retrieval_metrics)(sim).items()}
    assert m == pytest.approx({"r1": 0.12037037312984467, "r5": 0.5370370745658875,
                               "r10": 1.0, "medr": 5.5, "mean_rank": 4.722222328186035,
                               "count": 9.0}, rel=1e-6)


def test_metrics_ignore_padding() -> None:
    sim = np.eye(6)
    sim[:4, 4:] = 5.0  # padded candidates that would outrank every answer
    valid = np.array([True] * 4 + [False] * 2)
    m = retrieval_metrics(jnp.asarray(sim), jnp.asarray(valid))
    assert float(m["r1"]) == 1.0 and float(m["count"]) == 4 and float(m["medr"]) == 1.0


# ----------------------------------------------------------------------------- builders


def test_synthetic_synopsis_reuses_the_clip_corpus(tmp_path: pathlib.Path) -> None:
    syn = mp.synopsis_source("synthetic_synopsis_tiny", "test_out_domain", tmp_path)
    clips = mp.data_source("synthetic_tiny", "test_out_domain", tmp_path)
    assert len(syn) == len(clips) == 10
    for i in (0, 9):
        a, b = syn[i], clips[i]
        assert a["clip_id"] == b["clip_id"] and a["frames"] == b["frames"]
        assert a["subtitles"] == b["subtitles"]
        for k in ("shot_id", "scene_id", "position"):
            np.testing.assert_array_equal(a[k], b[k])
        assert a["synopsis"].endswith(".") and " the " in a["synopsis"]
    texts = [syn[i]["synopsis"] for i in range(len(syn))]
    assert len(set(texts)) >= 8  # paragraphs tell clips apart
    assert "synopsis" not in clips[0]  # the clip configs keep their features


def test_describe_clip_mentions_places_and_finds() -> None:
    from tfds_builders.moviepuzzle import synthetic

    movie = synthetic.make_movie(0, 1)
    for i in range(6):
        clip, _ = synthetic.make_clip(0, "train", i, movie)
        text = synopsis_corpus.describe_clip(movie, clip)
        for loc in clip["locs"]:
            assert f"the {movie['locations'][loc]['name']}." in text
        for _, obj in clip["pickups"]:
            assert f"finds the {obj}." in text


def test_movienet_synopsis_from_story_alignment(tmp_path: pathlib.Path) -> None:
    from tests.benchmarks.moviepuzzle.test_movienet import frame_cues, write_movie

    raw = tmp_path / "raw"
    for m in range(1, 6):
        story = [{"id": f"s{k}", "shot": [k * 5, k * 5 + 4], "frame": [k * 500, k * 500 + 499],
                  "duration": [k * 500 / 25, (k * 500 + 499) / 25],
                  "description": f"Movie {m} part {k}: they  argue\nabout money."}
                 for k in range(3)]
        story.append({"id": "bad", "shot": [0, 4]})  # no description
        write_movie(raw, f"tt000010{m}", 15, [[0, 14]], frame_cues(15, 25.0) if m != 3 else None,
                    story=story)
    write_movie(raw, "tt0000200", 15, [[0, 14]], frame_cues(15))  # no story: skipped
    builder = mp.prepare("movienet_synopsis", tmp_path / "data", manual_dir=raw)
    skipped = json.loads((pathlib.Path(builder.data_dir) / common.SUMMARY_FILE).read_text())[
        "skipped"]
    assert skipped == {"story_bad_entry": 5, "movie_no_story": 1, "srt_unused_movie_no_subtitle": 1}
    splits = {s: mp.synopsis_source("movienet_synopsis", s, tmp_path / "data")
              for s in builder.info.splits}
    assert sum(len(s) for s in splits.values()) == 15
    movies = {s: {src[i]["movie_id"] for i in range(len(src))} for s, src in splits.items()}
    assert not movies["train"] & movies["test"]
    rec = next(src[i] for src in splits.values() for i in range(len(src))
               if src[i]["clip_id"] == "tt0000101_s001")
    assert rec["synopsis"] == "Movie 1 part 1: they argue about money."
    assert len(rec["frames"]) == 15 and np.all(np.diff(rec["img_id"]) > 0)
    assert rec["img_id"][0] == 15
    assert rec["subtitles"][0] == "I think we should go to the house 5 0."


# ----------------------------------------------------------------------------- task


def _smoke(tmp_path: pathlib.Path, **overrides):
    from configs.moviepuzzle.synopsis import get_config

    c = get_config("smoke")
    c.data.data_dir = str(tmp_path / "tfds")
    for k, v in overrides.items():
        c[k] = v
    return c


def _reorder_run(workdir: pathlib.Path, hcmc: bool = False) -> nnx.State:
    """A checkpoint exactly as vnr.train writes it for configs/moviepuzzle/main.py:smoke
    (or, with `hcmc`, configs/moviepuzzle/hcmc.py:smoke)."""
    from vnr import checkpoint

    if hcmc:
        from configs.moviepuzzle.hcmc import get_config
        from vnr.benchmarks.moviepuzzle import hcmc as moviepuzzle
    else:
        from configs.moviepuzzle.main import get_config
        from vnr.benchmarks.moviepuzzle import pairwise as moviepuzzle

    cfg = get_config("smoke")
    model = moviepuzzle.make_model(cfg, nnx.Rngs(3))
    opt = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)

    class NoIter:
        def get_state(self) -> dict:
            return {}

    workdir.mkdir(parents=True)
    (workdir / "config.json").write_text(cfg.to_json_best_effort())
    mgr = checkpoint.manager(workdir / "checkpoints", 2)
    checkpoint.save(mgr, 6, nnx.state((model, opt)), NoIter())
    mgr.wait_until_finished()
    mgr.close()
    return nnx.state(model, nnx.Param)


def test_init_from_loads_the_frame_encoder_by_name(tmp_path: pathlib.Path) -> None:
    """The `pretrained` hook names run sources (at `init_step`, default the step the run
    reports); `vnr.pretrained.load` (what the trainer calls on a fresh state) copies
    image/text/fuse; make_model reads no weights."""
    from vnr import pretrained, sharding
    from vnr.benchmarks.moviepuzzle import synopsis as task

    saved = _reorder_run(tmp_path / "reorder")
    config = _smoke(tmp_path, init_from=str(tmp_path / "reorder"))
    task.validate(config)
    sources = task.pretrained(config)
    assert sources == {p: (str((tmp_path / "reorder").absolute()), pretrained.RUN, "selected")
                       for p in ("image", "text", "fuse")}
    model = task.make_model(config, nnx.Rngs(0))
    fresh = np.array(model.fuse.kernel.value)
    state = nnx.state(model)
    mesh = sharding.make_mesh((1, 1), devices=jax.devices()[:1])
    new = pretrained.load(state, sharding.state_shardings(state, mesh), sources, root=(),
                          say=lambda _: None)
    nnx.update(model, new)
    for part in ("image", "text", "fuse"):
        got = nnx.state(getattr(model, part), nnx.Param).to_pure_dict()
        want = saved[part].to_pure_dict()
        jax.tree.map(np.testing.assert_array_equal, got, want)
    assert not np.array_equal(fresh, model.fuse.kernel.value)
    assert task.pretrained(_smoke(tmp_path)) == {}


def test_init_from_an_hcmc_run_copies_its_frame_encoder(tmp_path: pathlib.Path) -> None:
    """Table 4 "+reordering" from HCMC: `hcmc` builds HCMC's frame encoder under its own
    path, so the (run, "run") source copies encoders.frame from the HCMC checkpoint."""
    from configs.moviepuzzle.synopsis import get_config
    from vnr import pretrained, sharding
    from vnr.benchmarks.moviepuzzle import synopsis as task

    saved = _reorder_run(tmp_path / "hcmc", hcmc=True)
    with pytest.raises(ValueError, match="is an HCMC run: set model.frame_encoder='hcmc'"):
        task.validate(_smoke(tmp_path, init_from=str(tmp_path / "hcmc")))
    config = get_config("smoke,hcmc")
    config.data.data_dir = str(tmp_path / "tfds")
    config.init_from = str(tmp_path / "hcmc")
    task.validate(config)
    model = task.make_model(config, nnx.Rngs(0))
    state = nnx.state(model)
    mesh = sharding.make_mesh((1, 1), devices=jax.devices()[:1])
    new = pretrained.load(state, sharding.state_shardings(state, mesh), task.pretrained(config),
                          root=(), say=lambda _: None)
    nnx.update(model, new)
    got = nnx.state(model.encoders["frame"], nnx.Param).to_pure_dict()
    jax.tree.map(np.testing.assert_array_equal, got, saved["encoders"]["frame"].to_pure_dict())


def test_init_from_mismatch_is_one_clear_line(tmp_path: pathlib.Path) -> None:
    from vnr.benchmarks.moviepuzzle import synopsis as task

    _reorder_run(tmp_path / "reorder")
    config = _smoke(tmp_path, init_from=str(tmp_path / "reorder"))
    config.model.width = 48
    with pytest.raises(ValueError, match=r"model.width=32 .* this config has 48") as e:
        task.validate(config)
    assert "\n" not in str(e.value)
    (tmp_path / "reorder" / "config.json").unlink()  # then the shapes themselves are checked
    with pytest.raises(ValueError, match=r"parameter image\..* expects"):
        task.validate(config)
    with pytest.raises(FileNotFoundError, match="no finished checkpoint under"):
        task.validate(_smoke(tmp_path, init_from=str(tmp_path)))


@pytest.mark.e2e
def test_train_end_to_end_with_reordering_init(tmp_path: pathlib.Path) -> None:
    from vnr import train

    _reorder_run(tmp_path / "reorder")
    config = _smoke(tmp_path, init_from=str(tmp_path / "reorder"))
    results = train.run(config, str(tmp_path / "run"))
    assert set(results) == {"test_in_domain", "test_out_domain"}
    for m in results.values():
        assert m["clips"] == 10 and 0 <= m["r1"] <= m["r5"] <= m["r10"] == 1.0
        assert 1 <= m["medr"] <= 10
    assert split_results(json.loads((tmp_path / "run" / "results.json").read_text())) == results
