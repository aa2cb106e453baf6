"""Product FLOPs counted from a model's graph."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from tfaccel.workloads.flops import einsum_flops, forward_flops_per_sample


def test_einsum_counts_every_index_once() -> None:
    # (batch 2, seq 8, in 16) x (16, heads 4, dim 5): 2 x 2*8*16*4*5
    assert einsum_flops("abc,cde->abde", [[2, 8, 16], [16, 4, 5]]) == 2 * 2 * 8 * 16 * 4 * 5
    assert einsum_flops("abc->acb", [[2, 3, 4]]) == 0  # one operand: a transpose
    assert einsum_flops("...c,cd->...d", [[2, 3], [3, 4]]) == 0  # ellipsis: not counted


def test_forward_flops_of_dense_conv_einsum_and_attention() -> None:
    import keras

    x = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(4, 3, padding="same")(x)  # 8*8*4 outputs x 3*3*3
    h = keras.layers.DepthwiseConv2D(3, padding="same")(h)  # 8*8*4 outputs x 3*3
    h = keras.layers.Reshape((64, 4))(h)
    h = keras.layers.EinsumDense("abc,cd->abd", output_shape=(64, 6))(h)  # 64 x 4*6
    att = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)
    h = att(h, h)
    model = keras.Model(x, h)
    got = forward_flops_per_sample(model, batch=2)
    conv = 2 * 8 * 8 * 4 * 27 + 2 * 8 * 8 * 4 * 9
    einsum = 2 * 64 * 4 * 6
    # attention: q, k, v projections (6 -> 2x3), scores and context (64x64 per head),
    # output projection (2x3 -> 6)
    mha = 3 * 2 * 64 * 6 * 6 + 2 * (2 * 2 * 64 * 64 * 3) + 2 * 64 * 6 * 6
    assert got == conv + einsum + mha


def test_a_model_without_a_forward_pass_is_judged_by_its_sub_models() -> None:
    """A GAN's model (keras-io's WGAN-GP) has no call of its own, only a train_step
    that runs a generator and a critic: the matrix products' share is their forward
    passes'. The WGAN's is 0.7 % (convolutions), which spares the trials of the knobs
    that speed up matrix products alone (cuBLASLt, float8)."""
    import keras

    from tfaccel.workloads.flops import forward_flops, sub_models_gemm_share

    noise = keras.Input((4,))
    generator = keras.Model(noise, keras.layers.Reshape((4, 4, 1))(keras.layers.Dense(16)(noise)))
    image = keras.Input((4, 4, 1))
    critic = keras.Model(image, keras.layers.Conv2D(8, 3, padding="same")(image))

    class Gan(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.generator, self.critic = generator, critic

    dense = 2 * 4 * 16
    conv = 2 * 4 * 4 * 8 * 9
    assert sub_models_gemm_share(Gan()) == pytest.approx(dense / (dense + conv))
    assert forward_flops(generator)[1] == 1.0
    assert sub_models_gemm_share(generator) is None  # a model that holds no models
