"""Symmetric entailment, SYMON's first story-coverage distance (§4.2, Table 2).

The paper: "the average probability of a entailing b and b entailing a from the natural
language inference classifier of Nie et al (2020)". `NliClassifier` is a RoBERTa
sequence classifier in NNX: vnr's RoBERTa encoder (`bert.BertModel`, RoBERTa positions, no
pooler) and Hugging Face's RoBERTa classification head (dense -> tanh -> out_proj on the
<s> token), with the tensor names of `RobertaForSequenceClassification`, so
`roberta-large-mnli` or Nie et al.'s `ynie/roberta-large-snli_mnli_fever_anli_R1_R2_R3-nli`
load as they are (`model.safetensors`, Flax or PyTorch layout, or `pytorch_model.bin` read
without torch). `symmetric_cost(A, B)` is the DTW cost matrix
1 − ½ (P(a_i ⊨ b_j) + P(b_j ⊨ a_i)), P = softmax probability of the entailment label
(premise first, hypothesis second). `smoke_checkpoint(path)` writes a tiny random NLI
checkpoint with a byte-level BPE tokenizer (rows.toml `[smoke.vars] SYMON_NLI`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models.encoders import layers, loading
from vnr.models.encoders.bert import BertModel

ARCHS = ("roberta", "xlm-roberta")
IGNORED = ("roberta.pooler.", "lm_head.")  # tensors a classifier checkpoint may carry
MAX_LEN = 256  # tokens of a premise-hypothesis pair (Nie et al.'s example script)
BATCH = 64


class NliClassifier(nnx.Module):
    """RoBERTa + `RobertaClassificationHead`; `__call__` returns logits [batch, labels]."""

    def __init__(self, cfg: Any, *, dtype: Any = jnp.float32, param_dtype: Any = jnp.float32,
                 rngs: nnx.Rngs):
        kw = dict(std=cfg.initializer_range, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        h = cfg.hidden_size
        self.roberta = BertModel(cfg, add_pooling_layer=False, position_scheme="roberta",
                                 dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        rate = getattr(cfg, "classifier_dropout", None)
        self.classifier = layers.Node(
            dense=layers.dense(h, h, ("embed", None), **kw),
            out_proj=layers.dense(h, cfg.num_labels, (None, None), **kw),
            dropout=layers.dropout(cfg.hidden_dropout_prob if rate is None else rate, rngs))

    def __call__(self, input_ids: jax.Array, attention_mask: jax.Array | None = None, *,
                 deterministic: bool | None = None) -> jax.Array:
        x = self.roberta(input_ids, attention_mask, deterministic=deterministic)
        c = self.classifier
        x = c.dropout(x.last_hidden_state[:, 0], deterministic=deterministic)
        x = c.dropout(jnp.tanh(c.dense(x)), deterministic=deterministic)
        return c.out_proj(x)


def entailment_index(cfg: Any, override: int | None = None) -> int:
    """The entailment label's index: `override`, else the one `id2label` entry starting
    with "entail" (any case). Raises a one-line ValueError for none or several."""
    n = int(cfg.num_labels)
    if override is not None:
        if not 0 <= override < n:
            raise ValueError(f"entailment label {override} is not one of the {n} labels")
        return override
    hits = [int(i) for i, name in cfg.id2label.items() if str(name).lower().startswith("entail")]
    if len(hits) != 1:
        raise ValueError(f"not an NLI checkpoint: config.json id2label {dict(cfg.id2label)} "
                         f"names {len(hits)} entailment labels (need one; or pass "
                         "--entailment_label INDEX)")
    return hits[0]


def _tensors(directory: pathlib.Path) -> tuple[dict[str, np.ndarray], str]:
    """The checkpoint's tensors: safetensors / msgpack, else `pytorch_model.bin`."""
    if (directory / "pytorch_model.bin").is_file() and not any(
            (directory / f).is_file() for f in ("model.safetensors",
                                                "model.safetensors.index.json",
                                                "flax_model.msgpack")):
        from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

        return read_torch_checkpoint(directory / "pytorch_model.bin"), "pt"
    return loading.read_checkpoint(directory)


def load_nli(name_or_dir: str, entailment_label: int | None = None, *,
             dtype: Any = jnp.float32) -> tuple[NliClassifier, Any, Any, int]:
    """(classifier, fast tokenizer or None, transformers config, entailment index) of a RoBERTa
    sequence-classification checkpoint. Every failure is one line (ValueError /
    FileNotFoundError naming the directory)."""
    from transformers import AutoConfig

    from vnr.models.encoders.tokenizers import saved_tokenizer

    try:
        directory = loading.resolve(name_or_dir, key="--nli")
        if not (directory / "config.json").is_file():
            raise FileNotFoundError(f"no config.json in {directory}")
        cfg = AutoConfig.from_pretrained(str(directory))
        if cfg.model_type not in ARCHS:
            raise ValueError(f"model_type {cfg.model_type!r} is not a RoBERTa classifier "
                             f"({', '.join(ARCHS)})")
        label = entailment_index(cfg, entailment_label)
        tensors, layout = _tensors(directory)
        ctor = lambda r: NliClassifier(cfg, dtype=dtype, rngs=r)  # noqa: E731
        arrays = loading.match_tensors(loading.param_shapes(ctor), tensors, layout,
                                       ignore=IGNORED)
        tok = saved_tokenizer(directory)
    except (OSError, ValueError) as e:
        text = "; ".join(line.strip() for line in str(e).splitlines())
        raise type(e)(f"--nli={str(name_or_dir)!r}: {text}") from None
    model = loading.instantiate(ctor, arrays, key=jax.random.key(0))
    model.eval()
    return model, tok, cfg, label


def entailment_prober(name_or_dir: str, entailment_label: int | None = None,
                      max_len: int = MAX_LEN
                      ) -> Callable[[Sequence[str], Sequence[str]], np.ndarray]:
    """`probs(premises, hypotheses)` -> P(entailment) [n] of the checkpoint, jitted batches
    of `BATCH` pairs padded to a multiple of 64 tokens (few traces)."""
    model, tok, cfg, label = load_nli(name_or_dir, entailment_label)
    directory = loading.resolve(name_or_dir, key="--nli")
    if tok is None:
        raise FileNotFoundError(f"--nli={name_or_dir!r}: no tokenizer files (vocab.json + "
                                "merges.txt or tokenizer.json) beside the weights")
    max_len = min(max_len, cfg.max_position_embeddings - cfg.pad_token_id - 1)
    graph, state = nnx.split(model)
    pad = tok.pad_token_id if tok.pad_token_id is not None else cfg.pad_token_id

    @jax.jit
    def prob(state, ids, mask):
        logits = nnx.merge(graph, state)(ids, mask, deterministic=True)
        return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)[:, label]

    def probs(premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        out = []
        for s in range(0, len(premises), BATCH):
            got = tok(list(premises[s:s + BATCH]), list(hypotheses[s:s + BATCH]),
                      truncation=True, max_length=max_len)["input_ids"]
            width = min(max_len, -(-max(map(len, got)) // 64) * 64)
            ids = np.full((BATCH, width), pad, np.int32)
            for k, row in enumerate(got):
                ids[k, :len(row)] = row
            mask = ids != pad
            mask[len(got):, 0] = True  # padding rows: one real token, no NaN
            out.append(np.asarray(prob(state, ids, mask))[:len(got)])
        return np.concatenate(out) if out else np.zeros((0,), np.float32)

    # what a cached cost depends on (`cached_cost`): the weights, the label and the length
    probs.identity = {"nli": str(directory), "label": int(label), "max_len": int(max_len)}
    return probs


def symmetric_cost(probs: Callable[[Sequence[str], Sequence[str]], np.ndarray]
                   ) -> Callable[[Sequence[str], Sequence[str]], np.ndarray]:
    """DTW cost [N, M] of sentences A, B: 1 − ½ (P(a_i ⊨ b_j) + P(b_j ⊨ a_i))."""

    def cost(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        pa = [x for x in a for _ in b]
        pb = [y for _ in a for y in b]
        fwd = probs(pa, pb).reshape(len(a), len(b))
        bwd = probs(pb, pa).reshape(len(a), len(b))
        return 1.0 - 0.5 * (fwd + bwd)

    return cost


def smoke_checkpoint(path: str | pathlib.Path, seed: int = 0) -> pathlib.Path:
    """Writes a tiny random RoBERTa NLI checkpoint (labels contradiction / neutral /
    entailment, as roberta-large-mnli's config; Flax-layout safetensors) with a byte-level
    BPE tokenizer under `path`; returns `path`. Numbers from it are plumbing only."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    d = pathlib.Path(path)
    d.mkdir(parents=True, exist_ok=True)
    from tfds_builders import symon

    bpe = ByteLevelBPETokenizer()
    # the synthetic corpus's words become a token or two (a sentence pair about 29 tokens,
    # not 90 letters: a third of the width, and a quarter of the smoke classifier's time)
    bpe.train_from_iterator(["the story of a movie and its narration",
                             " ".join(symon.generated_word_shapes())], vocab_size=1000,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(d))
    tok = RobertaTokenizerFast(vocab_file=str(d / "vocab.json"),
                               merges_file=str(d / "merges.txt"))
    tok.save_pretrained(str(d))
    write_tiny_classifier(d, vocab_size=len(tok), seed=seed)
    return d


def write_tiny_classifier(directory: str | pathlib.Path, vocab_size: int = 96, seed: int = 0,
                          layout: str = "flax-safetensors", **config: Any) -> tuple[Any, dict]:
    """A random `FlaxRobertaForSequenceClassification` (width 32, 2 layers) saved to
    `directory` (`layout` "flax-safetensors" or "pt-safetensors"); `config` overrides.
    Returns (transformers Flax model, its params)."""
    import transformers as tf
    from flax.traverse_util import flatten_dict, unflatten_dict
    from safetensors.numpy import save_file

    from vnr.models.encoders.testing import to_pt_layout

    labels = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    kw = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=64, max_position_embeddings=MAX_LEN + 2, type_vocab_size=1,
              pad_token_id=1, bos_token_id=0, eos_token_id=2, id2label=labels,
              label2id={v: k for k, v in labels.items()})
    cfg = tf.RobertaConfig(**{**kw, **config})
    model = tf.FlaxRobertaForSequenceClassification(cfg, seed=seed)
    rng = np.random.default_rng(seed)
    flat = {k: (rng.normal(size=v.shape) * (0.2 if v.ndim < 2 else 0.05)
                + (1.0 if k[-1] == "scale" else 0.0)).astype(np.float32)
            for k, v in flatten_dict(model.params).items()}
    params = unflatten_dict(flat)
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if layout == "pt-safetensors":
        cfg.save_pretrained(d)
        named = {".".join(k): v for k, v in flat.items()}
        save_file(to_pt_layout(named), str(d / "model.safetensors"), metadata={"format": "pt"})
    else:
        model.save_pretrained(d, params=params, safe_serialization=True)
    return model, params


def cached_cost(cost: Callable[[Sequence[str], Sequence[str]], np.ndarray],
                directory: str | pathlib.Path, identity: dict[str, Any]
                ) -> Callable[[Sequence[str], Sequence[str]], np.ndarray]:
    """`cost` with its matrices kept in `directory` (one `.npy` per pair of sentence lists,
    named by the SHA-256 of `identity` and both lists): a second run, e.g. with other
    δ_A / δ_B, reads them instead of ~2 N M classifier passes per video. `identity` names
    the classifier (its directory is hashed, file names, sizes and contents). A damaged
    entry is recomputed; `fn.stats` counts hits and computed matrices."""
    from vnr.feature_cache import digest

    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    key = dict(identity, nli_sha256=digest(identity["nli"]), nli=None, kind="symmetric-v1")
    stats = {"hits": 0, "computed": 0}

    def fn(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        name = hashlib.sha256(json.dumps([key, list(a), list(b)], sort_keys=True).encode())
        path = d / f"{name.hexdigest()}.npy"
        try:
            got = np.load(path)
            if got.shape == (len(a), len(b)) and np.isfinite(got).all():
                stats["hits"] += 1
                return got
        except (OSError, ValueError):
            pass  # absent or damaged: computed again
        got = np.asarray(cost(a, b), np.float32)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, got)
        os.replace(tmp, path)  # readers see a whole matrix or none
        stats["computed"] += 1
        return got

    fn.stats = stats
    return fn
