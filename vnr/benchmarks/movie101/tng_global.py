"""Movie101 TNG's global stage (§5.2; `config.stage = "global"`): every narration ranks all
shots of its own movie.

A split's movies are packed row-wise into one stream (`movie_rows`: row i holds shot i and
narration i, so both towers run once per row), which the trainer's loop predicts like any
other split; `eval_metrics` cuts the outputs back into movies (`per_movie`) and scores
R@1/5/10 in percent over narrations, `movie_avg_R@k` (the paper's "average Recall@n on all
movies" read as a per-movie mean) and the exact random level. The shots: with
`data.shot_source = "rtemp"` the release's Movie101-R-temp `split` file (the candidates of a
caption are its movie's listed shots, its positive its own shot), else every
`data.shot_len`-second shot of the movie, positives by `shot_alignment`. Table 4's CNCLIP
(`model.arch = "cnclip"`) packs the shots' frames instead (`tng_cnclip.movie_rows`).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from vnr import evaluation
from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import records, tng_cnclip
from vnr.benchmarks.movie101 import tng_data as data
from vnr.data import pipeline

KS = (1, 5, 10)  # R@k
REPORT_NARRATIONS, REPORT_TOP = 4, 3  # rows and top spans of <split>_grounding.png


def movie_shot_spans(config: Any, movies: dict[str, list[dict]], durations: list[int],
                     offsets: dict[str, float] | None = None) -> list[np.ndarray]:
    """Per movie its candidate shots [S, 2] in seconds: with data.shot_source = "rtemp" the
    split's records themselves (the Movie101-R-temp shots), else the movie cut every
    shot_len seconds on the grid of its offset (`offsets`, default 0)."""
    d = config.data
    if data.given_shots(d):
        return [np.array([[float(r["start"]), float(r["end"])] for r in recs])
                for recs in movies.values()]
    offsets = offsets or {}
    return [gm.cut_shots(float(T), float(d.shot_len), offsets.get(mid, 0.0))
            for mid, T in zip(movies, durations)]


def movie_rows(config: Any, movies: dict[str, list[dict]],
               offsets: dict[str, float] | None = None) -> pipeline.EvalStream:
    """`movies`' shots (`movie_shot_spans`) and narrations packed row-wise into global
    batches of eval_batch_size (`evaluation.global_rows`: process p feeds the p-th block of
    each); `info` is their `tng_data.MovieRows`."""
    if tng_cnclip.enabled(config):
        return tng_cnclip.movie_rows(config, movies, offsets)
    from vnr.data import text

    d = config.data
    table = records.MovieTable(d)
    shots, masks, toks = [], [], []
    frames_of = {mid: data.movie_frames(table[mid], mid) for mid in movies}
    durations = [len(f) for f in frames_of.values()]
    spans = movie_shot_spans(config, movies, durations, offsets)
    for (mid, recs), sp in zip(movies.items(), spans):
        sf, sm = data.shot_features(frames_of[mid], sp, d.shot_len)
        shots.append(sf)
        masks.append(sm)
        toks += [text.tokenize(r["text"], d.vocab_size, d.max_tokens) for r in recs]
    shot = np.concatenate(shots)
    mask = np.concatenate(masks)
    tok = np.stack(toks)
    n = max(len(shot), len(tok))

    def pad(x: np.ndarray) -> np.ndarray:  # shots and narrations share rows
        return np.concatenate([x, np.zeros((n - len(x), *x.shape[1:]), x.dtype)])

    stream = evaluation.global_rows(
        {"shot": pad(shot), "shot_mask": pad(mask), "tokens": pad(tok)},
        config.eval_batch_size)
    return dataclasses.replace(stream, info=data.MovieRows(movies, spans, durations))


def per_movie(out: evaluation.SplitOutputs) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The outputs of a `movie_rows` stream -> per movie its shot embeddings [S, W] and its
    narration embeddings [Q, W]."""
    info: data.MovieRows = out.info
    bv = np.cumsum([0] + [len(sp) for sp in info.spans])
    bt = np.cumsum([0] + [len(recs) for recs in info.movies.values()])
    return ([out["shot"][bv[i]:bv[i + 1]] for i in range(len(info.movies))],
            [out["text"][bt[i]:bt[i + 1]] for i in range(len(info.movies))])


def embed_movies(config: Any, movies: dict[str, list[dict]], predict_fn: Callable,
                 mesh: jax.sharding.Mesh, offsets: dict[str, float] | None = None
                 ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[int]]:
    """Per movie: shot embeddings [S, W], narration embeddings [Q, W], the shots' spans
    [S, 2] and the duration in seconds (`movie_rows` through `predict_fn`; every process
    gets all of them)."""
    out = evaluation.predict_split(movie_rows(config, movies, offsets), predict_fn, mesh,
                                   name="movie101 tng shots")
    vs, ts = per_movie(out)
    return vs, ts, out.info.spans, out.info.durations


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """The movies of the first `max_examples` usable narrations of `split` (0: all)."""
    movies = data.split_movies(config.data, split, max_examples)
    if not movies:
        raise ValueError(f"evaluation split {split} of movie101/{config.data.config} is empty")
    return movie_rows(config, movies)


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None = None) -> dict[str, float]:
    """R@1/5/10 over narrations, movie_avg_R@k, the random levels and the counts; with
    `report_dir`, `<split>_grounding.png` (`global_figure`)."""
    d, info = config.data, out.info
    vs, ts = per_movie(out)
    if report_dir is not None:
        from vnr.reports import plots

        plots.report(report_dir / f"{split}_grounding.png", global_figure, config, split,
                     next(iter(info.movies.items())), vs[0], ts[0], info.spans[0],
                     info.durations[0])
    hits = {k: [] for k in KS}
    per_movie_recall = {k: [] for k in KS}
    n_shots, n_pos = [], []
    for recs, v, t, sp in zip(info.movies.values(), vs, ts, info.spans):
        pos = _positives(d, recs, sp)
        r = gm.retrieval_recall(t @ v.T, pos, KS)
        for k in KS:
            hits[k].append(r[f"R@{k}"] * len(recs))
            per_movie_recall[k].append(r[f"R@{k}"])
        n_shots += [len(v)] * len(recs)
        n_pos += pos.sum(1).tolist()
    q = len(n_pos)
    metrics = {f"R@{k}": 100 * sum(hits[k]) / q for k in KS}
    metrics.update({f"movie_avg_R@{k}": 100 * float(np.mean(per_movie_recall[k])) for k in KS})
    metrics["movies"] = float(len(info.movies))
    metrics.update({f"random_{k}": 100 * v for k, v in
                    gm.random_retrieval_recall(np.array(n_shots), np.array(n_pos), KS).items()})
    metrics["narrations"] = float(q)
    metrics["no_positive"] = float(sum(p == 0 for p in n_pos))
    metrics["left_out"] = float(sum(records.usable(d, split)[1].values()))
    return metrics


def _positives(d: Any, recs: list[dict], spans: np.ndarray) -> np.ndarray:
    """[Q, S]: the shots each narration's retrieval counts as hits (its own listed shot,
    else the cut shots `shot_alignment` aligns with it)."""
    if data.given_shots(d):
        return np.eye(len(recs), dtype=bool)
    return np.stack([gm.shot_alignment(spans, np.array([float(r["start"]), float(r["end"])]))
                     for r in recs])


def global_figure(config: Any, split: str, movie: tuple[str, list[dict]], v: np.ndarray,
                  t: np.ndarray, spans: np.ndarray, seconds: int) -> Any:
    """The first movie's first narrations on its timeline: true span, top shots, hits."""
    from vnr.benchmarks.movie101 import figures

    mid, recs = movie
    recs = recs[:REPORT_NARRATIONS]
    pos = _positives(config.data, recs, spans)
    rows = []
    for i, rec in enumerate(recs):
        top = np.argsort(-(t[i] @ v.T), kind="stable")[:REPORT_TOP]
        rows.append(figures.Grounded(
            f"{rec['text']}  ({mid}, {float(rec['start']):.0f}-{float(rec['end']):.0f} s)",
            (float(rec["start"]), float(rec["end"])), [tuple(spans[j]) for j in top],
            (0.0, float(seconds)), hits=[tuple(spans[j]) for j in np.flatnonzero(pos[i])]))
    return figures.grounding(rows, f"{split}: global shot retrieval in movie {mid}, top "
                             f"{REPORT_TOP} shots")
