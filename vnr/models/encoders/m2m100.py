"""M2M100, the architecture of NLLB-200 (facebook/nllb-200-*: M-SYMON §5.2's translation
model), in NNX, read from its Hugging Face checkpoint without torch, with a jitted greedy /
beam generator.

    model = m2m100.from_pretrained("path/to/nllb-200-distilled-600M")  # or a name under
    tokens, lengths = m2m100.generate(model, ids, mask, max_len=127,  # $VNR_ENCODERS_DIR
                                      forced_bos=eng_Latn_id)

Architecture (transformers' `M2M100ForConditionalGeneration`, checked against it by
tests/models/test_m2m100.py): one shared token embedding scaled by sqrt(d_model)
(`scale_embedding`), fixed sinusoidal positions counted from pad + 1 over the non-pad tokens
(pad positions get the zero row), pre-LayerNorm encoder and decoder layers (self-attention,
the decoder's cross-attention, a ReLU FFN), a final LayerNorm on each side, and the output
layer tied to the shared embedding. Generation starts from `decoder_start_token_id` (NLLB:
</s>), forces `forced_bos` (the target language's code) as the first token as transformers'
`forced_bos_token_id` does, and runs `vnr.ops.beam_decode.beam_search` with a KV cache
(beam 1 = greedy; scores are summed log-probabilities, GNMT length penalty `alpha`).
Parameter names follow the checkpoint's (`model.` prefix), so `videomae.match` maps them;
the tied copies (`model.encoder.embed_tokens`, `model.decoder.embed_tokens`, `lm_head`) are
the shared embedding and are not read twice (a file that keeps only one of them gives
`model.shared`). pytorch_model.bin or model.safetensors, one file (e.g.
nllb-200-distilled-600M / -1.3B) or sharded with its index JSON (nllb-200-3.3B).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.models import layers
from vnr.models.encoders import loading, videomae
from vnr.models.encoders.loading import CheckpointError
from vnr.ops.beam_decode import NEG, beam_search, tile_beams

PREFIXES = ("model.",)
EPS = 1e-5  # torch.nn.LayerNorm's default, which M2M100 keeps
TIED = ("lm_head.", "model.encoder.embed_tokens.", "model.decoder.embed_tokens.",
        "model.encoder.embed_positions.", "model.decoder.embed_positions.")


@dataclasses.dataclass(frozen=True)
class M2M100Config:
    vocab_size: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_attention_heads: int
    decoder_attention_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    scale_embedding: bool = True
    activation_function: str = "relu"
    pad_token_id: int = 1
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    max_position_embeddings: int = 1024


def read_config(directory: str | Path) -> M2M100Config:
    """The M2M100 config of a checkpoint directory (one line naming the file otherwise)."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file (an M2M100 / NLLB-200 checkpoint "
                              "directory: config.json, pytorch_model.bin or model.safetensors)")
    raw = json.loads(path.read_text())
    if raw.get("model_type") != "m2m_100":
        raise CheckpointError(f"{path}: model_type={raw.get('model_type')!r}, not 'm2m_100' "
                              "(NLLB-200's architecture)")
    if raw.get("activation_function", "relu") not in ACTIVATIONS:
        raise CheckpointError(f"{path}: activation_function={raw['activation_function']!r}; "
                              f"supported: {sorted(ACTIVATIONS)}")
    fields = {f.name for f in dataclasses.fields(M2M100Config)}
    try:
        return M2M100Config(**{k: v for k, v in raw.items() if k in fields})
    except TypeError as e:
        raise CheckpointError(f"{path}: {e}") from None


ACTIVATIONS = {"relu": jax.nn.relu, "gelu": functools.partial(jax.nn.gelu, approximate=False)}


def sinusoid(positions: jax.Array, dim: int, pad: int) -> jax.Array:
    """fairseq's sinusoidal embedding of integer `positions` (sin half, then cos half; a
    zero column for odd `dim`; the zero vector at `pad`)."""
    half = dim // 2
    freq = jnp.exp(jnp.arange(half, dtype=jnp.float32) * -(math.log(10000) / (half - 1)))
    angle = positions.astype(jnp.float32)[..., None] * freq
    emb = jnp.concatenate([jnp.sin(angle), jnp.cos(angle)], -1)
    if dim % 2:
        emb = jnp.pad(emb, [(0, 0)] * (emb.ndim - 1) + [(0, 1)])
    return jnp.where((positions == pad)[..., None], 0.0, emb)


def positions_of(ids: jax.Array, pad: int, offset: int | jax.Array = 0) -> jax.Array:
    """Positions pad + 1, pad + 2, ... over the non-pad tokens (after `offset` earlier
    ones), pad where the token is pad: transformers' create_position_ids_from_input_ids."""
    real = (ids != pad).astype(jnp.int32)
    return (jnp.cumsum(real, -1) + offset) * real + pad


class Attention(nnx.Module):
    def __init__(self, d: int, heads: int, rngs: nnx.Rngs):
        self.heads, self.head_dim = heads, d // heads
        self.q_proj = layers.dense(d, d, ("embed", "heads"), rngs)
        self.k_proj = layers.dense(d, d, ("embed", "heads"), rngs)
        self.v_proj = layers.dense(d, d, ("embed", "heads"), rngs)
        self.out_proj = layers.dense(d, d, ("heads", "embed"), rngs)

    def split(self, x: jax.Array) -> jax.Array:
        return x.reshape(*x.shape[:-1], self.heads, self.head_dim)

    def kv(self, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.split(self.k_proj(y)), self.split(self.v_proj(y))

    def __call__(self, x: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
        """x [B,S,d] attends to k, v [B,T,H,Dh] where `mask` [B,S|1,T] is True."""
        q = self.split(self.q_proj(x)) * self.head_dim ** -0.5
        s = jnp.einsum("bshd,bthd->bhst", q, k)
        s = jnp.where(mask[:, None], s, jnp.finfo(s.dtype).min)
        p = jax.nn.softmax(s.astype(jnp.float32), -1).astype(v.dtype)
        out = jnp.einsum("bhst,bthd->bshd", p, v)
        return self.out_proj(out.reshape(*out.shape[:2], -1))


class EncoderLayer(nnx.Module):
    def __init__(self, cfg: M2M100Config, rngs: nnx.Rngs, decoder: bool = False):
        d = cfg.d_model
        heads = cfg.decoder_attention_heads if decoder else cfg.encoder_attention_heads
        ffn = cfg.decoder_ffn_dim if decoder else cfg.encoder_ffn_dim
        self.self_attn = Attention(d, heads, rngs)
        self.self_attn_layer_norm = layers.layer_norm(d, rngs, EPS)
        if decoder:
            self.encoder_attn = Attention(d, heads, rngs)
            self.encoder_attn_layer_norm = layers.layer_norm(d, rngs, EPS)
        self.fc1 = layers.dense(d, ffn, ("embed", "mlp"), rngs)
        self.fc2 = layers.dense(ffn, d, ("mlp", "embed"), rngs)
        self.final_layer_norm = layers.layer_norm(d, rngs, EPS)
        self.act = ACTIVATIONS[cfg.activation_function]

    def ffn(self, h: jax.Array) -> jax.Array:
        return h + self.fc2(self.act(self.fc1(self.final_layer_norm(h))))

    def __call__(self, h: jax.Array, mask: jax.Array) -> jax.Array:
        x = self.self_attn_layer_norm(h)
        h = h + self.self_attn(x, *self.self_attn.kv(x), mask)
        return self.ffn(h)

    def decode(self, h: jax.Array, kv: Any, mask: jax.Array, cross: tuple[jax.Array, jax.Array],
               cross_mask: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        """A decoder layer: self-attention over `kv(x)` (the keys and values it attends to,
        given this layer's normalised input: its own, or a cache with them written in),
        cross-attention to `cross` = (keys, values) of the source, the FFN. Returns the
        states and the (keys, values) attended."""
        x = self.self_attn_layer_norm(h)
        k, v = kv(x)
        h = h + self.self_attn(x, k, v, mask)
        h = h + self.encoder_attn(self.encoder_attn_layer_norm(h), *cross, cross_mask)
        return self.ffn(h), (k, v)


class Stack(nnx.Module):
    def __init__(self, cfg: M2M100Config, rngs: nnx.Rngs, decoder: bool):
        n = cfg.decoder_layers if decoder else cfg.encoder_layers
        self.layers = nnx.List([EncoderLayer(cfg, rngs, decoder) for _ in range(n)])
        self.layer_norm = layers.layer_norm(cfg.d_model, rngs, EPS)


class M2M100(nnx.Module):
    """`model.` of M2M100ForConditionalGeneration (the output layer is `shared`)."""

    def __init__(self, cfg: M2M100Config, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.shared = nnx.Embed(cfg.vocab_size, cfg.d_model, rngs=rngs, embedding_init=(
            layers.annotate(nnx.initializers.normal(0.02), ("vocab", "embed"))))
        self.encoder = Stack(cfg, rngs, decoder=False)
        self.decoder = Stack(cfg, rngs, decoder=True)

    def embed(self, ids: jax.Array, positions: jax.Array) -> jax.Array:
        scale = math.sqrt(self.cfg.d_model) if self.cfg.scale_embedding else 1.0
        return self.shared(ids) * scale + sinusoid(positions, self.cfg.d_model,
                                                   self.cfg.pad_token_id)

    def encode(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        """Source ids [B,T] and mask [B,T] -> the encoder's last states [B,T,d]."""
        h = self.embed(ids, positions_of(ids, self.cfg.pad_token_id))
        keys = mask.astype(bool)[:, None, :]
        for layer in self.encoder.layers:
            h = layer(h, keys)
        return self.encoder.layer_norm(h)

    def logits(self, h: jax.Array) -> jax.Array:
        return self.shared.attend(self.decoder.layer_norm(h))

    def __call__(self, ids: jax.Array, mask: jax.Array, decoder_ids: jax.Array) -> jax.Array:
        """Teacher-forced logits [B,S,V] of `decoder_ids` [B,S] given the source."""
        memory, cross = self.encode(ids, mask), mask.astype(bool)[:, None, :]
        s = decoder_ids.shape[1]
        causal = jnp.tril(jnp.ones((s, s), bool))[None]
        h = self.embed(decoder_ids, positions_of(decoder_ids, self.cfg.pad_token_id))
        for layer in self.decoder.layers:
            h, _ = layer.decode(h, layer.self_attn.kv, causal, layer.encoder_attn.kv(memory),
                                cross)
        return self.logits(h)


def _step(graph: Any, tokens: jax.Array, state: dict, t: jax.Array, consts: dict
          ) -> tuple[jax.Array, dict]:
    """One decoder position for every beam: log-probabilities [N,V] and the updated cache."""
    model = nnx.merge(graph, consts["params"])
    cfg = model.cfg
    h = model.embed(tokens[:, None], jnp.full((tokens.shape[0], 1), t + cfg.pad_token_id + 1))
    length = state["k"][0].shape[1]
    seen = (jnp.arange(length) <= t)[None, None, :]
    ks, vs = [], []
    for i, layer in enumerate(model.decoder.layers):
        def cached(x, i=i, layer=layer):  # this position's key and value written in
            k, v = layer.self_attn.kv(x)
            return (jax.lax.dynamic_update_slice_in_dim(state["k"][i], k, t, axis=1),
                    jax.lax.dynamic_update_slice_in_dim(state["v"][i], v, t, axis=1))

        h, (k, v) = layer.decode(h, cached, seen, consts["cross"][i], consts["cross_mask"])
        ks.append(k)
        vs.append(v)
    logp = jax.nn.log_softmax(model.logits(h)[:, 0].astype(jnp.float32), -1)
    forced = consts["forced_bos"]
    only = jnp.where(jnp.arange(logp.shape[-1]) == forced, 0.0, NEG)
    logp = jnp.where((t == 0) & (forced >= 0), only[None], logp)
    return logp, {"k": ks, "v": vs}


@functools.partial(jax.jit, static_argnames=("graph", "max_len", "beam_size", "alpha"))
def _generate(graph: Any, params: Any, ids: jax.Array, mask: jax.Array, forced_bos: jax.Array,
              *, max_len: int, beam_size: int, alpha: float) -> tuple[jax.Array, jax.Array]:
    model = nnx.merge(graph, params)
    cfg = model.cfg
    memory = model.encode(ids, mask)
    b, k = ids.shape[0], beam_size
    cross = [layer.encoder_attn.kv(memory) for layer in model.decoder.layers]
    heads = cfg.decoder_attention_heads
    # one [B*K, L, H, Dh] key and value cache per layer (beam_search gathers leading rows)
    cache = [jnp.zeros((b * k, max_len, heads, cfg.d_model // heads), memory.dtype)
             for _ in range(cfg.decoder_layers)]
    consts = {"params": params, "cross": tile_beams(cross, k),
              "cross_mask": tile_beams(mask.astype(bool)[:, None, :], k),
              "forced_bos": forced_bos}
    seqs, _, lengths, _ = beam_search(
        functools.partial(_step, graph), {"k": cache, "v": cache}, batch_size=b, beam_size=k,
        max_len=max_len, bos_id=cfg.decoder_start_token_id, eos_id=cfg.eos_token_id,
        pad_id=cfg.pad_token_id, alpha=alpha, consts=consts)
    return seqs[:, 0], lengths[:, 0]


def generate(model: M2M100, ids: Any, mask: Any, *, max_len: int, beam_size: int = 1,
             alpha: float = 0.0, forced_bos: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The best hypothesis per source: tokens [B,max_len] (the forced first token included,
    the start token not; pad after </s>) and their lengths (</s> included)."""
    graph, params = nnx.split(model)
    seqs, lengths = _generate(graph, params, jnp.asarray(ids, jnp.int32),
                              jnp.asarray(mask, jnp.int32),
                              jnp.asarray(-1 if forced_bos is None else forced_bos, jnp.int32),
                              max_len=max_len, beam_size=beam_size, alpha=alpha)
    return np.asarray(seqs), np.asarray(lengths)


def from_pretrained(name_or_dir: str | Path, *, key: jax.Array | None = None) -> M2M100:
    """M2M100 / NLLB-200 with a Hugging Face checkpoint's weights (pytorch_model.bin read
    without torch, or model.safetensors). Raises CheckpointError: one line naming the file
    and the offending key."""
    directory = loading.resolve(name_or_dir)
    cfg = read_config(directory)
    tensors, where = videomae.read_tensors(directory)
    shared = "model.shared.weight"
    if shared not in tensors:  # a deduplicated file keeps one of the tied copies
        alias = next((k for k in ("lm_head.weight", "model.encoder.embed_tokens.weight",
                                  "model.decoder.embed_tokens.weight") if k in tensors), None)
        if alias is not None:
            tensors = {**tensors, shared: tensors[alias]}

    def ctor(rngs: nnx.Rngs) -> M2M100:
        return M2M100(cfg, rngs=rngs)

    return videomae.load(ctor, tensors, Path(where), PREFIXES, TIED, key, None, None)
