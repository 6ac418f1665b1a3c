"""M-SyMoN / YMS command-line tools (not the trainer; never imported by a task).

    python -m vnr.benchmarks.msymon.tools baseline --data_dir D [--manual_dir RELEASE]
    python -m vnr.benchmarks.msymon.tools evaluate --config configs/msymon/yms.py:zeroshot \
        --init_from RUN [--data_dir D] [--manual_dir YMS]
    python -m vnr.benchmarks.msymon.tools punctuate --run RUN --encoder XLMR --src RELEASE \
        --lang hi
    python -m vnr.benchmarks.msymon.tools crosslingual --config configs/msymon/main.py \
        --workdirs en=DIR ch=DIR ... [--split test]

`baseline`: the transcript-only baseline per language (no video); `evaluate`: a trained
run's model on every `data.test_splits` split (zero-shot transfer, re-scoring);
`crosslingual`: Figure 4's 7x7 matrix from per-language runs; `table3_generate` / `table3`:
every §5.2 regime chained and Table 3 printed (`table3.py`); `punctuate`: Appendix C's
punctuation restoration on `subtitles/<lang>/` with a `main.py:punctuation` run.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Any

import numpy as np

from vnr import evaluate, progress, train
from vnr.benchmarks.msymon import alignment, data, table3
from vnr.reports import results

MAIN_CONFIG = str(pathlib.Path(__file__).resolve().parents[3] / "configs/msymon/main.py")


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
    have = set(alignment.split_names(data_cfg))
    results = {}
    for split in splits:
        for lang in languages:
            name = f"{lang}_{split}"
            if name not in have:
                continue
            it, n = data.eval_batches(data_cfg, name, 8)
            outs = [b for _, b in zip(range(n), it, strict=False)]
            out = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
            res = alignment.score(out, alignment.transcript_alignment(out))
            res["videos"] = float(len(out["labels"]))
            res["narration_from_subtitles"] = float(out["narr_known"][out["sent_mask"]].mean())
            results[name] = res
    return results


def crosslingual(config: Any, workdirs: dict[str, str], split: str, metric: str = "f1"
                 ) -> tuple[dict[tuple[str, str], float], str]:
    """Figure 4: a model trained on language r (row) evaluated on `<c>_<split>` (column).

    Returns ({(row, col): value}, a Markdown 7x7 table; "-" where there is no checkpoint
    or no such split)."""
    have = set(alignment.split_names(config.data))
    cells: dict[tuple[str, str], float] = {}
    for row, wd in workdirs.items():
        cfg = config.copy_and_resolve_references()
        cfg.unlock()
        cfg.init_from = wd
        model = evaluate.from_config(cfg)  # the run's weights in this config's model
        for col in data.LANGUAGES:
            if f"{col}_{split}" in have:
                cells[row, col] = alignment.evaluate(cfg, f"{col}_{split}", model.predict,
                                                     model.setup.mesh)[metric]
    head = "| train \\ eval | " + " | ".join(data.LANGUAGES) + " |"
    rows = [head, "|" + "---|" * (len(data.LANGUAGES) + 1)]
    for r in data.LANGUAGES:
        rows.append(f"| {r} | " + " | ".join(
            f"{100 * cells[r, c]:.1f}" if (r, c) in cells else "-" for c in data.LANGUAGES)
            + " |")
    return cells, "\n".join(rows)


def evaluate_run(config: Any) -> dict[str, dict[str, float]]:
    """Evaluation only (zero-shot transfer, or re-scoring a run): the model of
    `config.init_from` through this config's final evaluators (`vnr.evaluate`);
    {split: metrics}."""
    if not config.get("init_from"):
        raise ValueError("evaluation needs init_from=<workdir of a trained alignment run>")
    results = evaluate.final_results(evaluate.from_config(config))
    return {k: v for k, v in results.items() if k != "selection"}


def punctuate(config: Any, src: pathlib.Path, lang: str, out: pathlib.Path | None = None
              ) -> dict[str, int]:
    """Appendix C: restores punctuation in `src/subtitles/<lang>/*.json` with the
    punctuation run `config.init_from` (written to `out`, default in place); counts."""
    import json
    import sys

    from vnr import evaluation
    from vnr.benchmarks.msymon import punctuation

    s = train.setup(config)
    fn = functools.partial(s.predict_fn, s.state)
    tok = punctuation._tokenizer(config)  # noqa: SLF001
    b = config.eval_batch_size

    def predict_words(ids: np.ndarray) -> np.ndarray:
        batch = {"ids": np.concatenate([ids, np.zeros((b - len(ids), ids.shape[1]), ids.dtype)]),
                 "labels": np.zeros((b, ids.shape[1]), np.int32), "valid": np.arange(b) < len(ids)}
        got = evaluation.predict_split([batch], 1, fn, s.mesh, b, name="punctuate").outputs
        return np.asarray(got["pred"])

    counts = {"files": 0, "sentences": 0, "bad_subtitles": 0}
    dest = (out or src) / "subtitles" / lang
    dest.mkdir(parents=True, exist_ok=True)
    files, every = sorted((src / "subtitles" / lang).glob("*.json")), progress.Every()
    for i, path in enumerate(files):
        every.tick(f"punctuate {lang}: {i} of {len(files)} files")
        try:
            subs = json.loads(path.read_text(encoding="utf-8"))
            texts = [str(e["text"]) for e in subs]
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as e:
            counts["bad_subtitles"] += 1
            print(f"skipped {path}: bad_subtitles ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        new = [punctuation.restore(tok, predict_words, t, config.data.max_tokens) for t in texts]
        (dest / path.name).write_text(json.dumps([{**e, "text": t} for e, t in zip(
            subs, new, strict=True)], ensure_ascii=False, indent=0), encoding="utf-8")
        counts["files"] += 1
        counts["sentences"] += len(new)
    progress.say(f"punctuate {lang}: {counts['files']} files, {counts['sentences']} sentences "
                 f"in {every.took()}")
    return counts


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m vnr.benchmarks.msymon.tools")
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
    c.add_argument("--metric", default="f1", choices=alignment.METRICS)
    c.add_argument("--data_dir", default=None)
    c.add_argument("--manual_dir", default=None)
    table3.add_parsers(sub)
    u = sub.add_parser("punctuate", help="restore punctuation in subtitles (Appendix C)")
    u.add_argument("--run", required=True, help="workdir of a main.py:punctuation run")
    u.add_argument("--encoder", required=True, help="the run's model.encoder checkpoint")
    u.add_argument("--src", required=True, help="the release folder")
    u.add_argument("--lang", required=True, choices=data.LANGUAGES)
    u.add_argument("--out", default=None, help="another release folder (default: in place)")
    args = p.parse_args(argv)
    if args.command == "punctuate":
        cfg = _load_config(f"{MAIN_CONFIG}:punctuation")
        cfg.update({"init_from": args.run, "total_steps": 0})
        cfg.model.encoder = args.encoder
        res = punctuate(cfg, pathlib.Path(args.src), args.lang,
                        pathlib.Path(args.out) if args.out else None)
        print(json.dumps(res))
        return 0
    if args.command.startswith("table3"):
        return table3.command(args, lambda a: _load_config(f"{MAIN_CONFIG}:{a}"), train.run)
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
            cells = " | ".join(f"{100 * v[m]:.1f}" for m in alignment.METRICS)
            print(f"| {k} | {v['videos']:.0f} | {cells} | "
                  f"{100 * v['narration_from_subtitles']:.0f}% |")
        return 0
    cfg = _load_config(args.config)
    for k in ("data_dir", "manual_dir"):
        if getattr(args, k) is not None:
            cfg.data[k] = getattr(args, k)
    if args.command == "evaluate":
        cfg.init_from = args.init_from
        res = evaluate_run(cfg)
        print(json.dumps(res, indent=2))
        print(results.markdown(res, alignment.result_columns(cfg, res)))
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
