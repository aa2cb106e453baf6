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
