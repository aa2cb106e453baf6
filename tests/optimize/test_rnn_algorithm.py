"""The cuDNN RNN algorithm knob: the variables it sets, when, and which layers it acts on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfaccel.optimize import rnn_algorithm
from tfaccel.optimize.report import ConfigureOrderError
from tfaccel.optimize.settings import Settings

NAMES = (rnn_algorithm.ENV_DEBUG, rnn_algorithm.ENV_ALGO, rnn_algorithm.ENV_TENSOR_OPS)


def test_the_default_leaves_tensorflow_its_own_choice() -> None:
    assert rnn_algorithm.environment(Settings()) == dict.fromkeys(NAMES)


@pytest.mark.parametrize(
    ("algorithm", "precision", "expected"),
    [
        ("persist_dynamic", "tf32", ("1", "2", "1")),
        ("persist_static", "mixed_bfloat16", ("1", "1", "1")),
        # strict float32 keeps TF32 off: no tensor ops in cuDNN's RNN either
        ("persist_dynamic", "float32", ("1", "2", "0")),
    ],
)
def test_a_persistent_algorithm_sets_tensorflows_debug_variables(
    algorithm: str, precision: str, expected: tuple[str, ...]
) -> None:
    settings = Settings(rnn_algorithm=algorithm, precision=precision)  # type: ignore[arg-type]
    assert rnn_algorithm.environment(settings) == dict(zip(NAMES, expected, strict=True))


def test_apply_sets_the_variables_before_the_runtime_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    row = rnn_algorithm.apply(Settings(rnn_algorithm="persist_dynamic"), initialized=False)
    assert (row.knob, row.value, row.status) == ("rnn_algorithm", "persist_dynamic", "applied")
    assert "persist dynamic" in row.detail
    assert [os.environ[name] for name in NAMES] == ["1", "2", "1"]
    # the same again, after the runtime started: nothing to change, no error
    again = rnn_algorithm.apply(Settings(rnn_algorithm="persist_dynamic"), initialized=True)
    assert again.status == "unchanged"
    # back to the default before the runtime starts: the variables go
    rnn_algorithm.apply(Settings(), initialized=False)
    assert not any(name in os.environ for name in NAMES)


def test_apply_refuses_a_change_after_the_runtime_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigureOrderError, match="TensorFlow already started"):
        rnn_algorithm.apply(Settings(rnn_algorithm="persist_static"), initialized=True)


def test_the_layers_keras_runs_on_cudnn_are_counted_by_keras_own_rule() -> None:
    import keras

    counted = [
        keras.layers.LSTM(4),
        keras.layers.GRU(4),
        keras.layers.LSTM(4, use_cudnn="auto", return_sequences=True),
    ]
    left = [
        keras.layers.LSTM(4, activation="relu"),
        keras.layers.LSTM(4, recurrent_dropout=0.1),
        keras.layers.LSTM(4, use_cudnn=False),
        keras.layers.LSTM(4, unroll=True),
        keras.layers.GRU(4, reset_after=False),
        keras.layers.SimpleRNN(4),
        keras.layers.Dense(4),
    ]
    assert rnn_algorithm.count_layers(counted) == 3
    assert rnn_algorithm.count_layers(left) == 0


def test_a_bidirectional_layers_two_directions_are_found_in_a_model() -> None:
    import keras

    inputs = keras.Input(shape=(None,), dtype="int32")
    x = keras.layers.Embedding(100, 8)(inputs)
    x = keras.layers.Bidirectional(keras.layers.LSTM(4))(x)
    model = keras.Model(inputs, keras.layers.Dense(1)(x))
    layers = list(model._flatten_layers(include_self=False, recursive=True))
    assert rnn_algorithm.count_layers(layers) == 2


@pytest.mark.gpu
def test_a_persistent_algorithm_trains_keras_lstm_on_the_gpu(tmp_path: Path) -> None:
    """configure(rnn_algorithm=...) before TensorFlow starts: Keras' LSTM runs on cuDNN
    with the algorithm, and from the same weights on the same batches its losses stay
    close to the standard algorithm's (another summation order)."""
    from tests.optimize.test_configure import run_py

    code = """
        import json
        import tfaccel
        tfaccel.configure(rnn_algorithm="{algorithm}")
        import keras, numpy as np
        keras.utils.set_random_seed(0)
        x = np.random.default_rng(0).normal(size=(256, 50, 8)).astype("float32")
        y = (x[:, :, 0].sum(axis=1) > 0).astype("float32")
        model = keras.Sequential([keras.Input((50, 8)), keras.layers.LSTM(16),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile("adam", "binary_crossentropy")
        history = model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
        cudnn = not model.layers[0].supports_jit  # Keras took the cuDNN path
        print(json.dumps({{"losses": history.history["loss"], "cudnn": cudnn}}))
    """
    standard = run_py(code.format(algorithm="default"), tmp_path)
    for algorithm in ("persist_static", "persist_dynamic"):
        persistent = run_py(code.format(algorithm=algorithm), tmp_path)
        assert standard["cudnn"] and persistent["cudnn"]
        assert persistent["losses"] == pytest.approx(standard["losses"], rel=0.05)
        assert persistent["losses"][-1] < persistent["losses"][0]  # it learns
