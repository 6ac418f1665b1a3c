"""Movie101's Role-aware Narration Locator (RNL, §5.2) as the release trains it: an NNX port of
`CNCLIP+RNL/RNL/models_/gcn_final.py`'s `Model` (yuezih/Movie101; read as reference
behaviour, not copied), its training loss and the targets its loader builds.

Forward (layers in `rnl_layers.py`):

* Video encoder: clip features (S3D, 1024-d) -> `attn_layers` residual local self-attention
  layers (+-3 clips, no padding mask) -> BiGRU over the valid clips (V); plus, for f_v, an FC
  of the clips' frame-face features (1536-d) -> V + F.
* Sentence encoder: word features (768-d) -> BiGRU over the real words (output padded to the
  word slots); for f_t the portrait face features (one token per named role) are appended.
  Upstream defines an FC for them (`tran_face`, 512 -> d_model) but never applies it, so its
  portraits must be `width` wide; `portrait_fc=True` applies it (§5.2: "encode them ... with
  a FC layer"). The query mask is [word mask, portrait mask].
* `blocks` x (gated co-attention, gated self-attention), then each clip attends over the
  query (tanh attention, masked), [clip, attended] -> BiGRU over the valid clips.
* Head (upstream's ActivityNet setting, `utils.generate_anchors`): at every clip t and anchor
  width w in (8, 16, 32, 64) a proposal [t - (w - 1) / 2, t + (w - 1) / 2]; a 1x1
  convolution gives its score (sigmoid) and another its (start, end) offsets. Proposals
  leaving the window are illegal: their score is zeroed. The refined box is proposal +
  offsets, where upstream casts the proposals to the integer type of the ground truth first
  (`type_as(gt)`: half-clip ends truncated toward zero); kept here.

Dropout (rate 0.2) on the input clips and words, after every local attention layer and after
each BiGRU, as upstream; none inside the co-/self-attention or tanh attention (upstream
builds them with rate 0).

Padding is part of the model: neither the local attention nor the co-/self-attention masks
anything, so the number of word slots (upstream: `max_num_words` 80) and portrait slots (3)
changes the result; feed them padded as upstream's loader does.

Ablations (Table 5): `face_dim=0` drops f_v, `portraits=False` drops f_t; both off is the
IA-Net base. Upstream's release only has the full model; how the ablations were run is not
released (ours: the branch is left out, nothing else changes).

Targets and loss (`targets`, `loss`: `dataloaders/clip_loader.py` `ClipDataset1`,
`gcn_final.Model.forward`): IoU (inclusive clip ends) of every legal proposal with the ground
truth [start, end] (clip indices), divided by its maximum, is the score target; binary
cross-entropy over all proposals (illegal ones: prediction and target 0) plus 1e-3 x
smooth-L1 of the refined boxes against the ground truth, averaged in training over the
proposals whose IoU is at least 0.45 x the maximum (`adj_mat`), in evaluation over all.

Checkpoints: `from_checkpoint` reads the runner's `torch.save` of the `DataParallel` model
(keys `module.<name>`; a bare state dict too) without torch. NNX `a.kernel` is `a.weight`
transposed (the two 1x1 `Conv1d` heads drop their kernel axis), the attention's packed
projection is `in_proj_weight` / `in_proj_bias`, a BiGRU's `fwd` / `bwd` cells are
`rnn.gru.*_l0` / `*_l0_reverse`, `layers.{2k}` / `layers.{2k + 1}` are `co{k+1}` /
`se{k+1}` (their `query` / `update` / `gate` lists: `dense_coattn.linears`, `linears.i.0`,
`linears_re.i.0`). `sentence_encoder.tran_face.*` (unused upstream) is left unread unless
`portrait_fc`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from vnr.benchmarks.movie101.rnl_layers import (
    BiGRU,
    GatedAttention,
    LocalSelfAttention,
    TanhAttention,
    linear,
)
from vnr.models.encoders import loading
from vnr.models.layers import annotate

UNUSED_PREFIXES = ("sentence_encoder.tran_face.",)  # defined upstream, never applied


@dataclasses.dataclass(frozen=True)
class RNLConfig:
    """Sizes; the defaults are `train.sh`'s (with `main.py`'s defaults for the rest)."""

    clip_dim: int = 1024  # upstream frame_dim: the S3D part of each clip's features
    face_dim: int = 1536  # frame faces per clip (f_v); 0: without
    word_dim: int = 768
    width: int = 512  # d_model; portrait tokens come in at this width
    heads: int = 4  # local self-attention heads (num_heads)
    attn_layers: int = 2
    local_width: int = 3
    blocks: int = 3  # co-/self-attention pairs (co1..co3, se1..se3)
    block_heads: int = 4  # their heads (a constant upstream)
    portraits: bool = True  # f_t
    portrait_fc: bool = False  # apply tran_face to the portraits (the paper; upstream: not)
    portrait_dim: int = 512  # tran_face's input width (Arcface)
    anchors: tuple[int, ...] = (8, 16, 32, 64)
    dropout: float = 0.2
    reg_weight: float = 1e-3  # the smooth-L1 term's weight (non-TACoS / Charades)
    iou_keep: float = 0.45  # adj_mat: proposals trained for regression, x max IoU


class VideoEncoder(nnx.Module):
    """Clips [B, T, clip_dim] (+ faces [B, T, face_dim]) -> [B, T, width]."""

    def __init__(self, cfg: RNLConfig, rngs: nnx.Rngs):
        self.tran = linear(cfg.face_dim, cfg.width, ("mlp", "embed"), rngs) if cfg.face_dim \
            else None
        self.attn_layers = nnx.List([
            LocalSelfAttention(cfg.clip_dim, cfg.heads, cfg.local_width, rngs)
            for _ in range(cfg.attn_layers)])
        self.rnn = BiGRU(cfg.clip_dim, cfg.width, rngs)
        self.drop = nnx.Dropout(cfg.dropout)

    def __call__(self, clips: jax.Array, lengths: jax.Array, faces: jax.Array | None, *,
                 train: bool = False, rngs: nnx.Rngs | None = None) -> jax.Array:
        x = clips
        for att in self.attn_layers:
            x = x + self.drop(att(x), deterministic=not train, rngs=rngs)
        x = self.drop(self.rnn(x, lengths), deterministic=not train, rngs=rngs)
        if self.tran is not None:
            x = x + self.tran(faces)
        return x


class SentenceEncoder(nnx.Module):
    """Words [B, L, word_dim] (+ portrait tokens [B, P, width]) -> [B, L (+ P), width]."""

    def __init__(self, cfg: RNLConfig, rngs: nnx.Rngs):
        self.rnn = BiGRU(cfg.word_dim, cfg.width, rngs)
        self.tran_face = (linear(cfg.portrait_dim, cfg.width, ("mlp", "embed"), rngs)
                          if cfg.portraits and cfg.portrait_fc else None)
        self.drop = nnx.Dropout(cfg.dropout)

    def __call__(self, words: jax.Array, lengths: jax.Array, portraits: jax.Array | None, *,
                 train: bool = False, rngs: nnx.Rngs | None = None) -> jax.Array:
        x = self.drop(self.rnn(words, lengths), deterministic=not train, rngs=rngs)
        if portraits is None:
            return x
        if self.tran_face is not None:
            portraits = self.tran_face(portraits)
        return jnp.concatenate([x, portraits], 1)


def proposals(n: int, anchors: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The [n * A, 2] anchor proposals (clip-major: row t * A + a) and their legal mask."""
    w = np.asarray(anchors, np.float64)[None]
    t = np.arange(n, dtype=np.float64)[:, None]
    p = np.stack([t - 0.5 * (w - 1), t + 0.5 * (w - 1)], -1).reshape(-1, 2)
    return p, (p[:, 0] >= 0) & (p[:, 1] < n)


class RNL(nnx.Module):
    """Scores and refined boxes of every anchor proposal in a window (module docstring)."""

    def __init__(self, cfg: RNLConfig, rngs: nnx.Rngs):
        self.cfg = cfg
        self.video_encoder = VideoEncoder(cfg, rngs)
        self.sentence_encoder = SentenceEncoder(cfg, rngs)
        self.layers = nnx.List([GatedAttention(cfg.width, cfg.block_heads, k % 2 == 0, rngs)
                                for k in range(2 * cfg.blocks)])
        self.v2s = TanhAttention(cfg.width, rngs)
        self.rnn = BiGRU(2 * cfg.width, cfg.width, rngs)
        a = len(cfg.anchors)
        self.fc_score = linear(cfg.width, a, ("embed", None), rngs)
        self.fc_reg = linear(cfg.width, 2 * a, ("embed", None), rngs)
        self.drop = nnx.Dropout(cfg.dropout)

    def __call__(self, clips: jax.Array, clip_mask: jax.Array, words: jax.Array,
                 word_mask: jax.Array, *, faces: jax.Array | None = None,
                 portraits: jax.Array | None = None,
                 portrait_mask: jax.Array | None = None, train: bool = False,
                 rngs: nnx.Rngs | None = None) -> dict[str, jax.Array]:
        """clips [B, T, clip_dim], clip_mask [B, T] (a valid prefix), words [B, L, word_dim],
        word_mask [B, L], faces [B, T, face_dim] (f_v), portraits [B, P, width] with
        portrait_mask [B, P] (f_t); `train` turns dropout on (`rngs`: its stream). Returns
        `logits` / `scores` (sigmoid, illegal proposals 0) [B, T * A], `boxes`
        [B, T * A, 2] and the intermediate `video`, `query`, `attended`, `fused`."""
        cfg = self.cfg
        if (faces is None) != (cfg.face_dim == 0):
            raise ValueError(f"RNL: faces {'missing' if faces is None else 'given'} for "
                             f"face_dim={cfg.face_dim}")
        if (portraits is None) == cfg.portraits:
            raise ValueError(f"RNL: portraits {'missing' if portraits is None else 'given'} "
                             f"for portraits={cfg.portraits}")
        def drop(x: jax.Array) -> jax.Array:
            return self.drop(x, deterministic=not train, rngs=rngs)

        clip_len = clip_mask.sum(-1).astype(jnp.int32)
        video = self.video_encoder(drop(clips), clip_len, faces, train=train, rngs=rngs)
        query = self.sentence_encoder(drop(words), word_mask.sum(-1).astype(jnp.int32),
                                      portraits, train=train, rngs=rngs)
        query_mask = word_mask if portraits is None else jnp.concatenate(
            [word_mask, portrait_mask], -1)
        v, q = video, query
        for layer in self.layers:
            v, q = layer(v, q)
        attended = self.v2s(v, q, query_mask > 0)
        fused = self.rnn(jnp.concatenate([v, attended], -1), clip_len)
        x = drop(fused)
        b, n = clips.shape[:2]
        p, legal = proposals(n, cfg.anchors)
        logits = self.fc_score(x).reshape(b, -1)
        boxes = np.trunc(p).astype(np.float32) + self.fc_reg(x).reshape(b, -1, 2)
        scores = jax.nn.sigmoid(logits) * legal
        return dict(logits=logits, scores=scores, boxes=boxes, video=video, query=query,
                    attended=attended, fused=fused)


def targets(gt: jax.Array, n: int, anchors: tuple[int, ...], iou_keep: float = 0.45
            ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """gt [B, 2] (first and last clip, inclusive) -> (score targets [B, n * A]: IoU / max IoU,
    legal mask [n * A], regression mask [B, n * A]: IoU >= `iou_keep` x max, IoU > 0)."""
    p, legal = proposals(n, anchors)
    gt = jnp.asarray(gt, jnp.float32)
    s, e = gt[:, None, 0], gt[:, None, 1]
    inter = jnp.minimum(p[None, :, 1], e) - jnp.maximum(p[None, :, 0], s) + 1
    union = jnp.maximum(p[None, :, 1], e) - jnp.minimum(p[None, :, 0], s) + 1
    iou = jnp.where(legal, jnp.maximum(inter / union, 0.0), 0.0)
    best = iou.max(-1, keepdims=True)
    return iou / best, legal, (iou >= iou_keep * best) & (iou > 0)


def loss(out: Mapping[str, jax.Array], gt: jax.Array, cfg: RNLConfig, *, train: bool
         ) -> jax.Array:
    """Upstream's objective (module docstring) for `RNL` outputs `out` and gt [B, 2] clips."""
    b, count = out["logits"].shape
    y, legal, keep = targets(gt, count // len(cfg.anchors), cfg.anchors, cfg.iou_keep)
    z = out["logits"]
    bce = jnp.where(legal, y * jax.nn.softplus(-z) + (1 - y) * jax.nn.softplus(z), 0.0)
    d = jnp.abs(out["boxes"] - jnp.asarray(gt, jnp.float32)[:, None])
    smooth = jnp.where(d < 1, 0.5 * d * d, d - 0.5).sum(-1)
    if train:
        reg = (smooth * keep).sum() / (2 * jnp.maximum(keep.sum(), 1))
    else:
        reg = smooth.mean() / 2
    return bce.mean() + cfg.reg_weight * reg


# ----------------------------------------------------------------------------- checkpoints


def _gru_key(m: re.Match) -> str:
    kind = "weight" if m.group(4) == "kernel" else "bias"
    return f"{m.group(1)}rnn.gru.{kind}_{m.group(3)}_l0{'_reverse' * (m.group(2) == 'bwd')}"


_RENAMES = (
    (re.compile(r"^layers\.(\d+)\."),
     lambda m: f"{('co', 'se')[int(m.group(1)) % 2]}{int(m.group(1)) // 2 + 1}."),
    (re.compile(r"\.query\.(\d)\.kernel$"), r".dense_coattn.linears.\1.weight"),
    (re.compile(r"\.update\.(\d)\."), r".linears.\1.0."),
    (re.compile(r"\.gate\.(\d)\."), r".linears_re.\1.0."),
    (re.compile(r"\.in_proj\.(kernel|bias)$"),
     lambda m: f".in_proj_{'weight' if m.group(1) == 'kernel' else 'bias'}"),
    (re.compile(r"^(.*?)rnn\.(fwd|bwd)\.(ih|hh)\.(kernel|bias)$"), _gru_key),
    (re.compile(r"\.kernel$"), ".weight"),
)


def upstream_key(name: str) -> str:
    """NNX parameter name -> upstream state-dict key (without `module.`)."""
    for pattern, repl in _RENAMES:
        name = pattern.sub(repl, name)
    return name


def _torch_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    if not name.endswith("kernel"):
        return shape
    return (shape[1], shape[0], 1) if name.startswith("fc_") else (shape[1], shape[0])


def param_shapes(cfg: RNLConfig) -> dict[str, tuple[int, ...]]:
    """NNX parameter name -> shape of the `RNL` that `cfg` builds (nothing allocated)."""
    return loading.param_shapes(lambda rngs: RNL(cfg, rngs))


def upstream_shapes(cfg: RNLConfig = RNLConfig()) -> dict[str, tuple[int, ...]]:
    """Upstream key -> torch shape of every tensor this port reads."""
    return {upstream_key(k): _torch_shape(k, s) for k, s in param_shapes(cfg).items()}


def match(tensors: Mapping[str, np.ndarray], cfg: RNLConfig, where: str
          ) -> dict[str, np.ndarray]:
    """NNX parameter name -> array for `RNL(cfg)` from upstream's state dict (`module.`
    prefix or none). Every parameter must be there with its shape and every tensor read
    but `UNUSED_PREFIXES` (read with `portrait_fc`) and `video_encoder.tran.` without f_v;
    the first problem is one
    `CheckpointError` line naming `where`, with the count of the others."""
    tensors = {k.removeprefix("module."): v for k, v in tensors.items()}
    problems, arrays, wanted = [], {}, set()
    for name, shape in param_shapes(cfg).items():
        key, want = upstream_key(name), _torch_shape(name, shape)
        wanted.add(key)
        if key not in tensors:
            problems.append(f"missing key {key!r} (RNL expects shape {want})")
        elif tuple(tensors[key].shape) != want:
            problems.append(f"key {key!r} has shape {tuple(tensors[key].shape)}, RNL "
                            f"expects {want}")
        else:
            x = np.asarray(tensors[key])
            arrays[name] = x.reshape(x.shape[:2]).T if name.endswith("kernel") else x
    spare = (() if cfg.face_dim else ("video_encoder.tran.",)) + (
        () if cfg.portraits and cfg.portrait_fc else UNUSED_PREFIXES)
    problems += [f"unexpected key {k!r} (shape {tuple(tensors[k].shape)})"
                 for k in sorted(tensors) if k not in wanted and not k.startswith(spare)]
    loading.refuse(where, problems)
    return arrays


def from_checkpoint(path: str | Path, cfg: RNLConfig, *, key: jax.Array | None = None,
                    mesh: jax.sharding.Mesh | None = None, rules=None) -> RNL:
    """`RNL(cfg)` with the weights of upstream's saved `model-<epoch>` (read
    without torch). Raises CheckpointError (one line naming `path`) when they do not fit."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    arrays = match(read_torch_checkpoint(path), cfg, str(path))
    model = loading.instantiate(lambda rngs: RNL(cfg, rngs), arrays,
                                key=jax.random.key(0) if key is None else key, mesh=mesh,
                                rules=rules)
    return model


# ----------------------------------------------------------------------------- TNG windows


class WindowRNL(nnx.Module):
    """`RNL` on `tng_data` window batches (configs/movie101/tng.py:release): clips
    [B, n, clip_dim] all valid (upstream's loader masks none), faces [B, n, F, Df] flattened to
    F * Df per clip (upstream's frame-face rows: 3 x 512), portraits [B, R, Df] with their
    mask. Words: with `text` (a frozen BERT-base-Chinese tower, `tng_bert`), the first
    `max_words` of its last-layer states over the batch's `tokens` / `token_mask` (the whole
    narration), as upstream's pre-extracted 768-d text features cut to max_num_words;
    without, a learned table of `word_dim` values over the hashed tokens
    (`vnr.data.text.tokenize`, 0 = padding: our stand-in)."""

    def __init__(self, cfg: RNLConfig, vocab: int, rngs: nnx.Rngs,
                 text: nnx.Module | None = None, max_words: int = 0):
        if text is None:
            init = annotate(nnx.initializers.normal(1.0), ("vocab", "embed"))  # torch N(0, 1)
            self.embed = nnx.Embed(vocab, cfg.word_dim, embedding_init=init, rngs=rngs)
        self.text, self.max_words = text, max_words  # max_words: the states RNL reads
        self.rnl = RNL(cfg, rngs)

    def words(self, batch: dict) -> tuple[jax.Array, jax.Array]:
        """(word features [B, L, word_dim], mask [B, L])."""
        tokens = batch["tokens"]
        if self.text is None:
            return self.embed(tokens), tokens > 0
        mask = batch["token_mask"]
        out = self.text(tokens, mask.astype(jnp.int32), deterministic=True)
        n = self.max_words or tokens.shape[1]
        return out.last_hidden_state[:, :n].astype(jnp.float32), mask[:, :n]

    def __call__(self, batch: dict, *, train: bool = False, rngs: nnx.Rngs | None = None
                 ) -> dict[str, jax.Array]:
        cfg, clips = self.rnl.cfg, batch["clips"]
        b, n = clips.shape[:2]
        faces = batch["faces"].reshape(b, n, -1) if cfg.face_dim else None
        return self.rnl(clips, jnp.ones((b, n), jnp.int32), *self.words(batch),
                        faces=faces, portraits=batch["portraits"] if cfg.portraits else None,
                        portrait_mask=batch["portrait_mask"] if cfg.portraits else None,
                        train=train, rngs=rngs)


def index_boxes(boxes: np.ndarray, n: int) -> np.ndarray:
    """Refined boxes [..., 2] -> upstream's evaluated boxes (`runner_final.eval_new`):
    rounded to integers (half to even, NumPy's), starts below 0 set to 0, ends past the
    window's last clip set to n - 1."""
    out = np.round(np.asarray(boxes, np.float64))
    out[..., 0] = np.maximum(out[..., 0], 0)
    out[..., 1] = np.minimum(out[..., 1], n - 1)
    return out
