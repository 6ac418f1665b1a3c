"""HCMC: hierarchical contrastive movie clustering (MoviePuzzle §3.2, Fig. 5, Table 7).

Per frame: image features ⊕ utterance features, projected to `width` (`FrameEncoder`; the
towers are a config choice: the small from-scratch encoders of
`vnr.benchmarks.moviepuzzle.pairwise_model`, a `scratch:clip-<size>` CLIP tower of
`vnr.models.encoders`, or a CLIP checkpoint (its `config.json` builds the tower here with
`vnr.models.encoders.towers`; the task's `pretrained` hook loads the weights into a fresh run,
e.g. ViT-B/32 as the paper's CLIP features). Real CLIP text towers read ids from the
checkpoint's own tokenizer (`data.tokenizer`): <|startoftext|> ... <|endoftext|> with a
token mask, pooled at the EOS token as CLIP does. CLIP towers read uint8 frames that the data
pipeline resized as `data.image_resize` says (`hcmc.py:clip=<checkpoint>` sets "clip": CLIP's
image processor, `vnr.data.images`) and normalise them on device with CLIP's table (the
processor's values bit for bit). Frames of another side than the tower's (tests' tiny
towers) are then resized bilinearly to it.
A unit of level

  frame  is one frame: its frame feature;
  shot   is a sequence of frames. `shot_pool="concat"` (App. C: "the concatenated features
         of each frame in the shot"): the features of its frames in temporal order (true
         order in training; the frame-level predicted order in Algorithm 1), concatenated
         into `max_shot_frames` slots (zeros after the last frame; `max_shot_frames` is the
         clip length limit, so no frame is ever cut), projected to `width`, then a shot
         MLP. `shot_pool="mean"` (ours): the masked mean of the frame features, then the MLP;
  scene  is a set of frames: the masked mean of their frame features, then a scene MLP
         (the paper only says "pairing the features of these scenes": our choice).

A scene's pooled vector is the mean over its frames, i.e. the mean of its shots' pooled
vectors weighted by shot length (the choice that needs no shot partition inside a scene,
so the same function serves training, where groups are the ground truth, and Algorithm 1,
where they are predicted clusters). Inside a batch pooling is a masked [N, N] average
over frames with the same group id (no Python loops).

With `frame_repr="tokens"` (the paper rows on CLIP towers) a frame is also its token
sequence (the image tower's hidden states, then the utterance's, projected to `width`: §3.2),
and a frame pair is both sequences (+ segment and level embeddings) through the transformer,
its head reading both frames' first output tokens; a frame's own vector (for ψ, shots and
scenes) is the transformer's output at the first token of its sequence alone. Algorithm 1
takes the frame scores of the clip pass. Otherwise (and for shots and scenes, whose unit
is one vector) a pair of units (u, v) of one level is two tokens (unit vector + segment +
level embeddings) through the video-dialogue transformer encoder (`pair_layers` pre-LN blocks,
default 2 layers, width 512, 8 heads as Table 7); the per-level binary order head reads
both output tokens: class 1 = u before v. `pair_arch="mlp"` replaces the transformer by an
MLP over [u, v] (Appendix E). Cluster heads (shot, scene) map frame features to unit-norm
embeddings trained with the contrastive loss of Eq. 3 (`contrastive_cluster_loss`) and
clustered by k-means at inference: raw head outputs for the printed Eq. 3
(`cluster_norm=False`), unit-norm ones for our cosine / temperature form. `cluster_out=
"softmax"` (the paper rows) makes ψ a `cluster_dim`-class classifier whose probabilities are
ψ(P), positive as §3.2's ψ(P) ∈ ℝ₊; `phi_out="softplus"` makes the order head's outputs
positive as ϕ(P) ∈ ℝ₊ (the seed code's heads have real outputs).

`separate=True` gives every level its own frame encoder, pair encoder and cluster head
(Appendix E's separately trained variants): the summed loss then has disjoint gradients
per level, which equals training them separately up to the shared LR schedule and global
gradient clipping.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.benchmarks.moviepuzzle.frame_encoder import FrameEncoder
from vnr.benchmarks.moviepuzzle.sampling import _take
from vnr.models.compute import float32
from vnr.models.layers import Block, annotate, dense, layer_norm

LEVELS = ("frame", "shot", "scene")
CLUSTER_LEVELS = ("shot", "scene")
CLUSTER_OUTS = ("real", "softmax")
FRAME_REPRS = ("pooled", "tokens")
PHI_OUTS = ("real", "softplus")


class PairEncoder(nnx.Module):
    """Video-dialogue transformer over a pair of unit vectors (or an MLP), per-level heads."""

    def __init__(self, *, levels: tuple[str, ...], width: int, layers: int, heads: int,
                 mlp: int, dropout: float, arch: str, rngs: nnx.Rngs, phi_out: str = "real"):
        if arch not in ("transformer", "mlp"):
            raise ValueError(f"model.pair_arch={arch!r}: use 'transformer' or 'mlp'")
        if phi_out not in PHI_OUTS:
            raise ValueError(f"model.phi_out={phi_out!r}: use one of {PHI_OUTS}")
        self.phi_out = phi_out
        self.arch, self.levels = arch, tuple(levels)
        init = annotate(nnx.initializers.normal(0.02), (None, "embed"))
        self.segment = nnx.Param(init(rngs.params(), (2, width)))
        self.level_embed = nnx.Param(init(rngs.params(), (len(levels), width)))
        tf = arch == "transformer"
        self.blocks = nnx.List([Block(width, heads, mlp, dropout, rngs)
                                for _ in range(layers if tf else 0)])
        self.ln = nnx.data(layer_norm(width, rngs) if tf else None)
        self.mlp = nnx.List([] if tf else [dense(2 * width, mlp, ("embed", "mlp"), rngs)] + [
            dense(mlp, mlp, ("mlp", "mlp"), rngs) for _ in range(max(layers - 1, 0))])
        self.drop = nnx.Dropout(dropout)
        self.heads = nnx.Dict({lv: dense(2 * width if arch == "transformer" else mlp, 2,
                                         ("embed", None), rngs) for lv in levels})

    def embed_frames(self, level: str, seq: jax.Array, mask: jax.Array, *, train: bool,
                     rngs: nnx.Rngs | None) -> jax.Array:
        """Each frame's own token sequence [..., T, W] (mask [..., T]) through the
        transformer -> its output at the first token [..., W]."""
        lead, (t, w) = seq.shape[:-2], seq.shape[-2:]
        x = (seq + self.segment.value[0] + self.level_embed.value[self.levels.index(level)])
        x = self._transformer(x.reshape(-1, t, w), mask.reshape(-1, t), train, rngs)
        return x[:, 0].reshape(*lead, w)

    def _transformer(self, x: jax.Array, mask: jax.Array | None, train: bool,
                     rngs: nnx.Rngs | None) -> jax.Array:
        """The pre-LN blocks, then the final layer norm: [B', T, W] -> [B', T, W]."""
        for block in self.blocks:
            x = block(x, mask, train=train, rngs=rngs)
        return self.ln(x)

    def sequences(self, level: str, first: jax.Array, first_mask: jax.Array,
                  second: jax.Array, second_mask: jax.Array, *, train: bool,
                  rngs: nnx.Rngs | None) -> jax.Array:
        """Token sequences [..., T, W] (masks [..., T]) of u and v, concatenated through the
        transformer -> logits [..., 2]; the head reads the output at each one's first token
        (as the seed code's pair head). Class 1 = u before v."""
        lead, (t, w) = first.shape[:-2], first.shape[-2:]
        lvl = self.level_embed.value[self.levels.index(level)]
        seg = self.segment.value
        x = jnp.concatenate([first + seg[0], second + seg[1]], -2) + lvl
        mask = jnp.concatenate([first_mask, second_mask], -1).reshape(-1, 2 * t)
        x = self._transformer(x.reshape(-1, 2 * t, w), mask, train, rngs)
        heads = jnp.concatenate([x[:, 0], x[:, t]], -1)
        return self._phi(self.heads[level](heads)).reshape(*lead, 2)

    def __call__(self, level: str, first: jax.Array, second: jax.Array, *, train: bool,
                 rngs: nnx.Rngs | None) -> jax.Array:
        """Unit vectors [..., W] of u and v -> logits [..., 2]; class 1 = u before v."""
        lead, w = first.shape[:-1], first.shape[-1]
        if self.arch == "mlp":
            x = jnp.concatenate([first, second], -1).reshape(-1, 2 * w)
            for layer in self.mlp:
                x = self.drop(jax.nn.gelu(layer(x)), deterministic=not train, rngs=rngs)
            return self._phi(self.heads[level](x)).reshape(*lead, 2)
        lvl = self.level_embed.value[self.levels.index(level)]
        x = jnp.stack([first, second], axis=-2) + self.segment.value + lvl
        x = self._transformer(x.reshape(-1, 2, w), None, train, rngs)
        return self._phi(self.heads[level](x.reshape(x.shape[0], -1))).reshape(*lead, 2)

    def _phi(self, logits: jax.Array) -> jax.Array:
        """ϕ's two outputs: the head's ("real") or made positive ("softplus": ϕ ∈ ℝ₊, §3.2;
        Eq. 2's cross-entropy and Eq. 5's softmax difference read them as before)."""
        return jax.nn.softplus(float32(logits)) if self.phi_out == "softplus" else logits


def _mlp2(din: int, dout: int, rngs: nnx.Rngs) -> nnx.List:
    return nnx.List([dense(din, din, ("embed", "mlp"), rngs), dense(din, dout, ("mlp", "embed"),
                                                                    rngs)])


def group_mean(x: jax.Array, group: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of x [B, N, W] over the real frames sharing each frame's group id [B, N]."""
    same = (group[:, :, None] == group[:, None, :]) & mask[:, None, :] & mask[:, :, None]
    w = same.astype(x.dtype)
    return jnp.einsum("bij,bjw->biw", w, x) / jnp.maximum(w.sum(-1, keepdims=True), 1.0)


def member_mean(x: jax.Array, member_mask: jax.Array) -> jax.Array:
    """Mean of x [..., M, W] over its real members [..., M]."""
    m = member_mask[..., None].astype(x.dtype)
    return (x * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)


class HCMC(nnx.Module):
    """Frame encoder(s), unit poolers, pair encoder(s), order and cluster heads."""

    def __init__(self, *, levels: tuple[str, ...] = ("frame", "shot"),
                 modalities: tuple[str, ...] = ("vision", "text"), image_encoder: str = "small",
                 text_encoder: str = "small", image_size: int = 64, stem: int = 4,
                 conv: str = "patch", channels: tuple[int, ...] = (32, 64, 64),
                 vocab_size: int = 4096, max_tokens: int = 16, width: int = 512,
                 text_layers: int = 0, pair_layers: int = 2, heads: int = 8, mlp: int = 2048,
                 dropout: float = 0.1, cluster_dim: int = 64, pair_arch: str = "transformer",
                 separate: bool = False, eos_id: int | None = None,
                 shot_pool: str = "concat", max_shot_frames: int = 20,
                 cluster_norm: bool = False, cluster_out: str = "real",
                 frame_repr: str = "pooled", phi_out: str = "real", rngs: nnx.Rngs):
        if "frame" not in levels or set(levels) - set(LEVELS):
            raise ValueError(f"model.levels={levels}: 'frame' plus any of 'shot', 'scene'")
        if shot_pool not in ("concat", "mean"):
            raise ValueError(f"model.shot_pool={shot_pool!r}: use 'concat' or 'mean'")
        if cluster_out not in CLUSTER_OUTS:
            raise ValueError(f"model.cluster_out={cluster_out!r}: use one of {CLUSTER_OUTS}")
        self.cluster_out = cluster_out
        if frame_repr not in FRAME_REPRS:
            raise ValueError(f"model.frame_repr={frame_repr!r}: use one of {FRAME_REPRS}")
        if frame_repr == "tokens" and pair_arch != "transformer":
            raise ValueError("model.frame_repr='tokens' needs model.pair_arch='transformer' "
                             "(an MLP reads one vector per unit)")
        self.frame_tokens = frame_repr == "tokens"
        self.levels = tuple(lv for lv in LEVELS if lv in levels)
        self.shot_pool, self.max_shot_frames = shot_pool, int(max_shot_frames)
        self.cluster_norm = cluster_norm
        self.cluster_levels = tuple(lv for lv in CLUSTER_LEVELS if lv in self.levels)
        self.separate = separate
        owners = self.levels if separate else ("frame",)

        def frame_encoder():
            return FrameEncoder(
                tokens=self.frame_tokens,
                modalities=tuple(modalities), image_encoder=image_encoder,
                text_encoder=text_encoder, image_size=image_size, stem=stem, conv=conv,
                channels=tuple(channels), vocab_size=vocab_size, max_tokens=max_tokens,
                width=width, text_layers=text_layers, heads=heads, dropout=dropout, rngs=rngs,
                eos_id=eos_id)

        def pair_encoder(lv):
            return PairEncoder(levels=(lv,) if separate else self.levels, width=width,
                               layers=pair_layers, heads=heads, mlp=mlp, dropout=dropout,
                               arch=pair_arch, rngs=rngs, phi_out=phi_out)

        self.encoders = nnx.Dict({o: frame_encoder() for o in owners})
        self.pairs = nnx.Dict({o: pair_encoder(o) for o in owners})
        self.poolers = nnx.Dict({lv: _mlp2(width, width, rngs) for lv in CLUSTER_LEVELS
                                 if lv in self.levels})
        self.cluster_heads = nnx.Dict({lv: _mlp2(width, cluster_dim, rngs)
                                       for lv in self.cluster_levels})
        concat = shot_pool == "concat" and "shot" in self.levels
        self.shot_concat = nnx.data(dense(self.max_shot_frames * width, width,
                                          ("mlp", "embed"), rngs) if concat else None)

    def _owner(self, level: str) -> str:
        return level if self.separate else "frame"

    def encode(self, frames: jax.Array | None, tokens: jax.Array | None, *, train: bool,
               rngs: nnx.Rngs | None, token_mask: jax.Array | None = None,
               image_features: jax.Array | None = None,
               text_features: jax.Array | None = None) -> jax.Array:
        """Frame features per level: [B, N, L, W] (L = len(levels); copies when shared).
        Cached tower outputs (`image_features`, `text_features`) replace the towers."""
        out = {o: enc(frames, tokens, train=train, rngs=rngs, token_mask=token_mask,
                      image_features=image_features, text_features=text_features)
               for o, enc in self.encoders.items()}
        return jnp.stack([out[self._owner(lv)] for lv in self.levels], -2)

    def encode_tokens(self, frames: jax.Array | None, tokens: jax.Array | None, *,
                      train: bool, rngs: nnx.Rngs | None,
                      token_mask: jax.Array | None = None):
        """`frame_repr="tokens"`: (frame features [B, N, L, W], the frame level's token
        sequences [B, N, T, W], their mask [B, N, T]). A frame's feature is the transformer's
        output at its first token over its own sequence (the representation §3.2 feeds ψ
        and aggregates into shots and scenes)."""
        out, seqs = {}, {}
        for o, enc in self.encoders.items():
            seqs[o] = enc(frames, tokens, train=train, rngs=rngs, token_mask=token_mask,
                          with_tokens=True)
            out[o] = self.pairs[o].embed_frames(o, *seqs[o], train=train, rngs=rngs)
        feats = jnp.stack([out[self._owner(lv)] for lv in self.levels], -2)
        return feats, *seqs["frame"]

    def frame_sequence_logits(self, seq: jax.Array, mask: jax.Array, i: jax.Array,
                              j: jax.Array, *, train: bool, rngs: nnx.Rngs | None) -> jax.Array:
        """Frame pairs (i, j) [B, P] of the token sequences [B, N, T, W] -> logits [B, P, 2]."""
        return self.pairs["frame"].sequences("frame", _take(seq, i), _take(mask, i),
                                             _take(seq, j), _take(mask, j), train=train,
                                             rngs=rngs)

    def all_frame_sequence_logits(self, seq: jax.Array, mask: jax.Array) -> jax.Array:
        """Every ordered frame pair of each clip -> logits [B, N, N, 2], one first frame at
        a time (N pair batches of [B, N] instead of one of [B, N, N] sequences)."""
        n = seq.shape[1]
        j = jnp.broadcast_to(jnp.arange(n), seq.shape[:2])

        def row(k):
            i = jnp.full(seq.shape[:2], k)
            return self.frame_sequence_logits(seq, mask, i, j, train=False, rngs=None)

        return jnp.moveaxis(jax.lax.map(row, jnp.arange(n)), 0, 1)

    def level_features(self, feats: jax.Array, level: str) -> jax.Array:
        return feats[..., self.levels.index(level), :]

    def unit_vectors(self, level: str, pooled: jax.Array) -> jax.Array:
        """Pooled frame features [..., W] of a unit -> its unit vector [..., W]."""
        if level == "frame":
            return pooled
        a, b = self.poolers[level]
        return pooled + b(jax.nn.gelu(a(pooled)))

    def _concat(self, slots: jax.Array) -> jax.Array:
        """Frame features in slots [..., M, W] (zeros = no frame) -> shot feature [..., W]."""
        M = self.max_shot_frames
        if slots.shape[-2] < M:
            pad = [(0, 0)] * (slots.ndim - 2) + [(0, M - slots.shape[-2]), (0, 0)]
            slots = jnp.pad(slots, pad)
        return self.shot_concat(slots[..., :M, :].reshape(*slots.shape[:-2], -1))

    def units_from_groups(self, level: str, feats: jax.Array, group: jax.Array,
                          mask: jax.Array, position: jax.Array | None = None) -> jax.Array:
        """Per frame, the unit vector of its group (training: ground-truth groups).

        position [B, N]: true positions, for the temporal order of concatenated shots."""
        x = self.level_features(feats, level)
        if level == "frame":
            return x
        if level == "shot" and self.shot_concat is not None:
            if position is None:
                raise ValueError("shot_pool='concat' needs the frames' positions")
            same = (group[:, :, None] == group[:, None, :]) & mask[:, None, :] & mask[:, :, None]
            earlier = same & (position[:, None, :] < position[:, :, None])
            rank = earlier.sum(-1)  # [B, N]: rank of frame j inside its shot
            slot = jnp.arange(x.shape[1])[None, None, :, None] == rank[:, None, None, :]
            sel = (same[:, :, None, :] & slot).astype(x.dtype)  # [B, i, m, j]
            return self.unit_vectors(level, self._concat(jnp.einsum("bimj,bjw->bimw", sel, x)))
        return self.unit_vectors(level, group_mean(x, group, mask))

    def units_from_members(self, level: str, members: jax.Array,
                           member_mask: jax.Array) -> jax.Array:
        """Members' features [P, G, M, L*W] (Algorithm 1 layout: members in their order,
        real ones first) -> unit vectors [P, G, W]."""
        x = members.reshape(*members.shape[:-1], len(self.levels), -1)
        x = self.level_features(x, level)
        if level == "shot" and self.shot_concat is not None:
            return self.unit_vectors(level, self._concat(x * member_mask[..., None]))
        return self.unit_vectors(level, member_mean(x, member_mask))

    def pair_logits(self, level: str, first: jax.Array, second: jax.Array, *, train: bool,
                    rngs: nnx.Rngs | None) -> jax.Array:
        return self.pairs[self._owner(level)](level, first, second, train=train, rngs=rngs)

    def all_pair_logits(self, level: str, units: jax.Array) -> jax.Array:
        """Unit vectors [P, G, W] -> logits of every ordered pair [P, G, G, 2]."""
        g = units.shape[1]
        first = jnp.broadcast_to(units[:, :, None], (units.shape[0], g, g, units.shape[-1]))
        second = jnp.broadcast_to(units[:, None, :], first.shape)
        return self.pair_logits(level, first, second, train=False, rngs=None)

    def cluster_embed(self, level: str, feats: jax.Array) -> jax.Array:
        """Clustering embedding ψ [B, N, D] of every frame for `level`: the head's D outputs
        ("real"), or its class probabilities ("softmax": ψ as a D-class classifier, ψ(P) in
        ℝ₊ as §3.2 writes); then unit norm when `cluster_norm`."""
        a, b = self.cluster_heads[level]
        z = b(jax.nn.gelu(a(self.level_features(feats, level))))
        if self.cluster_out == "softmax":
            z = jax.nn.softmax(float32(z), -1)
        if not self.cluster_norm:
            return z
        return z / jnp.maximum(jnp.linalg.norm(z, axis=-1, keepdims=True), 1e-6)


def contrastive_cluster_loss(anchor: jax.Array, positive: jax.Array, negatives: jax.Array,
                             neg_mask: jax.Array, valid: jax.Array, tau: float,
                             form: str = "dot") -> jax.Array:
    """Eq. 3, averaged over valid anchors:

        L_CL = -log( e^{s(z, z+)} / (e^{s(z, z+)} + Σ_{k<n} e^{s(z, z_k^-)}) ),

    form "dot" (as printed): s = ψ·ψ, the raw dot product of the head outputs, no
    temperature (`tau` unused). form "cosine" (ours): s = cos(z, z') / τ. z+ a frame of the
    anchor's group, z_k^- (k = 0..n-1) frames outside it. anchor, positive [A, D];
    negatives [A, n, D]; neg_mask [A, n] (False = unused draw); valid [A] (anchors without
    a positive or any negative do not count).
    """
    if form not in ("dot", "cosine"):
        raise ValueError(f"cl_form={form!r}: use 'dot' (Eq. 3 as printed) or 'cosine'")
    anchor, positive, negatives = float32(anchor), float32(positive), float32(negatives)
    if form == "cosine":
        unit = lambda v: v / jnp.maximum(jnp.linalg.norm(v, axis=-1, keepdims=True), 1e-6)  # noqa
        a, p, n, scale = unit(anchor), unit(positive), unit(negatives), 1.0 / tau
    else:
        a, p, n, scale = anchor, positive, negatives, 1.0
    pos = (a * p).sum(-1) * scale
    neg = jnp.where(neg_mask, jnp.einsum("ad,and->an", a, n) * scale, -jnp.inf)
    logits = jnp.concatenate([pos[:, None], neg], -1)
    nll = jax.nn.logsumexp(logits, -1) - pos
    ok = valid & neg_mask.any(-1)
    return jnp.where(ok, nll, 0.0).sum() / jnp.maximum(ok.sum(), 1)
