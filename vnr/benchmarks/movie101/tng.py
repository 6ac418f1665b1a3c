"""Movie101 TNG glue: RNL local grounding in a window around each narration.

Training: binary cross-entropy of every valid proposal's score against its scaled IoU
(2D-TAN, t_min = 0.5, t_max = 1.0). Evaluation: proposals ranked by score, greedy NMS
(IoU 0.5), "R@n, IoU@m" for n in {1, 5}, m in {0.1, 0.3, 0.5, 0.7} (in percent), plus
`random_R@1,IoU@m`: the exact expected value of a uniformly random valid proposal on the
same windows (the chance level).

The local stage uses the oracle anchor (the window is placed around the ground truth at a
fixed, id-hashed offset).

`config.stage = "global"` (configs/movie101/tng.py:global) is §5.2's global shot retrieval:
every movie cut into `data.shot_len`-second shots, `ShotDualEncoder` trained with a
symmetric InfoNCE loss over the batch (temperature `model.temperature`; other rows of the
same (movie, shot) are masked, not negatives), positives by `shot_alignment`; evaluation
ranks all shots of the narration's own movie: R@1/5/10 in percent and the exact
`random_R@k`. Narrations with no aligned shot (`no_positive`) count as misses.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import sharding
from vnr.benchmarks.movie101 import grounding_metrics as gm
from vnr.benchmarks.movie101 import tng_data as data
from vnr.benchmarks.movie101.grounding import RNL, ShotDualEncoder
from vnr.data import pipeline

NEG = -1.0e9

IOUS = (0.1, 0.3, 0.5, 0.7)
KS = (1, 5, 10)


def _global(config: Any) -> bool:
    stage = config.get("stage", "local")
    if stage not in ("local", "global"):
        raise ValueError(f"config.stage={stage!r}: choose 'local' or 'global'")
    return stage == "global"


def validate(config: Any) -> None:
    d = config.data
    if d.config.startswith(("v1_", "v2_")) and not d.manual_dir:
        raise ValueError(f"data.manual_dir is required for data.config={d.config!r}")
    if d.manual_dir and not pathlib.Path(d.manual_dir).is_dir():
        raise ValueError(f"data.manual_dir={d.manual_dir!r} does not exist")
    if d.window % d.n_clips:
        raise ValueError(f"data.window={d.window} must be a multiple of data.n_clips={d.n_clips}")
    if _global(config) and d.shot_len <= 0:
        raise ValueError(f"data.shot_len={d.shot_len} must be positive")


def make_model(config: Any, rngs: nnx.Rngs) -> RNL | ShotDualEncoder:
    d, m = config.data, config.model
    if _global(config):
        return ShotDualEncoder(frame_dim=d.frame_dim, vocab=d.vocab_size, width=m.width,
                               rngs=rngs)
    return RNL(frame_dim=d.frame_dim, face_dim=d.face_dim, faces=d.faces, vocab=d.vocab_size,
               width=m.width, n_clips=d.n_clips, portraits=m.portraits, rngs=rngs)


def prepare_data(config: Any) -> None:
    data.prepare(config.data)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    if _global(config):
        return data.shot_train_dataset(config.data, local_batch, config.seed, process_index,
                                       process_count)
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def _targets(gt: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    i = jnp.arange(n)[:, None].astype(jnp.float32)
    j = jnp.arange(n)[None].astype(jnp.float32) + 1
    s, e = gt[:, 0, None, None], gt[:, 1, None, None]
    inter = jnp.clip(jnp.minimum(j, e) - jnp.maximum(i, s), 0)
    union = (j - i) + (e - s) - inter
    iou = inter / jnp.maximum(union, 1e-6)
    valid = (j - 1 >= i)[None]
    return jnp.clip((iou - 0.5) / 0.5, 0, 1) * valid, jnp.broadcast_to(valid, iou.shape)


def _infonce(model: ShotDualEncoder, batch: dict, config: Any):
    v = model.shots(batch["shot"], batch["shot_mask"])
    t = model.text(batch["tokens"])
    logits = t @ v.T / config.model.temperature
    same = ((batch["movie"][:, None] == batch["movie"][None])
            & (batch["shot_index"][:, None] == batch["shot_index"][None]))
    logits = jnp.where(same & ~jnp.eye(len(v), dtype=bool), NEG, logits)
    labels = jnp.arange(len(v))
    loss = 0.5 * (optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
                  + optax.softmax_cross_entropy_with_integer_labels(logits.T, labels).mean())
    return loss, {"batch_t2v_acc": (jnp.argmax(logits, 1) == labels).mean()}


def loss_fn(model: RNL, batch: dict, rngs: nnx.Rngs, config: Any):
    if _global(config):
        return _infonce(model, batch, config)
    scores = model(batch)
    y, valid = _targets(batch["gt"], config.data.n_clips)
    bce = optax.sigmoid_binary_cross_entropy(jnp.where(valid, scores, 0.0), y)
    loss = (bce * valid).sum() / valid.sum()
    best = jnp.argmax(scores.reshape(scores.shape[0], -1), -1)
    hit = jnp.take_along_axis(y.reshape(y.shape[0], -1), best[:, None], 1)[:, 0] >= 0.0001
    return loss, {"top1_iou_gt_0.5": hit.mean()}


def predict(model: RNL, batch: dict, config: Any) -> dict[str, jax.Array]:
    if _global(config):
        return {"shot": model.shots(batch["shot"], batch["shot_mask"]),
                "text": model.text(batch["tokens"])}
    return {"scores": model(batch), "gt": batch["gt"], "valid": batch["valid"]}


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_clips: int = 0, report_path: pathlib.Path | None = None) -> dict[str, float]:
    if _global(config):
        return evaluate_global(config, split, predict_fn, mesh, max_clips=max_clips)
    pc = jax.process_count()
    local = config.eval_batch_size // pc
    it, n_batches = data.eval_batches(config.data, split, config.eval_batch_size, max_clips,
                                      jax.process_index(), pc)
    scores, gts = [], []
    for _ in range(n_batches):
        host = next(it, None)
        if host is None:
            raise ValueError(f"evaluation split {split} is empty on this process")
        out = jax.device_get(predict_fn(sharding.global_batch(pipeline.pad_batch(host, local),
                                                              mesh)))
        keep = np.asarray(out["valid"], bool)
        scores.append(np.asarray(out["scores"])[keep])
        gts.append(np.asarray(out["gt"])[keep])
    return score_windows(np.concatenate(scores), np.concatenate(gts), config.data.n_clips)


def score_windows(scores: np.ndarray, gt: np.ndarray, n: int) -> dict[str, float]:
    """Ranked proposals (NMS) -> R@n IoU@m in percent, with the random chance level."""
    spans, valid = gm.proposal_spans(n)
    flat_spans = spans[valid]
    preds = np.stack([gm.nms_topk(flat_spans, s[valid], 5, 0.5) for s in scores])
    out = {k: 100 * v for k, v in gm.recall_at_iou(preds, gt, (1, 5), IOUS).items()}
    for m in IOUS:
        out[f"random_R@1,IoU@{m}"] = 100 * gm.random_recall(n, gt, m)
    out["narrations"] = float(len(gt))
    return out


def embed_movies(config: Any, movies: dict[str, list[dict]], predict_fn: Callable,
                 mesh: jax.sharding.Mesh
                 ) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    """Per movie: shot embeddings [S, W], narration embeddings [Q, W], duration in seconds.

    Shots and narrations are packed row-wise into global batches of eval_batch_size; process
    p feeds the p-th block of each (the loop's layout), every process gets all outputs."""
    from vnr.benchmarks.movie101.data import MovieTable
    from vnr.data import text

    d = config.data
    table = MovieTable(d)
    shots, masks, toks, n_shots, durations = [], [], [], [], []
    for mid, recs in movies.items():
        frames = data.movie_frames(table[mid], mid)
        durations.append(len(frames))
        sf, sm = data.shot_features(frames, d.shot_len)
        shots.append(sf)
        masks.append(sm)
        n_shots.append(len(sf))
        toks += [text.tokenize(r["text"], d.vocab_size, d.max_tokens) for r in recs]
    shot = np.concatenate(shots)
    mask = np.concatenate(masks)
    tok = np.stack(toks)
    G, pc, pi = config.eval_batch_size, jax.process_count(), jax.process_index()
    local = G // pc
    n = max(len(shot), len(tok))
    n_batches = -(-n // G)

    def pad(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x, np.zeros((n_batches * G - len(x), *x.shape[1:]), x.dtype)])

    shot, mask, tok = pad(shot), pad(mask), pad(tok)
    vs, ts = [], []
    for b in range(n_batches):
        sl = slice(b * G + pi * local, b * G + (pi + 1) * local)
        out = jax.device_get(predict_fn(sharding.global_batch(
            {"shot": shot[sl], "shot_mask": mask[sl], "tokens": tok[sl]}, mesh)))
        vs.append(np.asarray(out["shot"]))
        ts.append(np.asarray(out["text"]))
    v, t = np.concatenate(vs), np.concatenate(ts)
    bounds_v = np.cumsum([0] + n_shots)
    bounds_t = np.cumsum([0] + [len(r) for r in movies.values()])
    return ([v[bounds_v[i]:bounds_v[i + 1]] for i in range(len(movies))],
            [t[bounds_t[i]:bounds_t[i + 1]] for i in range(len(movies))], durations)


def evaluate_global(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh,
                    *, max_clips: int = 0) -> dict[str, float]:
    """Global shot retrieval within each movie: R@1/5/10 (percent) and the random level."""
    d = config.data
    movies = data.split_movies(d, split, max_clips)
    if not movies:
        raise ValueError(f"evaluation split {split} of movie101/{d.config} is empty")
    vs, ts, durations = embed_movies(config, movies, predict_fn, mesh)
    hits = {k: [] for k in KS}
    n_shots, n_pos = [], []
    for recs, v, t, T in zip(movies.values(), vs, ts, durations):
        spans = gm.cut_shots(float(T), float(d.shot_len))
        pos = np.stack([gm.shot_alignment(spans, np.array([float(r["start"]), float(r["end"])]))
                        for r in recs])
        r = gm.retrieval_recall(t @ v.T, pos, KS)
        for k in KS:
            hits[k].append(r[f"R@{k}"] * len(recs))
        n_shots += [len(v)] * len(recs)
        n_pos += pos.sum(1).tolist()
    q = len(n_pos)
    out = {f"R@{k}": 100 * sum(hits[k]) / q for k in KS}
    out.update({f"random_{k}": 100 * v for k, v in
                gm.random_retrieval_recall(np.array(n_shots), np.array(n_pos), KS).items()})
    out["narrations"] = float(q)
    out["no_positive"] = float(sum(p == 0 for p in n_pos))
    return out


def results_table(results: dict[str, dict[str, float]]) -> str:
    if all("R@10" in m for m in results.values()):
        rows = ["| split | R@1 | R@5 | R@10 | random R@1 | random R@5 | narrations |",
                "|---|---|---|---|---|---|---|"]
        for split, m in results.items():
            rows.append(f"| {split} | {m['R@1']:.2f} | {m['R@5']:.2f} | {m['R@10']:.2f} | "
                        f"{m['random_R@1']:.2f} | {m['random_R@5']:.2f} | "
                        f"{m['narrations']:.0f} |")
        return "\n".join(rows)
    cols = [f"R@{n},IoU@{m}" for n in (1, 5) for m in IOUS]
    rows = ["| split | " + " | ".join(cols) + " | random R@1,IoU@0.5 |",
            "|" + "---|" * (len(cols) + 2)]
    for split, m in results.items():
        rows.append(f"| {split} | " + " | ".join(f"{m[c]:.2f}" for c in cols)
                    + f" | {m['random_R@1,IoU@0.5']:.2f} |")
    return "\n".join(rows)


def _load(workdir: str) -> tuple[Any, Any, Any]:
    """(config, state restored from the newest checkpoint, train.Setup) of a finished run."""
    import json

    import ml_collections

    from vnr import checkpoint, train

    wd = pathlib.Path(workdir).absolute()
    path = wd / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a training run (no config.json)")
    config = ml_collections.ConfigDict(json.loads(path.read_text()))
    config.sharding_rules = tuple(tuple(r) for r in config.sharding_rules)
    config.mesh.shape, config.mesh.axes = tuple(config.mesh.shape), tuple(config.mesh.axes)
    if config.task != "movie101.tng":
        raise ValueError(f"{path}: task={config.task!r}, expected movie101.tng")
    s = train.setup(config)
    mgr = checkpoint.manager(wd / "checkpoints", config.keep_ckpts)
    step, state = checkpoint.restore_latest(mgr, s.state, s.state_shardings, None)
    if not step:
        raise FileNotFoundError(f"{wd / 'checkpoints'}: no checkpoint to evaluate")
    return config, state, s


def two_stage(global_workdir: str, local_workdir: str, split: str = "test", k: int = 5,
              weight: float = 1.0, max_clips: int = 0) -> dict[str, float]:
    """Table 6: global top-k shots, RNL in a window centred on each, k-way re-ranking.

    For every narration of `split`: its movie's shots are ranked by the global run; for each
    of the k best, a `window`-second window of the local run centred on the shot (clamped to
    the movie) is scored by RNL; all k windows' proposals are combined by
    `grounding_metrics.two_stage_rank` (log-sigmoid of the local logit + `weight` x cosine
    of the shot) and NMS'd. R@n IoU@m (percent) against the narration's span in seconds.
    """
    from vnr.benchmarks.movie101.data import MovieTable
    from vnr.data import text

    gc, gstate, gs = _load(global_workdir)
    lc, lstate, ls = _load(local_workdir)
    if not _global(gc) or _global(lc):
        raise ValueError("--global_workdir must be a stage=global run and --local_workdir a "
                         "stage=local run")
    if (gc.data.config, gc.data.vocab_size, gc.data.max_tokens) != (
            lc.data.config, lc.data.vocab_size, lc.data.max_tokens):
        raise ValueError("the two runs use different data configs / tokenizers")
    d = lc.data
    movies = data.split_movies(gc.data, split, max_clips)
    vs, ts, durations = embed_movies(gc, movies, lambda b: gs.predict_fn(gstate, b), gs.mesh)
    table = MovieTable(d)
    W, n = d.window, d.n_clips
    spans, valid = gm.proposal_spans(n)
    rel = spans[valid] * (W / n)
    items, meta = [], []
    for (mid, recs), v, t, T in zip(movies.items(), vs, ts, durations):
        movie = table[mid]
        sim = t @ v.T
        for r, row in zip(recs, sim):
            # a movie with fewer than k shots repeats its last one (NMS drops the copies)
            top = np.resize(np.argsort(-row, kind="stable"), k)
            starts = []
            for j in top:
                centre = (j + 0.5) * gc.data.shot_len
                ws = int(np.clip(round(centre - W / 2), 0, max(T - W, 0)))
                clips, faces = data.window_features(movie, ws, W, n, d.faces, d.face_dim)
                por, pm = data.portrait_features(movie, r["roles"], d.max_roles, d.face_dim)
                items.append({"clips": clips, "faces": faces, "portraits": por,
                              "portrait_mask": pm, "gt": np.zeros(2, np.float32),
                              "valid": np.array(True),
                              "tokens": text.tokenize(r["text"], d.vocab_size, d.max_tokens)})
                starts.append(ws)
            meta.append((row[top], np.array(starts, float),
                         np.array([float(r["start"]), float(r["end"])])))
    G, pc, pi = lc.eval_batch_size, jax.process_count(), jax.process_index()
    local = G // pc
    n_batches = -(-len(items) // G)
    scores = []
    for b in range(n_batches):
        chunk = items[b * G + pi * local: b * G + (pi + 1) * local]
        host = {key: np.stack([it[key] for it in chunk]) for key in items[0]} if chunk else None
        host = pipeline.pad_batch(host, local) if host else {
            key: np.zeros((local, *val.shape), val.dtype) for key, val in items[0].items()}
        out = jax.device_get(ls.predict_fn(lstate, sharding.global_batch(host, ls.mesh)))
        scores.append(np.asarray(out["scores"]))
    sc = np.concatenate(scores)[: len(items)].reshape(len(meta), k, n, n)[:, :, valid]
    preds = np.stack([gm.two_stage_rank(m[0], m[1], rel, s, k, weight, 0.5, 5)
                      for m, s in zip(meta, sc)])
    gt = np.stack([m[2] for m in meta])
    out = {key: 100 * val for key, val in gm.recall_at_iou(preds, gt, (1, 5), IOUS).items()}
    out["narrations"] = float(len(gt))
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json

    p = argparse.ArgumentParser(description="Movie101 TNG two-stage evaluation (Table 6)")
    p.add_argument("command", choices=["two_stage"])
    p.add_argument("--global_workdir", required=True, help="a configs/movie101/tng.py:global run")
    p.add_argument("--local_workdir", required=True, help="a configs/movie101/tng.py run")
    p.add_argument("--split", default="test")
    p.add_argument("--k", type=int, default=5, help="shots kept by the global stage")
    p.add_argument("--weight", type=float, default=1.0, help="weight of the shot cosine")
    p.add_argument("--max_clips", type=int, default=0, help="first N narrations (0 = all)")
    a = p.parse_args(argv)
    if a.k < 1:
        p.error(f"--k={a.k} must be >= 1")
    print(json.dumps(two_stage(a.global_workdir, a.local_workdir, a.split, a.k, a.weight,
                               a.max_clips), indent=1))


if __name__ == "__main__":
    main()
