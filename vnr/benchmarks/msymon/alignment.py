"""Clip/sentence alignment (M-SyMoN §5, Appendix E; SYMON §7.3 on YMS, `vnr/tasks/yms.py`).

Training (Eq. 2): clips and sentences are embedded by `vnr.benchmarks.msymon.model.Aligner` (unit
vectors, so a dot product is a cosine). For every clip c annotated with sentence s, an
InfoNCE term in each direction with temperature tau and K hard negatives from the SAME
video, sampled uniformly without replacement each step:

    clip->text: -log e^{cos(v_c,t_s)/tau} / (e^{cos(v_c,t_s)/tau} + sum_k e^{cos(v_c,t_k)/tau})
                t_k: K of the video's other sentences (matched or not);
    text->clip: the same with t_s as anchor and K of the video's clips not annotated with s
                (unannotated clips included, so footage that matches nothing is pushed away).

With fewer than K candidates all of them are used. The loss is the mean of the two
directions, each averaged over all annotated clips of the global batch.

Inference: similarity = cosine [C, S]; cost = -similarity; Drop-DTW (`vnr.ops.drop_dtw`,
two-sided: clips and sentences may be dropped) with drop costs `eval.drop` (a number) or,
with `eval.drop="percentile"`, the authors' per-video percentile rule
(`percentile_drop_cost`, `eval.keep_percentile`). `eval.method="argmax"` instead gives each
clip its most similar sentence when that similarity exceeds a threshold, else "no sentence"
(SYMON §7.3 zero-shot; the threshold is tuned on the val split for F1 unless
`eval.threshold` is set). The timestamp-window constraint (M-SyMoN §6.5,
`eval.window_seconds` = W > 0): a sentence may only take clips within W seconds of its
narration interval (cost set to +1e4 outside, so Drop-DTW drops rather than matches there).

Transcript-only baseline (`transcript_alignment`, no video): each clip is given the
sentence being narrated at the clip's midpoint (narration intervals from the subtitle
timestamps; when the release has no subtitles, from the constant-rate estimate of
`vnr.benchmarks.msymon.data.narration_times`), clips with no narration get "no sentence", and every
sentence is predicted matched. `evaluate` reports it next to the model as `transcript_*`.

Metrics (`vnr.benchmarks.msymon.metrics`): duration-weighted clip accuracy, sentence IoU over
annotated sentences, and F1 of the two dataset means.

Commands: `python -m vnr.benchmarks.msymon.alignment baseline ...` (transcript baseline on a built or
raw release, per language), `... crosslingual ...` (the 7x7 matrix of Figure 4).
"""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr import sharding
from vnr.benchmarks.msymon import data
from vnr.benchmarks.msymon import metrics as am
from vnr.benchmarks.msymon.model import Aligner
from vnr.data import pipeline

METRICS = ("clip_accuracy", "sentence_iou", "f1")
WINDOW_COST = 1e4
_INIT_CACHE: dict[str, Any] = {}


def validate(config: Any) -> None:
    d, e = config.data, config.eval
    if not d.features:
        raise ValueError("data.features=False (text_only) cannot train an aligner; it serves the "
                         "transcript baseline: python -m vnr.benchmarks.msymon.alignment baseline --data_dir ...")
    if d.manual_dir and not pathlib.Path(d.manual_dir).is_dir():
        raise ValueError(f"data.manual_dir={d.manual_dir!r} does not exist")
    if config.loss.temperature <= 0 or config.loss.num_negatives < 1:
        raise ValueError(f"loss.temperature={config.loss.temperature} must be > 0 and "
                         f"loss.num_negatives={config.loss.num_negatives} >= 1")
    if e.method not in ("drop_dtw", "argmax"):
        raise ValueError(f"eval.method={e.method!r}: use 'drop_dtw' or 'argmax'")
    if e.method == "drop_dtw" and not (e.drop == "percentile" or _is_number(e.drop)):
        raise ValueError(f"eval.drop={e.drop!r}: use 'percentile' or a number")
    te = config.model.text_encoder
    if te != "hash" and not te.startswith("scratch:"):
        raise ValueError(f"model.text_encoder={te!r}: the alignment pipeline tokenizes with the "
                         "hashed word tokenizer (vnr.data.text), which only 'hash' and "
                         "'scratch:<arch>-<size>' encoders share")
    if not 0 <= e.keep_percentile <= 1:
        raise ValueError(f"eval.keep_percentile={e.keep_percentile} must be in [0, 1]")
    if config.get("require_init_from") and not config.get("init_from"):
        raise ValueError("two_stage: stage 2 starts from the multilingual run: pass "
                         "--config.init_from=<its workdir>")
    if config.total_steps == 0 and not config.get("init_from"):
        raise ValueError("total_steps=0 (zero-shot evaluation) needs init_from=<workdir of a "
                         "trained alignment run>")
    if config.get("init_from"):
        _init_params(config)
    check_splits(config)  # builds the dataset if needed; a missing split is one line here


def _is_number(x: Any) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def check_splits(config: Any) -> None:
    d = config.data
    have = set(_split_names(d))
    for key, split in [("data.train_split", d.train_split), ("data.val_split", d.val_split)] + [
            ("data.test_splits", s) for s in d.test_splits]:
        for part in split.split("+"):
            if part not in have:
                raise ValueError(f"{key}={split!r}: {part!r} is not a split of "
                                 f"{d.builder}/{d.config} (it has {', '.join(sorted(have))})")


def _split_names(d: Any) -> list[str]:
    if d.builder == "yms":
        from tfds_builders.msymon import yms

        return yms.split_names(d.config, d.data_dir, d.manual_dir or None, dim=d.dim, fps=d.fps)
    from tfds_builders import msymon

    return msymon.split_names(msymon.resolve_config(d.config, d.dim, d.fps), d.data_dir,
                              d.manual_dir or None)


def _new_model(config: Any, rngs: nnx.Rngs) -> Aligner:
    m, d = config.model, config.data
    return Aligner(feature_dim=d.dim, vocab_size=d.vocab_size, max_tokens=d.max_tokens,
                   width=m.width, embed=m.embed, text_layers=m.text_layers,
                   clip_layers=m.clip_layers, sentence_layers=m.sentence_layers,
                   heads=m.heads, dropout=m.dropout, rngs=rngs, text_encoder=m.text_encoder)


def _name(path: tuple) -> str:
    return ".".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))))
                    for k in path)


def _str_keys(tree: Any) -> Any:
    return {str(k): _str_keys(v) for k, v in tree.items()} if isinstance(tree, dict) else tree


def _keys_like(tree: Any, like: Any) -> Any:
    """`tree` (string keys) with the keys of `like`, leaves as NumPy arrays."""
    if isinstance(like, dict):
        return {k: _keys_like(tree[str(k)], v) for k, v in like.items()}
    return np.asarray(tree)


def _init_params(config: Any) -> Any:
    """The model parameters of the latest checkpoint in `config.init_from` (host arrays)."""
    import orbax.checkpoint as ocp

    root = pathlib.Path(config.init_from).absolute()
    ckpts = root / "checkpoints"
    steps = sorted(int(p.name) for p in ckpts.iterdir() if p.name.isdigit()) \
        if ckpts.is_dir() else []
    if not steps:
        raise FileNotFoundError(f"init_from={config.init_from!r}: no checkpoint under {ckpts}")
    abstract = nnx.state(nnx.eval_shape(lambda: _new_model(config, nnx.Rngs(0))), nnx.Param)
    target = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), abstract.to_pure_dict())
    key = f"{root}|{steps[-1]}|{[x.shape for x in jax.tree.leaves(target)]}"
    if key in _INIT_CACHE:  # validate() and make_model() both ask; read the files once
        return _INIT_CACHE[key]
    path = ckpts / str(steps[-1]) / "state"
    ckptr = ocp.PyTreeCheckpointer()
    meta = ckptr.metadata(path)
    meta = getattr(getattr(meta, "item_metadata", meta), "tree", meta)
    saved = {_name(k): tuple(v.shape) for k, v in
             jax.tree_util.tree_flatten_with_path(meta.get("0", {}))[0]}
    for k, want in jax.tree_util.tree_flatten_with_path(target)[0]:
        have = saved.get(_name(k))
        if have != tuple(want.shape):
            raise ValueError(
                f"init_from={config.init_from!r}: parameter {_name(k)} is {have} in its "
                f"checkpoint (step {steps[-1]}) but {tuple(want.shape)} in this config's model "
                "(the same model.* and data.dim/vocab_size/max_tokens are needed)")
    item = {"0": _str_keys(target)}  # orbax stores list indices as string keys
    restored = ckptr.restore(path, args=ocp.args.PyTreeRestore(
        item=item, partial_restore=True,
        restore_args=jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), item)))
    params = _keys_like(restored["0"], target)
    _INIT_CACHE[key] = params
    return params


def pretrained(config: Any) -> dict[str, tuple[str, str | None]]:
    """The trainer's hook: a checkpoint text encoder's weights go to `text` (validate
    admits only hashed-token encoders today, so this is empty for every shipped config)."""
    from vnr.models.encoders import towers

    name = config.model.text_encoder
    return {"text": (name, None)} if towers.is_checkpoint(name) else {}


def make_model(config: Any, rngs: nnx.Rngs) -> Aligner:
    model = _new_model(config, rngs)
    if config.get("init_from"):  # two-stage training / zero-shot transfer / evaluation
        params = nnx.state(model, nnx.Param)
        nnx.replace_by_pure_dict(params, jax.tree.map(jnp.asarray, _init_params(config)))
        nnx.update(model, params)
    return model


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def _sample_mask(key: jax.Array, valid: jax.Array, k: int) -> jax.Array:
    """Uniformly k of the True entries of `valid` along the last axis (all if fewer)."""
    score = jnp.where(valid, jax.random.uniform(key, valid.shape), -1.0)
    k = min(k, valid.shape[-1])
    kth = jax.lax.top_k(score, k)[0][..., -1:]
    return valid & (score >= kth)


def info_nce(v: jax.Array, t: jax.Array, batch: dict, key: jax.Array, tau: float,
             num_negatives: int) -> tuple[jax.Array, dict]:
    """Eq. 2 in both directions with K same-video negatives; see the module docstring."""
    labels, clip_mask, sent_mask = batch["labels"], batch["clip_mask"], batch["sent_mask"]
    s_count = t.shape[1]
    sim = jnp.einsum("bce,bse->bcs", v, t) / tau  # [B, C, S]
    pos = (labels >= 0) & clip_mask  # [B, C]
    lab = jnp.clip(labels, 0, s_count - 1)
    onehot = jax.nn.one_hot(lab, s_count, dtype=bool)  # [B, C, S]
    k1, k2 = jax.random.split(key)
    # clip -> text: the positive sentence and K other sentences of the video.
    neg_t = _sample_mask(k1, sent_mask[:, None, :] & ~onehot, num_negatives)
    pos_logit = jnp.take_along_axis(sim, lab[..., None], -1)[..., 0]  # [B, C]
    lse_c = jax.nn.logsumexp(jnp.where(neg_t | onehot, sim, -jnp.inf), -1)
    l_c2t = lse_c - pos_logit
    # text -> clip, for each positive pair (c, s): clip c and K clips not annotated with s.
    sim_t = jnp.einsum("bse,bke->bsk", t, v) / tau  # [B, S, C]
    rows = jnp.take_along_axis(sim_t, lab[..., None], 1)  # [B, C(anchor pair), C']
    other = (clip_mask & (labels != -2))[:, None, :] & (labels[:, None, :] != lab[:, :, None])
    neg_v = _sample_mask(k2, other, num_negatives)
    self_ = jnp.eye(v.shape[1], dtype=bool)[None]
    lse_t = jax.nn.logsumexp(jnp.where(neg_v | self_, rows, -jnp.inf), -1)
    l_t2c = lse_t - pos_logit
    n = jnp.maximum(pos.sum(), 1)
    c2t = jnp.where(pos, l_c2t, 0.0).sum() / n
    t2c = jnp.where(pos, l_t2c, 0.0).sum() / n
    acc = jnp.where(pos, jnp.argmax(jnp.where(sent_mask[:, None], sim, -jnp.inf), -1) == lab,
                    False).sum() / n
    return (c2t + t2c) / 2, {"loss_c2t": c2t, "loss_t2c": t2c, "clip_top1": acc}


def loss_fn(model: Aligner, batch: dict, rngs: nnx.Rngs, config: Any):
    v, t = model(batch, train=True, rngs=rngs)
    return info_nce(v, t, batch, rngs.dropout(), config.loss.temperature,
                    config.loss.num_negatives)


_HOST_KEYS = ("clip_mask", "sent_mask", "labels", "clip_begin", "clip_end", "narr_begin",
              "narr_end", "matched", "language")


def predict(model: Aligner, batch: dict, config: Any) -> dict[str, jax.Array]:
    """Cosine similarities [B, C, S] plus what the host needs for alignment and metrics."""
    v, t = model(batch, train=False, rngs=None)
    return {"sim": jnp.einsum("bce,bse->bcs", v, t), **{k: batch[k] for k in _HOST_KEYS}}


# ----------------------------------------------------------------------------- alignment


def window_mask(out: dict, seconds: float) -> np.ndarray:
    """[B, C, S] True where clip c lies within `seconds` of sentence s's narration."""
    cb, ce = out["clip_begin"][:, :, None], out["clip_end"][:, :, None]
    nb, ne = out["narr_begin"][:, None, :], out["narr_end"][:, None, :]
    return (ce > nb - seconds) & (cb < ne + seconds)


def drop_dtw_alignment(out: dict, ev: Any) -> np.ndarray:
    """Per-clip sentence (-1 = dropped) by Drop-DTW on cost = -cosine."""
    from vnr.ops.drop_dtw import drop_dtw, percentile_drop_cost

    cost = -np.asarray(out["sim"], np.float32)
    len_x = np.maximum(out["clip_mask"].sum(-1), 1).astype(np.int32)
    len_y = np.maximum(out["sent_mask"].sum(-1), 1).astype(np.int32)
    if ev.drop == "percentile":
        drop = np.asarray(percentile_drop_cost(cost, ev.keep_percentile, len_x, len_y))
    else:
        drop = np.full(len(cost), float(ev.drop), np.float32)
    if ev.window_seconds > 0:
        cost = np.where(window_mask(out, ev.window_seconds), cost, WINDOW_COST)
    _, match = drop_dtw(cost, drop, drop if ev.drop_sentences else None, len_x, len_y)
    return np.where(out["clip_mask"], np.asarray(match), -1).astype(np.int32)


def argmax_alignment(out: dict, threshold: float, window_seconds: float = 0.0) -> np.ndarray:
    """Each clip's most similar sentence if the cosine exceeds `threshold`, else -1."""
    sim = np.where(out["sent_mask"][:, None, :], out["sim"], -np.inf)
    if window_seconds > 0:
        sim = np.where(window_mask(out, window_seconds), sim, -np.inf)
    best = sim.argmax(-1)
    ok = (sim.max(-1) > threshold) & out["clip_mask"]
    return np.where(ok, best, -1).astype(np.int32)


def transcript_alignment(out: dict) -> np.ndarray:
    """The transcript-only baseline: the sentence narrated at each clip's midpoint."""
    mid = (out["clip_begin"] + out["clip_end"])[:, :, None] / 2
    inside = (mid >= out["narr_begin"][:, None, :]) & (mid < out["narr_end"][:, None, :])
    inside &= out["sent_mask"][:, None, :] & out["clip_mask"][:, :, None]
    s = inside.shape[-1]
    last = s - 1 - np.argmax(inside[..., ::-1], -1)  # a later sentence wins an overlap
    return np.where(inside.any(-1), last, -1).astype(np.int32)


def per_video(pred: np.ndarray, out: dict) -> dict[str, np.ndarray]:
    """Per-video clip accuracy and sentence IoU of `pred` against the ground truth."""
    gt = np.where(out["labels"] == -2, -1, out["labels"]).astype(np.int32)
    dur = np.maximum(out["clip_end"] - out["clip_begin"], 0.0)
    return am.alignment_metrics(pred, gt, dur, out["sim"].shape[-1] if "sim" in out else
                                out["narr_begin"].shape[-1], mask=out["clip_mask"])


def score(outs: dict, pred: np.ndarray, prefix: str = "") -> dict[str, float]:
    m = per_video(pred, outs)
    return {prefix + k: v for k, v in am.summarize(m["clip_accuracy"],
                                                   m["sentence_iou"]).items()}


def collect(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh,
            max_clips: int = 0) -> dict[str, np.ndarray]:
    """predict_fn over a whole split; concatenated host outputs of the real videos."""
    pc = jax.process_count()
    local = config.eval_batch_size // pc
    it, n_batches = data.eval_batches(config.data, split, config.eval_batch_size, max_clips,
                                      jax.process_index(), pc)
    outs, first = [], None
    for _ in range(n_batches):
        host = next(it, None)
        if host is None:
            host = {k: np.zeros((local, *v.shape[1:]), v.dtype) for k, v in first.items()}
        host = pipeline.pad_batch(host, local)
        first = first or host
        out = jax.device_get(predict_fn(sharding.global_batch(host, mesh)))
        keep = np.asarray(out["clip_mask"]).any(-1)
        outs.append({k: np.asarray(v)[keep] for k, v in out.items()})
    return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}


def tune_threshold(out: dict, window_seconds: float = 0.0) -> float:
    """The argmax threshold with the best F1 on `out` (a grid over cosine values)."""
    best, best_f1 = 0.0, -1.0
    for thr in np.linspace(-0.5, 0.95, 30):
        f = score(out, argmax_alignment(out, float(thr), window_seconds))["f1"]
        if f > best_f1:
            best, best_f1 = float(thr), f
    return best


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_clips: int = 0, report_path: pathlib.Path | None = None) -> dict[str, float]:
    """Aligns every video of `split`; the model's metrics and the transcript baseline's."""
    ev = config.eval
    out = collect(config, split, predict_fn, mesh, max_clips)
    if ev.method == "argmax":
        thr = ev.threshold
        if thr is None or thr == "tune":
            val = out if split == config.data.val_split else collect(
                config, config.data.val_split, predict_fn, mesh, config.eval.max_val_clips)
            thr = tune_threshold(val, ev.window_seconds)
        pred = argmax_alignment(out, float(thr), ev.window_seconds)
    else:
        thr = None
        pred = drop_dtw_alignment(out, ev)
    metrics = score(out, pred)
    metrics.update(score(out, transcript_alignment(out), "transcript_"))
    metrics["videos"] = float(len(pred))
    if thr is not None:
        metrics["threshold"] = float(thr)
    return metrics


def results_table(results: dict[str, dict[str, float]]) -> str:
    cols = (*METRICS, *(f"transcript_{m}" for m in METRICS))
    rows = ["| split | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for split, m in results.items():
        rows.append(f"| {split} | " + " | ".join(f"{100 * m.get(c, np.nan):.1f}" for c in cols)
                    + " |")
    return "\n".join(rows)


def _load_config(spec: str) -> Any:
    """`path.py[:arg]` -> the config its `get_config(arg)` returns (unlocked)."""
    import importlib.util

    path, _, arg = spec.partition(":")
    if not pathlib.Path(path).is_file():
        raise SystemExit(f"error: --config {path}: no such file")
    mod_spec = importlib.util.spec_from_file_location("_vnr_cfg", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod.get_config(arg or None)


def baseline(data_cfg: Any, splits: list[str], languages: tuple[str, ...] = data.LANGUAGES
             ) -> dict[str, dict[str, float]]:
    """Transcript-only baseline per `<lang>_<split>` that exists: {split: metrics}."""
    have = set(_split_names(data_cfg))
    results = {}
    for split in splits:
        for lang in languages:
            name = f"{lang}_{split}"
            if name not in have:
                continue
            it, n = data.eval_batches(data_cfg, name, 8)
            outs = [b for _, b in zip(range(n), it, strict=False)]
            out = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
            res = score(out, transcript_alignment(out))
            res["videos"] = float(len(out["labels"]))
            res["narration_from_subtitles"] = float(out["narr_known"][out["sent_mask"]].mean())
            results[name] = res
    return results


def crosslingual(config: Any, workdirs: dict[str, str], split: str, metric: str = "f1"
                 ) -> tuple[dict[tuple[str, str], float], str]:
    """Figure 4: a model trained on language r (row) evaluated on `<c>_<split>` (column).

    Returns ({(row, col): value}, a Markdown 7x7 table; "-" where there is no checkpoint
    or no such split)."""
    from vnr import train

    have = set(_split_names(config.data))
    cells: dict[tuple[str, str], float] = {}
    for row, wd in workdirs.items():
        cfg = config.copy_and_resolve_references()
        cfg.unlock()
        cfg.init_from = wd
        s = train.setup(cfg)
        fn = functools.partial(s.predict_fn, s.state)
        for col in data.LANGUAGES:
            if f"{col}_{split}" in have:
                cells[row, col] = evaluate(cfg, f"{col}_{split}", fn, s.mesh)[metric]
    head = "| train \\ eval | " + " | ".join(data.LANGUAGES) + " |"
    rows = [head, "|" + "---|" * (len(data.LANGUAGES) + 1)]
    for r in data.LANGUAGES:
        rows.append(f"| {r} | " + " | ".join(
            f"{100 * cells[r, c]:.1f}" if (r, c) in cells else "-" for c in data.LANGUAGES)
            + " |")
    return cells, "\n".join(rows)


def evaluate_run(config: Any) -> dict[str, dict[str, float]]:
    """Evaluation only (zero-shot transfer, or re-scoring a run): the model of
    `config.init_from` on every `data.test_splits` split; {split: metrics}."""
    from vnr import train

    if not config.get("init_from"):
        raise ValueError("evaluation needs init_from=<workdir of a trained alignment run>")
    s = train.setup(config)
    fn = functools.partial(s.predict_fn, s.state)
    return {split: evaluate(config, split, fn, s.mesh, max_clips=config.eval.max_test_clips)
            for split in config.data.test_splits}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m vnr.benchmarks.msymon.alignment")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("baseline", help="transcript-only baseline per language (no video)")
    b.add_argument("--data_dir", required=True, help="where the TFDS dataset is (or goes)")
    b.add_argument("--manual_dir", default="", help="the M-SyMoN release (to build it)")
    b.add_argument("--builder_config", default="text_only")
    b.add_argument("--splits", default="val,train", help="comma-separated: val,train,test")
    b.add_argument("--clip_seconds", type=float, default=3.0)
    e = sub.add_parser("evaluate", help="evaluate a trained run (e.g. zero-shot on YMS)")
    e.add_argument("--config", required=True, help="e.g. configs/msymon/yms.py:zeroshot")
    e.add_argument("--init_from", required=True, help="workdir of the trained run")
    e.add_argument("--data_dir", default=None)
    e.add_argument("--manual_dir", default=None)
    c = sub.add_parser("crosslingual", help="fill the 7x7 matrix from per-language runs")
    c.add_argument("--config", required=True, help="configs/msymon/main.py[:args]")
    c.add_argument("--workdirs", nargs="+", required=True, help="lang=WORKDIR ...")
    c.add_argument("--split", default="test")
    c.add_argument("--metric", default="f1", choices=METRICS)
    c.add_argument("--data_dir", default=None)
    c.add_argument("--manual_dir", default=None)
    args = p.parse_args(argv)
    if args.command == "baseline":
        import ml_collections

        cfg = ml_collections.ConfigDict(dict(
            builder="msymon", config=args.builder_config, data_dir=args.data_dir,
            manual_dir=args.manual_dir, features=args.builder_config != "text_only", dim=512,
            fps=1.0, clip_seconds=args.clip_seconds, max_tokens=4, vocab_size=64,
            num_workers=0))
        res = baseline(cfg, args.splits.split(","))
        print(json.dumps(res, indent=2))
        print("| split | videos | clip accuracy | sentence IoU | F1 | narration from subtitles |")
        print("|---|---|---|---|---|---|")
        for k, v in res.items():
            print(f"| {k} | {v['videos']:.0f} | " + " | ".join(f"{100 * v[m]:.1f}" for m in METRICS)
                  + f" | {100 * v['narration_from_subtitles']:.0f}% |")
        return 0
    cfg = _load_config(args.config)
    for k in ("data_dir", "manual_dir"):
        if getattr(args, k) is not None:
            cfg.data[k] = getattr(args, k)
    if args.command == "evaluate":
        cfg.init_from = args.init_from
        results = evaluate_run(cfg)
        print(json.dumps(results, indent=2))
        print(results_table(results))
        return 0
    bad = [w for w in args.workdirs if "=" not in w or w.split("=")[0] not in data.LANGUAGES]
    if bad:
        raise SystemExit(f"error: --workdirs takes lang=DIR with lang in {data.LANGUAGES}: {bad}")
    _, table = crosslingual(cfg, dict(w.split("=", 1) for w in args.workdirs), args.split,
                            args.metric)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
