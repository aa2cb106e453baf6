"""trial.noise_scale: the gradient noise scale from norms at two batch sizes, read
from a real Keras model on data labelled by a fixed teacher."""

from __future__ import annotations

import numpy as np
import pytest

from tfaccel.trial.noise_scale import BATCHES, BIG, measure, simple_noise_scale, starting_weights


def test_the_estimate_from_two_batch_sizes() -> None:
    # |g_b|^2 = |G|^2 + tr(S)/b with |G|^2 = 1, tr(S) = 500: B_simple = 500
    assert simple_noise_scale(32, 256, 1 + 500 / 32, 1 + 500 / 256) == pytest.approx(500)
    assert simple_noise_scale(32, 256, 1.0, 2.0) is None  # no noise seen: no estimate
    assert simple_noise_scale(32, 256, 2.0, 2.0) is None  # a gradient without noise


def _teacher_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and the labels a fixed random linear teacher gives them."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 16)).astype("float32")
    teacher = np.random.default_rng(1).normal(size=(16, 4))
    return x, (x @ teacher).argmax(axis=1).astype("int32")


def test_a_real_model_gives_a_noise_scale_or_says_why_not() -> None:
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(4)])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    tf = pytest.importorskip("tensorflow")
    x, y = _teacher_data(BATCHES * BIG * 8)
    examples = tf.data.Dataset.from_tensor_slices((x, y))  # single examples, as trials hold
    found = measure(model, examples, 8)
    assert found["noise_scale_batches"] == [8, 8 * BIG]
    # an untrained model: a clear true gradient, and the per-example noise of 4 classes
    assert 1 < found["noise_scale"] < 10_000
    assert measure(model, examples.take(20), 8) == {
        "noise_scale_why": f"fewer examples than {BATCHES} batches of 8"
    }
    assert "could not be read" in measure(model, (x, y), 8)["noise_scale_why"]  # not a dataset


def test_the_estimate_is_read_at_the_weights_the_fit_started_from() -> None:
    """The baseline trains thousands of steps before the estimate: read where they left
    the model (here: a linear teacher fitted to round-off), it is noise of the round-off;
    read at the starting weights kept before (`starting_weights`), it is the untrained
    model's, where the race starts, and the trained weights are put back after."""
    keras = pytest.importorskip("keras")
    tf = pytest.importorskip("tensorflow")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 1))).astype("float32")  # a fixed linear teacher
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    examples = tf.data.Dataset.from_tensor_slices((x, y))
    start = starting_weights(model)
    untrained = measure(model, examples, 8)
    model.fit(x, y, batch_size=64, epochs=30, verbose=0)
    assert model.evaluate(x, y, verbose=0) < 1e-6  # fitted
    trained = model.get_weights()
    assert measure(model, examples, 8, start) == untrained
    assert all(np.array_equal(a, b) for a, b in zip(trained, model.get_weights(), strict=True))
    assert measure(model, examples, 8) != untrained
    assert starting_weights(keras.Sequential([keras.layers.Dense(1)])) is None  # not built
