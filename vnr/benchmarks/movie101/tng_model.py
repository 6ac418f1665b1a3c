"""Movie101 TNG models: RNL local grounding (§5.2), Table 5's 2D-TAN row and the
shot-retrieval dual encoder.

RNL (§5.2 on the IA-Net base as Movie101's release builds it, `ianet.py`): the window's clips
(CLIP ⊕ S3D, average-pooled to n clips) through FC, local self-attention and a BiGRU (V),
their face features through another FC layer (F, absent with faces = 0: RNL w/o f_v), V + F;
the query's words through a BiGRU plus, for every cast member the narration names, a token
made from that member's portrait face feature (FC; absent: RNL w/o f_t); IA-Net's gated
co-/self-attention blocks, tanh attention of each clip over the query and a BiGRU; a 2D-TAN
moment map (`proposal_map`) and two 3x3 convolutions score every proposal. Loss: binary
cross-entropy against the scaled IoU targets (`grounding_metrics.proposal_map_targets`).

TAN2D: Table 5's 2D-TAN row (its docstring).

ShotDualEncoder: shot = mean of its seconds' features -> MLP; narration = mean of word
embeddings -> MLP; unit vectors, cosine similarity; trained with a symmetric InfoNCE loss
(the task) for global shot retrieval.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from vnr.models.layers import annotate, dense

NEG = -1.0e9


def _unit(x: jax.Array) -> jax.Array:
    """x / max(|x|, 1e-6) with a finite gradient at x = 0 (the norm's is 0 / 0 there; the
    2D-TAN map has all-zero cells below its diagonal)."""
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), 1e-12))


class RNL(nnx.Module):
    """Local grounding over a window of n clips: scores [B, n, n] (invalid = -1e9).

    The IA-Net base as Movie101's release builds it (`ianet.IANetEncoder`), with f_v (FC of
    the clips' faces added to the BiGRU output; faces = 0: without) and f_t (FC of the named
    roles' portrait faces appended to the query; portraits=False: without); the clip
    features, L2-normalised, feed 2D-TAN's moment map and two 3x3 convolutions."""

    def __init__(self, *, frame_dim: int, face_dim: int, faces: int, vocab: int, width: int,
                 n_clips: int, portraits: bool, heads: int = 4, blocks: int = 3,
                 local_layers: int = 2, rngs: nnx.Rngs):
        from vnr.benchmarks.movie101.ianet import IANetEncoder

        self.n = n_clips
        self.encoder = IANetEncoder(frame_dim=frame_dim, face_dim=face_dim, faces=faces,
                                    vocab=vocab, width=width, portraits=portraits, heads=heads,
                                    blocks=blocks, local_layers=local_layers, rngs=rngs)
        self.conv1 = nnx.Conv(width, width, (3, 3), padding="SAME", rngs=rngs)
        self.conv2 = nnx.Conv(width, 1, (3, 3), padding="SAME", rngs=rngs)

    def __call__(self, batch: dict) -> jax.Array:
        grid, valid = proposal_map(_unit(self.encoder(batch)))
        s = self.conv2(jax.nn.relu(self.conv1(grid)))[..., 0]
        return jnp.where(valid[None], s, NEG)


def proposal_map(f: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Clip features f [B, n, W] -> 2D-TAN's max-pooled moment map [B, n, n, W] (cell
    (i, j) = max over clips i..j, zero below the diagonal) and its valid mask [n, n]."""
    b, n = f.shape[:2]
    rows, cur = [], f
    for length in range(n):
        shifted = jnp.pad(cur, ((0, 0), (0, length), (0, 0)))[:, :n]
        rows.append(shifted)  # rows[l][:, i] = max over i..i+l (valid if i + l < n)
        cur = jnp.maximum(cur[:, :-1], f[:, length + 1:]) if length + 1 < n else cur
    by_len = jnp.stack(rows, 2)  # [B, i, l, W]
    i = jnp.arange(n)[:, None]
    j = jnp.arange(n)[None]
    length = jnp.clip(j - i, 0, n - 1)
    grid = jnp.take_along_axis(by_len, jnp.broadcast_to(length[None, :, :, None],
                                                        (b, n, n, 1)), axis=2)
    valid = j >= i
    return grid * valid[None, :, :, None], valid


class TAN2D(nnx.Module):
    """Table 5's 2D-TAN row (Zhang et al., 2020), on the window's clips (no faces, no
    portraits): clips -> FC + ReLU (2D-TAN's 1x1 frame layer); the 2D moment map by max
    pooling over every span (`proposal_map`, dense: all n(n+1)/2 cells); the sentence as
    the last hidden state of an LSTM over word embeddings; fusion = FC(map cell) * FC(sentence)
    L2-normalised per cell; `layers` k x k convolutions over the map (ReLU, invalid cells
    zeroed after each); a 1x1 convolution scores every moment. Trained like RNL with BCE
    against the IoU scaled from [0.5, 1] (`tng._targets`).

    The sentence: with `word_dim` > 0 (configs/movie101/tng.py:tan2d,glove, the paper row)
    2D-TAN's text encoder, `text_layers` (3) stacked LSTM layers over the narration's
    pretrained word vectors (`batch["words"]`, `batch["word_mask"]`: `tng_glove`); with
    `word_dim` = 0 (tan2d alone, our option) one LSTM layer over learned hashed-word
    embeddings of `batch["tokens"]`.

    Our choices where the paper and Movie101's release are silent (no 2D-TAN code or config
    for Movie101 is released): ActivityNet's map settings (4 layers, kernel 9) on the real
    200-s / 50-clip window, dense map instead of 2D-TAN's sparse sampling (n = 50 is small)."""

    def __init__(self, *, frame_dim: int, vocab: int, width: int, layers: int, kernel: int,
                 rngs: nnx.Rngs, word_dim: int = 0, text_layers: int = 1):
        init = nnx.initializers.normal(0.02)
        self.fc = dense(frame_dim, width, ("mlp", "embed"), rngs)
        self.word_dim = word_dim
        self.embed = (None if word_dim else nnx.Embed(
            vocab, width, embedding_init=annotate(init, ("vocab", "embed")), rngs=rngs))
        ins = [word_dim or width] + [width] * (text_layers - 1)
        self.lstms = nnx.List([nnx.RNN(nnx.OptimizedLSTMCell(d, width, rngs=rngs),
                                       return_carry=True, rngs=False) for d in ins])
        self.map_fc = dense(width, width, ("embed", "mlp"), rngs)
        self.text_fc = dense(width, width, ("embed", "mlp"), rngs)
        self.convs = nnx.List([nnx.Conv(width, width, (kernel, kernel), padding="SAME",
                                        rngs=rngs) for _ in range(layers)])
        self.pred = nnx.Conv(width, 1, (1, 1), rngs=rngs)

    def sentence(self, batch: dict) -> jax.Array:
        """The last LSTM layer's hidden state after the last real word [B, W]."""
        if self.word_dim:
            x, n = batch["words"], batch["word_mask"].sum(1)
        else:
            x, n = self.embed(batch["tokens"]), (batch["tokens"] > 0).sum(1)
        h = None
        for lstm in self.lstms:
            zero = jnp.zeros((x.shape[0], lstm.cell.hidden_features), x.dtype)
            (_, h), x = lstm(x, initial_carry=(zero, zero), seq_lengths=jnp.maximum(n, 1))
        return h

    def __call__(self, batch: dict) -> jax.Array:
        grid, valid = proposal_map(jax.nn.relu(self.fc(batch["clips"])))
        q = self.text_fc(self.sentence(batch))
        m = valid[None, :, :, None]
        f = _unit(self.map_fc(grid) * q[:, None, None]) * m
        for conv in self.convs:
            f = jax.nn.relu(conv(f)) * m
        return jnp.where(valid[None], self.pred(f)[..., 0], NEG)


class ShotDualEncoder(nnx.Module):
    """Shot and narration embeddings (unit vectors) for global shot retrieval."""

    def __init__(self, *, frame_dim: int, vocab: int, width: int, rngs: nnx.Rngs):
        init = nnx.initializers.normal(0.02)
        self.v1 = dense(frame_dim, width, ("mlp", "embed"), rngs)
        self.v2 = dense(width, width, ("embed", "mlp"), rngs)
        self.embed = nnx.Embed(vocab, width, embedding_init=annotate(init, ("vocab", "embed")),
                               rngs=rngs)
        self.t2 = dense(width, width, ("embed", "mlp"), rngs)

    def shots(self, feats, mask):
        """feats [B, T, D] seconds of a shot, mask [B, T] -> [B, W]."""
        m = mask[..., None].astype(feats.dtype)
        pooled = (feats * m).sum(1) / jnp.maximum(m.sum(1), 1)
        return _unit(self.v2(jax.nn.relu(self.v1(pooled))))

    def text(self, tokens):
        m = (tokens > 0)[..., None].astype(jnp.float32)
        pooled = (self.embed(tokens) * m).sum(1) / jnp.maximum(m.sum(1), 1)
        return _unit(self.t2(jax.nn.relu(pooled)))
