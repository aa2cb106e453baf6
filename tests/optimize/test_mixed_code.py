"""Mixed precision for code written for float32 (tfaccel.optimize.mixed_code), on the
CPU: a model called from the user's own code returns float32 outputs; Gaussian noise
drawn in a 16-bit layer's call comes in its dtype."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import keras
import tensorflow as tf

import tfaccel
from tfaccel.optimize.mixed_code import mixed_code_on, set_mixed_code


@pytest.fixture
def mixed() -> Iterator[None]:
    try:
        tfaccel.configure(precision="mixed_bfloat16", xla="off")
        yield
    finally:
        tfaccel.configure.reset()


def _generator() -> keras.Model:
    z = keras.Input((4,))
    return keras.Model(z, keras.layers.Dense(6)(z))


class _Seen(keras.layers.Layer):
    """Records the dtype of what it is given."""

    seen: ClassVar[list[str]] = []

    def call(self, x: Any) -> Any:
        _Seen.seen.append(x.dtype.name if hasattr(x.dtype, "name") else str(x.dtype))
        return x


def test_a_models_entry_call_returns_float32_and_nested_calls_keep_16_bits(mixed: None) -> None:
    """A generator called from the user's code returns float32; the same model inside
    a functional model hands its next layer bfloat16 (only the outer call widens), and
    a call on keras.Input builds the graph as written."""
    gen = _generator()
    assert gen.compute_dtype == "bfloat16"
    assert gen(tf.zeros((2, 4))).dtype == tf.float32
    z = keras.Input((4,))
    symbolic = gen(z)
    assert "bfloat16" in str(symbolic.dtype)  # a KerasTensor: the user's graph unchanged
    outer = keras.Model(z, _Seen()(gen(z)))
    _Seen.seen.clear()
    out = outer(tf.zeros((2, 4)))
    assert _Seen.seen == ["bfloat16"] and out.dtype == tf.float32
    ints = keras.Model(z, keras.ops.argmax(gen(z), axis=-1))
    assert ints(tf.zeros((2, 4))).dtype in (tf.int32, tf.int64)  # not floating: as it was


def test_a_float32_model_and_reset_leave_keras_as_it_was() -> None:
    from keras.src.layers.layer import Layer
    from keras.src.models.model import Model

    try:
        report = tfaccel.configure(precision="mixed_bfloat16", xla="off")
        assert mixed_code_on()
        rows = {row.knob: row for row in report.rows}
        assert rows["outputs"].value == "float32" and "float32 outputs" in rows["outputs"].detail
        assert "outputs float32" in report.brief()[0]  # tfaccel run says it
        tfaccel.configure(precision="bfloat16", xla="off")  # bf16 weights: inference
        assert not mixed_code_on()
        assert _generator()(tf.zeros((1, 4))).dtype == tf.bfloat16  # as Keras gives it
        tfaccel.configure(precision="mixed_bfloat16", xla="off")
        report = tfaccel.configure(precision="float32", xla="off")
        assert "outputs" not in {row.knob for row in report.rows}
        assert not mixed_code_on()
        assert "__call__" not in Model.__dict__ and Model.__call__ is Layer.__call__
        tfaccel.configure(precision="mixed_float16", xla="off")
        assert mixed_code_on()
    finally:
        tfaccel.configure.reset()
    assert not mixed_code_on() and "__call__" not in Model.__dict__
    import keras.src.backend.tensorflow.random as random

    assert random.normal.__module__ == "keras.src.backend.tensorflow.random"  # Keras' own
    assert _generator()(tf.zeros((1, 4))).dtype == tf.float32  # float32 policy: as Keras


class _WGAN(keras.Model):
    """keras-io's WGAN-GP train_step, reduced: its gradient penalty subtracts the real
    images (float32) from the generator's output."""

    def __init__(self) -> None:
        super().__init__()
        self.critic = keras.Sequential([keras.Input((6,)), keras.layers.Dense(1)])
        self.generator = _generator()

    def compile(self, c_optimizer: Any, g_optimizer: Any) -> None:  # type: ignore[override]
        super().compile()
        self.c_optimizer, self.g_optimizer = c_optimizer, g_optimizer

    def train_step(self, real: Any) -> dict[str, Any]:
        z = tf.random.normal((tf.shape(real)[0], 4), seed=1)
        with tf.GradientTape() as tape:
            fake = self.generator(z, training=True)
            alpha = tf.random.uniform((tf.shape(real)[0], 1), seed=2)
            mixed_in = real + alpha * (fake - real)
            with tf.GradientTape() as gp_tape:
                gp_tape.watch(mixed_in)
                pred = self.critic(mixed_in, training=True)
            norm = tf.norm(gp_tape.gradient(pred, mixed_in), axis=1)
            cost = tf.reduce_mean(self.critic(fake)) - tf.reduce_mean(self.critic(real))
            loss = cost + 10.0 * tf.reduce_mean((norm - 1.0) ** 2)
        variables = self.critic.trainable_variables
        grads = tape.gradient(loss, variables)
        self.c_optimizer.apply_gradients(zip(grads, variables, strict=True))
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(self.critic(self.generator(z, training=True)))
        variables = self.generator.trainable_variables
        grads = tape.gradient(g_loss, variables)
        self.g_optimizer.apply_gradients(zip(grads, variables, strict=True))
        return {"loss": loss, "g_loss": g_loss}


def test_a_wgans_own_train_step_trains_under_a_mixed_policy(mixed: None) -> None:
    """Without float32 outputs Keras' mixed policy fails it at its first step
    (`fake - real`: bfloat16 minus float32); with them it trains, in bfloat16."""
    real = np.random.default_rng(0).normal(size=(256, 6)).astype("float32")
    set_mixed_code(False)
    gan = _WGAN()
    gan.compile(keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3))
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError), match="bfloat16"):
        gan.fit(real, batch_size=32, epochs=1, verbose=0)
    set_mixed_code(True)
    gan = _WGAN()
    gan.compile(keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3))
    history = gan.fit(real, batch_size=32, epochs=2, verbose=0).history
    assert gan.generator.layers[-1].compute_dtype == "bfloat16"
    assert np.isfinite(history["loss"]).all() and np.isfinite(history["g_loss"]).all()


def _fit_losses() -> list[float]:
    """A regression on a fixed linear teacher, from fixed weights, without shuffling."""
    keras.utils.set_random_seed(3)
    x = np.random.default_rng(1).normal(size=(512, 8)).astype("float32")
    y = x @ np.random.default_rng(2).normal(size=(8, 1)).astype("float32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.05), "mse")
    return list(model.fit(x, y, batch_size=64, epochs=3, shuffle=False, verbose=0).history["loss"])


def test_fits_own_train_step_learns_the_same_with_float32_outputs(mixed: None) -> None:
    """Keras' losses cast the predictions to float32 themselves: with the outputs
    widened first, `fit` computes the same losses."""
    set_mixed_code(False)
    keras_own = _fit_losses()
    set_mixed_code(True)
    widened = _fit_losses()
    assert keras_own[-1] < 0.5 * keras_own[0]  # it learns the teacher
    np.testing.assert_allclose(widened, keras_own, rtol=1e-6)


class _Draws(keras.layers.Layer):
    """Records the dtypes of the random numbers its call draws."""

    seen: ClassVar[dict[str, str]] = {}

    def call(self, x: Any) -> Any:
        shape = keras.ops.shape(x)
        draws = {
            "normal": keras.random.normal(shape),
            "truncated_normal": keras.random.truncated_normal(shape, 0.0, 1.0),
            "positional_none": keras.random.normal(shape, 0.0, 1.0, None),
            "named_float32": keras.random.normal(shape, dtype="float32"),
            "positional_float32": keras.random.normal(shape, 0.0, 1.0, "float32"),
            "uniform": keras.random.uniform(shape),
        }
        _Draws.seen.update(
            {name: keras.backend.standardize_dtype(d.dtype) for name, d in draws.items()}
        )
        return x


def test_noise_drawn_in_a_16_bit_layer_comes_in_its_dtype(mixed: None) -> None:
    """Without a dtype named, Gaussian draws in a mixed layer's call take its compute
    dtype; a dtype the code names, uniform draws and draws outside a layer do not."""
    _Draws()(tf.zeros((2, 3)))
    assert _Draws.seen == {
        "normal": "bfloat16",
        "truncated_normal": "bfloat16",
        "positional_none": "bfloat16",
        "named_float32": "float32",
        "positional_float32": "float32",
        "uniform": "float32",
    }
    assert keras.random.normal((2,)).dtype == tf.float32  # no layer's call


class _Sampling(keras.layers.Layer):
    """keras-io's VAE sampling layer, as written."""

    def call(self, inputs: Any) -> Any:
        z_mean, z_log_var = inputs
        epsilon = keras.random.normal(shape=keras.ops.shape(z_mean))
        return z_mean + keras.ops.exp(0.5 * z_log_var) * epsilon


def _vae_encoder() -> keras.Model:
    x = keras.Input((6,))
    h = keras.layers.Dense(8, activation="relu")(x)
    z_mean, z_log_var = keras.layers.Dense(2)(h), keras.layers.Dense(2)(h)
    return keras.Model(x, [z_mean, z_log_var, _Sampling()([z_mean, z_log_var])])


def test_a_vaes_sampling_layer_builds_and_trains_under_a_mixed_policy(mixed: None) -> None:
    """keras-io's Sampling layer fails as the model is built under Keras' mixed policy
    alone (bfloat16 times float32 noise); with mixed code it builds, runs in bfloat16,
    and a model around it trains."""
    set_mixed_code(False)
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError), match="bfloat16"):
        _vae_encoder()
    set_mixed_code(True)
    encoder = _vae_encoder()
    z = encoder(tf.ones((4, 6)))[2]
    assert encoder.layers[-1].compute_dtype == "bfloat16" and z.dtype == tf.float32
    model = keras.Model(encoder.input, keras.layers.Dense(6)(encoder.outputs[2]))
    model.compile(keras.optimizers.Adam(1e-2), "mse")
    x = np.random.default_rng(4).normal(size=(256, 6)).astype("float32")
    losses = model.fit(x, x, batch_size=32, epochs=3, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


@pytest.mark.gpu
def test_a_wgans_own_train_step_trains_in_bfloat16_under_xla_on_the_gpu() -> None:
    """The same WGAN under mixed_bfloat16 and XLA on the GPU: its layers compute in
    bfloat16, its train_step gets float32 outputs, and its losses stay finite."""
    real = np.random.default_rng(0).normal(size=(1024, 6)).astype("float32")
    try:
        report = tfaccel.configure(precision="mixed_bfloat16", xla="jit")
        assert report.gpus >= 1
        gan = _WGAN()
        gan.compile(keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3))
        gan.jit_compile = True
        history = gan.fit(real, batch_size=64, epochs=2, verbose=0).history
        assert gan.generator.layers[-1].compute_dtype == "bfloat16"
        assert gan.generator(tf.zeros((2, 4))).dtype == tf.float32
        assert np.isfinite(history["loss"]).all() and np.isfinite(history["g_loss"]).all()
    finally:
        tfaccel.configure.reset()
