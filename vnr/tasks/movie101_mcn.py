"""Movie101 MCN glue: RMN (role pointer) trained with MLE / teacher forcing, beam decoding,
caption metrics.

Training: cross-entropy of the one softmax over vocabulary + cast outputs against the next
token of the narration (`@k` role mentions are the pointer outputs V + k when the model has
the pointer, plain name tokens otherwise), masked to the real tokens and EOS.

Evaluation: `vnr.ops.beam_decode.beam_search` (config.eval.beam_size, length penalty
eval.alpha, KV cache) decodes every narration inside the jitted `predict`; pointer outputs
are expanded to the cast member's full name; metrics (`vnr.ops.caption_metrics`): BLEU@1-4,
CIDEr-D, role P/R/F1 and, when `eval.bert_model` names a BERT checkpoint directory,
BERTScore (rescaled with the mismatched-reference baseline, reported as `bert_baseline`).
Not yet computed here (gap): EMScore and hence MNScore, which need CLIP text token
embeddings in the space of the release's CLIP frame features; `vnr.ops.caption_metrics`
has both functions, tested on given features.
"""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from vnr import sharding
from vnr.data import movie101 as data
from vnr.models.narrator import RMN, rmn_step
from vnr.ops import caption_metrics as cm
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
    d = config.data
    words = data.vocab(d)
    pc = jax.process_count()
    local = config.eval_batch_size // pc
    it, n_batches = data.eval_batches(d, split, config.eval_batch_size, max_clips,
                                      jax.process_index(), pc)
    hyps, refs, casts = [], [], []
    for _ in range(n_batches):
        host = next(it, None)
        if host is None:
            raise ValueError(f"evaluation split {split} is empty on this process")
        n_real = len(host["targets"])
        host = data.pad_batch(host, local)
        texts = {k: host.pop(k) for k in TEXT_KEYS}
        out = jax.device_get(predict_fn(sharding.global_batch(host, mesh)))
        for i in range(n_real):
            cast = texts["cast"][i].split("\t") if texts["cast"][i] else []
            hyps.append(decode_text(np.asarray(out["tokens"][i]), words, cast))
            refs.append(str(texts["ref"][i]))
            casts.append(cast)
    metrics = caption_scores(hyps, refs, casts)
    if config.eval.bert_model:
        metrics.update(bert_scores(config.eval.bert_model, hyps, refs))
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
    return out


@functools.lru_cache(maxsize=2)
def _bert(path: str):
    from vnr.models import encoders

    model, tok, _ = encoders.load_pretrained(path)
    return model, tok


def bert_scores(path: str, hyps: list[str], refs: list[str]) -> dict[str, float]:
    """BERTScore F1 (x100) with the project's BERT encoder and the mismatched-pair baseline."""
    model, tok = _bert(path)
    he, hm = cm.bert_token_embeddings(model, tok, hyps)
    re, rm = cm.bert_token_embeddings(model, tok, refs)
    b = cm.bertscore_baseline(re, rm)
    return {"bertscore": 100 * float(np.mean(cm.bertscore_f1(he, hm, re, rm, b))),
            "bert_baseline": b}


def results_table(results: dict[str, dict[str, float]]) -> str:
    cols = ("bleu4", "cider_d", "role_f1", "role_p", "role_r", "bertscore")
    rows = ["| split | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for split, m in results.items():
        rows.append(f"| {split} | " + " | ".join(f"{m[c]:.2f}" if c in m else "-" for c in cols)
                    + " |")
    return "\n".join(rows)
