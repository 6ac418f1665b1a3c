"""Caption metrics for movie narration: BLEU@4, CIDEr-D, RoleF1, BERTScore, EMScore, MNScore.

Tokens: `tokens(text)` = `vnr.data.text.words` (lower-cased; every CJK character is one
token, Latin words are tokens, `?!.,` kept), so Chinese is scored at character level as
Movie101 does and mixed Chinese/English text works.

- `bleu(hyps, refs)`: corpus BLEU-1..4 as coco-caption computes it (clipped n-gram counts
  summed over the corpus, closest-reference brevity penalty, no smoothing).
- `cider_d(hyps, refs)`: coco-caption's CIDEr-D (TF-IDF n-grams, n = 1..4, document
  frequencies from the evaluated corpus's references, clipped counts, Gaussian length
  penalty σ = 6, ×10), on the tokens above.
- `role_f1_release(hyps, refs, casts, names)`: RoleF1 as Movie101's rolef1.py (names of
  all movies' casts minus its ban list, per-narration average, 0 when either side names
  nobody): the `role_f1` of the results table and of MNScore.
  `role_f1(...)`: ours, micro P/R/F1 over the corpus with the own cast only
  (`role_*_micro`).
- `bertscore_f1(...)`: greedy cosine matching of contextual token embeddings (no idf),
  rescaled `(F - b) / (1 - b)`; `bert_token_embeddings(..., layer=k)` takes the states
  after k layers as bert_score does; `bertscore_baseline` estimates `b` from mismatched
  reference pairs when no published baseline exists.
- `emscore(...)`: EMScore(X, V) of Shi et al. (CVPR 2022): coarse = cosine of the mean
  unit frame embedding with the caption's global embedding; fine = greedy token-frame F1
  (P a plain mean over tokens, or idf-weighted via `idf_weights`); EMScore = (coarse +
  fine) / 2. Padded tokens/frames are masked out.
- `sample_frames(frames, mask, k)`: k frames spread uniformly over each clip's valid frames.
- `mnscore(em, bert, role)` = (EMScore + 4·BERTScore + RoleF1) / 6 × 100 (Movie101 Eq. 2).
Where each differs from the upstream scorer, and why: `vnr/benchmarks/movie101/README.md`.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vnr.data.text import words

# The keys each scorer reports (`vnr.benchmarks.movie101.mcn.metric_columns` lists them).
ROLE_RELEASE = ("role_p", "role_r", "role_f1")  # `role_f1_release`
ROLE_MICRO = ("role_p_micro", "role_r_micro", "role_f1_micro")  # `role_f1`
EMSCORE = ("em_coarse", "em_fine_p", "em_fine_r", "em_fine_f", "emscore")  # `emscore`


def tokens(text: str) -> list[str]:
    return words(text)


def _ngrams(toks: Sequence[str], n: int) -> collections.Counter:
    return collections.Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))


def bleu(hyps: Sequence[str], refs: Sequence[Sequence[str]], max_n: int = 4) -> list[float]:
    """Corpus BLEU-1..max_n (coco-caption's closest-reference brevity penalty)."""
    match, total = np.zeros(max_n), np.zeros(max_n)
    hyp_len = ref_len = 0
    for h, rs in zip(hyps, refs, strict=True):
        ht = tokens(h)
        rts = [tokens(r) for r in rs]
        hyp_len += len(ht)
        ref_len += min((abs(len(r) - len(ht)), len(r)) for r in rts)[1]
        for n in range(1, max_n + 1):
            hc = _ngrams(ht, n)
            best: collections.Counter = collections.Counter()
            for r in rts:
                best |= _ngrams(r, n)
            match[n - 1] += sum(min(c, best[g]) for g, c in hc.items())
            total[n - 1] += max(len(ht) - n + 1, 0)
    bp = 1.0 if hyp_len >= ref_len else math.exp(1 - ref_len / max(hyp_len, 1))
    out, logsum = [], 0.0
    for n in range(max_n):
        if match[n] == 0 or total[n] == 0:
            out.extend([0.0] * (max_n - n))
            break
        logsum += math.log(match[n] / total[n])
        out.append(bp * math.exp(logsum / (n + 1)))
    return out


def cider_d(hyps: Sequence[str], refs: Sequence[Sequence[str]], n: int = 4,
            sigma: float = 6.0) -> float:
    """Corpus CIDEr-D (mean over narrations), coco-caption's formula."""
    ref_toks = [[tokens(r) for r in rs] for rs in refs]
    df: collections.Counter = collections.Counter()
    for rs in ref_toks:
        df.update({g for r in rs for k in range(1, n + 1) for g in _ngrams(r, k)})
    log_n = math.log(float(len(refs)))

    def vec(toks):
        v, norms, length = [], [], 0
        for k in range(1, n + 1):
            counts = _ngrams(toks, k)
            vk = {g: tf * (log_n - math.log(max(1.0, df[g]))) for g, tf in counts.items()}
            if k == 2:
                length = sum(counts.values())
            v.append(vk)
            norms.append(math.sqrt(sum(x * x for x in vk.values())))
        return v, norms, length

    scores = []
    for h, rs in zip(hyps, ref_toks, strict=True):
        vh, nh, lh = vec(tokens(h))
        total = np.zeros(n)
        for r in rs:
            vr, nr, lr = vec(r)
            for k in range(n):
                val = sum(min(x, vr[k].get(g, 0.0)) * vr[k].get(g, 0.0) for g, x in vh[k].items())
                if nh[k] and nr[k]:
                    val /= nh[k] * nr[k]
                total[k] += val * math.exp(-((lh - lr) ** 2) / (2 * sigma**2))
        scores.append(total.mean() / len(rs) * 10.0)
    return float(np.mean(scores)) if scores else 0.0


def mentioned_roles(text: str, cast: Sequence[str]) -> set[str]:
    """Cast names found in `text` (longest first, non-overlapping, case-insensitive)."""
    low = text.lower()
    found = set()
    for name in sorted({c for c in cast if c.strip()}, key=len, reverse=True):
        key = name.lower()
        if key in low:
            found.add(name)
            low = low.replace(key, "\0" * len(key))
    return found


def role_f1(hyps: Sequence[str], refs: Sequence[str], casts: Sequence[Sequence[str]]
            ) -> dict[str, float]:
    """Micro role precision / recall / F1 over the corpus (own cast only; ours, reported
    beside the release's `role_f1_release`)."""
    tp = nh = nr = 0
    for h, r, cast in zip(hyps, refs, casts, strict=True):
        hs, rs = mentioned_roles(h, cast), mentioned_roles(r, cast)
        tp, nh, nr = tp + len(hs & rs), nh + len(hs), nr + len(rs)
    p = tp / nh if nh else 0.0
    rc = tp / nr if nr else 0.0
    return dict(zip(ROLE_MICRO, (p, rc, 2 * p * rc / (p + rc) if p + rc else 0.0),
                    strict=True))


# upstream rolef1.py's list of easily misidentified role names (never counted as predicted)
BANNED = ("司机", "淡定", "大海", "火山", "主持人", "琉璃", "李小龙", "莎莎", "老牛", "小河",
          "小方", "时分")


def role_f1_release(hyps: Sequence[str], refs: Sequence[str], casts: Sequence[Sequence[str]],
                    names: Sequence[str], banned: Sequence[str] = BANNED) -> dict[str, float]:
    """RoleF1 as Movie101's evaluation/MCN/rolef1.py scores it: the predicted roles of a
    narration are the names of ALL movies' casts (`names`, minus `banned`) that occur in the
    hypothesis (substring, case-sensitive), the reference roles the names of its own cast
    that occur in the reference; per-narration P/R/F1 over the sets, 0 when either side
    names nobody, mean over every narration. This is `role_f1` in the results and in
    MNScore."""
    vocab = [n for n in dict.fromkeys(names) if n.strip() and n not in set(banned)]
    p, r, f = [], [], []
    for h, ref, cast in zip(hyps, refs, casts, strict=True):
        hs = {n for n in vocab if n in h}
        rs = {n for n in cast if n.strip() and n in ref}
        tp = len(hs & rs)
        pi, ri = (tp / len(hs), tp / len(rs)) if hs and rs else (0.0, 0.0)
        p.append(pi)
        r.append(ri)
        f.append(2 * pi * ri / (pi + ri) if pi + ri else 0.0)
    n = max(len(f), 1)
    return dict(zip(ROLE_RELEASE, (sum(p) / n, sum(r) / n, sum(f) / n), strict=True))


def _unit(x: jax.Array) -> jax.Array:
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


@jax.jit
def greedy_match(a: jax.Array, a_mask: jax.Array, b: jax.Array, b_mask: jax.Array,
                 a_weight: jax.Array | None = None, b_weight: jax.Array | None = None
                 ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Greedy cosine matching of a [N,S,D] against b [N,T,D]: (P over a, R over b, F1) [N].
    Every masked-in token is a match target; P is the mean over a's tokens, or their
    `a_weight` [N,S]-weighted mean (idf; weight 0 = a target that is not scored), R
    likewise with `b_weight`."""
    sim = jnp.einsum("nsd,ntd->nst", _unit(a), _unit(b))
    big = 1e4
    p_tok = jnp.max(jnp.where(b_mask[:, None], sim, -big), 2)
    r_tok = jnp.max(jnp.where(a_mask[:, :, None], sim, -big), 1)
    w = a_mask if a_weight is None else a_weight * a_mask
    v = b_mask if b_weight is None else b_weight * b_mask
    p = (p_tok * w).sum(1) / jnp.where(w.sum(1) == 0, 1, w.sum(1))
    r = (r_tok * v).sum(1) / jnp.where(v.sum(1) == 0, 1, v.sum(1))
    return p, r, 2 * p * r / jnp.where(p + r == 0, 1.0, p + r)


def _bert_masks(mask: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """`bert_token_embeddings` mask (2 token, 1 [CLS]/[SEP], 0 pad) -> (targets, weights);
    a boolean mask has no special tokens (every True token is scored)."""
    mask = jnp.asarray(mask)
    if mask.dtype == jnp.bool_:
        return mask, mask.astype(jnp.float32)
    return mask > 0, (mask == 2).astype(jnp.float32)


def bertscore_f1(hyp_emb, hyp_mask, ref_emb, ref_mask, baseline: float) -> np.ndarray:
    """Per-pair BERTScore F1 rescaled with `baseline`: (F - b) / (1 - b). As bert_score
    (idf off): [CLS]/[SEP] stay in the similarity matrix as match targets but carry weight
    0 in the P and R means."""
    (hm, hw), (rm, rw) = _bert_masks(hyp_mask), _bert_masks(ref_mask)
    _, _, f = greedy_match(hyp_emb, hm, ref_emb, rm, hw, rw)
    return (np.asarray(f) - baseline) / (1.0 - baseline)


def encoder_states(model, ids: jax.Array, mask: jax.Array, layer: int = 0) -> jax.Array:
    """Hidden states of a BERT-family `vnr.models.encoders.BertModel` after `layer` encoder
    layers (0 = all: the last hidden state), as bert_score truncates the model."""
    if not layer:
        return model(ids, mask, deterministic=True).last_hidden_state
    blocks = getattr(getattr(model, "encoder", None), "layer", None)
    if blocks is None or not 0 < layer <= len(blocks):
        raise ValueError(f"layer={layer}: needs a BERT/RoBERTa encoder with at least that many "
                         f"layers (got {type(model).__name__})")
    from vnr.models.attention import Mask
    from vnr.models.encoders.bert import roberta_position_ids

    if model.position_scheme == "roberta":
        pos = roberta_position_ids(ids, model.pad_token_id)
    else:
        pos = jnp.broadcast_to(jnp.arange(ids.shape[-1]), ids.shape)
    x = model.embeddings(ids, jnp.zeros_like(ids), pos, True)
    keys = Mask(mask)
    for block in list(blocks)[:layer]:
        x = block(x, keys, True)
    return x


def bert_token_embeddings(model, tokenizer, texts: Sequence[str], max_len: int | None = None,
                          layer: int = 0, chunk: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Token embeddings [N,S,D] (layer `layer`, 0 = last) and an int8 mask [N,S]: 2 for a
    scored token, 1 for [CLS]/[SEP] (kept as match targets, as bert_score keeps them), 0 for
    padding.

    S = max_len, or the longest tokenized text rounded up to 32 (capped by the tokenizer's
    and the model's maximum length: longer texts are truncated). Texts go through one jitted
    call per `chunk` sentences (the last chunk padded: one trace)."""
    from flax import nnx

    texts = list(texts) or [""]
    if max_len is None:
        pos = model.embeddings.position_embeddings.embedding.shape[0]
        cap = min(int(getattr(tokenizer, "model_max_length", pos)),
                  pos - 2 * (getattr(model, "position_scheme", "") == "roberta"))
        longest = max(len(x) for x in tokenizer(texts, truncation=True, max_length=cap)
                      ["input_ids"])
        max_len = min(cap, -(-longest // 32) * 32)
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=max_len,
                    return_tensors="np")
    ids, mask = enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)
    graph, state = nnx.split(model)
    run = jax.jit(lambda st, i, m: encoder_states(nnx.merge(graph, st), i, m, layer))
    pad = -len(ids) % chunk
    pids, pmask = (np.concatenate([a, np.repeat(a[:1], pad, 0)]) for a in (ids, mask))
    out = np.concatenate([np.asarray(run(state, pids[i:i + chunk], pmask[i:i + chunk]))
                          for i in range(0, len(pids), chunk)])[: len(ids)]
    special = np.isin(ids, [tokenizer.cls_token_id, tokenizer.sep_token_id])
    return out, (mask.astype(np.int8) * np.where(special, 1, 2)).astype(np.int8)


def bertscore_baseline(ref_emb, ref_mask, seed: int = 0) -> float:
    """Mean raw F1 of mismatched reference pairs (a random derangement of the corpus)."""
    n = len(ref_emb)
    perm = (np.arange(n) + 1 + np.random.default_rng(seed).integers(max(n - 1, 1))) % n
    (am, aw), (bm, bw) = _bert_masks(ref_mask), _bert_masks(ref_mask[perm])
    _, _, f = greedy_match(ref_emb, am, ref_emb[perm], bm, aw, bw)
    return float(np.mean(np.asarray(f)))


def idf_weights(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Shi et al.'s token idf over the scored captions themselves: log((N + 1) / (df + 1))
    per token id (df = captions containing it); each caption's last real token (CLIP's EOS)
    gets the mean idf of the ids seen, as upstream does. [N,L] weights, 0 on padding."""
    n = len(ids)
    df: collections.Counter = collections.Counter()
    for row, m in zip(ids, mask, strict=True):
        df.update(set(row[m.astype(bool)].tolist()))
    idf = {t: math.log((n + 1) / (c + 1)) for t, c in df.items()}
    eos_idf = float(np.mean(list(idf.values()))) if idf else 0.0
    out = np.zeros(ids.shape, np.float32)
    for i, (row, m) in enumerate(zip(ids, mask, strict=True)):
        real = np.flatnonzero(m)
        out[i, real] = [idf[t] for t in row[real].tolist()]
        if len(real):
            out[i, real[-1]] = eos_idf
    return out


def emscore(frame_emb, frame_mask, text_global, token_emb, token_mask,
            token_weight=None) -> dict[str, np.ndarray]:
    """EMScore(X, V) per caption: coarse, fine P/R/F1 and (coarse + fine F1) / 2; fine P
    weighted by `token_weight` (e.g. `idf_weights`) when given."""
    fm = frame_mask[..., None].astype(jnp.float32)
    video = _unit((_unit(frame_emb) * fm).sum(1) / jnp.maximum(fm.sum(1), 1))
    coarse = jnp.sum(video * _unit(text_global), -1)
    p, r, f = greedy_match(token_emb, token_mask, frame_emb, frame_mask, token_weight)
    return dict(zip(EMSCORE, (np.asarray(x) for x in (coarse, p, r, f, (coarse + f) / 2)),
                    strict=True))


def sample_frames(frames: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """[N,T,D] frames + [N,T] mask -> [N,k,D] frames uniformly spread over each row's valid
    frames (order kept; rows with fewer than k valid frames keep them all, rest masked)."""
    n, _, d = frames.shape
    out, out_mask = np.zeros((n, k, d), frames.dtype), np.zeros((n, k), bool)
    for i in range(n):
        valid = np.flatnonzero(mask[i])
        if len(valid) > k:
            valid = valid[np.linspace(0, len(valid) - 1, k).round().astype(int)]
        out[i, : len(valid)], out_mask[i, : len(valid)] = frames[i, valid], True
    return out, out_mask


def mnscore(em: float, bert: float, role: float) -> float:
    """Movie101 Eq. 2: (EMScore + 4·BERTScore + RoleF1) / 6 × 100 (inputs in [0, 1])."""
    return (em + 4.0 * bert + role) / 6.0 * 100.0
