"""A script's validation in its trials: fit evaluates it each epoch with the trial's
settings, so a trial times it too and counts it in samples per second (real scripts,
real TensorFlow on the CPU)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from tfaccel.optimize.settings import Settings
from tfaccel.script.command import parse_command
from tfaccel.script.run import ScriptTrial
from tfaccel.script.validation import EpochShape, epoch_shape, with_validation
from tfaccel.trial.runner import StepPlan, run_trial

PLAN = StepPlan(warmup=3, windows=3, window=8)

# Learnable labels (a fixed linear teacher); `{fit}` is the fit call's validation.
SCRIPT = """
import numpy as np
import keras
rng = np.random.default_rng(0)
x = rng.random((2400, 8)).astype("float32")
y = (x @ np.arange(8.0) > 14).astype("float32")
model = keras.Sequential([
    keras.Input((8,)),
    keras.layers.Dense(32, activation="relu"),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(loss="binary_crossentropy", optimizer="adam")
model.fit(x[:400], y[:400], batch_size=20, epochs=2, verbose=0{fit})
"""


def _trial(folder: Path, fit: str) -> Any:
    (folder / "train.py").write_text(SCRIPT.format(fit=fit))
    script = parse_command(["python", str(folder / "train.py")])
    result = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), PLAN)
    assert result.ok, (result.error, result.traceback)
    return result


def test_a_trial_counts_the_validation_in_its_samples_per_second(script_folder: Path) -> None:
    result = _trial(script_folder, ", validation_data=(x[400:], y[400:])")
    timing = result.extra["validation_timing"]
    assert (timing["train"], timing["validation"], timing["every"], timing["batch"]) == (
        400,
        2000,
        1,
        20,
    )
    train = result.extra["train_window_samples_per_s"]
    assert len(train) == len(result.windows) == PLAN.windows
    for folded, alone in zip(result.windows, train, strict=True):
        assert folded == pytest.approx(with_validation(alone, timing["samples_per_s"], 5.0))
    # five validation examples per training example: most of an epoch is its validation
    assert 0.5 < timing["share"] < 1.0
    # each window slower than its training alone (above), so their medians too (not
    # every training window: on a loaded machine one of them ran 6x below the rest)
    assert result.samples_per_s < statistics.median(train)


def test_a_fit_without_validation_is_timed_as_before(script_folder: Path) -> None:
    result = _trial(script_folder, "")
    assert "validation_timing" not in result.extra
    assert "validation_untimed" not in result.extra
    assert "train_window_samples_per_s" not in result.extra


def test_validation_split_and_validation_freq_shape_the_epoch(script_folder: Path) -> None:
    result = _trial(script_folder, ", validation_split=0.2, validation_freq=2")
    timing = result.extra["validation_timing"]
    assert (timing["train"], timing["validation"], timing["every"]) == (320, 80, 2)
    assert result.samples_per_s > 0


def test_with_validation_adds_the_evaluation_time_per_training_example() -> None:
    # 100 training samples/s and a validation of half as many examples at 50/s: an
    # epoch of 100 examples takes 1 s of training and 1 s of validation.
    assert with_validation(100.0, 50.0, 0.5) == pytest.approx(50.0)
    assert with_validation(100.0, 50.0, 0.0) == pytest.approx(100.0)
    assert with_validation(0.0, 50.0, 0.5) == 0.0
    assert EpochShape(train=100, validation=50, every=2, batch=8).ratio == pytest.approx(0.25)


def _model() -> Any:
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="sgd")
    return model


def test_the_epoch_shape_of_fit_arguments() -> None:
    import tensorflow as tf

    model, x, y = _model(), np.zeros((100, 4), "float32"), np.zeros((100, 1), "float32")
    assert epoch_shape(model, {"x": x, "y": y}, 100, 10) is None  # no validation
    given = {"x": x, "y": y, "validation_data": (x[:30], y[:30])}
    assert epoch_shape(model, given, 100, 10) == EpochShape(100, 30, 1, 10)
    given |= {"validation_batch_size": 5, "validation_steps": 2, "steps_per_epoch": 4}
    assert epoch_shape(model, given, 100, 10) == EpochShape(40, 10, 1, 5)
    split = {"x": x, "y": y, "validation_split": 0.25, "validation_freq": 3}
    assert epoch_shape(model, split, 100, 10) == EpochShape(75, 25, 3, 10)
    batches = tf.data.Dataset.from_tensor_slices((x[:30], y[:30])).batch(6)
    assert epoch_shape(model, {"x": x, "validation_data": batches}, 100, 10) == EpochShape(
        100, 30, 1, 6
    )

    def endless() -> Any:
        while True:
            yield x[:6], y[:6]

    unknown = tf.data.Dataset.from_generator(
        endless,
        output_signature=(tf.TensorSpec((None, 4)), tf.TensorSpec((None, 1))),
    )
    why = epoch_shape(model, {"x": x, "validation_data": unknown}, 100, 10)
    assert isinstance(why, str) and "unknown" in why
    no_count = epoch_shape(model, {"x": x, "validation_split": 0.1}, None, 10)
    assert isinstance(no_count, str) and "unknown" in no_count


def test_a_validation_split_of_a_dataset_is_not_keras_validation() -> None:
    import tensorflow as tf

    data = tf.data.Dataset.from_tensor_slices(np.zeros((10, 4), "float32")).batch(2)
    assert epoch_shape(_model(), {"x": data, "validation_split": 0.5}, 10, 2) is None


def test_tune_says_its_samples_per_second_count_the_validation(script_folder: Path) -> None:
    import json

    from typer.testing import CliRunner

    from tfaccel.cli import app

    (script_folder / "train.py").write_text(SCRIPT.format(fit=", validation_split=0.25"))
    args = ["tune", "--max-batch", "20", "--warmup", "2", "--windows", "2", "--window", "3"]
    out = CliRunner().invoke(app, [*args, "--format", "json", "--", "python", "train.py"])
    assert out.exit_code == 0, out.output
    said = [d["text"] for d in json.loads(out.stdout)["decisions"] if d["stage"] == "validation"]
    assert len(said) == 1 and "count the script's validation too: 100 examples" in said[0]


def test_an_evaluation_that_fails_leaves_the_training_figures(script_folder: Path) -> None:
    """Validation data of the wrong width: the script itself would fail at the end of
    its first epoch; the trial keeps its training's windows and says why it has no
    validation figures."""
    result = _trial(script_folder, ", validation_data=(x[400:, :5], y[400:])")
    assert "validation_timing" not in result.extra
    assert result.extra["validation_untimed"].startswith("its evaluation failed (")
    assert len(result.windows) == PLAN.windows


def test_the_validation_arrays_are_read_once_for_their_shape_and_their_evaluation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading arrays as a dataset copies them: the epoch's shape and the split a trial
    evaluates take the one read."""
    import keras

    from tfaccel.script import validation
    from tfaccel.workloads import inputs

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    x, y = np.zeros((60, 4), "float32"), np.zeros((60, 1), "float32")
    args = {"x": x[:40], "y": y[:40], "validation_data": (x[40:], y[40:])}
    given = validation.read_given(model, args)
    assert given is not None

    def again(*_: Any, **__: Any) -> Any:
        raise AssertionError("the validation data read again")

    monkeypatch.setattr(inputs, "user_data", again)
    assert epoch_shape(model, args, 40, 8, given) == EpochShape(40, 20, 1, 8)
    held = validation.split(model, args, None, 40, given)  # the training examples: any
    assert held.validation is given.examples


def _trial_at(folder: Path, fit: str, settings: Settings) -> Any:
    (folder / "train.py").write_text(SCRIPT.format(fit=fit))
    script = parse_command(["python", str(folder / "train.py")])
    result = run_trial(ScriptTrial(script), settings, PLAN)
    assert result.ok, (result.error, result.traceback)
    return result


def test_a_trial_evaluates_the_validation_arrays_at_the_settings_batch(
    script_folder: Path,
) -> None:
    """`validation_batch_size` evaluates a script's validation arrays at a larger batch
    (the evaluation reads the weights and changes none): the trial times it there, and
    the baseline says whether the fit allows it."""
    fit = ", validation_data=(x[400:], y[400:])"
    base = Settings(precision="float32", xla="off")
    own = _trial_at(script_folder, fit, base)
    assert own.extra["validation_timing"]["batch"] == 20
    assert own.extra["validation_batch_blocker"] is None
    large = _trial_at(script_folder, fit, base.replace(validation_batch_size=1000))
    assert large.extra["validation_timing"]["batch"] == 1000
    assert large.extra["validation_timing"]["samples_per_s"] > 0


def test_where_the_validation_cannot_run_at_another_batch_it_says_why() -> None:
    import keras

    from tfaccel.script.validation import applied_batch, batch_blocker

    x, y = np.zeros((64, 4), "float32"), np.zeros((64, 1), "float32")
    free = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    assert batch_blocker(free, {"x": x}) == "the fit does not validate"
    assert batch_blocker(free, {"x": x, "validation_split": 0.2}) is None
    assert batch_blocker(free, {"x": x, "validation_data": (x, y)}) is None
    own = {"x": x, "validation_data": (x, y), "validation_batch_size": 16}
    assert batch_blocker(free, own) == "the script sets validation_batch_size=16"
    steps = {"x": x, "validation_data": (x, y), "validation_steps": 2}
    assert batch_blocker(free, steps) == "the script sets validation_steps=2 (batches)"
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    assert batch_blocker(free, {"x": x, "validation_data": ds}) == (
        "its validation_data (a tf.data.Dataset) makes its own batches"
    )
    fixed = keras.Sequential([keras.Input((4,), batch_size=8), keras.layers.Dense(1)])
    assert batch_blocker(fixed, {"x": x, "validation_split": 0.2}) == (
        "its inputs have a fixed batch dimension (8)"
    )
    stateful = keras.Sequential(
        [keras.Input((3, 4), batch_size=8), keras.layers.LSTM(2, stateful=True, name="mem")]
    )
    assert batch_blocker(stateful, {"x": x, "validation_split": 0.2}) == (
        "a stateful layer (mem) carries its state from batch to batch"
    )
    # applied: fit's arguments changed, and said; blocked: left, and said why
    args: dict[str, Any] = {"x": x, "validation_split": 0.2}
    assert applied_batch(free, args, 512) == (
        "validation_batch_size=512 (evaluation only: the training is the same)"
    )
    assert args["validation_batch_size"] == 512
    assert applied_batch(free, {"x": x, "validation_data": ds}, 512) == (
        "validation at the script's own batch (its validation_data (a tf.data.Dataset) makes "
        "its own batches)"
    )
    assert applied_batch(free, {"x": x}, 512) is None  # nothing to say of a fit without
    assert applied_batch(free, {"x": x}, None) is None
