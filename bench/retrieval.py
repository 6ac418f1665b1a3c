"""SYMON §7.2 retrieval metrics at the paper's test size: ``python -m bench retrieval``.

Side by side, each case in a fresh subprocess (so peak memory is its own):

- ``blockwise``: `vnr.ops.retrieval_metrics.embedding_retrieval_metrics` (both directions,
  scores computed block by block by `vnr.ops.ranking.rank_stats_blockwise`), at
  ``--n`` (default 60,000 clips, the SYMON test split by the paper's statistics: 502 videos
  of ~10 min in 4.4 s two-scene clips) and at the dense baseline's largest size;
- ``dense``: the direct protocol, the baseline: the [N, N] score matrix in NumPy, the
  relevance and exclusion as [N, N] matrices, ranks in float64 (below), at
  ``--dense_sizes`` until one does not fit
  ``--dense_budget_gb`` (the child's address space is capped at its start-up size plus
  the budget, so a size that does not fit ends in MemoryError, not in the OOM killer).

Items: videos of 60-200 clips (SYMON-like), every fifth movie with two summary videos;
embeddings [N, D] (D = ``--dim``, 512) random unit vectors, texts = clips + 6 x noise (a
clip and its text at cosine ~0.16, so ranks spread over the pool). Reported
per case: wall time of the metric call (compile included for blockwise: it runs once per
evaluation), peak resident memory of the process and its growth during the call (peak RSS
minus the RSS before it), XLA's temp bytes of the compiled blockwise loop, v2t / t2v R@1,
and whether dense and blockwise agree where both ran. The machine is shared: compare the
rows of one run only, and read `uptime`'s load printed with the table.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
from absl import flags

from vnr import cli

KS = (1, 5, 10)


def items(n: int, dim: int, seed: int = 0):
    """(v, t, video, movie, center, text_center) of n SYMON-like items."""
    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(60, 201)))
    sizes[-1] -= sum(sizes) - n
    video = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
    movie_of = np.arange(len(sizes))
    movie_of[1::5] = movie_of[0::5][:len(movie_of[1::5])]  # every fifth movie twice
    movie = movie_of[video].astype(np.int32)
    center = np.concatenate([np.arange(s) * 4.4 + 2.2 for s in sizes])
    text_center = center + rng.normal(0, 1.5, n)
    v = rng.standard_normal((n, dim), dtype=np.float32)
    t = v + 6.0 * rng.standard_normal((n, dim), dtype=np.float32)  # cosine ~0.16: hard
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    return v, t, video, movie, center, text_center


# ----------------------------------------------------------------------------- the dense baseline
# The §7.2 protocol with every [N, N] matrix materialised.


def _dense_relevance(video, center, nearest, cand_center):
    center, cand = np.asarray(center, np.float64), np.asarray(cand_center, np.float64)
    n = len(video)
    same = video[:, None] == video[None, :]
    dist = np.where(same, np.abs(center[:, None] - cand[None, :]), np.inf)
    order = np.argsort(dist, axis=1, kind="stable")[:, :nearest]
    rel = np.zeros((n, n), bool)
    rel[np.repeat(np.arange(n), order.shape[1]), order.ravel()] = True
    return rel & same


def _dense_ranks(sim, rel, excluded):
    sim = np.asarray(sim, np.float64)
    best = np.where(rel, sim, -np.inf).max(1)
    above = (~rel & ~excluded & (sim > best[:, None])).sum(1)
    return np.where(rel.any(1), 1.0 + above, np.nan)


def dense_metrics(v, t, video, movie, center, text_center, nearest=3) -> dict[str, float]:
    sim = v @ t.T
    excluded = (movie[:, None] == movie[None, :]) & (video[:, None] != video[None, :])
    out = {}
    for prefix, s, qc, cc in (("v2t_", sim, center, text_center),
                              ("t2v_", sim.T, text_center, center)):
        r = _dense_ranks(s, _dense_relevance(video, qc, nearest, cc), excluded)
        r = r[~np.isnan(r)]
        out |= {f"{prefix}r@{k}": float(100.0 * (r <= k).mean()) for k in KS}
        out[f"{prefix}medr"] = float(np.median(r))
    return out


# ----------------------------------------------------------------------------- one case


def _status_bytes(field: str) -> int:
    """A size field of /proc/self/status ("VmRSS", "VmSize") in bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0


def child(impl: str, n: int, dim: int, budget_gb: float, block: tuple[int, int]) -> dict:
    """Runs one case in this process; returns its measurements."""
    data = items(n, dim)
    out: dict = {"impl": impl, "n": n, "dim": dim}
    if impl == "dense":
        resource.setrlimit(resource.RLIMIT_AS,
                           (_status_bytes("VmSize") + int(budget_gb * 2**30),) * 2)
        fn = dense_metrics
    else:
        from vnr.ops import ranking, retrieval_metrics

        def fn(*a):
            return retrieval_metrics.embedding_retrieval_metrics(
                *a[:5], text_center=a[5], block_queries=block[0], block_candidates=block[1])

        qb, nb = min(block[0], n), min(block[1], n)
        nq = -(-n // qb) * qb
        nc = -(-n // nb) * nb
        args = (np.zeros((nq, dim), np.float32), np.full((nq, 3), -1, np.int32),
                {"video": np.zeros(nq, np.int32), "movie": np.zeros(nq, np.int32)},
                np.zeros((nc, dim), np.float32), np.zeros(nc, bool),
                {"video": np.zeros(nc, np.int32), "movie": np.zeros(nc, np.int32)})
        compiled = ranking._compiled(retrieval_metrics.in_pool, qb, nb, None, "data")  # noqa: SLF001
        mem = compiled.lower(*args).compile().memory_analysis()
        out["xla_temp_gb"] = getattr(mem, "temp_size_in_bytes", 0) / 2**30
    before = _status_bytes("VmRSS")
    t0 = time.perf_counter()
    try:
        metrics = fn(*data)
    except MemoryError:
        return out | {"fits": False}
    out["seconds"] = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out | {"fits": True, "metrics": metrics, "peak_rss_gb": peak / 2**30,
                  "growth_gb": max(peak - before, 0) / 2**30}


def _run(impl: str, n: int, args) -> dict:
    cmd = [sys.executable, "-m", "bench.retrieval", "--child", impl, "--n", str(n),
           "--dim", str(args.dim), "--dense_budget_gb", str(args.dense_budget_gb),
           "--block", args.block]
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if not lines:  # killed (memory) or crashed: the case does not fit
        return {"impl": impl, "n": n, "dim": args.dim, "fits": False,
                "error": (res.stderr.strip().splitlines() or ["killed"])[-1][:120]}
    return json.loads(lines[-1])


def _row(r: dict) -> str:
    if not r.get("fits"):
        return (f"| {r['impl']} | {r['n']:,} | {r['dim']} | does not fit "
                f"({r.get('error', 'MemoryError')}) | | | | | | |")
    m = r["metrics"]
    temp = f"{r['xla_temp_gb']:.3f}" if "xla_temp_gb" in r else "-"
    return (f"| {r['impl']} | {r['n']:,} | {r['dim']} | {r['seconds']:.1f} | "
            f"{r['peak_rss_gb']:.2f} | {r['growth_gb']:.2f} | {temp} | {m['v2t_r@1']:.2f} | "
            f"{m['t2v_r@1']:.2f} | {r.get('agree', '')} |")


def main(argv: list[str]) -> None:
    def define(fv: flags.FlagValues) -> None:
        flags.DEFINE_integer("n", 60_000, "clips of the blockwise run", flag_values=fv)
        flags.DEFINE_integer("dim", 512, "embedding width", flag_values=fv)
        flags.DEFINE_string("dense_sizes", "2500,5000,10000,15000,20000", "sizes for the "
                            "dense implementation, in order", flag_values=fv)
        flags.DEFINE_float("dense_budget_gb", 8.0, "memory the dense implementation may use "
                           "beyond its start-up", flag_values=fv)
        flags.DEFINE_string("block", "1024,8192", "block_queries,block_candidates",
                            flag_values=fv)
        flags.DEFINE_string("child", "", "internal: run one case in this process",
                            flag_values=fv)

    args = cli.parse(argv[1:], "python -m bench retrieval", __doc__, define)
    block = tuple(int(x) for x in args.block.split(","))
    if args.child:
        print(json.dumps(child(args.child, args.n, args.dim, args.dense_budget_gb, block)))
        return
    rows, largest = [], None
    for n in (int(x) for x in args.dense_sizes.split(",")):
        r = _run("dense", n, args)
        rows.append(r)
        print(_row(r), flush=True)
        if not r["fits"]:
            break
        largest = r
    sizes = sorted({*([largest["n"]] if largest else []), args.n})
    for n in sizes:
        r = _run("blockwise", n, args)
        if largest and n == largest["n"] and r.get("fits"):
            same = all(abs(r["metrics"][k] - v) < 1e-9 for k, v in largest["metrics"].items())
            r["agree"] = "= dense" if same else "differs"
        rows.append(r)
        print(_row(r), flush=True)
    print("\n| impl | N | D | seconds | peak RSS GB | growth GB | XLA temp GB | v2t R@1 | "
          "t2v R@1 | metrics |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(_row(r))
    print(f"\nload: {os.getloadavg()}; block {block}; dense budget {args.dense_budget_gb} GB")


if __name__ == "__main__":
    main([sys.argv[0], *sys.argv[1:]])
