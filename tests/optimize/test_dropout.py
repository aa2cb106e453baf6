"""tfaccel.optimize.dropout: Keras' masks computed once, and 16-bit Philox masks."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("tensorflow")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import tensorflow as tf

from tfaccel.errors import InputError
from tfaccel.optimize import dropout
from tfaccel.optimize.settings import Settings


@pytest.fixture(autouse=True)
def keras_dropout_after() -> Iterator[None]:
    yield
    dropout.set_dropout("keras")


def _x(shape: tuple[int, ...], dtype: str = "float32") -> tf.Tensor:
    return tf.cast(tf.random.stateless_normal(shape, seed=[5, 6]) + 3.0, dtype)


def _drop(name: str, x: tf.Tensor, rate: float, jit: bool = False, **kw: object) -> np.ndarray:
    """`name`'s dropout of x through Keras (as a layer calls it), seed 11."""
    dropout.set_dropout(name)
    seed = keras.random.SeedGenerator(11)

    def f(x: tf.Tensor) -> tf.Tensor:
        return keras.random.dropout(x, rate, seed=seed, **kw)

    fn = tf.function(f, jit_compile=True) if jit else f
    return np.asarray(fn(x))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_mask_once_gives_keras_masks_bit_for_bit(jit: bool, dtype: str) -> None:
    x = _x((4, 3, 16, 16), dtype)
    a = _drop("keras", x, 0.1, jit)
    b = _drop("mask_once", x, 0.1, jit)
    assert np.array_equal(a, b)
    assert 0.85 < (a != 0).mean() < 0.95


@pytest.mark.parametrize("jit", [False, True])
def test_philox16_keeps_one_minus_rate_and_scales_as_keras(jit: bool) -> None:
    x = _x((64, 4, 32, 32))
    y = _drop("philox16", x, 0.1, jit)
    kept = y != 0
    n = kept.size
    # P(keep) = 1 - round(0.1 * 65536) / 65536; 5 standard deviations
    p = 1 - round(0.1 * 65536) / 65536
    assert abs(kept.mean() - p) < 5 * np.sqrt(p * (1 - p) / n)
    np.testing.assert_allclose(y[kept], np.asarray(x)[kept] / 0.9, rtol=1e-6)
    # another stream than Keras'
    assert not np.array_equal(kept, _drop("keras", x, 0.1, jit) != 0)


def test_philox16_halves_are_independent_and_odd_axes_work() -> None:
    """The low and high halves of each word decide two different elements: their keep
    decisions agree no more often than two independent coins would."""
    x = tf.ones((20000, 2))
    y = _drop("philox16", x, 0.5)
    same = (y[:, 0] != 0) == (y[:, 1] != 0)
    assert abs(same.mean() - 0.5) < 0.02
    z = _drop("philox16", tf.ones((3000, 7, 5)), 0.3, noise_shape=(None, 1, 5))
    assert z.shape == (3000, 7, 5)
    assert np.all(z == z[:, :1, :])  # broadcast along the axis of size 1
    assert abs((z != 0).mean() - 0.7) < 0.02
    assert _drop("philox16", tf.constant(2.0), 0.5).shape == ()


@pytest.mark.parametrize("name", ["mask_once", "philox16"])
def test_gradients_follow_the_same_mask(name: str) -> None:
    dropout.set_dropout(name)
    x = _x((8, 64))
    w = _x((8, 64))
    seed = keras.random.SeedGenerator(3)

    @tf.function(jit_compile=True)
    def f(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = keras.random.dropout(x, 0.25, seed=seed)
            loss = tf.reduce_sum(y * w)
        return y, tape.gradient(loss, x)

    y, g = (np.asarray(t) for t in f(x))
    np.testing.assert_allclose(g, np.where(y != 0, np.asarray(w) / 0.75, 0.0), rtol=1e-6)


def test_rates_zero_and_one_and_bad_names() -> None:
    x = _x((5, 6))
    for name in ("mask_once", "philox16"):
        assert np.array_equal(_drop(name, x, 0.0), np.asarray(x))
        assert not _drop(name, x, 1.0).any()
    with pytest.raises(InputError, match="unknown dropout"):
        dropout.set_dropout("fast")
    with pytest.raises(InputError, match="dropout"):
        Settings(dropout="fast")


def test_a_keras_dropout_layer_uses_the_chosen_masks() -> None:
    """Layers look the function up at each call: a model built before the switch uses
    the new masks, and switching back restores Keras' own."""
    layer = keras.layers.Dropout(0.1, seed=4)
    x = _x((64, 256))
    dropout.set_dropout("keras")
    a = np.asarray(layer(x, training=True))
    layer = keras.layers.Dropout(0.1, seed=4)
    assert dropout.set_dropout("philox16").startswith("two 16-bit")
    assert dropout.current_dropout() == "philox16"
    b = np.asarray(layer(x, training=True))
    assert not np.array_equal(a != 0, b != 0)
    layer = keras.layers.Dropout(0.1, seed=4)
    dropout.set_dropout("keras")
    assert dropout.current_dropout() == "keras"
    assert np.array_equal(np.asarray(layer(x, training=True)), a)


def test_configure_applies_and_reset_restores_the_dropout() -> None:
    import tfaccel

    report = tfaccel.configure(dropout="mask_once")
    row = [r for r in report.rows if r.knob == "dropout"]
    assert row and row[0].value == "mask_once" and row[0].status == "applied"
    assert dropout.current_dropout() == "mask_once"
    tfaccel.configure.reset()
    assert dropout.current_dropout() == "keras"
    # Keras' own dropout by default: no row
    assert not [r for r in tfaccel.configure().rows if r.knob == "dropout"]
    tfaccel.configure.reset()


@pytest.mark.gpu
def test_dropout_masks_on_the_gpu_under_xla() -> None:
    """On the GPU, under XLA, at BERT's attention shape: mask_once writes Keras' masks
    bit for bit, philox16 keeps 1 - rate."""
    with tf.device("/GPU:0"):
        x = _x((32, 12, 128, 128), "bfloat16")
        a = _drop("keras", x, 0.1, jit=True)
        b = _drop("mask_once", x, 0.1, jit=True)
        c = _drop("philox16", x, 0.1, jit=True)
    assert np.array_equal(a, b)
    p = 1 - round(0.1 * 65536) / 65536
    assert abs((c != 0).mean() - p) < 5 * np.sqrt(p * (1 - p) / c.size)
