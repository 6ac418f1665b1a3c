"""Ordering benchmark: `python -m bench ordering [--batch 256 --n 15 --beam 10]`.

Side by side on the same inputs: the jitted batched per-start `beam_search_order` (the
paper's Algorithm 3) versus the literal Python transcription of Algorithm 3
(`bench/reference/algorithm3.py`, timed on `--ref-clips` clips and given per clip); the
shared-beam option (ours) alongside; `exact_order` throughput at n = 10, 13, 16; the gap
of the per-start and shared beams to `exact_order` at b = 1, 5, 10, 20; and the Random row
of Table 1 under our metric definitions.
"""

from __future__ import annotations

import numpy as np
from absl import flags

from bench.reference import algorithm3 as alg3
from bench.timing import wall_times
from vnr import cli
from vnr.benchmarks.moviepuzzle import order_metrics as om
from vnr.ops import permutation_search as ps

# img_num histogram of the 100 public in-domain MoviePuzzle clips
PUBLIC_LENGTHS = {10: 25, 11: 20, 12: 9, 13: 7, 15: 2, 16: 6, 17: 5, 18: 1, 20: 25}
PAPER_RANDOM = {"lsd": 34.24, "lmd": 4.57, "sd": 10.59, "ssd": 33.99, "os2": 49.66, "os3": 16.42}


def _time(fn, repeats: int) -> float:
    """Median wall time of `fn()` over `repeats` runs (after one warm-up run)."""
    return float(np.median(wall_times(fn, repeats)))


def _model_scores(rng, B: int, n: int, kind: str, noise: float) -> np.ndarray:
    """Scores a trained pair model might give: tanh of a margin plus Gaussian noise.

    kind "before": +1 if i precedes j in a hidden order, else -1 (MoviePuzzle's pair task);
    kind "next": +1 if j directly follows i, else -1 (what the path objective models).
    """
    s = np.zeros((B, n, n), np.float32)
    for b in range(B):
        r = rng.permutation(n)
        if kind == "before":
            margin = np.sign(r[None, :] - r[:, None]).astype(float)
        else:
            margin = 2.0 * (r[None, :] == r[:, None] + 1) - 1.0
        s[b] = np.tanh(margin + noise * rng.normal(size=(n, n)))
    return s


def main(argv: list[str]) -> None:
    def define(fv: flags.FlagValues) -> None:
        for name, default, what in (("batch", 256, "clips"), ("n", 15, "frames per clip"),
                                    ("beam", 10, "beam width"), ("repeats", 20, "timed runs"),
                                    ("gap_batch", 128, "clips of the optimality gap"),
                                    ("ref_clips", 32, "clips of the literal Algorithm 3")):
            flags.DEFINE_integer(name, default, what, lower_bound=1, flag_values=fv)
        flags.DEFINE_alias("gap-batch", "gap_batch", flag_values=fv)  # the old spellings
        flags.DEFINE_alias("ref-clips", "ref_clips", flag_values=fv)
        flags.DEFINE_integer("seed", 0, "random seed", flag_values=fv)

    a = cli.parse(argv[1:], "python -m bench ordering", __doc__, define)
    rng = np.random.default_rng(a.seed)
    B, n, K = a.batch, a.n, a.beam

    print(f"== beam search, B={B} clips, n={n}, bsize {K}, path objective, N(0,1) scores ==")
    scores = rng.normal(size=(B, n, n)).astype(np.float32)
    mask = np.ones((B, n), bool)
    R = min(a.ref_clips, B)
    ours_t = _time(lambda: ps.beam_search_order(scores, mask, K), a.repeats)
    shared_t = _time(lambda: ps.beam_search_order(scores, mask, K, starts="shared"), a.repeats)
    ours_o, ours_tot = ps.beam_search_order(scores, mask, K)
    ref_o, ref_tot = alg3.batch(scores[:R], mask[:R], K)
    ref_t = _time(lambda: alg3.batch(scores[:R], mask[:R], K), 1) * B / R
    same = float((np.asarray(ours_o[:R]) == ref_o).all(1).mean())
    print(f"{'implementation':48s} {'clips/s':>10s} {'per-start is':>13s}")
    print(f"{'per-start (Algorithm 3): jitted, batched':48s} {B / ours_t:10.0f} {'':>13s}")
    print(f"{'literal Algorithm 3 in Python (' + str(R) + ' clips)':48s} {B / ref_t:10.1f} "
          f"{ref_t / ours_t:12.0f}x")
    print(f"{'shared beam (ours): jitted, batched':48s} {B / shared_t:10.0f} "
          f"{shared_t / ours_t:12.2f}x")
    err = float(np.abs(np.asarray(ours_tot[:R]) - ref_tot).max())
    print(f"same order as the literal Algorithm 3: {100 * same:.1f}% of {R} clips; "
          f"max |total diff| {err:.1e}")

    print("\n== exact_order (subset DP), N(0,1) scores ==")
    print(f"{'n':>3s} {'clips':>6s} {'path clips/s':>13s} {'linear clips/s':>15s}")
    for m, bm in ((10, 256), (13, 64), (16, 16)):
        s = rng.normal(size=(bm, m, m)).astype(np.float32)
        tp = _time(lambda s=s: ps.exact_order(s, None, "path"), 2)
        tl = _time(lambda s=s: ps.exact_order(s, None, "linear"), 2)
        print(f"{m:3d} {bm:6d} {bm / tp:13.1f} {bm / tl:15.1f}")

    G = a.gap_batch
    print(f"\n== gap to the exact optimum, {G} clips, n={n}: mean (exact - beam) total, "
          "[% of clips at the optimum] ==")
    cases = [
        ("path, N(0,1) scores", "path", scores[:G]),
        ("path, 'next' scores, noise 0.5", "path", _model_scores(rng, G, n, "next", 0.5)),
        ("linear, 'before' scores, noise 0.7", "linear", _model_scores(rng, G, n, "before", 0.7)),
    ]
    widths = (1, 5, 10, 20)
    print(f"{'objective, inputs, starts':44s} " + " ".join(f"{'b=' + str(w):>15s}" for w in widths))
    for name, objective, s in cases:
        _, best = ps.exact_order(s, None, objective)
        best = np.asarray(best)
        for starts in ps.STARTS:
            cells = []
            for w in widths:
                _, tot = ps.beam_search_order(s, None, w, objective, starts)
                gap = best - np.asarray(tot)
                cells.append(f"{gap.mean():7.3f} [{100 * np.mean(gap < 1e-4):4.0f}%]")
            print(f"{name + ', ' + starts:44s} " + " ".join(f"{c:>15s}" for c in cells))

    print("\n== Random row of Table 1 (in-domain) under our metric definitions ==")
    lengths = np.repeat(list(PUBLIC_LENGTHS), list(PUBLIC_LENGTHS.values()))
    expect = om.random_expectation(lengths)
    sim_n = rng.choice(lengths, 4000)
    pred = np.tile(np.arange(20), (sim_n.size, 1))
    for b, m in enumerate(sim_n):
        pred[b, :m] = rng.permutation(m)
    sim = om.summary(pred, np.tile(np.arange(20), (sim_n.size, 1)), np.arange(20) < sim_n[:, None])
    print(f"{'metric':6s} {'paper':>8s} {'expected':>9s} {'simulated':>10s} {'diff':>7s}")
    for k, v in PAPER_RANDOM.items():
        print(f"{k:6s} {v:8.2f} {expect[k]:9.2f} {sim[k]:10.2f} {100 * (expect[k] - v) / v:6.1f}%")
    print("(expected: exact expectation over the 100 public clips' lengths; simulated: 4000 draws)")
