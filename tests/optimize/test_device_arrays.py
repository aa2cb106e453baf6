"""tfaccel.optimize.device_arrays: fit's arrays kept on the device train as Keras'
own arrays do (checked here on the CPU device: the same mechanism, another place)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras

from tfaccel.optimize import device_arrays

GiB = 2**30


def _data(n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Learnable: labels from a fixed linear teacher; float64, as numpy makes them."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(n, 6))
    return x, x @ rng.normal(size=(6, 1))


def _model() -> keras.Model:
    keras.utils.set_random_seed(1)
    layers = [keras.Input((6,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(1)]
    model = keras.Sequential(layers)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def _fit(on_device: bool, **kwargs: Any) -> tuple[keras.Model, dict[str, list[float]]]:
    x, y = _data()
    model = _model()
    a: dict[str, Any] = {"x": x, "y": y, "batch_size": 32, "epochs": 3, "verbose": 0, **kwargs}
    if not on_device:
        return model, model.fit(**a).history
    assert device_arrays.blocker(a, 80 * GiB) is None
    with device_arrays.kept_on_device(model, a, 32, "/CPU:0") as note:
        assert "kept in GPU memory" in note
        history = model.fit(**a).history
    return model, history


def test_in_order_the_same_steps_and_weights_as_keras_own_arrays() -> None:
    """shuffle=False: the same batches in the same order, the last partial one too (200
    examples = 6 x 32 + 8), so the very same weights; validation_split taken from the
    end, as Keras takes it."""
    own, h_own = _fit(False, shuffle=False, validation_split=0.25)
    kept, h_kept = _fit(True, shuffle=False, validation_split=0.25)
    np.testing.assert_allclose(h_kept["loss"], h_own["loss"], rtol=1e-5)
    np.testing.assert_allclose(h_kept["val_loss"], h_own["val_loss"], rtol=1e-5)
    for w_own, w_kept in zip(own.get_weights(), kept.get_weights(), strict=True):
        np.testing.assert_allclose(w_kept, w_own, rtol=1e-5)


def test_shuffled_epochs_learn_as_keras_own_do() -> None:
    """shuffle=True (fit's default): another order, the same learning: both end far
    below where they started, within a small margin of each other."""
    _, h_own = _fit(False, epochs=8)
    _, h_kept = _fit(True, epochs=8)
    assert h_kept["loss"][-1] < 0.3 * h_kept["loss"][0]
    assert abs(h_kept["loss"][-1] - h_own["loss"][-1]) < 0.25 * h_own["loss"][-1]


def test_the_model_is_left_as_it_was() -> None:
    """After the block the model trains from arrays again as Keras does."""
    model, _ = _fit(True)
    assert "train_step" not in vars(model)
    x, y = _data()
    assert np.isfinite(model.fit(x, y, batch_size=50, epochs=1, verbose=0).history["loss"][0])


def test_a_custom_train_step_gets_the_gathered_batch() -> None:
    seen: list[int] = []

    class Own(keras.Model):
        def train_step(self, data: Any) -> Any:
            x, _ = data
            seen.append(int(x.shape[0]) if x.shape[0] is not None else -1)
            return super().train_step(data)

    keras.utils.set_random_seed(1)
    inputs = keras.Input((6,))
    model = Own(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer="sgd", loss="mse")
    x, y = _data()
    a: dict[str, Any] = dict(x=x, y=y, batch_size=32, epochs=1, verbose=0)
    with device_arrays.kept_on_device(model, a, 32, "/CPU:0"):
        model.fit(**a)
    assert seen  # traced with the gathered (x, y), not the indices


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"class_weight": {0: 1.0}}, "class_weight"),
        ({"shuffle": "batch"}, 'shuffle="batch"'),
        ({"steps_per_epoch": 3}, "steps_per_epoch"),
        ({"x": ["a", "b"]}, "numeric numpy arrays"),
        ({"y": np.zeros((5, 1))}, "differ in their number"),
    ],
)
def test_what_keeps_the_arrays_as_they_are(change: dict[str, Any], reason: str) -> None:
    x, y = _data()
    why = device_arrays.blocker({"x": x, "y": y, **change}, 80 * GiB)
    assert why is not None and reason in why


def test_arrays_over_a_quarter_of_the_gpu_stay_on_the_host() -> None:
    x, y = _data(2000)
    why = device_arrays.blocker({"x": x, "y": y}, 4 * x.nbytes)
    assert why is not None and "over a quarter" in why
    assert device_arrays.blocker({"x": x, "y": y}, 8 * (x.nbytes + y.nbytes)) is None
    assert "not known" in (device_arrays.blocker({"x": x, "y": y}, None) or "")
