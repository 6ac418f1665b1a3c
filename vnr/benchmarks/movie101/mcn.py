"""Movie101 MCN glue: RMN (role pointer) trained with MLE / teacher forcing, beam decoding,
caption metrics including EMScore and MNScore.

Training: cross-entropy of the one softmax over vocabulary + cast outputs against the next
token of the narration (`@k` role mentions are the pointer outputs V + k when the model has
the pointer, plain name tokens otherwise), masked to the real tokens and EOS.

Evaluation: `vnr.ops.beam_decode.beam_search` (config.eval.beam_size, length penalty
eval.alpha, KV cache) decodes every narration inside the jitted `predict`; pointer outputs
are expanded to the cast member's full name. Metrics (`vnr.benchmarks.movie101.caption_metrics`, x100):
BLEU@1-4, CIDEr-D, RoleF1 (micro `role_*`, and `role_*_up` averaged as upstream does), and
  * eval.bert_model (a BERT checkpoint directory or offline name): `bertscore` at layer
    eval.bert_layer (0 = last) rescaled with eval.bert_baseline (< 0: estimated from
    mismatched reference pairs, reported as `bert_baseline`);
  * eval.clip_model (a CLIP checkpoint directory, or a name `vnr.models.encoders.loading.
    resolve` finds offline; model_type clip, clip_text_model or chinese_clip, with its text
    projection and tokenizer files): EMScore(X, V) of each hypothesis against its clip's CLIP
    frame features, i.e. the first `clip` columns of the batch's `frames` (the release's
    `features/clip/<movie>.mp4.npy.npz`, see `vnr.benchmarks.movie101.data.clip_width`), eval.em_frames
    of them uniformly sampled (0 = all): `emscore` = (em_coarse + em_fine_f) / 2 and the
    parts em_coarse, em_fine_p/r/f (fine P idf-weighted over the hypotheses when
    eval.em_idf, Shi et al.'s default; off = Movie101's). A projection width different
    from the features' is a one-line error before decoding;
  * both: `mnscore` = (EM + 4·bertscore + role_f1_up) / 6 (Eq. 2), EM = em_fine_f
    (eval.mnscore_em="fine", upstream's) or emscore ("full", Shi et al.'s).
The text tower is loaded once (cached), hypotheses are tokenised to the tower's maximum
length and embedded in jitted chunks of 64 (one trace): per-token embeddings = final states
@ text_projection for every real token (start/end included, as Shi et al. keep [SOS]/[EOS]);
global = the EOS row (CLIP; the tokenizer's last real token, so unknown-token ids cannot
move it) or the [CLS] row (Chinese-CLIP: a `BertModel` + bias-free projection composed
here, `ChineseCLIPText`, because `vnr.models.encoders` has no chinese_clip builder).

What upstream does (sources; where we differ, we chose):
  * MNScore = (1·EMScore + 4·BERTScore + 1·RoleF1) / 6 × 100: paper Eq. 2 (arXiv
    2305.12140) and github.com/yuezih/Movie101 `Movie101v1/evaluation/README.md`; the RMN
    row of `baseline/README_en.md` (0.154, 0.188, 0.238 -> 19.07) checks it.
  * EMScore: "calculated by our fine-tuned CNCLIP model" (evaluation/README.md). The
    paper's appendix (Chinese version, `Movie101v1/assets/Movie101_zh.pdf`, "metric
    implementation") fine-tunes ChineseCLIP-huge on Movie101 as for TNG retrieval (§5.2);
    CLIPScore uses the mean of 10 uniformly sampled frames, EMScore each sampled frame's
    feature and the text-token features. The released `evaluation/MCN/emscore.py` reads
    precomputed L2-normalised frame / token features and prints the mean fine-grained F1
    only (P over tokens, R over frames, no idf, no coarse term, no references): that is
    reference-free EMScore(X, V)'s fine F, and what enters their MNScore -> our default
    eval.mnscore_em="fine", em_frames=10. The full (coarse + fine) / 2 of Shi et al.
    (CVPR 2022, github.com/ShiYaya/emscore: OpenAI CLIP ViT-B/32, EOS-projected global,
    SOS..EOS tokens, idf-weighted P: eval.em_idf=True) is reported too.
  * The release's frame features: OpenAI CLIP (Radford et al. 2021) at 1 frame/s, 512-d
    (paper §4.4 implementation details; `baseline/RMN/README.md`: "CLIP feature (512d)").
    Neither names the ViT (B/32 and B/16 both project to 512; tfds_builders/movie101
    assumes B/32). ChineseCLIP-huge is 1024-d: upstream's EMScore space is not the
    release's features, and its fine-tuned checkpoint (TeraBox, PyTorch .pt) and the videos
    are needed to reproduce its EMScore exactly. Our choice: score against the release's
    features with the OpenAI CLIP text tower that made them (eval.clip_model =
    clip-vit-base-patch32, or patch16). The width check cannot tell two 512-d CLIPs apart
    (B/32 vs B/16, or a 512-d Chinese-CLIP-base): use the one that made the features.
  * Chinese text: upstream tokenises it with CN-CLIP's / bert-base-chinese's WordPiece (one
    token per character). OpenAI CLIP's byte-level BPE (English) turns Chinese characters
    into byte pieces it was hardly trained on, so on zh narrations our EMScore is a weak
    signal; on the English narrations (v2 `en`) it is CLIP's usual one. A chinese_clip
    checkpoint is accepted (character tokens, [CLS] global) for frame features it made.
  * BERTScore: `evaluation/MCN/bertscore.py` runs `bert-score --lang zh
    --rescale_with_baseline` = bert-base-chinese, layer 8, published F baseline 0.54755783,
    no idf -> eval.bert_model=<bert-base-chinese dir>, bert_layer=8,
    bert_baseline=0.54755783 computes the same quantity (padding to the longest text, not
    512; inputs longer than 512 tokens are truncated by both).
  * RoleF1: `evaluation/MCN/rolef1.py` averages per-narration F1 (0 when either side names
    nobody) -> `role_f1_up`, used in `mnscore`; names are matched against the clip's cast
    (upstream: every movie's role names minus a ban list).
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import sharding
from vnr.benchmarks.movie101 import caption_metrics as cm
from vnr.benchmarks.movie101 import data
from vnr.benchmarks.movie101.narrator import RMN, rmn_step
from vnr.data import pipeline
from vnr.models.encoders import loading
from vnr.ops.beam_decode import beam_search, tile_beams

TEXT_KEYS = ("ref", "cast")


def validate(config: Any) -> None:
    d = config.data
    if d.config.startswith(("v1_", "v2_")) and not d.manual_dir:
        raise ValueError(f"data.manual_dir is required for data.config={d.config!r} (the "
                         "Movie101 release with features/; see tfds_builders/movie101/README.md)")
    if d.manual_dir and not pathlib.Path(d.manual_dir).is_dir():
        raise ValueError(f"data.manual_dir={d.manual_dir!r} does not exist")
    if d.vocab_size <= len(data.SPECIALS):
        raise ValueError(f"data.vocab_size={d.vocab_size} must exceed {len(data.SPECIALS)}")
    if config.eval.beam_size < 1:
        raise ValueError(f"eval.beam_size={config.eval.beam_size} must be >= 1")
    if config.model.width % config.model.heads:
        raise ValueError(f"model.width={config.model.width} not divisible by model.heads")
    e = config.eval
    if e.mnscore_em not in EM_KINDS:
        raise ValueError(f"eval.mnscore_em={e.mnscore_em!r} must be one of {sorted(EM_KINDS)}")
    if e.bert_baseline >= 1:
        raise ValueError(f"eval.bert_baseline={e.bert_baseline} must be < 1 (< 0 = estimate)")
    if e.em_frames < 0:
        raise ValueError(f"eval.em_frames={e.em_frames} must be >= 0 (0 = all frames)")
    if e.clip_model:
        clip_config(e.clip_model)
    if e.bert_model:
        loading.resolve(e.bert_model, key="eval.bert_model")


def check_splits(config: Any) -> None:
    from tfds_builders import movie101

    d = config.data
    have = movie101.split_names(d.config, d.data_dir, d.manual_dir or None)
    for key, split in [("data.train_split", d.train_split), ("data.val_split", d.val_split)] + [
            ("data.test_splits", s) for s in d.test_splits]:
        if split not in have:
            raise ValueError(f"{key}={split!r} is not a split of movie101/{d.config} "
                             f"(it has {', '.join(have)})")


def make_model(config: Any, rngs: nnx.Rngs) -> RMN:
    m, d = config.model, config.data
    return RMN(frame_dim=d.frame_dim, face_dim=d.face_dim, faces=d.faces, genres=d.genres,
               vocab=d.vocab_size, max_roles=d.max_roles, width=m.width,
               enc_layers=m.enc_layers, dec_layers=m.dec_layers, heads=m.heads, mlp=m.mlp,
               max_frames=d.max_frames, max_len=d.max_tokens + 1, dropout=m.dropout,
               pointer=d.pointer, rngs=rngs)


def prepare_data(config: Any) -> None:
    data.prepare(config.data)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def loss_fn(model: RMN, batch: dict, rngs: nnx.Rngs, config: Any):
    logits = model(batch, train=True, rngs=rngs)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    m = batch["target_mask"].astype(jnp.float32)
    loss = (ce * m).sum() / jnp.maximum(m.sum(), 1)
    acc = ((logits.argmax(-1) == batch["targets"]) * m).sum() / jnp.maximum(m.sum(), 1)
    is_role = (batch["targets"] >= config.data.vocab_size) & batch["target_mask"]
    role_acc = ((logits.argmax(-1) == batch["targets"]) & is_role).sum() / \
        jnp.maximum(is_role.sum(), 1)
    return loss, {"token_acc": acc, "role_token_acc": role_acc}


def predict(model: RMN, batch: dict, config: Any) -> dict[str, jax.Array]:
    """Beam-searched token ids [B, L] (best hypothesis) for every example."""
    K, B = config.eval.beam_size, batch["frames"].shape[0]
    mem, mask = model.encode(batch["frames"], batch["faces"], batch["frame_mask"],
                             batch["genre"])
    graph, params = nnx.split(model)
    consts = tile_beams({"mem": mem, "mem_mask": mask, "portraits": batch["portraits"],
                         "role_mask": batch["role_mask"]}, K)
    consts.update(params=params, cross=model.decoder.cross_kv(consts["mem"]))
    state = {"cache": model.decoder.init_cache(B * K)}
    seqs, scores, lengths, _ = beam_search(
        functools.partial(rmn_step, graph), state, batch_size=B, beam_size=K,
        max_len=config.data.max_tokens, bos_id=data.BOS, eos_id=data.EOS,
        alpha=config.eval.alpha, consts=consts)
    return {"tokens": seqs[:, 0], "length": lengths[:, 0], "valid": batch["frame_mask"].any(-1)}


def decode_text(ids: np.ndarray, words: list[str], cast: list[str]) -> str:
    """Token ids -> text; pointer ids V + k become the full name of cast member k."""
    V, toks = len(words), []
    for i in ids.tolist():
        if i == data.EOS:
            break
        if i >= V:
            if i - V < len(cast):
                toks.append(cast[i - V])
        elif i > data.UNK:
            toks.append(words[i])
    return data.detokenize(toks)


def evaluate(config: Any, split: str, predict_fn: Callable, mesh: jax.sharding.Mesh, *,
             max_clips: int = 0, report_path: pathlib.Path | None = None) -> dict[str, float]:
    d, e = config.data, config.eval
    words = data.vocab(d)
    clip_dim = check_clip_width(config) if e.clip_model else 0  # fails before decoding
    pc = jax.process_count()
    local = config.eval_batch_size // pc
    it, n_batches = data.eval_batches(d, split, config.eval_batch_size, max_clips,
                                      jax.process_index(), pc)
    hyps, refs, casts, em_frames, em_masks = [], [], [], [], []
    for _ in range(n_batches):
        host = next(it, None)
        if host is None:
            raise ValueError(f"evaluation split {split} is empty on this process")
        n_real = len(host["targets"])
        host = pipeline.pad_batch(host, local)
        texts = {k: host.pop(k) for k in TEXT_KEYS}
        if clip_dim:  # the release's CLIP frame features: the first clip_dim columns
            f, m = cm.sample_frames(host["frames"][:n_real, :, :clip_dim],
                                    host["frame_mask"][:n_real], e.em_frames or d.max_frames)
            em_frames.append(f)
            em_masks.append(m)
        out = jax.device_get(predict_fn(sharding.global_batch(host, mesh)))
        for i in range(n_real):
            cast = texts["cast"][i].split("\t") if texts["cast"][i] else []
            hyps.append(decode_text(np.asarray(out["tokens"][i]), words, cast))
            refs.append(str(texts["ref"][i]))
            casts.append(cast)
    metrics = caption_scores(hyps, refs, casts)
    if e.bert_model:
        metrics.update(bert_scores(e.bert_model, hyps, refs, e.bert_layer, e.bert_baseline))
    if e.clip_model:
        metrics.update(em_scores(e.clip_model, hyps, np.concatenate(em_frames),
                                 np.concatenate(em_masks), e.em_idf))
    if e.clip_model and e.bert_model:
        em = metrics[EM_KINDS[e.mnscore_em]]
        metrics["mnscore"] = cm.mnscore(em / 100, metrics["bertscore"] / 100,
                                        metrics["role_f1_up"] / 100)
    metrics["narrations"] = float(len(hyps))
    if report_path is not None:
        path = pathlib.Path(report_path).with_suffix(".txt")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(f"REF {r}\nHYP {h}\n" for h, r in list(zip(hyps, refs))[:20]),
                        encoding="utf-8")
    return metrics


def caption_scores(hyps: list[str], refs: list[str], casts: list[list[str]]) -> dict[str, float]:
    b = cm.bleu(hyps, [[r] for r in refs])
    out = {f"bleu{n + 1}": 100 * v for n, v in enumerate(b)}
    out["cider_d"] = 100 * cm.cider_d(hyps, [[r] for r in refs])
    out.update({k: 100 * v for k, v in cm.role_f1(hyps, refs, casts).items()})
    out.update({k: 100 * v for k, v in cm.role_f1_upstream(hyps, refs, casts).items()})
    return out


@functools.lru_cache(maxsize=2)
def _bert(path: str):
    from vnr.models import encoders

    model, tok, _ = encoders.load_pretrained(loading.resolve(path, key="eval.bert_model"))
    if tok is None:
        raise FileNotFoundError(f"eval.bert_model={path!r}: no tokenizer files (vocab.txt, "
                                "tokenizer.json, ...) next to the checkpoint")
    return model, tok


def bert_scores(path: str, hyps: list[str], refs: list[str], layer: int = 0,
                baseline: float = -1.0) -> dict[str, float]:
    """BERTScore F1 (x100) with the project's BERT encoder at `layer` (0 = last), rescaled
    with `baseline` (< 0: estimated from mismatched reference pairs)."""
    model, tok = _bert(path)
    he, hm = cm.bert_token_embeddings(model, tok, hyps, layer=layer)
    re, rm = cm.bert_token_embeddings(model, tok, refs, layer=layer)
    b = baseline if baseline >= 0 else cm.bertscore_baseline(re, rm)
    return {"bertscore": 100 * float(np.mean(cm.bertscore_f1(he, hm, re, rm, b))),
            "bert_baseline": b}


def results_table(results: dict[str, dict[str, float]]) -> str:
    cols = ("bleu4", "cider_d", "role_f1", "role_p", "role_r", "bertscore", "emscore",
            "em_fine_f", "mnscore")
    rows = ["| split | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for split, m in results.items():
        rows.append(f"| {split} | " + " | ".join(f"{m[c]:.2f}" if c in m else "-" for c in cols)
                    + " |")
    return "\n".join(rows)


# ----------------------------------------------------------------------------- EMScore

EM_KINDS = {"fine": "em_fine_f", "full": "emscore"}  # eval.mnscore_em -> reported metric
CLIP_TYPES = ("clip", "clip_text_model", "chinese_clip")
_CHUNK = 64  # sentences per jitted text-tower call (the last chunk is padded: one trace)


def clip_config(name: str) -> tuple[pathlib.Path, dict]:
    """(checkpoint directory, config.json) of eval.clip_model; one-line errors otherwise."""
    path = loading.resolve(name, key="eval.clip_model")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"eval.clip_model={name!r}: no config.json in {path}")
    conf = json.loads((path / "config.json").read_text())
    if conf.get("model_type") not in CLIP_TYPES:
        raise ValueError(f"eval.clip_model={name!r}: model_type={conf.get('model_type')!r} in "
                         f"{path / 'config.json'} is not a CLIP text tower (supported: "
                         f"{', '.join(CLIP_TYPES)})")
    return path, conf


class ChineseCLIPText(nnx.Module):
    """Chinese-CLIP's text tower as Hugging Face's `ChineseCLIPModel` holds it: a BERT
    (RoBERTa-wwm) encoder without pooler (`text_model.*`) and a bias-free `text_projection`
    of the [CLS] state. Built from `vnr.models.encoders` blocks (the encoders package has no
    `chinese_clip` builder); tensor names match the checkpoint's."""

    def __init__(self, cfg: Any, *, rngs: nnx.Rngs):
        from vnr.models.encoders import BertModel
        from vnr.models.encoders.layers import dense

        tc = cfg.text_config
        self.text_model = BertModel(tc, add_pooling_layer=False, pooling="cls", rngs=rngs)
        self.text_projection = dense(tc.hidden_size, cfg.projection_dim, ("embed", None),
                                     use_bias=False, std=tc.initializer_range, rngs=rngs)


def _load_chinese_clip(path: pathlib.Path) -> ChineseCLIPText:
    from transformers import AutoConfig

    from vnr.models.encoders import loading

    cfg = AutoConfig.from_pretrained(str(path))
    tensors, layout = loading.read_checkpoint(path)

    def ctor(r):
        return ChineseCLIPText(cfg, rngs=r)

    try:
        arrays = loading.match_tensors(loading.param_shapes(ctor), tensors, layout,
                                       ignore=("vision_model.", "visual_projection.",
                                               "logit_scale"))
    except loading.CheckpointError as err:
        raise loading.CheckpointError(f"eval.clip_model={str(path)!r}: {err}") from None
    return loading.instantiate(ctor, arrays, key=jax.random.key(0))


@functools.lru_cache(maxsize=2)
def _clip(name: str):
    """(jitted ids, mask -> (token [C,L,P], global [C,P]) embeddings, tokenizer, L, P)."""
    from vnr.models.encoders import factory, load_pretrained

    path, conf = clip_config(name)
    kind = conf["model_type"]
    if kind == "chinese_clip":
        model, tok = _load_chinese_clip(path), factory.load_tokenizer(path)
        tower, proj = model.text_model, model.text_projection
        max_len = model.text_model.embeddings.position_embeddings.embedding.shape[0]
    else:
        model, tok, cfg = load_pretrained(path, tower="text" if kind == "clip" else None)
        if model.text_projection is None:
            raise ValueError(f"eval.clip_model={name!r}: {path} has no text_projection, so its "
                             "token embeddings are not in the joint image-text space")
        tower, proj = model, model.text_projection
        tc = cfg.text_config if kind == "clip" else cfg
        max_len = tc.max_position_embeddings
    if tok is None:
        raise FileNotFoundError(f"eval.clip_model={name!r}: no tokenizer files in {path} "
                                "(vocab.json + merges.txt for CLIP, vocab.txt for Chinese-CLIP)")
    graph, state = nnx.split((tower, proj))

    @jax.jit
    def embed(state, ids, mask):
        tw, pj = nnx.merge(graph, state)
        h = tw(ids, mask, deterministic=True).last_hidden_state  # CLIP: final-LN'd states
        tokens = pj(h)
        if kind == "chinese_clip":  # [CLS] pooled
            return tokens, tokens[:, 0]
        eos = jnp.maximum(mask.sum(-1) - 1, 0)  # the tokenizer's last real token is EOS
        return tokens, tokens[jnp.arange(len(ids)), eos]

    return functools.partial(embed, state), tok, int(max_len), int(proj.kernel.shape[1])


def clip_text_embeddings(name: str, texts: list[str]) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray, np.ndarray]:
    """Per-token projected embeddings [N,L,P], their mask [N,L] (every real token with the
    start/end tokens, as Shi et al. keep [SOS]/[EOS]), global embeddings [N,P] and the
    token ids [N,L]."""
    embed, tok, max_len, _ = _clip(name)
    enc = tok(list(texts) or [""], padding="max_length", truncation=True, max_length=max_len,
              return_tensors="np")
    ids, mask = enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)
    n = len(texts)
    pad = -n % _CHUNK
    ids, mask = (np.concatenate([a, np.repeat(a[:1], pad, 0)]) for a in (ids, mask))
    toks, glob = [], []
    for i in range(0, len(ids), _CHUNK):
        t, g = jax.device_get(embed(ids[i:i + _CHUNK], mask[i:i + _CHUNK]))
        toks.append(t)
        glob.append(g)
    return (np.concatenate(toks)[:n], mask[:n].astype(bool), np.concatenate(glob)[:n],
            ids[:n])


@functools.lru_cache(maxsize=4)
def _clip_width(movies_config: str, data_dir: str, manual_dir: str) -> int:
    """`data.clip_width`, once per dataset (it opens the movies table)."""
    import types

    return data.clip_width(types.SimpleNamespace(movies_config=movies_config,
                                                 data_dir=data_dir, manual_dir=manual_dir))


def check_clip_width(config: Any) -> int:
    """The release's CLIP feature width, checked against eval.clip_model's projection."""
    d = config.data
    width = _clip_width(d.movies_config, os.path.abspath(d.data_dir), d.manual_dir)
    _, _, _, proj = _clip(config.eval.clip_model)
    if width != proj:
        raise ValueError(f"eval.clip_model={config.eval.clip_model!r} projects text to {proj}-d "
                         f"but the CLIP frame features are {width}-d (column `clip` of "
                         f"movie101/{d.movies_config}, read from features/clip/"
                         "<movie>.mp4.npy.npz): EMScore needs the CLIP that made the features")
    return width


def em_scores(name: str, hyps: list[str], frames: np.ndarray, frame_mask: np.ndarray,
              idf: bool = False) -> dict[str, float]:
    """Corpus means (x100) of EMScore(X, V) and its parts for hypotheses against frames
    (fine P idf-weighted over the hypotheses when `idf`)."""
    tok, tok_mask, glob, ids = clip_text_embeddings(name, hyps)
    weight = cm.idf_weights(ids, tok_mask) if idf else None
    em = cm.emscore(frames, frame_mask, glob, tok, tok_mask, weight)
    return {k: 100 * float(np.mean(v)) for k, v in em.items()}
