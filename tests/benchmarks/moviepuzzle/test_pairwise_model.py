"""The pairwise-order model's pieces: patchify layers, shapes, modality switches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from vnr.benchmarks.moviepuzzle.pairwise_model import ImageEncoder, PairOrderModel, Patchify


def test_patchify_is_a_kernel_equals_stride_convolution():
    layer = Patchify(3, 5, 4, nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (2, 16, 12, 3))
    kernel = layer.proj.kernel.value.reshape(4, 4, 3, 5)  # (kh, kw, cin, cout)
    want = jax.lax.conv_general_dilated(x, kernel, (4, 4), "VALID",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(layer(x), want + layer.proj.bias.value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("conv", ["3x3", "patch"])
def test_image_encoder_shapes(conv):
    enc = ImageEncoder(64, (8, 16, 16), 32, nnx.Rngs(0), stem=4, conv=conv)
    out = nnx.jit(lambda e, x: e(x))(enc, jnp.zeros((2, 5, 64, 64, 3), jnp.uint8))
    assert out.shape == (2, 5, 32) and bool(jnp.isfinite(out).all())


def test_bad_encoder_arguments_are_named():
    with pytest.raises(ValueError, match="model.conv='5x5'"):
        ImageEncoder(64, (8,), 32, nnx.Rngs(0), conv="5x5")
    with pytest.raises(ValueError, match="data.image_size=60 is not divisible"):
        ImageEncoder(60, (8, 16), 32, nnx.Rngs(0), stem=4)
    with pytest.raises(ValueError, match="model.modalities"):
        PairOrderModel(modalities=("audio",), image_size=16, stem=1, conv="3x3", channels=(8,),
                       vocab_size=64, max_tokens=4, width=8, text_layers=0, pair_layers=1,
                       heads=2, mlp=16, dropout=0.0, rngs=nnx.Rngs(0))


def test_pair_logits_cover_every_ordered_pair():
    m = PairOrderModel(modalities=("vision", "text"), image_size=16, stem=1, conv="patch",
                       channels=(8, 8), vocab_size=64, max_tokens=4, width=16, text_layers=1,
                       pair_layers=1, heads=2, mlp=32, dropout=0.0, rngs=nnx.Rngs(0))

    @nnx.jit
    def run(m):
        frames = jax.random.randint(jax.random.key(0), (2, 6, 16, 16, 3), 0, 255).astype(
            jnp.uint8)
        tokens = jax.random.randint(jax.random.key(1), (2, 6, 4), 0, 64)
        feats = m.encode_frames(frames, tokens, train=False, rngs=None)
        return m.all_pair_logits(feats), m.pair_logits(feats[:, 2], feats[:, 4], train=False,
                                                       rngs=None)

    full, one = run(m)
    assert full.shape == (2, 6, 6, 2)
    np.testing.assert_allclose(full[:, 2, 4], one, rtol=1e-5, atol=1e-6)
