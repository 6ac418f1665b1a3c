"""Movie101 command-line tools (not the trainer; never imported by a task).

    python -m vnr.benchmarks.movie101.tools two_stage --global_workdir G --local_workdir L \
        [--k 1|2|3] [--split test] [--weight 0]

`two_stage`: Table 6, the global shot-retrieval run's top-k shots re-ranked by the local
RNL run (`two_stage` below).
"""

from __future__ import annotations

import json

import ml_collections
import numpy as np
from absl import flags

from vnr import cli, evaluate, evaluation
from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import rnl, tng, tng_data, tng_global
from vnr.benchmarks.movie101.records import MovieTable


def two_stage(global_workdir: str, local_workdir: str, split: str = "test", k: int = 1,
              weight: float = 0.0, max_examples: int = 0, step: str = "selected"
              ) -> dict[str, float]:
    """Table 6: global top-k shots, RNL in a window centred on each, k-way re-ranking.

    For every narration of `split`: its movie's shots (cut every shot_len seconds; on each
    movie's Movie101-R-temp offset grid when the global run trained on those files, §5.2)
    are ranked by the global run; for each
    of the k best, a `window`-second window of the local run centred on the shot (clamped to
    the movie) is scored by RNL; all k windows' proposals are pooled and ranked by the local
    confidence (`grounding_metrics.two_stage_candidates`; `weight` > 0 adds our shot-cosine
    prior, a named option) and scored with the upstream protocol (`recall_upstream`) on
    index boxes of whole seconds against the narration's span. Table 6 has k = 1, 2, 3.
    A local run of upstream's RNL (model.arch = "release", `rnl.py`) gives refined boxes per
    window instead of a shared proposal grid: each window's boxes (`rnl.index_boxes`) are
    moved to the movie's clock and pooled with their scores (log-sigmoid, plus the same
    optional prior), the narration's box upstream's label int(start), int(end).
    Each run is restored by `vnr.evaluate.restore` at `step` (default: the step its
    results.json reports).
    """
    glob = evaluate.restore(global_workdir, step, task="movie101.tng")
    local = evaluate.restore(local_workdir, step, task="movie101.tng")
    gc, lc = glob.config, local.config
    if not tng._global(gc) or tng._global(lc):
        raise ValueError("--global_workdir must be a stage=global run and --local_workdir a "
                         "stage=local run")
    offsets: dict[str, float] = {}
    if tng_data.given_shots(gc.data):
        # a Movie101-R-temp global run: the local run's narrations, each movie cut on the
        # grid of its offset in the R-temp file of the same split
        offsets = tng_data.shot_offsets(gc.data, split)
        gc = ml_collections.ConfigDict(gc.to_dict())
        gc.data.update(config=lc.data.config, shot_source="cut")
    if gc.data.config != lc.data.config:  # each run tokenizes with its own settings
        raise ValueError("the two runs use different data configs")
    d = lc.data
    movies = tng_data.split_movies(d, split, max_examples)
    vs, ts, shot_spans, durations = tng_global.embed_movies(
        gc, movies, glob.predict, glob.setup.mesh, offsets)
    table = MovieTable(d)
    W, n = d.window, d.n_clips
    release = tng._release(lc)
    query = tng_data.Query.from_config(d)  # the local run's own query inputs
    spans, valid = gm.proposal_spans(n)
    rel = spans[valid] * (W / n)
    items, meta = [], []
    for (mid, recs), v, t, sp, T in zip(movies.items(), vs, ts, shot_spans, durations):
        movie = table[mid]
        sim = t @ v.T
        for r, row in zip(recs, sim):
            # a movie with fewer than k shots repeats its last one (NMS drops the copies)
            top = np.resize(np.argsort(-row, kind="stable"), k)
            starts = []
            # the narration's own inputs, the same in each of its k windows
            por, pm = tng_data.portrait_features(movie, r["roles"], d.max_roles, d.face_dim)
            asked = {"portraits": por, "portrait_mask": pm, **query(r["text"])}
            for j in top:
                centre = float(sp[j].mean())
                ws = int(np.clip(round(centre - W / 2), 0, max(T - W, 0)))
                clips, faces = tng_data.window_features(movie, ws, W, n, d.faces, d.face_dim)
                if release and d.get("s3d_only", False):
                    clips = clips[:, -int(d.s3d_dim):]
                items.append({"clips": clips, "faces": faces, **asked,
                              "gt": np.zeros(2, np.float32), "valid": np.array(True),
                              **({"gt_index": np.zeros(2, np.int32)} if release else {})})
                starts.append(ws)
            meta.append((row[top], np.array(starts, float),
                         np.array([float(r["start"]), float(r["end"])])))
    stream = evaluation.global_rows(
        {key: np.stack([it[key] for it in items]) for key in items[0] if key != "valid"},
        lc.eval_batch_size)
    pred = evaluation.predict_split(stream, local.predict, local.setup.mesh,
                                    name="movie101 two-stage windows")
    if release:  # per window: its refined index boxes on the movie's clock, log-sigmoid
        sc = np.log(np.maximum(pred["scores"], 1e-30)).reshape(len(meta), k, -1)
        boxes = rnl.index_boxes(pred["boxes"], n).reshape(len(meta), k, -1, 2) * (W / n)
    else:
        sc = pred["scores"].reshape(len(meta), k, n, n)[:, :, valid]
    res = {key: 0.0 for key in gm.recall_upstream(np.zeros((1, 1)), np.zeros((1, 2)),
                                                  np.zeros((1, 2)), (1, 5), tng.IOUS)}
    for q, (m, s) in enumerate(zip(meta, sc)):
        if release:
            cand = (boxes[q] + m[1][:, None, None]).reshape(-1, 2)
            score = (s + weight * np.asarray(m[0], np.float64)[:, None]).reshape(-1)
            r = gm.recall_upstream(score[None], cand, np.floor(m[2][None]), (1, 5), tng.IOUS)
        else:
            cand, score = gm.two_stage_candidates(m[0], m[1], rel, s, k, weight)
            r = gm.recall_upstream(score[None], gm.to_index_boxes(cand),
                                   gm.to_index_boxes(m[2][None]), (1, 5), tng.IOUS)
        for key in res:
            res[key] += r[key]
    gt = np.stack([m[2] for m in meta])
    out = {key: 100 * val / max(len(meta), 1) for key, val in res.items()}
    out["narrations"] = float(len(gt))
    return out


def _two_stage_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("global_workdir", None, "a configs/movie101/tng.py:global run",
                        required=True, flag_values=fv)
    flags.DEFINE_string("local_workdir", None, "a configs/movie101/tng.py run", required=True,
                        flag_values=fv)
    flags.DEFINE_string("split", "test", "the split both runs evaluate", flag_values=fv)
    flags.DEFINE_integer("k", 1, "shots kept by the global stage (Table 6: 1, 2, 3)",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_float("weight", 0.0, "OUR option: weight of the shot-cosine prior (0 = the "
                       "paper's rule)", flag_values=fv)
    flags.DEFINE_integer("max_clips", 0, "first N narrations (0 = all)", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_string("step", "selected", "each run's checkpoint: selected (what its "
                        "results.json reports), best, last or a step number", flag_values=fv)


COMMANDS = {"two_stage": ("Table 6: global top-k shots re-ranked by the local run",
                          _two_stage_flags)}


def main(argv: list[str] | None = None) -> None:
    a = cli.parse(argv, "python -m vnr.benchmarks.movie101.tools", __doc__, COMMANDS)
    try:
        out = two_stage(a.global_workdir, a.local_workdir, a.split, a.k, a.weight, a.max_clips,
                        a.step)
    except (evaluate.EvaluateError, ValueError, FileNotFoundError) as e:
        cli.fail(f"{e}")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
