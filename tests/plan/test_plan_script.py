"""`tfaccel plan -- python train.py`: the memory plan of an unmodified script's model,
traced as its fit call trains it, on the CPU (real scripts, real TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_a_loop_of_train_on_batch_calls_is_planned_from_its_first_model(here: Path) -> None:
    """Without a fit, the model of the first train_on_batch call is planned at that
    call's batch, on its data; nothing after it runs."""
    (here / "loop.py").write_text(LOOP)
    result = runner.invoke(app, ["plan", "--spec", "H200", "-f", "json", "--", "python", "loop.py"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    assert fit["estimate"]["workload"] == (
        "script: python loop.py: its loop's first train_on_batch model"
    )
    assert fit["estimate"]["parameters"] == 8 * 4 + 4 and fit["estimate"]["optimizer"] == "SGD"
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
