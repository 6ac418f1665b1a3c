"""VideoCLIP as a SYMON dual encoder: Table 8's and Table 9's zero-shot VideoCLIP rows.

SYMON Appendix E: "we initialize the VideoClip (Xu et al, 2021) model with weights pre-trained
on HowTo100M ... Video-CLIP uses S3D network pretrained on 30fps video data as a feature
extractor ... Similar to UniVL, Video-CLIP is used to calculate the similarity between video
and text". `VideoCLIPRetrievalModel` is `vnr.models.encoders.videoclip.VideoCLIP` (fairseq
examples/MMPT's `MMFusionSeparate`) loaded from its released `checkpoint_best.pt` through the
trainer's `pretrained` hook (port `"videoclip"`), with the methods of
`model.RetrievalModel`, so `retrieval._embed` and `yms_transfer` run it unchanged:

* video: a clip's feature rows ``[B, F, 512]`` (F = `data.max_frames`, 4: §7.1 / Appendix
  E's four seconds, zero-padded and masked) are VideoCLIP's video tokens, ``[CLS] tokens
  [SEP]`` with [SEP] at position ``max_video_len + 1`` as upstream; the embedding is
  upstream's ``pooled_video`` (mean over the real tokens and [SEP]).
* text: `data.tokenizer` (bert-base-uncased WordPiece, a directory with its vocab.txt) gives
  ``[CLS] pieces [SEP]`` in `data.max_tokens` slots (`data.tokens_of`), the text tower's
  input as upstream's `split_caps` makes it; the embedding is ``pooled_text`` (mean over the
  pieces and [SEP]).
* score: the raw dot product, upstream's retrieval score (no normalisation).

The rows are zero-shot (the paper does not fine-tune VideoCLIP) and have no memory: the
memory inputs are refused by `videoclip_config` (config) and never read here.

Features: VideoCLIP's own S3D extraction (`s3d.VIDEOCLIP`: 30 fps, 30-frame clips, so one
row a second, 224 x 224 centre crop, the 512-d ``video_embedding``, L2-normalised), not
UniVL's 1024-d ``mixed_5c``; REPRODUCING.md says how to make them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.encoders import videoclip

PORT = "videoclip"  # the `pretrained` hook's port name (vnr/models/encoders/ports.py)


class VideoCLIPRetrievalModel(nnx.Module):
    """VideoCLIP's video and text towers as SYMON's dual encoder (module docstring); the
    methods of `model.RetrievalModel`, memory inputs ignored (the rows have none)."""

    def __init__(self, cfg: videoclip.VideoCLIPConfig, *, dtype: Any = jnp.float32,
                 rngs: nnx.Rngs):
        from vnr.models.encoders.towers import raw_rng_keys

        self.videoclip = raw_rng_keys(videoclip.VideoCLIP(cfg, dtype=dtype, rngs=rngs))

    def encode_video(self, frames, mask, mem_frames, mem_mask, *, train: bool,
                     rngs: nnx.Rngs | None) -> jax.Array:
        """``(B, F, D)`` rows, ``(B, F)`` mask -> ``(B, H)`` ``pooled_video``."""
        return self.videoclip.video_embed(frames, jnp.asarray(mask, jnp.int32),
                                          deterministic=not train)

    def encode_text(self, tokens, mem_tokens, mem_mask, *, train: bool,
                    rngs: nnx.Rngs | None, token_mask: jax.Array | None = None) -> jax.Array:
        """``[CLS] pieces [SEP]`` ids ``(B, L)`` -> ``(B, H)`` ``pooled_text``."""
        mask = tokens > 0 if token_mask is None else token_mask
        return self.videoclip.text_embed(tokens, jnp.asarray(mask, jnp.int32),
                                         deterministic=not train)


def videoclip_config(config: Any) -> videoclip.VideoCLIPConfig:
    """The sizes of `model.videoclip_checkpoint` (its tensor shapes, not its weights; heads
    and upstream's `max_video_len` / `max_len` from `model.videoclip_*`), checked against
    the data: a WordPiece tokenizer, no memory, the clip's rows within `max_video_len`, the
    text within the position table. One-line ValueError naming the key otherwise."""
    from vnr.models.encoders import torch_checkpoint

    m, d = config.model, config.data
    path = m.get("videoclip_checkpoint", "")
    if not path:
        raise ValueError("model.encoder='videoclip' needs --config.model.videoclip_checkpoint="
                         "PATH/checkpoint_best.pt (fairseq examples/MMPT's released VideoCLIP)")
    cfg = videoclip.infer_config(
        torch_checkpoint.read_torch_shapes(path, foreign="skip"), path,
        num_attention_heads=m.get("videoclip_heads", 12),
        max_video_len=m.get("videoclip_max_video_len", 32),
        max_len=m.get("videoclip_max_len", 96))
    if d.get("tokenizer", "hash") == "hash":
        raise ValueError("model.encoder='videoclip' reads BERT WordPiece ids: set "
                         "--config.data.tokenizer=DIR (a directory with bert-base-uncased's "
                         "vocab.txt)")
    if d.get("memory"):
        raise ValueError("model.encoder='videoclip' has no memory inputs (the VideoCLIP rows "
                         "are zero-shot): use the no_memory preset (data.memory=False)")
    if d.get("max_frames", 0) > cfg.max_video_len:
        raise ValueError(f"data.max_frames={d.max_frames} exceeds VideoCLIP's max_video_len "
                         f"{cfg.max_video_len} (model.videoclip_max_video_len)")
    if d.max_tokens > cfg.max_position_embeddings:
        raise ValueError(f"data.max_tokens={d.max_tokens} exceeds the "
                         f"{cfg.max_position_embeddings} positions of {path}")
    return cfg


def make(config: Any, dim: int, rngs: nnx.Rngs) -> VideoCLIPRetrievalModel:
    """The model for features of width `dim` (VideoCLIP reads its S3D's 512-d rows)."""
    cfg = videoclip_config(config)
    if cfg.video_dim != dim:
        raise ValueError(f"the features are {dim}-d, {config.model.videoclip_checkpoint} reads "
                         f"{cfg.video_dim}-d (VideoCLIP's S3D video_embedding: extract at 30 "
                         "fps with s3d.VIDEOCLIP, see vnr/benchmarks/symon/REPRODUCING.md)")
    return VideoCLIPRetrievalModel(cfg, rngs=rngs)


def pretrained(config: Any) -> dict[str, tuple[str, str]]:
    """Both towers from `checkpoint_best.pt` (its poolers stay unread)."""
    return {"videoclip": (config.model.videoclip_checkpoint, PORT)}
