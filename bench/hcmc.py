"""HCMC inference throughput: Algorithm 1 (clustering + hierarchical beam search) in clips/s.

    python -m bench hcmc --config configs/moviepuzzle/hcmc.py[:ARGS] \
        [--clips 64] [--repeats 3] [--config.key=value ...]

Side by side in one run, on the same clips of `data.val_split` with the config's model
(randomly initialised: speed does not depend on the weights, and k-means runs to
convergence either way): (1) the jitted clip pass (frame features, cluster embeddings,
frame-level Eq. 5 scores), (2) k-means alone for each distance (euclidean, cosine,
soft-DTW), (3) Algorithm 1 end to end after the clip pass (clustering, then frame, shot
and scene ordering with the order heads scoring every unit pair), and (4) flat beam search
over all frames of a clip on the frame scores (the main job's inference). Each is timed
after a warm-up call (compile excluded), best of `--repeats`.
"""

from __future__ import annotations

import numpy as np
from absl import flags

from bench.timing import flag_config, wall_times
from vnr import cli, evaluation
from vnr.train import setup

FLAGS = flags.FLAGS  # --config (and its overrides) is defined by vnr.train
flags.DEFINE_integer("clips", 64, "Validation clips to order.")
flags.DEFINE_integer("repeats", 3, "Timed repetitions (best is reported).")


def main(argv: list[str]) -> None:
    config = flag_config(argv)
    if config.task != "moviepuzzle.hcmc" or config.model.kind != "hcmc":
        cli.fail("the hcmc benchmark needs a row of configs/moviepuzzle/hcmc.py")
    from vnr.benchmarks.moviepuzzle import hcmc_scores
    from vnr.benchmarks.moviepuzzle import pairwise as base
    from vnr.benchmarks.moviepuzzle.hierarchical import hierarchical_order
    from vnr.ops.kmeans import kmeans
    from vnr.ops.permutation_search import beam_search_order

    s = setup(config)
    predict = lambda b: s.predict_fn(s.state, b)  # noqa: E731
    split = config.data.val_split

    def clip_pass():
        return evaluation.predict_split(base.eval_data(config, split, FLAGS.clips), predict,
                                        s.mesh)

    cat = clip_pass()
    n_clips = len(cat["mask"])
    t_pass = wall_times(clip_pass, FLAGS.repeats).min()
    e, levels = config.eval, tuple(config.model.levels)
    fns = {lv: hcmc_scores.level_score_fn(config, lv, s.predictor(s.state), s.mesh)
           for lv in levels}
    features = cat["features"]
    if config.model.get("frame_repr") == "tokens":  # as hcmc.evaluate: frame scores by index
        features, fns = hcmc_scores.frame_scores_by_index(cat, fns)
    emb_level = "shot" if "shot" in levels else "scene" if "scene" in levels else None

    def algorithm1(distance: str):
        return hierarchical_order(
            features, cat["mask"], fns["frame"], fns.get("shot"), fns.get("scene"),
            shot_embed=cat.get("shot_embed"), scene_embed=cat.get("scene_embed"),
            gt_shot_ids=cat["shot_id"] if "shot" in levels else None,
            gt_scene_ids=cat["scene_id"] if "scene" in levels else None,
            search=e.search, beam_size=e.beam_size, objective=e.objective, starts=e.starts,
            distance=distance, max_iters=e.kmeans_iters, init=e.kmeans_init,
            dtw_segments=e.dtw_segments, dtw_gamma=e.dtw_gamma)

    def flat():
        return beam_search_order(cat["scores"], cat["mask"], e.beam_size, e.objective,
                                 e.starts)[0]

    rows = [("clips ordered", f"{n_clips} ({split})"),
            ("clip pass (encoder + frame scores)", _rate(n_clips, t_pass))]
    if emb_level is not None:
        x = cat[f"{emb_level}_embed"]
        ids = cat[f"{emb_level}_id"]
        k = np.array([len(set(r[m])) for r, m in zip(ids, cat["mask"], strict=True)])
        for dist in ("euclidean", "cosine", "softdtw"):
            run = lambda d=dist: kmeans(x, k, cat["mask"], distance=d,  # noqa: E731
                                        max_iters=e.kmeans_iters, init=e.kmeans_init,
                                        dtw_segments=e.dtw_segments, dtw_gamma=e.dtw_gamma)
            rows.append((f"k-means alone, {dist} ({emb_level} level)",
                         _rate(n_clips, wall_times(run, FLAGS.repeats).min())))
    for dist in (e.distance,):
        t = wall_times(lambda d=dist: algorithm1(d), FLAGS.repeats).min()
        rows.append((f"Algorithm 1 after the clip pass ({'+'.join(levels)}, {dist}, "
                     f"{e.search} {e.beam_size})", _rate(n_clips, t)))
        rows.append(("Algorithm 1 incl. clip pass", _rate(n_clips, t + t_pass)))
    rows.append((f"flat beam search on frame scores (width {e.beam_size})",
                 _rate(n_clips, wall_times(flat, FLAGS.repeats).min())))
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'measure'.ljust(width)} | clips/s |\n|{'-' * (width + 2)}|---|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:.1f}  ({seconds * 1e3:.0f} ms)"
