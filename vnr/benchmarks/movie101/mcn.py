"""Movie101 MCN task: RMN (role pointer) trained by teacher forcing, beam-decoded, scored.

Training: the one softmax over vocabulary + cast outputs against the next token of the
narration (`@k` role mentions are the pointer outputs V + k when the model has the pointer,
plain name tokens otherwise), masked to the real tokens and EOS: cross-entropy, or with
model.label_smoothing / model.unlikelihood upstream RMN's criterion (`vnr.ops.sequence_loss`:
smoothing mass on the vocabulary except PAD and on the cast slots that exist).

Evaluation: `vnr.ops.beam_decode.beam_search` (eval.beam_size, 1 = greedy as upstream's
`decoding='greedy'`; length penalty eval.alpha, KV cache) decodes every narration inside
the jitted `predict`; pointer outputs become the cast member's full name. Metrics
(`caption_metrics`, x100): BLEU@1-4, CIDEr-D, RoleF1 as upstream's rolef1.py (`role_f1`,
shown in the table and used by MNScore; our micro variant `role_*_micro`), and when
configured
  * eval.bert_model: `bertscore` at eval.bert_layer (0 = last), rescaled by
    eval.bert_baseline (< 0: estimated from mismatched reference pairs, `bert_baseline`);
  * eval.clip_model (a CLIP or Chinese-CLIP checkpoint, resolved offline): EMScore(X, V) of
    each hypothesis against its clip's CLIP frame features (the batch's `clip_frames`:
    rows spread over the whole clip, whatever window the model reads; eval.em_frames of
    them sampled, 0 = all): `emscore`,
    em_coarse, em_fine_p/r/f (idf-weighted P when eval.em_idf). A projection width other
    than the features' is a one-line error before decoding;
  * both: `mnscore` (Eq. 2) with EM = em_fine_f (eval.mnscore_em="fine") or emscore ("full").
The text tower is loaded once and run in jitted chunks of 64 hypotheses (one trace).
Why these defaults (Movie101's scripts, the release's CLIP features, Chinese text):
`vnr/benchmarks/movie101/README.md`.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import evaluation
from vnr import task as task_lib
from vnr.benchmarks.movie101 import caption_metrics as cm
from vnr.benchmarks.movie101 import emscore, records
from vnr.benchmarks.movie101 import mcn_data as data
from vnr.benchmarks.movie101.mcn_model import RMN, rmn_bank_step, rmn_step
from vnr.data import pipeline
from vnr.models.compute import float32
from vnr.models.encoders import loading
from vnr.ops import sequence_loss
from vnr.ops.beam_decode import beam_search, tile_beams
from vnr.reports import results as results_lib

TEXT_KEYS = ("ref", "cast", "clip", "span")
BLEU_N = 4  # BLEU@1..4
BERT = ("bertscore", "bert_baseline")  # what `bert_scores` reports


def validate(config: Any) -> None:
    d = config.data
    if d.get("frame_sampling", "first") not in data.FRAME_SAMPLING:
        raise ValueError(f"data.frame_sampling={d.frame_sampling!r}: choose one of "
                         f"{data.FRAME_SAMPLING}")
    if d.pointer and d.config.startswith("v1_"):
        from tfds_builders import movie101

        if movie101.pointer_targets(d.config) is None:
            raise ValueError(f"data.pointer=True but movie101/{d.config} has no role-pointer "
                             "targets (only v1_narration reads the release's narration_role/ "
                             "files; Movie101-raw's paragraphs carry no @k sentences): set "
                             "data.pointer=False for a model without the pointer, or "
                             "data.config='v1_narration'")
        if d.manual_dir and "train" in d.train_split.split("+") and movie101.role_file(
                pathlib.Path(d.manual_dir), "train") is None:  # (no manual_dir: the builder says)
            raise ValueError(f"data.pointer=True but "
                             f"{movie101.role_files_looked_for(d.manual_dir, 'train')} "
                             "does not exist: the train split would have no role-pointer "
                             "targets (the release ships narration_role/train_merge.json; "
                             "data.pointer=False for a model without the pointer)")
    if d.vocab_size <= len(data.SPECIALS):
        raise ValueError(f"data.vocab_size={d.vocab_size} must exceed {len(data.SPECIALS)}")
    if config.eval.beam_size < 1:
        raise ValueError(f"eval.beam_size={config.eval.beam_size} must be >= 1")
    if config.model.width % config.model.heads:
        raise ValueError(f"model.width={config.model.width} not divisible by model.heads")
    e = config.eval
    if e.bert_baseline >= 1:
        raise ValueError(f"eval.bert_baseline={e.bert_baseline} must be < 1 (< 0 = estimate)")
    emscore.check(config)
    if e.bert_model:
        loading.resolve(e.bert_model, key="eval.bert_model")
    if config.get("epochs", 0):  # Appendix C's epochs of the built train split -> steps
        from vnr.data import pipeline

        def narrations() -> int:
            data.prepare(d)
            return len(records.usable_source(d, d.train_split))

        pipeline.resolve_epochs(config, narrations, "train narrations",
                                "vnr:movie101_mcn_epochs")


def check_splits(config: Any) -> None:
    from tfds_builders import movie101

    d = config.data
    have = movie101.split_names(d.config, d.data_dir, d.manual_dir or None)
    task_lib.require_splits(config, have, f"movie101/{d.config}", joined=True)
    data.check(d)  # per-split counts in the log; a run that cannot mean its config stops
    emscore.check_videos(config, [s for s in (*d.test_splits, d.val_split) if s])


def make_model(config: Any, rngs: nnx.Rngs) -> RMN:
    m, d = config.model, config.data
    return RMN(frame_dim=d.frame_dim, face_dim=d.face_dim, faces=d.faces, genres=d.genres,
               vocab=d.vocab_size, max_roles=d.max_roles, width=m.width,
               enc_layers=m.enc_layers, dec_layers=m.dec_layers, heads=m.heads, mlp=m.mlp,
               max_frames=d.max_frames, max_len=d.max_tokens + 1, dropout=m.dropout,
               pointer=d.pointer, genre_token=m.genre_token, memory_bank=m.memory_bank,
               max_genres=d.max_genres, rngs=rngs)


def prepare_data(config: Any) -> None:
    data.prepare(config.data)


def train_data(config: Any, local_batch: int, process_index: int, process_count: int):
    return data.train_dataset(config.data, local_batch, config.seed, process_index,
                              process_count)


def loss_fn(config: Any, model: RMN, batch: dict, rngs: nnx.Rngs):
    logits = float32(model(batch, train=True, rngs=rngs))
    m = batch["target_mask"].astype(jnp.float32)
    smoothing = config.model.get("label_smoothing", 0.0)
    if smoothing or config.model.get("unlikelihood", False):  # upstream RMN's criterion
        v = config.data.vocab_size
        roles = batch["role_mask"] & config.data.pointer
        classes = jnp.concatenate([jnp.broadcast_to(jnp.arange(v) != data.PAD,
                                                    (roles.shape[0], v)), roles], -1)
        loss = sequence_loss.smoothed_kl(logits, batch["targets"], batch["target_mask"],
                                         smoothing, classes[:, : logits.shape[-1]])
        if config.model.get("unlikelihood", False):
            loss = loss + sequence_loss.unlikelihood(logits, batch["targets"],
                                                     batch["target_mask"])
    else:
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
        loss = (ce * m).sum() / jnp.maximum(m.sum(), 1)
    acc = ((logits.argmax(-1) == batch["targets"]) * m).sum() / jnp.maximum(m.sum(), 1)
    is_role = (batch["targets"] >= config.data.vocab_size) & batch["target_mask"]
    role_acc = ((logits.argmax(-1) == batch["targets"]) & is_role).sum() / \
        jnp.maximum(is_role.sum(), 1)
    return loss, {"token_acc": acc, "role_token_acc": role_acc}


def predict(config: Any, model: RMN, batch: dict) -> dict[str, jax.Array]:
    """Beam-searched token ids [B, L] (best hypothesis) for every example."""
    K, B = config.eval.beam_size, batch["frames"].shape[0]
    mem, mask = model.encode(batch["frames"], batch["faces"], batch["frame_mask"],
                             batch["genre"])
    graph, params = nnx.split(model)
    consts = tile_beams({"mem": mem, "mem_mask": mask, "portraits": batch["portraits"],
                         "role_mask": batch["role_mask"]}, K)
    consts.update(params=params)
    state = {"cache": model.decoder.init_cache(B * K)}
    if model.bank is None:
        consts.update(cross=model.decoder.cross_kv(consts["mem"]))
        step = rmn_step
    else:  # the memory bank is per beam state; cross K/V recomputed each step
        state["bank"] = model.bank.init(consts["mem"][:, model.video_offset:])
        step = rmn_bank_step
    seqs, scores, lengths, _ = beam_search(
        functools.partial(step, graph), state, batch_size=B, beam_size=K,
        max_len=config.data.max_tokens + 1, bos_id=data.BOS, eos_id=data.EOS,
        alpha=config.eval.alpha, consts=consts)
    out = {"tokens": seqs[:, 0], "length": lengths[:, 0], "valid": batch["frame_mask"].any(-1)}
    if config.eval.clip_model and emscore.source(config.eval) == "features":  # on the host
        out.update(frames=batch.get("clip_frames", batch["frames"]),
                   frame_mask=batch.get("clip_mask", batch["frame_mask"]))
    return out


def decode_tokens(ids: np.ndarray, words: list[str], cast: list[str]
                  ) -> list[tuple[str, bool]]:
    """Token ids -> (token, written by the role pointer) up to EOS; a pointer id V + k is
    the full name of cast member k."""
    V, toks = len(words), []
    for i in ids.tolist():
        if i == data.EOS:
            break
        if i >= V:
            if i - V < len(cast):
                toks.append((cast[i - V], True))
        elif i > data.UNK:
            toks.append((words[i], False))
    return toks


def decode_text(ids: np.ndarray, words: list[str], cast: list[str]) -> str:
    """Token ids -> text; pointer ids V + k become the full name of cast member k."""
    return data.detokenize([t for t, _ in decode_tokens(ids, words, cast)])


def eval_data(config: Any, split: str, max_examples: int) -> pipeline.EvalStream:
    """Every usable narration of `split`, its text columns (`TEXT_KEYS`) gathered beside the
    decoded tokens."""
    e = config.eval
    if e.clip_model and emscore.source(e) == "features":
        emscore.check_clip_width(config)  # fails before decoding
    stream = data.eval_dataset(config.data, split, config.eval_batch_size, max_examples)
    return dataclasses.replace(stream, host_columns=TEXT_KEYS)


def eval_metrics(config: Any, split: str, out: evaluation.SplitOutputs,
                 report_dir: pathlib.Path | None) -> dict[str, float]:
    """The decoded narrations' BLEU/CIDEr-D/RoleF1 (+ BERTScore, EMScore, MNScore when their
    checkpoints are configured)."""
    d, e = config.data, config.eval
    words = data.vocab(d)
    casts = [c.split("\t") if c else [] for c in out["cast"]]
    hyps = [decode_text(np.asarray(t), words, cast) for t, cast in zip(out["tokens"], casts)]
    refs = [str(r) for r in out["ref"]]
    metrics = caption_scores(hyps, refs, casts, data.all_cast_names(d))
    if e.bert_model:
        metrics.update(bert_scores(e.bert_model, hyps, refs, e.bert_layer, e.bert_baseline))
    if e.clip_model:
        metrics.update(emscore.scores(config, hyps, out))
    if e.clip_model and e.bert_model:
        em = metrics[emscore.EM_KINDS[e.mnscore_em]]
        metrics["mnscore"] = cm.mnscore(em / 100, metrics["bertscore"] / 100,
                                        metrics["role_f1"] / 100)
    metrics["narrations"] = float(len(hyps))
    metrics["left_out"] = float(sum(records.usable(d, split)[1].values()))
    if report_dir is not None:
        from vnr.reports import plots

        plots.written(report_dir / f"{split}_narrations.txt", "\n".join(
            f"REF {r}\nHYP {h}\n" for h, r in list(zip(hyps, refs))[:20]))
        narration_report(split, out, words, casts, report_dir)
    return metrics


REPORT_CLIPS = 4  # clips in <split>_narrations.png


def narration_report(split: str, out: Any, words: list[str], casts: list[list[str]],
                     report_dir: pathlib.Path) -> None:
    """`<split>_narrations.png`: the first clips' reference and generated narrations, the
    role pointer's names highlighted (`figures.narrations`)."""
    from vnr.benchmarks.movie101 import figures
    from vnr.reports import plots

    rows = []
    for i in range(min(REPORT_CLIPS, len(casts))):
        toks = decode_tokens(np.asarray(out["tokens"][i]), words, casts[i])
        hyp, text = [], ""
        for j, (_, named) in enumerate(toks):  # each token's piece of the joined text
            longer = data.detokenize([t for t, _ in toks[:j + 1]])
            hyp.append((longer[len(text):], named))
            text = longer
        rows.append(figures.Narrated(str(out["clip"][i]),
                                     figures.highlight(str(out["ref"][i]), casts[i]), hyp))
    plots.report(report_dir / f"{split}_narrations.png", figures.narrations, rows,
                 title=f"{split}: reference (REF) and generated (HYP) narrations")


def caption_scores(hyps: list[str], refs: list[str], casts: list[list[str]],
                   names: list[str] | None = None) -> dict[str, float]:
    """BLEU@1-4, CIDEr-D, RoleF1 as rolef1.py (`role_f1/p/r`; `names`: every movie's cast,
    default the casts given) and our micro RoleF1 (`role_*_micro`), x100."""
    b = cm.bleu(hyps, [[r] for r in refs], BLEU_N)
    out = {f"bleu{n + 1}": 100 * v for n, v in enumerate(b)}
    out["cider_d"] = 100 * cm.cider_d(hyps, [[r] for r in refs])
    names = [n for c in casts for n in c] if names is None else names
    out.update({k: 100 * v for k, v in cm.role_f1_release(hyps, refs, casts, names).items()})
    out.update({k: 100 * v for k, v in cm.role_f1(hyps, refs, casts).items()})
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
    return dict(zip(BERT, (100 * float(np.mean(cm.bertscore_f1(he, hm, re, rm, b))), b),
                    strict=True))


def metric_columns(config: Any) -> list[results_lib.Column]:
    """What `eval_metrics` reports under `config.eval`: BERTScore, EMScore and MNScore only with
    their checkpoints. The table: BLEU@4, CIDEr-D, the release's role P/R/F1 (F1 first),
    and the model-based scores that ran."""
    e = config.eval
    bert = BERT if e.bert_model else ()
    em = cm.EMSCORE if e.clip_model else ()
    mn = ("mnscore",) if e.clip_model and e.bert_model else ()
    shown = ("bleu4", "cider_d", "role_f1", "role_p", "role_r", *bert[:1], *(
        ("emscore", "em_fine_f") if em else ()), *mn)
    names = (*(f"bleu{n}" for n in range(1, BLEU_N + 1)), "cider_d", *cm.ROLE_RELEASE,
             *cm.ROLE_MICRO, *bert, *em, *mn, "narrations", "left_out")
    return [*results_lib.cols(shown), *results_lib.unshown([k for k in names if k not in shown])]
