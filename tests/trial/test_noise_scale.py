"""trial.noise_scale: the gradient noise scale from norms at two batch sizes, read
from a real Keras model on data labelled by a fixed teacher."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tfaccel.trial.noise_scale import (
    BIG,
    BIG_BATCHES,
    MIN_BATCHES,
    measure,
    simple_noise_scale,
    starting_weights,
)


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
    x, y = _teacher_data(BIG_BATCHES * BIG * 8)
    examples = tf.data.Dataset.from_tensor_slices((x, y))  # single examples, as trials hold
    found = measure(model, examples, 8)
    assert found["noise_scale_batches"] == [8, 8 * BIG]
    # an untrained model: a clear true gradient, and the per-example noise of 4 classes
    assert 1 < found["noise_scale"] < 10_000
    assert measure(model, examples.take(20), 8) == {
        "noise_scale_why": f"fewer examples than {MIN_BATCHES} batches of 8"
    }
    assert "could not be read" in measure(model, (x, y), 8)["noise_scale_why"]  # not a dataset


def _linear_teacher() -> tuple[Any, Any, np.ndarray, np.ndarray]:
    keras = pytest.importorskip("keras")
    tf = pytest.importorskip("tensorflow")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 1)) + 0.5 * rng.normal(size=(2048, 1))).astype("float32")
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    return model, tf.data.Dataset.from_tensor_slices((x, y)), x, y


def test_the_larger_of_the_reads_at_the_start_and_after_the_timed_steps_is_kept() -> None:
    """The noise scale grows as the loss falls: a few steps in, the read is larger than
    the untrained model's, and it is the one kept; the trained weights are put back."""
    model, examples, x, y = _linear_teacher()
    start = starting_weights(model)
    untrained = measure(model, examples, 8)
    model.fit(x, y, batch_size=64, epochs=1, steps_per_epoch=8, verbose=0)
    trained = model.get_weights()
    later = measure(model, examples, 8)
    assert later["noise_scale"] > untrained["noise_scale"]
    assert measure(model, examples, 8, start) == later
    assert all(np.array_equal(a, b) for a, b in zip(trained, model.get_weights(), strict=True))
    model.set_weights(start)
    assert measure(model, examples, 8, start) == untrained  # no steps taken: the same read
    assert starting_weights(keras_dense()) is None  # not built


def keras_dense() -> Any:
    keras = pytest.importorskip("keras")
    return keras.Sequential([keras.layers.Dense(1)])


class _Weights:
    """A model as `measure` handles it: weights to keep, set and put back."""

    def __init__(self) -> None:
        self.weights = "trained"

    def get_weights(self) -> str:
        return self.weights

    def set_weights(self, weights: str) -> None:
        self.weights = weights


class _Batches(list):  # type: ignore[type-arg]
    def take(self, count: int) -> list[Any]:
        return self[:count]


def test_a_model_at_its_minimum_has_a_noise_scale_past_what_the_batches_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Near a minimum the mean gradient is gone under the per-example noise (the
    batch-8 norms no larger than 8x the batch-64 ones): no cap from the noise scale, the
    race judges, said why, though the start's read had one. A late read that fails
    otherwise leaves the start's."""
    import tfaccel.trial.noise_scale as noise
    import tfaccel.workloads.inputs as inputs

    norms = {  # |g|^2 by the weights read and the batch size: |G|^2 = 1, tr(S) = 200
        "start": {8: 1 + 200 / 8, 64: 1 + 200 / 64},
        "trained": {8: 200 / 8, 64: 0.9 * 200 / 64},  # the noise alone, and read noisily
    }
    model = _Weights()
    monkeypatch.setattr(inputs, "in_batches", lambda _, size, __: _Batches([size] * 40))
    monkeypatch.setattr(noise, "_norm2", lambda m, size: norms[m.weights][size])
    found = measure(model, "examples", 8, start="start")  # type: ignore[arg-type]
    assert model.weights == "trained"
    assert found == {
        "noise_scale_why": "where the baseline's steps took the model, the gradient's noise "
        "hides its mean at batches 8 and 64: the noise scale is past what they read"
    }
    norms["trained"] = {8: 2.0, 64: 2.0 + 1e-9}  # no noise seen at all: not a read
    assert measure(model, "examples", 8, start="start") == {  # type: ignore[arg-type]
        "noise_scale": 200.0,
        "noise_scale_batches": [8, 64],
    }


def test_why_the_gradients_could_not_be_read_names_the_error_and_its_first_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """keras-io's knowledge distillation `Distiller` has no `call` of its own: the tune
    says Keras' words, not the exception's class alone."""
    import tfaccel.trial.noise_scale as noise
    import tfaccel.workloads.inputs as inputs

    def no_call(model: Any, element: Any) -> float:
        raise NotImplementedError("Model Distiller does not have a `call()` method.\nMore.")

    monkeypatch.setattr(inputs, "in_batches", lambda _, size, __: _Batches([size] * 40))
    monkeypatch.setattr(noise, "_norm2", no_call)
    assert measure(_Weights(), "examples", 8) == {  # type: ignore[arg-type]
        "noise_scale_why": "its gradients could not be read (NotImplementedError: Model "
        "Distiller does not have a `call()` method.)"
    }
