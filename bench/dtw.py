"""Benchmark of the DTW toolkit: ``python -m bench dtw [--repeats 3] [--quick]``.

Side by side in one run, on the same inputs:

- soft-DTW forward + backward (gradient w.r.t. the features x through a squared-Euclidean
  cost) at (B, N, M) = (64, 64, 64), (64, 256, 256), (8, 1024, 1024): ours
  (``pairwise_cost`` + ``soft_dtw``, custom VJP) vs ott-jax ``ott.geometry.costs.SoftDTW``
  vmapped over the batch and differentiated by autodiff vs tslearn (numba, one pair at a time,
  ``SoftDTW.compute/grad`` + ``SquaredEuclidean.jacobian_product``, float64). A reference that
  does not import is reported as such.
- soft-DTW alone on the cost matrix (value + gradient w.r.t. the cost), ours vs tslearn's
  numba ``SoftDTW.compute/grad``: tslearn's feature-space path above is dominated by its
  per-pair Python overhead, this row shows the recursion against the recursion.
- Drop-DTW (one-sided, contiguous) at (24, 200, 20): ours vs the NumPy transcription of the
  authors' cell loop (``bench/reference/drop_dtw.py``).

Times are the best of ``--repeats`` runs after one warm-up run (compilation excluded); the
slow references run once at (8, 1024, 1024).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from bench.reference.drop_dtw import drop_dtw_batch
from bench.timing import wall_times
from vnr import cli
from vnr.ops.dtw import drop_dtw, pairwise_cost, soft_dtw

SOFT_SIZES = [(64, 64, 64), (64, 256, 256), (8, 1024, 1024)]
DROP_SIZE = (24, 200, 20)
FEAT_DIM = 8
GAMMA = 1.0


def _time(fn, repeats: int) -> float:
    """Best wall time of `fn()` over `repeats` runs after a warm-up (the least noisy
    estimate on a shared machine; every engine gets the same treatment)."""
    return float(wall_times(fn, repeats).min())


def _ours():
    def loss(x, y):
        return soft_dtw(pairwise_cost(x, y), GAMMA).sum()

    return jax.jit(jax.value_and_grad(loss))


def _ott():
    try:
        from ott.geometry.costs import SoftDTW
    except ImportError as e:  # pragma: no cover - depends on the environment
        return None, f"ott-jax not importable ({e})"
    sdtw = SoftDTW(gamma=GAMMA)

    def loss(x, y):
        return jax.vmap(sdtw)(x, y).sum()

    return jax.jit(jax.value_and_grad(loss)), None


def _tslearn():
    try:
        from tslearn.metrics import SoftDTW, SquaredEuclidean
    except ImportError as e:  # pragma: no cover - depends on the environment
        return None, f"tslearn not importable ({e})"

    def run(x: np.ndarray, y: np.ndarray):
        vals, grads = [], []
        for xb, yb in zip(x, y, strict=True):
            dist = SquaredEuclidean(xb, yb)
            sdtw = SoftDTW(dist.compute(), gamma=GAMMA)
            vals.append(sdtw.compute())
            grads.append(dist.jacobian_product(sdtw.grad()))
        return np.asarray(vals), np.stack(grads)

    return run, None


def _fmt(t: float | None) -> str:
    return "n/a" if t is None else (f"{t * 1e3:8.1f} ms" if t < 1 else f"{t:8.2f} s ")


def _ratio(ref: float | None, ours: float) -> str:
    return "n/a" if ref is None else f"{ref / ours:7.1f}x"


def soft_rows(sizes, repeats: int, references=("ott", "tslearn")) -> tuple[list[dict], list[str]]:
    """Per (B, N, M): forward+backward seconds of ours and of each reference that imports
    (None otherwise) and max |value diff| against ours; plus why a reference is missing."""
    ours = _ours()
    ott, ott_err = _ott() if "ott" in references else (None, None)
    tsl, tsl_err = _tslearn() if "tslearn" in references else (None, None)
    rows = []
    for b, n, m in sizes:
        rng = np.random.default_rng(0)
        x = rng.normal(size=(b, n, FEAT_DIM)).astype(np.float32)
        y = rng.normal(size=(b, m, FEAT_DIM)).astype(np.float32)
        xj, yj = jnp.asarray(x), jnp.asarray(y)
        t_ours = _time(lambda xj=xj, yj=yj: ours(xj, yj), repeats)
        v_ours = np.asarray(soft_dtw(pairwise_cost(xj, yj), GAMMA))
        t_ott = d_ott = None
        if ott is not None:
            t_ott = _time(lambda xj=xj, yj=yj: ott(xj, yj), repeats)
            from ott.geometry.costs import SoftDTW

            v_ott = np.asarray(jax.jit(jax.vmap(SoftDTW(gamma=GAMMA)))(xj, yj))
            d_ott = float(np.abs(v_ott - v_ours).max())
        t_tsl = d_tsl = None
        if tsl is not None:
            tsl(x[:1, :4], y[:1, :4])  # numba compilation outside the timing
            slow = b * n * m > 2**22  # the largest size: one timed run is enough
            t_tsl = _time(lambda x=x, y=y: tsl(x, y), 1 if slow else repeats)
            d_tsl = float(np.abs(tsl(x, y)[0] - v_ours).max())
        rows.append(dict(size=(b, n, m), ours=t_ours, ott=t_ott, tslearn=t_tsl,
                         diff_ott=d_ott, diff_tslearn=d_tsl))
    return rows, [err for err in (ott_err, tsl_err) if err]


def bench_soft(sizes, repeats: int) -> list[str]:
    rows, errors = soft_rows(sizes, repeats)
    lines = [
        f"soft-DTW forward+backward, gamma={GAMMA}, features D={FEAT_DIM}, float32 "
        "(tslearn: float64, one pair at a time)",
        f"{'(B, N, M)':<17}{'ours':>12}{'ott-jax':>12}{'tslearn':>12}"
        f"{'vs ott':>10}{'vs tslearn':>12}   max |value diff| ott / tslearn",
    ]
    for r in rows:
        diffs = " / ".join("n/a" if d is None else f"{d:.2g}"
                           for d in (r["diff_ott"], r["diff_tslearn"]))
        lines.append(
            f"{str(r['size']):<17}{_fmt(r['ours']):>12}{_fmt(r['ott']):>12}"
            f"{_fmt(r['tslearn']):>12}{_ratio(r['ott'], r['ours']):>10}"
            f"{_ratio(r['tslearn'], r['ours']):>12}   {diffs}"
        )
    return lines + [f"  {err}" for err in errors]


def bench_core(sizes, repeats: int) -> list[str]:
    """soft-DTW alone on a given cost matrix: value + gradient w.r.t. the cost."""
    try:
        from tslearn.metrics import SoftDTW
    except ImportError as e:  # pragma: no cover - depends on the environment
        return [f"soft-DTW core vs tslearn: tslearn not importable ({e})"]

    def tsl(cost: np.ndarray):
        out = []
        for c in cost:
            sdtw = SoftDTW(c, gamma=GAMMA)
            out.append((sdtw.compute(), sdtw.grad()))
        return out

    ours = jax.jit(jax.value_and_grad(lambda c: soft_dtw(c, GAMMA).sum()))
    lines = [
        "soft-DTW core only (cost matrix in; value + gradient w.r.t. the cost out): ours vs "
        "tslearn SoftDTW.compute/grad (numba, float64, one pair at a time)",
        f"{'(B, N, M)':<17}{'ours':>12}{'tslearn':>12}{'ratio':>10}",
    ]
    for b, n, m in sizes:
        rng = np.random.default_rng(0)
        x = rng.normal(size=(b, n, FEAT_DIM)).astype(np.float32)
        y = rng.normal(size=(b, m, FEAT_DIM)).astype(np.float32)
        cost = np.asarray(pairwise_cost(x, y))
        cj = jnp.asarray(cost)
        t_ours = _time(lambda cj=cj: ours(cj), repeats)
        c64 = cost.astype(np.float64)
        t_tsl = _time(lambda c64=c64: tsl(c64), 1 if b * n * m > 2**22 else repeats)
        lines.append(
            f"{str((b, n, m)):<17}{_fmt(t_ours):>12}{_fmt(t_tsl):>12}{_ratio(t_tsl, t_ours):>10}"
        )
    return lines


def drop_row(repeats: int, size: tuple[int, int, int] = DROP_SIZE) -> dict:
    """Drop-DTW at `size`: seconds of ours and of the NumPy cell loop, max |value diff|,
    agreement of the matches."""
    b, n, m = size
    rng = np.random.default_rng(0)
    cost = rng.uniform(0.0, 1.0, (b, n, m)).astype(np.float32)
    drop_x = rng.uniform(0.3, 0.7, (b, n)).astype(np.float32)
    t_ours = _time(lambda: drop_dtw(cost, drop_x), repeats)
    t_loop = _time(lambda: drop_dtw_batch(cost, drop_x), 1)
    val, match = drop_dtw(cost, drop_x)
    ref_val, ref_match = drop_dtw_batch(cost, drop_x)
    return dict(size=size, ours=t_ours, loop=t_loop,
                diff=float(np.abs(np.asarray(val) - ref_val).max()),
                agree=float(np.mean(np.asarray(match) == ref_match)))


def bench_drop(repeats: int) -> list[str]:
    r = drop_row(repeats)
    return [
        "Drop-DTW (one-sided, contiguous), float32 vs NumPy float64 cell loop",
        f"{'(B, N, M)':<17}{'ours':>12}{'numpy loop':>12}{'ratio':>10}   "
        "max |value diff|, match_x agreement",
        f"{str(r['size']):<17}{_fmt(r['ours']):>12}{_fmt(r['loop']):>12}"
        f"{_ratio(r['loop'], r['ours']):>10}   {r['diff']:.2g}, {r['agree']:.0%}",
    ]


def main(argv: list[str]) -> None:
    """Runs the benchmark; ``argv[0]`` is the benchmark name ("dtw")."""
    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_integer("repeats", 5, "timed runs per entry", lower_bound=1,
                             flag_values=fv)
        flags.DEFINE_bool("quick", False, "skip the (8, 1024, 1024) size", flag_values=fv)

    args = cli.parse(argv[1:], "python -m bench dtw", __doc__, define)
    sizes = SOFT_SIZES[:2] if args.quick else SOFT_SIZES
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, repeats={args.repeats}")
    lines = bench_soft(sizes, args.repeats) + [""] + bench_core(sizes, args.repeats)
    for line in lines + [""] + bench_drop(args.repeats):
        print(line, flush=True)
