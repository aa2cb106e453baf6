"""Races on the CPU with real TensorFlow and learnable data (labels from a fixed teacher
network, so that the validation loss means something): a moderately larger batch with
its scaled learning rate wins, a far larger one that the linear rule makes diverge is
refused; a script's race uses its own validation data; a GAN-style model is offered no
batch change; the learning-rate rule on real Keras optimizers."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tensorflow")

from tfaccel.optimize.lr_scaling import change_for
from tfaccel.optimize.settings import Settings
from tfaccel.script.command import parse_command
from tfaccel.script.run import ScriptTrial
from tfaccel.trial.race import SHIM_ONLY
from tfaccel.trial.runner import StepPlan, TrialResult, run_trial
from tfaccel.trial.shared import logged_loss
from tfaccel.tune import offer

SMALL = StepPlan(warmup=2, windows=2, window=3)
RACE_S = 6.0

TEACHERS = """
import numpy as np
import keras
import tensorflow as tf


def _mlp(dim, optimizer, width=256):
    model = keras.Sequential([
        keras.Input((dim,)),
        keras.layers.Dense(width, activation="relu"),
        keras.layers.Dense(width, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def linear_adam():
    # labels: the argmax of a fixed linear teacher; learnt steadily over the race
    rng = np.random.default_rng(7)
    w = rng.normal(size=(64, 10))
    x = rng.normal(size=(65536, 64)).astype("float32")
    y = np.argmax(x @ w, axis=1).astype("int32")
    model = _mlp(64, keras.optimizers.Adam(3e-4), width=64)
    return model, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)


def tanh_sgd():
    # labels: the argmax of a fixed one-hidden-layer tanh teacher
    rng = np.random.default_rng(7)
    w1, w2 = rng.normal(size=(32, 64)), rng.normal(size=(64, 10))
    x = rng.normal(size=(32768, 32)).astype("float32")
    y = np.argmax(np.tanh(x @ w1) @ w2, axis=1).astype("int32")
    model = _mlp(32, keras.optimizers.SGD(0.01, momentum=0.9))
    return model, tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
"""


def _race(
    entry: str, batch: int, optimizer: str, examples: int, seconds: float = RACE_S
) -> offer.Race:
    """The same-training run (batch 32) against `batch` with its learning-rate rule."""
    base = Settings(precision="float32", xla="off", batch_size=32)
    same = run_trial(entry, base, SMALL, 300, extra={"race": {"seconds": seconds, "lr": None}})
    lr = change_for(batch / 32, optimizer, steps_per_epoch=examples // batch)
    extra = {"race": {"seconds": seconds, "lr": lr.to_dict()}}
    cand = run_trial(entry, base.replace(batch_size=batch), SMALL, 300, extra=extra)
    for r in (same, cand):
        assert r.status == "ok", (r.error, r.traceback)
        assert r.extra["validation"].startswith("a held-out ")
    assert "warmed up over" in cand.extra["lr_applied"]
    return offer.race_of(seconds, "", same.extra["race"], cand.extra["race"])


def _judged(race: offer.Race, batch: int) -> str:
    found = offer.BatchOffer(
        Settings(batch_size=batch),
        TrialResult("k", "l", {}, "ok"),
        32,
        2.0,
        change_for(batch / 32, "Adam"),
    )
    return offer.judged(found, race, race.seconds / 12).verdict


def test_a_moderately_larger_batch_with_its_learning_rate_wins_the_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adam, batch 32 -> 256 (learning rate x2.83, the square-root rule): on the CPU a
    step of this small model costs little more at 256 than at 32 (Keras' per-step
    work), so the larger batch reaches the loss sooner, by far more than the margin."""
    (tmp_path / "teachers.py").write_text(TEACHERS)
    monkeypatch.chdir(tmp_path)
    race = _race("teachers:linear_adam", 256, "Adam", 65536)
    assert race.candidate_s is not None and race.same_s is not None
    assert _judged(race, 256) == "passed", race


def test_a_far_larger_batch_that_diverges_loses_the_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SGD with momentum, batch 32 -> 2048: the linear rule makes its rate 0.64, and
    the validation loss climbs away from the target, whether or not it touched it on
    the way (its first execution out of the clock, it may): refused. It climbs with
    each step, so the race is longer than the others: on a 2-core machine running four
    test processes, a 6-s race's candidate took too few steps to climb far."""
    (tmp_path / "teachers.py").write_text(TEACHERS)
    monkeypatch.chdir(tmp_path)
    race = _race("teachers:tanh_sgd", 2048, "SGD", 32768, seconds=2 * RACE_S)
    assert race.candidate[-1][1] > race.target  # type: ignore[operator]
    assert race.candidate_s is None or race.candidate_end > race.same_end * 1.1, race  # type: ignore[operator]
    assert _judged(race, 2048) == "failed"


SCRIPT_WITH_VALIDATION = """
import numpy as np
import keras

rng = np.random.default_rng(3)
w = rng.normal(size=(16, 4))
x = rng.normal(size=(2048, 16)).astype("float32")
y = np.argmax(x @ w, axis=1)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(4)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x[:1536], y[:1536], batch_size=32, epochs=3, validation_data=(x[1536:], y[1536:]),
          callbacks=[keras.callbacks.ModelCheckpoint("must-not-exist.keras")])
"""

GAN_SCRIPT = """
import numpy as np
import keras
import tensorflow as tf

class Gan(keras.Model):
    def __init__(self):
        super().__init__()
        self.g = keras.layers.Dense(8)
        self.d = keras.layers.Dense(1)

    def call(self, x):
        return self.d(self.g(x))

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(data)))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"score": loss * 0.0, "d_loss": loss}  # no "loss", as a GAN's own step

model = Gan()
model.compile("adam")
model.fit(np.random.rand(512, 8).astype("float32"), batch_size=32, epochs=1)
"""


def _script_trial(folder: Path, source: str, race_s: float | None = None) -> TrialResult:
    """The baseline trial of `source` as a script in `folder` (the working directory), at
    batch 32; with `race_s`, a race of that many seconds."""
    (folder / "train.py").write_text(textwrap.dedent(source))
    script = parse_command(["python", "train.py"])
    s = Settings(precision="float32", xla="off", batch_size=32)
    extra = {"race": {"seconds": race_s, "lr": None}} if race_s else {"count_flops": True}
    r = run_trial(ScriptTrial(script), s, SMALL, 300, extra=extra)
    assert r.status == "ok", (r.error, r.traceback)
    return r


def test_a_scripts_race_uses_its_validation_data_and_writes_none_of_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    baseline = _script_trial(tmp_path, SCRIPT_WITH_VALIDATION)
    assert baseline.extra["examples"] == 1536 and "no_race" not in baseline.extra
    assert baseline.extra["optimizer"] == "Adam" and baseline.extra["learning_rate"] == 0.001
    r = _script_trial(tmp_path, SCRIPT_WITH_VALIDATION, race_s=2.0)
    assert r.extra["validation"] == "the script's validation_data"
    points = r.extra["race"]
    assert len(points) >= 3 and points[0][0] == 0.0 and points[-1][1] < points[0][1]
    assert not (tmp_path / "must-not-exist.keras").exists()


def test_a_gan_style_train_step_has_no_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    r = _script_trial(tmp_path, GAN_SCRIPT)
    assert "Gan has a train_step of its own and no test_step" in r.extra["no_race"]
    # its logs have no "loss": the trial reads (and syncs on) its "d_loss"
    assert r.losses and all(math.isfinite(x) and x > 0 for x in r.losses)


KERAS2_STEPS = """
import numpy as np
import keras
import tensorflow as tf

class Keras2Steps(keras.Model):
    # a Keras 2 pattern (keras-io's knowledge distillation): its own steps update the
    # metrics through compiled_metrics, which Keras 3 keeps as a shim that also fills
    # Keras' "loss" tracker with the mean of the predictions
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.own_loss(y, y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        return {**{m.name: m.result() for m in self.metrics}, **NAMED(loss)}

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        self.compiled_metrics.update_state(y, y_pred)
        return {**{m.name: m.result() for m in self.metrics}, **NAMED(self.own_loss(y, y_pred))}

rng = np.random.default_rng(3)
w = rng.normal(size=(16, 4))
x = rng.normal(size=(4096, 16)).astype("float32")
y = np.argmax(x @ w, axis=1)
inputs = keras.Input((16,))
hidden = keras.layers.Dense(32, activation="relu")(inputs)
model = Keras2Steps(inputs, keras.layers.Dense(4)(hidden))
model.own_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
model.compile("adam", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=2)
"""


def test_a_keras2_test_step_is_raced_by_its_own_loss_not_the_shims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps return their loss as "student_loss" beside the shim's "loss" (the
    mean of the logits, which need not fall): the race reads "student_loss", says so,
    and its curve falls from about ln 4."""
    monkeypatch.chdir(tmp_path)
    source = KERAS2_STEPS.replace("NAMED(", "dict(student_loss=")
    baseline = _script_trial(tmp_path, source)
    assert "no_race" not in baseline.extra
    r = _script_trial(tmp_path, source, race_s=2.0)
    assert "its loss read from 'student_loss'" in r.extra["validation"]
    points = r.extra["race"]
    assert 1.0 < points[0][1] < 2.0 and points[-1][1] < points[0][1] * 0.8, points
    assert all(point[2] is None or point[2] > 0 for point in points)


def test_a_keras2_test_step_that_reports_only_the_shims_loss_has_no_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    r = _script_trial(tmp_path, KERAS2_STEPS.replace("NAMED(", "dict.fromkeys((), "))
    assert r.extra["no_race"] == SHIM_ONLY


TRAINER_PATTERN = """
import numpy as np
import tensorflow as tf
from tensorflow import keras

class MyTrainer(keras.Model):
    # keras-io's trainer pattern, written for Keras 2: the loss from compiled_loss, the
    # metrics through compiled_metrics, and Keras' own test_step
    def __init__(self, model):
        super().__init__()
        self.model = model

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self.model(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def call(self, x):
        return self.model(x)

rng = np.random.default_rng(5)
w = rng.normal(size=(16, 4))
x = rng.normal(size=(4096, 16)).astype("float32")
y = np.argmax(x @ w, axis=1)
inner = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(4, activation="softmax")])
trainer = MyTrainer(inner)
trainer.compile(keras.optimizers.Adam(), loss="sparse_categorical_crossentropy",
                metrics=["accuracy"])
trainer.fit(x, y, batch_size=32, epochs=2, validation_split=0.25)
"""


def test_a_keras2_trainer_patterns_trials_log_its_loss_and_its_race_reads_the_compiled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keras 3 logs the mean of the predictions (0.25 for four classes) as its "loss":
    the trial's losses, which the accuracy guard compares, are the compiled loss's
    (about ln 4 in a trial's few steps); its race reads the compiled loss through
    Keras' test_step, and it falls."""
    monkeypatch.chdir(tmp_path)
    baseline = _script_trial(tmp_path, TRAINER_PATTERN)
    losses = baseline.losses
    assert "no_race" not in baseline.extra
    assert all(1.0 < loss < 2.0 for loss in losses), losses  # the shim's: 0.25 each
    r = _script_trial(tmp_path, TRAINER_PATTERN, race_s=2.0)
    assert r.extra["validation"].endswith(
        "its loss is the one MyTrainer was compiled with (Keras' test_step)"
    )
    points = r.extra["race"]
    assert 1.0 < points[0][1] < 2.0 and points[-1][1] < points[0][1] * 0.8, points
    assert all(point[2] is None or 0.0 < point[2] < 2.0 for point in points[1:]), points


INPUTS_ALONE_TRAINER = """
import numpy as np
import tensorflow as tf
import keras

class Denoiser(keras.Model):
    # its own train_step on inputs alone, compiled with a loss it never passes labels to:
    # Keras' test_step, given no labels, cannot evaluate that loss
    def train_step(self, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(x + 0.1, training=True) - x))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {"loss": loss}

inputs = keras.Input((8,))
model = Denoiser(inputs, keras.layers.Dense(8)(keras.layers.Dense(16, "relu")(inputs)))
model.compile("adam", loss="mse")
model.fit(np.random.default_rng(6).normal(size=(1024, 8)).astype("float32"), batch_size=32)
"""


def test_a_train_step_of_its_own_whose_compiled_loss_keras_cannot_evaluate_has_no_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiled with a loss, so Keras' test_step would evaluate it; on inputs alone it
    cannot: the baseline says why before any ladder trial or race is spent on it."""
    monkeypatch.chdir(tmp_path)
    r = _script_trial(tmp_path, INPUTS_ALONE_TRAINER)
    why = r.extra["no_race"]
    assert why.startswith("Keras' test_step cannot evaluate the loss Denoiser was compiled with")


STRATEGY_SCOPE = """
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(4)
x = rng.normal(size=(4096, 8)).astype("float32")
y = (x @ rng.normal(size=(8,)) > 0).astype("float32")
with tf.distribute.MirroredStrategy().scope():  # the optimizer's variables: mirrored
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
model.fit(x, y, batch_size=32, epochs=2, validation_split=0.25)
"""


def test_a_model_made_under_the_scripts_own_strategy_is_raced_with_its_learning_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its learning rate and step count are MirroredVariables, which float() and int()
    refuse: the baseline reads the rate, and the race scales it and counts its steps."""
    monkeypatch.chdir(tmp_path)
    baseline = _script_trial(tmp_path, STRATEGY_SCOPE)
    assert baseline.extra["learning_rate"] == 0.001 and "lr_schedule" not in baseline.extra
    (tmp_path / "train.py").write_text(STRATEGY_SCOPE)
    lr = change_for(4, "Adam", steps_per_epoch=24)
    s = Settings(precision="float32", xla="off", batch_size=128)
    extra = {"race": {"seconds": 2.0, "lr": lr.to_dict()}}
    r = run_trial(ScriptTrial(parse_command(["python", "train.py"])), s, SMALL, 300, extra=extra)
    assert r.status == "ok", (r.error, r.traceback)
    assert r.extra["lr_applied"].endswith("0.001 -> 0.002") and r.extra["race_steps"] > 0


def test_the_loss_a_steps_logs_carry() -> None:
    """Keras' "loss" first; else the first entry named like a loss; else the first;
    a vector is averaged; NaN where nothing can be read."""
    import numpy as np

    assert logged_loss({"accuracy": 0.5, "loss": 2.0}) == 2.0
    assert logged_loss({"score": 1.0, "d_loss": 3.0, "g_loss": 4.0}) == 3.0
    assert logged_loss({"mae": 0.25}) == 0.25
    assert logged_loss({"loss": np.array([1.0, 3.0])}) == 2.0
    for nothing in (None, {}, {"loss": "n/a"}):
        assert math.isnan(logged_loss(nothing))
    # where "loss" is not one (trial.race.ShimWatch): another named like one, else NaN
    assert logged_loss({"loss": 9.0, "acc": 0.5, "student_loss": 2.0}, keras_loss=False) == 2.0
    assert math.isnan(logged_loss({"loss": 9.0, "acc": 0.5}, keras_loss=False))


def _rates(model: Any, x: Any, y: Any, warmup: Any) -> list[float]:
    """The learning rate after each step of a two-epoch fit with the warm-up."""
    import keras

    seen: list[float] = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda b, logs: seen.append(float(model.optimizer.learning_rate))
    )
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[warmup, record])
    return seen


def test_the_learning_rate_rule_on_real_keras_optimizers() -> None:
    """Adam and SGD: the rate climbs from the user's over the warm-up, then holds at the
    scaled one; a schedule of the user's is left alone."""
    import keras
    import numpy as np

    from tfaccel.optimize.lr_scaling import apply, optimizer_facts

    x = np.random.rand(256, 4).astype("float32")
    y = np.random.rand(256, 1).astype("float32")
    for opt, scale in ((keras.optimizers.Adam(0.001), 2.0), (keras.optimizers.SGD(0.01), 4.0)):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(opt, "mse")
        name = type(opt).__name__
        change = change_for(4.0, name, steps_per_epoch=10)
        assert change.scale == scale
        warmup, note = apply(model, change)
        assert warmup is not None and "->" in note
        seen = _rates(model, x, y, warmup)
        base = optimizer_facts(model)["learning_rate"] / scale
        assert seen[0] == pytest.approx(base + (base * scale - base) / 10)
        assert seen[0] < seen[5] < seen[9] and seen[-1] == pytest.approx(base * scale)
    schedule = keras.optimizers.schedules.CosineDecay(0.01, 100)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(schedule), "mse")
    assert optimizer_facts(model) == {"optimizer": "Adam", "lr_schedule": "CosineDecay"}
    warmup, note = apply(model, change_for(4.0, "Adam"))
    assert warmup is None and "CosineDecay" in note


def test_the_baseline_reads_the_gradient_noise_scale_of_the_users_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From squared gradient norms at the user's batch and 8x it, on its own data."""
    (tmp_path / "teachers.py").write_text(TEACHERS)
    monkeypatch.chdir(tmp_path)
    base = Settings(precision="float32", xla="off", batch_size=32)
    r = run_trial("teachers:linear_adam", base, SMALL, 300, extra={"count_flops": True})
    assert r.status == "ok", (r.error, r.traceback)
    assert r.extra["noise_scale_batches"] == [32, 256]
    assert 1.0 < r.extra["noise_scale"] < 1e6
    assert r.extra["examples"] == 65536


def test_a_race_reads_at_most_its_first_validation_examples() -> None:
    """Thirteen evaluations of a large validation set would outlast the race's seconds:
    each reads the same first VALIDATION_MAX examples, and the description says so."""
    import keras
    import numpy as np
    import tensorflow as tf

    from tfaccel.trial.race import VALIDATION_MAX, Split, race_fit, read_note, split_off

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    read: list[int] = []

    def evaluate(val: Any, **kwargs: Any) -> dict[str, float]:
        read.append(sum(int(x.shape[0]) for x, _ in val))
        return {"loss": 1.0}

    model.evaluate = evaluate  # type: ignore[method-assign]
    x, y = np.ones((64, 4), "float32"), np.ones((64, 1), "float32")
    validation = tf.data.Dataset.from_tensor_slices(
        (np.ones((12_000, 4), "float32"), np.ones((12_000, 1), "float32"))
    )
    out = race_fit(
        lambda callbacks: model.fit(x, y, epochs=10**6, verbose=0, callbacks=callbacks),
        model,
        Split(None, validation, "the script's validation_data", 64),
        {"seconds": 0.3, "batch": 32, "lr": None},
    )
    assert out["status"] == "ok" and len(read) >= 2
    assert out["validation"] == "the script's validation_data"
    assert set(read) == {VALIDATION_MAX}
    assert read_note(VALIDATION_MAX) == "" and read_note(None) == "; the race reads its first 5,000"
    split = split_off(tf.data.Dataset.range(20_000), 20_000, 0.3)
    assert split.what == (
        "the script's validation_split=0.3 (the last 6,000 examples); the race reads its "
        "first 5,000"
    )


LR_CALLBACKS = """
import numpy as np
import keras

rng = np.random.default_rng(5)
x = rng.normal(size=(2048, 8)).astype("float32")
y = (x @ rng.normal(size=(8,)) > 0).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1, activation="sigmoid")])
model.compile(keras.optimizers.SGD(0.01), "binary_crossentropy")
callbacks = [
    keras.callbacks.ReduceLROnPlateau(patience=1),
    keras.callbacks.ModelCheckpoint("must-not-exist.keras"),
]
model.fit(x, y, batch_size=32, epochs=2, validation_split=0.25, callbacks=callbacks)
"""


def test_the_scripts_learning_rate_callbacks_stay_in_charge_and_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ReduceLROnPlateau of the script's goes on from the scaled rate: the baseline
    names it for the offer, the race keeps it (and not the checkpoint) and says so."""
    monkeypatch.chdir(tmp_path)
    baseline = _script_trial(tmp_path, LR_CALLBACKS)
    assert baseline.extra["lr_setters"] == ["ReduceLROnPlateau"]
    lr = change_for(4, "SGD", steps_per_epoch=12, setters=("ReduceLROnPlateau",))
    s = Settings(precision="float32", xla="off", batch_size=128)
    extra = {"race": {"seconds": 2.0, "lr": lr.to_dict()}}
    r = run_trial(ScriptTrial(parse_command(["python", "train.py"])), s, SMALL, 300, extra=extra)
    assert r.status == "ok", (r.error, r.traceback)
    assert r.extra["lr_applied"] == (
        "learning rate x4 (SGD: linear rule), warmed up over 12 steps: 0.01 -> 0.04 "
        "(the script's ReduceLROnPlateau sets the rate as it always does)"
    )
    assert not (tmp_path / "must-not-exist.keras").exists()


GENERATOR_STEPS = """
import numpy as np
import keras

rng = np.random.default_rng(7)
w = rng.normal(size=(8, 1))

def batches():
    while True:
        x = rng.normal(size=(32, 8)).astype("float32")
        yield x, (x @ w).astype("float32")

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.01), "mse")
model.fit(batches(), steps_per_epoch=100, epochs=2)
"""


def test_a_fit_of_steps_per_epoch_reports_its_epochs_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endless generator: its data has no size, its epoch has: 100 steps of 32 (a
    batch offer's warm-up lasts about an epoch)."""
    monkeypatch.chdir(tmp_path)
    baseline = _script_trial(tmp_path, GENERATOR_STEPS)
    assert baseline.extra["epoch_examples"] == 3200 and "examples" not in baseline.extra
    assert baseline.extra["fit_epochs"] == 2  # the epochs the script's fit trains
