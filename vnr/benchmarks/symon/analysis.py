"""SYMON dataset analyses (§4-6): story coverage, mental-state words, the semantic gap.

* `semantic_gap(counts)` (§6.2, Eq. 3, Appendix C): from a 2x2 table of human ordering
  answers, rows video-only correct / wrong, columns text+video correct / wrong. With
  guesses right half the time and independent given knowledge, P(¬C_t ∧ ¬C_v) =
  ¼ P(¬K_t ∧ ¬K_v) and P(¬C_v) = ½ P(¬K_v), so the gap 1 − P(K_t | ¬K_v) =
  P(¬K_t | ¬K_v) = 2 P(¬C_t ∧ ¬C_v) / P(¬C_v).
* Story coverage (§4.2, Eq. 2, Appendix A): WikiPlots sentences A and narration
  sentences B aligned by `skip_dtw` (cost 1 − cosine of sentence embeddings, or the
  symmetric-entailment cost of `entailment.py`; skip costs δ_A, δ_B); coverage = mean
  over WikiPlots movies of matched / all WikiPlots sentences.
  `dtw_accuracy` is Eq. 1 and `grid_search` picks δ_A, δ_B from labelled correspondences.
* Mental-state words (§5, Table 3): occurrences per 1,000 words of the words of
  user-supplied lexicon files (WordNet-feelings; the fastText neighbour lists).

Command line (the resources are the user's: nothing is downloaded):

    python -m vnr.benchmarks.symon.analysis gap 75.6 7.2 14.5 2.7
    python -m vnr.benchmarks.symon.analysis coverage --config features --manual_dir DIR \\
        --wikiplots WIKIDIR --encoder MINILM_DIR [--delta_a 0.6 --delta_b 0.6]
    python -m vnr.benchmarks.symon.analysis entailment --config text_only --manual_dir DIR \\
        --wikiplots WIKIDIR --nli NLI_DIR [--delta_a 0.6 --delta_b 0.6]
    python -m vnr.benchmarks.symon.analysis mental --config text_only --manual_dir DIR \\
        --lexicon emotion=feelings.txt --lexicon motivation=mot.txt
"""

from __future__ import annotations

import collections
import json
import pathlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from absl import flags

from vnr import cli
from vnr.benchmarks.symon.exclusion import title_key

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
EOS = "<EOS>"


# ----------------------------------------------------------------------- semantic gap
def semantic_gap(counts: Sequence[Sequence[float]]) -> float:
    """Estimated gap 1 − P(K_text | ¬K_video) (a fraction) from a 2x2 table.

    counts [[video✓ text✓, video✓ text✗], [video✗ text✓, video✗ text✗]] as counts or
    percentages (normalised here). Raises if the video-only condition is never wrong.
    """
    c = np.asarray(counts, np.float64)
    if c.shape != (2, 2) or (c < 0).any() or not np.isfinite(c).all():
        raise ValueError(f"semantic_gap: counts must be a 2x2 table of non-negative numbers, "
                         f"got {c.tolist()}")
    p = c / c.sum()
    video_wrong = p[1].sum()
    if video_wrong == 0:
        raise ValueError("semantic_gap: the video-only condition is never wrong; "
                         "P(K_text | ¬K_video) is undefined")
    return float(min(1.0, 2.0 * p[1, 1] / video_wrong))


# -------------------------------------------------------------------------- DTW
def skip_dtw(cost: np.ndarray, delta_a: float, delta_b: float
             ) -> tuple[float, list[tuple[int, int]]]:
    """Min-cost monotone correspondence of A (rows) and B (columns) with skips: the
    shortest path of Appendix A's graph. Returns (total cost, matched pairs).

    cost [N, M] (1 − similarity). Nodes: a match (i, j) and a skipped b (i, j, ε), with the
    paper's edges: from (i, j) to the matches (i+1, j+1), (i+1, j), (i, j+1) (cost c of the
    new match) and to (i, j+1, ε) (δ_B); from (i, j+1, ε) to (i, j+2, ε), (i, j+2) (a_i
    matched on both sides of the skipped b) and (i+1, j+2). Ours, where the paper gives
    δ_A but no edges: a skipped a mirrors a skipped b, and runs of skipped a's and b's may
    follow each other (a node that has skipped both only continues diagonally). The path
    runs from the dummy (0, 0) to the dummy (N+1, M+1), reached from any node at (N, M).
    """
    cost = np.asarray(cost, np.float64)
    n, m = cost.shape
    inf = np.inf
    # kinds: 0 match, 1 skipped b (a_i matched), 2 skipped a (b_j matched), 3 skipped both
    d = np.full((4, n + 1, m + 1), inf)
    back = np.zeros((4, n + 1, m + 1, 3), np.int64)  # predecessor (kind, i, j)
    d[0, 0, 0] = 0.0  # the dummy start, a match of nothing

    def relax(k: int, i: int, j: int, add: float, preds: list[tuple[int, int, int]]) -> None:
        best = min(preds, key=lambda q: d[q]) if preds else None
        if best is not None and d[best] + add < d[k, i, j]:
            d[k, i, j], back[k, i, j] = d[best] + add, best

    for i in range(n + 1):
        for j in range(m + 1):
            if i and j:  # match (i, j); a skip of row 0 / column 0 left only the dummy
                relax(0, i, j, cost[i - 1, j - 1],
                      [(0, i - 1, j - 1), (0, i - 1, j), (0, i, j - 1), (1, i - 1, j - 1),
                       (2, i - 1, j - 1), (3, i - 1, j - 1)]
                      + ([(1, i, j - 1)] if i > 0 else []) + [(2, i - 1, j)])
            if j:
                relax(1, i, j, delta_b, [(0, i, j - 1), (1, i, j - 1)])
                relax(3, i, j, delta_b, [(2, i, j - 1), (3, i, j - 1)])
            if i:
                relax(2, i, j, delta_a, [(0, i - 1, j), (2, i - 1, j)])
                relax(3, i, j, delta_a, [(1, i - 1, j), (3, i - 1, j)])
    end = min(((k, n, m) for k in range(4)), key=lambda q: d[q])
    pairs: list[tuple[int, int]] = []
    node = end
    while node != (0, 0, 0):
        k, i, j = node
        if k == 0:
            pairs.append((i - 1, j - 1))
        node = tuple(int(x) for x in back[node])
    return float(d[end]), pairs[::-1]


def cosine_cost(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1 − cosine similarity [N, M] of two sets of sentence embeddings."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return 1.0 - a @ b.T


def dtw_accuracy(pairs: Iterable[tuple[int, int]], gold: dict[int, int | None], n_a: int,
                 n_b: int) -> float:
    """Eq. 1: ½ (correct A sentences / N_A + correct B sentences / N_B).

    gold: A index -> its gold B index (None = no equivalent). An A sentence is correct
    when its predicted partner set is exactly its gold one (empty for None); a B sentence
    likewise against the A sentences whose gold is it.
    """
    pred_a: dict[int, set[int]] = collections.defaultdict(set)
    pred_b: dict[int, set[int]] = collections.defaultdict(set)
    for i, j in pairs:
        pred_a[i].add(j)
        pred_b[j].add(i)
    gold_b: dict[int, set[int]] = collections.defaultdict(set)
    for i, j in gold.items():
        if j is not None:
            gold_b[j].add(i)
    ok_a = sum(pred_a[i] == ({gold.get(i)} - {None}) for i in range(n_a))
    ok_b = sum(pred_b[j] == gold_b[j] for j in range(n_b))
    return 0.5 * (ok_a / max(n_a, 1) + ok_b / max(n_b, 1))


def grid_search(costs: Sequence[np.ndarray], golds: Sequence[dict[int, int | None]],
                grid: Sequence[float] = tuple(np.round(np.arange(0.1, 1.21, 0.1), 2))
                ) -> tuple[float, float, float]:
    """(δ_A, δ_B, mean Eq. 1 accuracy) maximising accuracy over labelled text pairs."""
    best = (grid[0], grid[0], -1.0)
    for da in grid:
        for db in grid:
            acc = float(np.mean([dtw_accuracy(skip_dtw(c, da, db)[1], g, *c.shape)
                                 for c, g in zip(costs, golds)]))
            if acc > best[2]:
                best = (float(da), float(db), acc)
    return best


# ---------------------------------------------------------------------- WikiPlots
def movie_name(title: str) -> str:
    """The name of a title's movie key (`exclusion.title_key`) without its year: WikiPlots titles
    carry none."""
    from tfds_builders import symon

    return symon.split_key(title_key(title))[0]


def read_wikiplots(directory: pathlib.Path | str) -> list[tuple[str, list[str]]]:
    """WikiPlots release layout: `titles` (one per line) and `plots` (one sentence per
    line, each story closed by a `<EOS>` line) -> [(title, sentences)]."""
    d = pathlib.Path(directory)
    for name in ("titles", "plots"):
        if not (d / name).is_file():
            raise FileNotFoundError(f"{d / name} missing: the WikiPlots directory must hold "
                                    "`titles` and `plots`")
    titles = [t.strip() for t in (d / "titles").read_text(encoding="utf-8").splitlines()]
    stories, cur = [], []
    for line in (d / "plots").read_text(encoding="utf-8").splitlines():
        if line.strip() == EOS:
            stories.append(cur)
            cur = []
        elif line.strip():
            cur.append(line.strip())
    if cur:
        stories.append(cur)
    if len(stories) != len(titles):
        raise ValueError(f"{d}: {len(titles)} titles but {len(stories)} <EOS>-closed plots")
    return list(zip(titles, stories))


def story_coverage(videos: Sequence[dict], plots: Sequence[tuple[str, list[str]]],
                   embed: Callable[[list[str]], np.ndarray] | None, delta_a: float,
                   delta_b: float,
                   cost: Callable[[list[str], list[str]], np.ndarray] | None = None) -> dict:
    """Eq. 2 over the WikiPlots movies that have a video (matched by `movie_name` of the
    video's `movie_id`). The DTW cost is `cost(A, B)` when given (e.g.
    `entailment.symmetric_cost`), else the cosine distance of `embed`'s embeddings.
    Several videos of one movie: their per-video coverages are averaged first (our choice;
    the paper does not say). Entries matching no video and videos with no entry are counted
    and named, never an error."""
    if cost is None:
        if embed is None:
            raise ValueError("story_coverage needs `embed` or `cost`")
        cost = lambda a, b: cosine_cost(embed(a), embed(b))  # noqa: E731
    by_key: dict[str, list[str]] = collections.defaultdict(list)
    for title, _ in plots:
        by_key[movie_name(title)].append(title)
    plot_of = {movie_name(t): s for t, s in plots if s}
    per_movie: dict[str, list[float]] = collections.defaultdict(list)
    no_plot = []
    for v in videos:
        key = movie_name(v["movie_id"])
        if key not in plot_of or not v["sentences"]:
            no_plot.append(v["video_id"])
            continue
        a, b = plot_of[key], list(v["sentences"])
        _, pairs = skip_dtw(cost(a, b), delta_a, delta_b)
        per_movie[key].append(len({i for i, _ in pairs}) / len(a))
    unmatched = sorted(t for k, ts in by_key.items() if k not in per_movie for t in ts)
    cov = [float(np.mean(x)) for x in per_movie.values()]
    return {"coverage": 100.0 * float(np.mean(cov)) if cov else float("nan"),
            "movies": len(cov), "videos_without_plot": len(no_plot),
            "videos_without_plot_ids": no_plot[:20],
            "plots_without_video": len(unmatched), "plots_without_video_titles": unmatched[:20]}


def minilm_embedder(directory: str) -> Callable[[list[str]], np.ndarray]:
    """Sentence embeddings (mean pooling, as the sentence-transformers config says) of the
    BERT checkpoint in `directory`, e.g. all-MiniLM-L6-v2; jitted batches of 64 sentences
    of 128 tokens (the last batch padded: one trace)."""
    import jax
    from flax import nnx

    from vnr.models.encoders import load_pretrained
    from vnr.models.encoders.tokenizers import encode

    model, _, _ = load_pretrained(directory)
    graph, state = nnx.split(model)

    @jax.jit
    def pooled(state, ids, mask):
        return nnx.merge(graph, state)(ids, mask, deterministic=True).pooled

    def embed(texts: list[str]) -> np.ndarray:
        out = []
        for s in range(0, len(texts), 64):
            ids, mask = encode(directory, texts[s:s + 64], 128)
            n, pad = len(ids), 64 - len(ids)
            ids, mask = np.pad(ids, ((0, pad), (0, 0))), np.pad(mask, ((0, pad), (0, 0)))
            out.append(np.asarray(pooled(state, ids, mask), np.float32)[:n])
        return np.concatenate(out) if out else np.zeros((0, 1), np.float32)

    return embed


# ------------------------------------------------------------------ mental states
def read_lexicon(path: pathlib.Path | str) -> tuple[set[str], int]:
    """One entry per line (`#` comments; a tab/comma-separated first field is the word).
    Returns (single-word entries lower-cased, multi-word entries skipped: counted)."""
    words, multi = set(), 0
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        w = re.split(r"[\t,]", line.strip(), maxsplit=1)[0].strip().lower().replace("_", " ")
        if not w or w.startswith("#"):
            continue
        if " " in w:
            multi += 1
        else:
            words.add(w)
    return words, multi


def words(text: str) -> list[str]:
    """The lower-cased word tokens of `text` (what the lexicons are matched against)."""
    return _WORD.findall(text.lower())


def words_per_thousand(texts: Iterable[str], lexicons: dict[str, set[str]]) -> dict:
    """Occurrences of each lexicon's words per 1,000 word tokens of `texts`."""
    total, hits = 0, collections.Counter()
    for text in texts:
        toks = words(text)
        total += len(toks)
        for name, lex in lexicons.items():
            hits[name] += sum(t in lex for t in toks)
    out = {name: 1000.0 * hits[name] / max(total, 1) for name in lexicons}
    out["words"] = total
    return out


# ---------------------------------------------------------------------------- CLI
def videos(config: str, data_dir: str, manual_dir: str | None = None) -> list[dict]:
    """Every video record of every split of the SYMON builder config (built if missing)."""
    from tfds_builders import symon

    out = []
    for split in symon.split_names(config, data_dir, manual_dir=manual_dir):
        src = symon.data_source(config, split, data_dir, manual_dir=manual_dir)
        out += [src[i] for i in range(len(src))]
    return out


def _videos(args: Any) -> list[dict]:
    return videos(args.config, args.data_dir, args.manual_dir)


def _data_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("config", "text_only", "symon builder config", flag_values=fv)
    flags.DEFINE_string("data_dir", "data/tfds", "where the TFDS dataset is (or goes)",
                        flag_values=fv)
    flags.DEFINE_string("manual_dir", None, "the SYMON release (to build it)", flag_values=fv)


def _coverage_flags(fv: flags.FlagValues) -> None:
    _data_flags(fv)
    flags.DEFINE_string("wikiplots", None, "WikiPlots directory", required=True, flag_values=fv)
    flags.DEFINE_string("encoder", None, "sentence-transformers BERT directory", required=True,
                        flag_values=fv)
    flags.DEFINE_float("delta_a", 0.6, "skip cost of a WikiPlots sentence", flag_values=fv)
    flags.DEFINE_float("delta_b", 0.6, "skip cost of a narration sentence", flag_values=fv)


def _entailment_flags(fv: flags.FlagValues) -> None:
    _data_flags(fv)
    flags.DEFINE_string("wikiplots", None, "WikiPlots directory", required=True, flag_values=fv)
    flags.DEFINE_string("nli", None, "RoBERTa NLI classifier directory (Nie et al.'s, or "
                        "roberta-large-mnli)", required=True, flag_values=fv)
    flags.DEFINE_integer("entailment_label", None, "index of the entailment label (default: "
                         "the id2label entry named entailment)", flag_values=fv)
    flags.DEFINE_integer("max_len", 256, "tokens of a premise-hypothesis pair", flag_values=fv)
    flags.DEFINE_string("cost_cache", None, "keep each video's entailment cost matrix here and "
                        "read it back on a rerun (e.g. other delta_a / delta_b)", flag_values=fv)
    flags.DEFINE_float("delta_a", 0.6, "skip cost of a WikiPlots sentence", flag_values=fv)
    flags.DEFINE_float("delta_b", 0.6, "skip cost of a narration sentence", flag_values=fv)


def _mental_flags(fv: flags.FlagValues) -> None:
    _data_flags(fv)
    flags.DEFINE_multi_string("lexicon", None, "NAME=FILE (repeatable)", required=True,
                              flag_values=fv)


COMMANDS = {"gap": ("the semantic gap of four counts: v✓t✓ v✓t✗ v✗t✓ v✗t✗", lambda fv: None),
            "coverage": ("story coverage of WikiPlots by the narrations", _coverage_flags),
            "entailment": ("story coverage with the symmetric-entailment distance",
                           _entailment_flags),
            "mental": ("mental-state words per 1,000 words", _mental_flags)}


def main(argv: Sequence[str] | None = None) -> dict:
    args = cli.parse(argv, "python -m vnr.benchmarks.symon.analysis", __doc__, COMMANDS,
                     operands="[COUNTS x 4 for gap]")
    if args.command == "gap":
        try:
            c4 = [float(x) for x in args.operands]
        except ValueError:
            cli.fail(f"gap takes 4 numbers, got {args.operands}")
        if len(c4) != 4:
            cli.fail(f"gap takes 4 numbers (v✓t✓ v✓t✗ v✗t✓ v✗t✗), got {len(c4)}")
        out = {"gap": 100.0 * semantic_gap([c4[:2], c4[2:]])}
    elif args.operands:
        cli.fail(f"{args.command}: unexpected argument {args.operands[0]!r}")
    elif args.command == "coverage":
        out = story_coverage(_videos(args), read_wikiplots(args.wikiplots),
                             minilm_embedder(args.encoder), args.delta_a, args.delta_b)
    elif args.command == "entailment":
        from vnr.benchmarks.symon import entailment

        try:
            probs = entailment.entailment_prober(args.nli, args.entailment_label, args.max_len)
        except (OSError, ValueError) as e:
            cli.fail(str(e))
        cost = entailment.symmetric_cost(probs)
        if args.cost_cache:
            cost = entailment.cached_cost(cost, args.cost_cache, probs.identity)
        out = story_coverage(_videos(args), read_wikiplots(args.wikiplots), None, args.delta_a,
                             args.delta_b, cost=cost)
        if args.cost_cache:
            out["cost_cache"] = {"dir": args.cost_cache, **cost.stats}
    else:
        lex, multi = {}, {}
        for item in args.lexicon:
            name, _, path = item.partition("=")
            if not path:
                cli.fail(f"--lexicon {item!r}: expected NAME=FILE")
            lex[name], multi[name] = read_lexicon(path)
        out = words_per_thousand((s for v in _videos(args) for s in v["sentences"]), lex)
        out["multiword_entries_skipped"] = multi
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
