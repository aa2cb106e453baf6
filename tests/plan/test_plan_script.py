"""`tfaccel plan -- python train.py`: the memory plan of an unmodified script's model,
traced as its fit call trains it, on the CPU (real scripts, real TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("tensorflow")

from tests.clitext import unboxed
from tfaccel.cli import app

runner = CliRunner()

# Two models: a small one fitted first, then a larger one whose (n,) labels meet its
# (n, 1) sigmoid, as Keras' compiled loss matches them. After each fit, a file.
TWO_FITS = """
import numpy as np
import keras

x = np.random.rand(256, 16).astype("float32")
y = (x.sum(axis=1) > 8).astype("float32")
small = keras.Sequential([keras.Input((16,)), keras.layers.Dense(1, activation="sigmoid")])
small.compile("sgd", "binary_crossentropy")
small.fit(x, y, batch_size=24, epochs=1, verbose=0,
          callbacks=[keras.callbacks.ModelCheckpoint("must-not-exist.keras")])
open("after-first-fit.txt", "w").write("ran")
large = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
large.compile("adam", "binary_crossentropy")
large.fit(x, y, batch_size=48, epochs=1, verbose=0)
open("after-second-fit.txt", "w").write("ran")
"""


@pytest.fixture
def here(script_folder: Path) -> Path:
    (script_folder / "train.py").write_text(TWO_FITS)
    return script_folder


def test_a_scripts_model_is_planned_at_its_own_batch_and_nothing_after_fit_runs(
    here: Path,
) -> None:
    args = ["plan", "--spec", "H200", "-f", "json", "--", "python", "train.py"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    assert fit["estimate"]["workload"] == "script: python train.py"
    assert fit["estimate"]["parameters"] == 17 and fit["estimate"]["optimizer"] == "SGD"
    assert fit["batch"] == 24 and fit["fits"] is True and fit["batch_from"] == "the script's"
    assert not (here / "must-not-exist.keras").exists()
    assert not (here / "after-first-fit.txt").exists()
    text = unboxed(runner.invoke(app, args[:3] + args[5:]).stdout)
    assert "batch 24 (the script's) fits" in text


def test_fit_names_the_call_whose_model_is_planned_and_batch_overrides_its_own(
    here: Path,
) -> None:
    args = ["plan", "--spec", "H200", "--fit", "2", "--batch", "4096", "-f", "json"]
    result = runner.invoke(app, [*args, "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    assert fit["estimate"]["parameters"] == 16 * 64 + 64 + 64 + 1
    assert fit["estimate"]["optimizer"] == "Adam"
    assert fit["batch"] == 4096 and fit["batch_from"] == "asked"
    assert (here / "after-first-fit.txt").exists() and not (here / "after-second-fit.txt").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "python", "nofit.py"], "ended before its model.fit call 1"),
        (["--fit", "3", "--", "python", "train.py"], "ended before its model.fit call 3"),
        (["--", "python", "missing.py"], "does not exist"),
        (["--fit", "2", "tiny"], "--fit chooses which of a script's model.fit calls"),
    ],
)
def test_a_script_that_cannot_be_planned_exits_2_with_why(
    here: Path, args: list[str], message: str
) -> None:
    (here / "nofit.py").write_text("import keras\nprint('no fit here')\n")
    result = runner.invoke(app, ["plan", "--spec", "H200", *args])
    assert result.exit_code == 2, result.output
    assert message in unboxed(result.output)


# A loop of its own: the first model trained with train_on_batch (16 rows a call), then
# a second one; after the loop, a file.
LOOP = """
import numpy as np
import keras

first = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
second = keras.Sequential([keras.Input((8,)), keras.layers.Dense(64), keras.layers.Dense(4)])
first.compile("sgd", "mse")
second.compile("adam", "mse")
for step in range(5):
    first.train_on_batch(np.zeros((16, 8), "float32"), np.zeros((16, 4), "float32"))
    second.train_on_batch(np.zeros((8, 8), "float32"), np.zeros((8, 4), "float32"))
open("after-loop.txt", "w").write("ran")
"""


def test_a_loop_of_train_on_batch_calls_is_planned_with_each_model_it_trains(
    here: Path,
) -> None:
    """Without a fit, a loop's models are planned once each has made its first call
    (both compiled models here: the first, 8 -> 4 with SGD at 16 rows, then the second,
    8 -> 64 -> 4 with Adam at 8), each on its call's data, a step each, at the first's
    batch; nothing after it runs."""
    (here / "loop.py").write_text(LOOP)
    result = runner.invoke(app, ["plan", "--spec", "H200", "-f", "json", "--", "python", "loop.py"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    estimate = fit["estimate"]
    assert estimate["workload"] == (
        "script: python loop.py: its loop's train_on_batch 2 models (sequential, sequential_1)"
    )
    assert estimate["parameters"] == (8 * 4 + 4) + (8 * 64 + 64 + 64 * 4 + 4)
    assert estimate["optimizer"] == "SGD + Adam"
    assert (
        estimate["method"]
        == "liveness of each model's traced training step, the largest (a step each)"
    )
    assert fit["batch"] == 16 and fit["batch_from"] == "the script's"
    assert not (here / "after-loop.txt").exists()


def test_a_training_step_of_its_own_is_planned_with_each_model_it_trains(here: Path) -> None:
    """A GAN's tf.function step (`script.tape`): its generator (4 -> 2, Adam) and its
    discriminator (2 -> 1, SGD inside a LossScaleOptimizer), each with the optimizer
    that trains it, on zeros shaped as its inputs, at the step's 16 rows, after one
    step, added up; nothing after it runs."""
    from tests.script.test_tape import TWO_MODELS

    (here / "gan.py").write_text(TWO_MODELS + '\nopen("after-loop.txt", "w").write("ran")\n')
    result = runner.invoke(app, ["plan", "--spec", "H200", "-f", "json", "--", "python", "gan.py"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    estimate = fit["estimate"]
    assert estimate["workload"] == (
        "script: python gan.py: the 2 models its training step trains (sequential, sequential_1)"
    )
    assert estimate["parameters"] == (4 * 2 + 2) + (2 * 1 + 1)
    assert estimate["optimizer"] == "Adam + LossScaleOptimizer(SGD)"
    assert estimate["gradients_bytes"] == 13 * 4
    assert fit["batch"] == 16 and fit["batch_from"] == "the script's"
    assert not (here / "after-loop.txt").exists()


def test_each_model_a_step_trains_is_planned_once() -> None:
    """`_distinct`: a step's models once each, by identity, with the optimizer that first
    trains it; a model inside another stays (its optimizer's slots are its own), and
    one the step's optimizer trains outside any called model (None) is left out."""
    import keras

    from tfaccel.plan.hook import _distinct

    gen = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    disc = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    both = keras.Sequential([keras.Input((4,)), gen, disc])
    adam, sgd = keras.optimizers.Adam(), keras.optimizers.SGD()
    assert _distinct([gen, disc, gen], [adam, sgd, sgd]) == [(gen, adam), (disc, sgd)]
    assert _distinct([disc, both, None], [sgd, adam, sgd]) == [(disc, sgd), (both, adam)]


# keras-io's GAN shape: a Model with a train_step of its own and no call, its generator
# and critic held as attributes with an optimizer each, fit on images alone.
OWN_STEP_GAN = """
import numpy as np
import tensorflow as tf
import keras

class GAN(keras.Model):
    def __init__(self):
        super().__init__()
        self.gen = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16)])
        self.critic = keras.Sequential([keras.Input((16,)), keras.layers.Dense(1)])

    def compile(self, g_opt, c_opt):
        super().compile()
        self.g_opt, self.c_opt = g_opt, c_opt

    def train_step(self, real):
        if isinstance(real, tuple):
            real = real[0]
        noise = tf.random.normal((tf.shape(real)[0], 4))
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self.critic(self.gen(noise))) - tf.reduce_mean(self.critic(real))
        grads = tape.gradient(loss, self.critic.trainable_weights)
        self.c_opt.apply_gradients(zip(grads, self.critic.trainable_weights))
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(self.critic(self.gen(noise)))
        grads = tape.gradient(g_loss, self.gen.trainable_weights)
        self.g_opt.apply_gradients(zip(grads, self.gen.trainable_weights))
        return {"c_loss": loss, "g_loss": g_loss}

gan = GAN()
gan.compile(keras.optimizers.Adam(1e-4), keras.optimizers.Adam(1e-4))
gan.fit(np.random.rand(512, 16).astype("float32"), batch_size=64, epochs=1, verbose=0)
open("after-fit.txt", "w").write("ran")
"""


def test_a_model_whose_train_step_is_its_own_is_planned_from_that_step(here: Path) -> None:
    """keras-io's GANs have no `call` (their forward pass cannot be traced alone): the
    plan traces the model's own train_step on the fit's data, with the slots of the two
    optimizers it applies, at the fit's batch; nothing of the fit runs."""
    (here / "gan.py").write_text(OWN_STEP_GAN)
    result = runner.invoke(app, ["plan", "--spec", "H200", "-f", "json", "--", "python", "gan.py"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    estimate = fit["estimate"]
    assert estimate["method"] == "liveness of the model's own traced train_step"
    assert estimate["parameters"] == (4 * 16 + 16) + (16 + 1)
    assert estimate["optimizer"] == "Adam x2"
    assert fit["batch"] == 64 and fit["batch_from"] == "the script's"
    assert not (here / "after-fit.txt").exists()


def test_a_loops_first_round_ends_where_each_compiled_model_has_trained() -> None:
    """`_Round`: a loop's round ends (planned before the call) where each compiled model
    has made its first call; where one never trains (a generator compiled for nothing),
    at a model's call after another's; else at its LOOP_CALLS-th call."""
    import weakref

    from tfaccel.plan.hook import LOOP_CALLS, _Round

    class M:  # a model's stand-in: only its identity counts
        pass

    d, g, p = M(), M(), M()

    def calls(compiled: list[Any], order: list[Any]) -> list[tuple[bool, bool]]:
        round_ = _Round()
        round_.compiled = [weakref.ref(m) for m in compiled]
        return [round_.call(m) for m in order]

    assert calls([d, g], [d, d, g]) == [(True, False), (False, False), (True, True)]
    assert calls([d, g, p], [d, g, d]) == [(True, False), (True, False), (False, True)]
    many = calls([d, g], [d] * (LOOP_CALLS + 1))
    assert many[-2] == (False, False) and many[-1] == (False, True)
    assert calls([d], [d]) == [(True, True)]  # one model: planned at its first call


# The classic GAN of older tutorials: a discriminator frozen inside a combined model, a
# loop that trains each with train_on_batch (the discriminator compiled after the
# combined model, which Keras 3.6 needs: `tests/script/test_loop.py`).
CLASSIC_GAN = """
import numpy as np
import keras

gen = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32), keras.layers.Dense(2)])
disc = keras.Sequential([keras.Input((2,)), keras.layers.Dense(16), keras.layers.Dense(1)])
disc.trainable = False
z = keras.Input((8,))
gan = keras.Model(z, disc(gen(z)))
gan.compile("sgd", "mse")
disc.trainable = True
disc.compile("adam", "mse")
for step in range(3):
    noise = np.zeros((16, 8), "float32")
    fake = gen.predict(noise, verbose=0)
    disc.trainable = True
    disc.train_on_batch(np.zeros((32, 2), "float32"), np.zeros((32, 1), "float32"))
    disc.trainable = False
    gan.train_on_batch(noise, np.ones((16, 1), "float32"))
open("after-loop.txt", "w").write("ran")
"""


def test_a_classic_gan_loop_is_planned_with_each_model_as_it_trains(here: Path) -> None:
    """The discriminator traced at its own call, trainable there (its gradients), the
    combined model at its call, the discriminator frozen (the generator's gradients);
    every weight once, both optimizers' slots; at the discriminator's 32 rows."""
    (here / "gan.py").write_text(CLASSIC_GAN)
    result = runner.invoke(app, ["plan", "--spec", "H200", "-f", "json", "--", "python", "gan.py"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    estimate = fit["estimate"]
    gen, disc = (8 * 32 + 32) + (32 * 2 + 2), (2 * 16 + 16) + (16 + 1)
    assert estimate["parameters"] == estimate["trainable_parameters"] == gen + disc
    assert estimate["gradients_bytes"] == 4 * max(gen, disc)
    assert estimate["optimizer"] == "Adam + SGD"
    assert fit["batch"] == 32
    assert not (here / "after-loop.txt").exists()


def test_a_loop_that_fails_within_its_first_round_says_its_own_error(here: Path) -> None:
    """A script that fails after its first train_on_batch call, before its other model's:
    its own error is the answer, not a plan of the models it reached."""
    second = "    second.train_on_batch("
    crash = LOOP.replace(second, "    raise ValueError('the data ran out')\n" + second)
    (here / "loop.py").write_text(crash)
    result = runner.invoke(app, ["plan", "--spec", "H200", "--", "python", "loop.py"])
    assert result.exit_code == 2, result.output
    assert "ValueError: the data ran out" in unboxed(result.output)


def test_a_loop_that_ends_within_its_first_round_is_planned_at_its_exit(here: Path) -> None:
    """A script whose one train_on_batch call of the first model is all it makes (the
    second compiled model never trains): planned as it exits, with the model it
    trained."""
    lines = LOOP.replace("range(5)", "range(1)").splitlines(keepends=True)
    once = "".join(line for line in lines if "second.train_on_batch" not in line)
    (here / "loop.py").write_text(once)
    result = runner.invoke(app, ["plan", "--spec", "H200", "-f", "json", "--", "python", "loop.py"])
    assert result.exit_code == 0, result.output
    estimate = json.loads(result.stdout)["fit"]["estimate"]
    assert estimate["parameters"] == 8 * 4 + 4 and estimate["optimizer"] == "SGD"
