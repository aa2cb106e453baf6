"""A script that trains with a step of its own, a tf.function around a GradientTape
(`script.tape`): timed as its loop calls it, said by `run`, an eager one told why not
(real scripts, real TensorFlow on the CPU)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

from tfaccel.optimize.settings import Settings
from tfaccel.script.command import check_script, parse_command
from tfaccel.script.run import ScriptTrial, run_script
from tfaccel.script.tape import EAGER_STEP, EAGER_STEP_RUN, TAPE_FACTS
from tfaccel.trial.runner import StepPlan, run_trial

SMALL = StepPlan(warmup=2, windows=2, window=3)

# TensorFlow's guide's loop: batches of 16 from a dataset, the step a tf.function that
# returns the loss; a helper tf.function called inside it; a learnable teacher.
TAPE = """
import sys
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 8)).astype("float32")
y = (x @ rng.normal(size=(8, 1)) > 0).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(1)])
optimizer = keras.optimizers.Adam(1e-3)
loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

@tf.function
def scaled(v):
    return v * 1.0

@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(scaled(xb), training=True))
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    return loss

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
for step, (xb, yb) in enumerate(ds.take(steps)):
    loss = train_step(xb, yb)
open("after_loop.txt", "w").write("the script went on after its loop")
"""


@pytest.fixture
def here(script_folder: Path) -> Path:
    (script_folder / "tape.py").write_text(TAPE)
    eager = TAPE.replace("@tf.function\ndef train_step", "def train_step")
    (script_folder / "eager.py").write_text(eager)
    return script_folder


def test_a_training_step_of_its_own_is_timed_as_the_loop_calls_it(here: Path) -> None:
    script = parse_command(["python", "tape.py"])
    (note,) = check_script(script).notes
    assert note.startswith("tape.py applies an optimizer's gradients itself (line 25)")
    r = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert r.ok, (r.error, r.traceback)
    # the step, not the helper it calls, at the loop's line
    assert r.extra["measured"] == "train_step (a tf.function of the script's) at tape.py:30"
    assert r.extra["own_batch"] == 16
    assert {key: r.extra[key] for key in TAPE_FACTS} == TAPE_FACTS
    assert r.extra["jit_compile"] is False
    assert len(r.windows) == 2 and all(rate > 0 for rate in r.windows)
    assert len(r.losses) == 2 + 2 * 3 and all(math.isfinite(loss) for loss in r.losses)
    assert not (here / "after_loop.txt").exists()  # the trial ended in the loop


def test_a_step_that_returns_no_loss_is_timed_with_none_to_compare(here: Path) -> None:
    """Its trial is timed; its losses read NaN, so the accuracy guard has nothing to
    hold a 16-bit trial to (`tune.guard.UNREADABLE`)."""
    assert "    return loss\n" in TAPE
    (here / "silent.py").write_text(TAPE.replace("    return loss\n", ""))
    r = run_trial(ScriptTrial(parse_command(["python", "silent.py"])), Settings(), SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.losses and all(math.isnan(loss) for loss in r.losses)


def test_a_loop_shorter_than_a_trial_says_how_many_steps_it_made(here: Path) -> None:
    r = run_trial(ScriptTrial(parse_command(["python", "tape.py", "3"])), Settings(), SMALL)
    assert r.status == "error" and r.error, r
    assert r.error.startswith(
        "the script's loop made 3 calls of its training step, and a trial times 8"
    )


def test_float16_without_loss_scaling_in_a_step_of_its_own_is_refused(here: Path) -> None:
    script = parse_command(["python", "tape.py"])
    r = run_trial(ScriptTrial(script), Settings(precision="mixed_float16", xla="off"), SMALL)
    assert r.status == "error" and r.error
    assert r.error.startswith("ValueError: mixed_float16 needs the loss scaled")
    assert "applies Adam's gradients unscaled" in r.error
    scaled = TAPE.replace(
        "optimizer = keras.optimizers.Adam(1e-3)",
        "optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-3))",
    ).replace(
        "    grads = tape.gradient(loss,",
        "        scaled_loss = optimizer.scale_loss(loss)\n    grads = tape.gradient(scaled_loss,",
    )
    (here / "scaled.py").write_text(scaled)
    ok = parse_command(["python", "scaled.py"])
    r = run_trial(ScriptTrial(ok), Settings(precision="mixed_float16", xla="off"), SMALL)
    assert r.ok, (r.error, r.traceback)


# The step draws its batch from an iterator it is given, as distributed loops do.
FROM_ITERATOR = TAPE.replace(
    "def train_step(xb, yb):\n", "def train_step(it):\n    xb, yb = next(it)\n"
).replace(
    "for step, (xb, yb) in enumerate(ds.take(steps)):\n    loss = train_step(xb, yb)",
    "it = iter(ds)\nfor step in range(steps):\n    loss = train_step(it)",
)


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_a_step_given_an_iterator_counts_its_static_batch_or_says_why_not(
    here: Path, drop_remainder: bool
) -> None:
    script = FROM_ITERATOR.replace(".batch(16)", f".batch(16, drop_remainder={drop_remainder})")
    assert "next(it)" in script and "drop_remainder" in script
    (here / "it.py").write_text(script)
    r = run_trial(ScriptTrial(parse_command(["python", "it.py"])), Settings(), SMALL)
    if drop_remainder:
        assert r.ok and r.extra["own_batch"] == 16, (r.error, r.traceback)
    else:
        assert (
            r.status == "error"
            and r.error
            and r.error.startswith(
                "ValueError: the script's training step train_step is given a OwnedIterator, "
                "whose rows tfaccel cannot count"
            )
        )


@pytest.mark.gpu
def test_a_training_step_of_its_own_trains_in_bfloat16_on_a_gpu(here: Path) -> None:
    """The precision policy reaches a step of the script's own: a bfloat16 trial times
    the model built in it on the GPU, its losses finite."""
    script = parse_command(["python", "tape.py"])
    r = run_trial(ScriptTrial(script), Settings(precision="mixed_bfloat16", xla="off"), SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.device == "GPU" and r.precision == "mixed_bfloat16"
    assert all(math.isfinite(loss) for loss in r.losses)


def test_an_eager_step_is_told_why_it_is_not_timed(here: Path) -> None:
    r = run_trial(ScriptTrial(parse_command(["python", "eager.py"])), Settings(), SMALL)
    assert r.status == "error" and r.error == EAGER_STEP
    assert not r.extra.get("before_fit")  # it failed in its loop, not before it
    # an eager apply of zeros before the loop (the optimizer's slots built, as before a
    # checkpoint is loaded) is set-up, not an eager loop
    zeros = "[tf.zeros_like(w) for w in model.trainable_weights]"
    setup = TAPE.replace(
        "steps = int(",
        f"optimizer.apply_gradients(zip({zeros}, model.trainable_weights))\nsteps = int(",
    )
    (here / "setup.py").write_text(setup)
    r = run_trial(ScriptTrial(parse_command(["python", "setup.py"])), Settings(), SMALL)
    assert r.ok, (r.error, r.traceback)


def test_run_says_once_that_an_eager_step_runs_as_python(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run_script(parse_command(["python", "eager.py", "5"]), Settings()) == 0
    said = [line for line in capfd.readouterr().err.splitlines() if "eagerly" in line]
    assert said == [f"tfaccel: {EAGER_STEP_RUN}"]
    assert (here / "after_loop.txt").exists()


def test_run_says_the_step_once_and_trains_to_its_end(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = parse_command(["python", "tape.py", "5"])
    assert run_script(script, Settings(precision="float32", xla="jit")) == 0
    said = [line for line in capfd.readouterr().err.splitlines() if "train_step" in line]
    assert said == [
        "tfaccel: train_step (a tf.function of the script's) at tape.py:30: trains "
        "Sequential with Adam; the precision reaches it through the dtype policy, set "
        "before the script built its models; its XLA is its own (jit_compile=False); "
        "steps_per_execution and the batches are the script's own"
    ]
    assert (here / "after_loop.txt").exists()


# A GAN's step, as TensorFlow's DCGAN tutorial writes it: two models, two tapes, two
# optimizers in one tf.function, the discriminator's wrapped for loss scaling.
TWO_MODELS = """
import numpy as np
import tensorflow as tf
import keras

gen = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
disc = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
g_opt = keras.optimizers.Adam(1e-3)
d_opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1e-2))
bce = keras.losses.BinaryCrossentropy(from_logits=True)

@tf.function
def train_step(real):
    with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
        fake = gen(tf.random.normal([16, 4]), training=True)
        real_out, fake_out = disc(real, training=True), disc(fake, training=True)
        g_loss = bce(tf.ones_like(fake_out), fake_out)
        d_loss = d_opt.scale_loss(bce(tf.ones_like(real_out), real_out))
    g_weights, d_weights = gen.trainable_weights, disc.trainable_weights
    g_opt.apply_gradients(zip(g_tape.gradient(g_loss, g_weights), g_weights))
    d_opt.apply_gradients(zip(d_tape.gradient(d_loss, d_weights), d_weights))
    return g_loss

for _ in range(3):
    train_step(np.ones((16, 2), "float32"))
"""


def test_run_says_each_model_a_step_trains_and_which_optimizer_scales_no_loss(
    script_folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (script_folder / "gan.py").write_text(TWO_MODELS)
    script = parse_command(["python", "gan.py"])
    assert run_script(script, Settings(precision="mixed_float16", xla="off")) == 0
    (said,) = [line for line in capfd.readouterr().err.splitlines() if "train_step" in line]
    assert said.startswith(
        "tfaccel: train_step (a tf.function of the script's) at gan.py:25: trains "
        "Sequential with Adam and Sequential with LossScaleOptimizer;"
    )
    assert said.endswith(
        "the script's own training step applies Adam's gradients unscaled: small float16 "
        "gradients would underflow to zero (mixed_bfloat16 needs no scaling)"
    )
