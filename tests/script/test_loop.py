"""A script that trains with a loop of its own train_on_batch calls (`script.loop`):
timed as its loop makes them, said by `run` (real scripts, real TensorFlow on the CPU)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from tfaccel import _compat
from tfaccel.optimize.settings import Settings
from tfaccel.script.command import check_script, parse_command
from tfaccel.script.loop import LOOP_FACTS, LoopModel, loss_of
from tfaccel.script.run import ScriptTrial, run_script
from tfaccel.trial.runner import StepPlan, run_trial

SMALL = StepPlan(warmup=2, windows=2, window=3)

# The style of older GAN tutorials: a discriminator trained on real and generated rows
# (2 x 16 a call), then the generator through the combined model, `predict` between.
GAN_LOOP = """
import sys
import numpy as np
import keras

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
rng = np.random.default_rng(0)
real = rng.normal(loc=(2.0, -1.0), size=(512, 2)).astype("float32")
gen = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                        keras.layers.Dense(2)])
disc = keras.Sequential([keras.Input((2,)), keras.layers.Dense(8, activation="relu"),
                         keras.layers.Dense(1, activation="sigmoid")])
disc.trainable = False
z = keras.Input((4,))
gan = keras.Model(z, disc(gen(z)))
gan.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
disc.trainable = True  # compiled after the combined model: Keras 3.6 loses its loss tracker else
disc.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy", metrics=["accuracy"])
for step in range(steps):
    noise = rng.normal(size=(16, 4)).astype("float32")
    fake = gen.predict(noise, verbose=0)
    disc.trainable = True
    disc.train_on_batch(np.concatenate([real[:16], fake]),
                        np.concatenate([np.ones((16, 1)), np.zeros((16, 1))]))
    disc.trainable = False
    gan.train_on_batch(noise, np.ones((16, 1)))
open("after_loop.txt", "w").write("the script went on after its loop")
"""


@pytest.fixture
def here(script_folder: Path) -> Path:
    (script_folder / "gan.py").write_text(GAN_LOOP)
    return script_folder


def test_a_train_on_batch_loop_is_timed_as_the_script_makes_it(here: Path) -> None:
    script = parse_command(["python", "gan.py"])
    (note,) = check_script(script).notes
    assert note.startswith("gan.py trains with train_on_batch (line 23) and has no .fit( call")
    r = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.extra["measured"] == "model.train_on_batch at gan.py:23"  # the first model's
    assert r.extra["own_batch"] == 32  # its rows: real and generated
    assert {key: r.extra[key] for key in LOOP_FACTS} == LOOP_FACTS
    assert len(r.windows) == 2 and all(rate > 0 for rate in r.windows)
    assert len(r.losses) == 2 + 2 * 3 and all(math.isfinite(loss) for loss in r.losses)
    assert not (here / "after_loop.txt").exists()  # the trial ended in the loop


def test_a_loop_shorter_than_a_trial_says_how_many_calls_it_made(here: Path) -> None:
    script = parse_command(["python", "gan.py", "3"])
    r = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert r.status == "error" and r.error, r
    assert r.error.startswith(
        "the script's loop made 3 train_on_batch calls of the model it trains, and a trial "
        "times 8 (--warmup, then --windows of --window steps)"
    )
    assert not r.extra.get("before_fit")  # it ended in its loop, not before it


# A warm-up call of one model (8 rows) before a loop that trains another (16 rows a
# call), its first model never called again.
WARM_UP_LOOP = """
import sys
import numpy as np
import keras

warm = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
main = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
warm.compile("sgd", "mse")
main.compile("sgd", "mse")
warm.train_on_batch(np.zeros((8, 4), "float32"), np.zeros((8, 2), "float32"))
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
    main.train_on_batch(np.ones((16, 4), "float32"), np.ones((16, 2), "float32"))
"""


def test_the_model_a_loop_trains_is_timed_not_a_warm_up_call_before_it(
    script_folder: Path,
) -> None:
    (script_folder / "warm.py").write_text(WARM_UP_LOOP)
    script = parse_command(["python", "warm.py"])
    r = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.extra["measured"] == "model.train_on_batch at warm.py:12"  # the loop's
    assert r.extra["own_batch"] == 16


def test_the_timed_model_is_the_first_unless_another_calls_twice_as_often() -> None:
    def turns(calls: str) -> str:
        choice = LoopModel()
        return " ".join(choice.turn(name) for name in calls)

    # a GAN's two models, one call each a step: the first stays timed
    assert turns("dgdgdg") == "first other timed other timed other"
    # a warm-up call, then the loop's model: timed from its third call
    assert turns("wmmmm") == "first other other switched timed"
    # a generator's step after five of its critic's: the critic from its third call
    assert turns("gcccccgc") == "first other other switched timed timed other timed"


def test_run_says_the_loop_once_a_model(here: Path, capfd: pytest.CaptureFixture[str]) -> None:
    script = parse_command(["python", "gan.py", "5"])
    settings = Settings(precision="float32", xla="off", steps_per_execution=25)
    assert run_script(script, settings) == 0
    said = [line for line in capfd.readouterr().err.splitlines() if "train_on_batch" in line]
    # (Keras 3.6 is given no steps_per_execution above 1: `optimize.apply` withholds it)
    withheld = _compat.keras_needs("steps_per_execution", *_compat.KERAS_SPE)
    runs = "" if withheld else " (steps_per_execution 25 runs one step a call there)"
    assert said == [
        f"tfaccel: model.train_on_batch at gan.py:{line} ({kind}): the settings apply "
        f"through its compile{runs}; the batches are the script's own"
        for line, kind in ((23, "Sequential"), (26, "Functional"))
    ]
    assert (here / "after_loop.txt").exists()  # run runs the script to its end


def test_the_loss_is_read_from_each_form_train_on_batch_returns() -> None:
    assert loss_of(0.5) == 0.5
    assert loss_of([0.25, 0.9]) == 0.25  # the loss, then the metrics
    assert loss_of({"accuracy": 0.9, "loss": 0.75}) == 0.75  # return_dict=True
    assert math.isnan(loss_of([]))
    assert math.isnan(loss_of(None))  # a step of the script's own that returns nothing
    assert math.isnan(loss_of(np.ones(3)))  # per-example losses: not one number


@pytest.mark.gpu
def test_a_train_on_batch_loop_trains_in_bfloat16_with_xla_on_a_gpu(here: Path) -> None:
    """The settings reach a loop's calls through compile: a bfloat16 trial with XLA
    times the loop compiled so, its losses finite."""
    script = parse_command(["python", "gan.py"])
    r = run_trial(ScriptTrial(script), Settings(precision="mixed_bfloat16", xla="jit"), SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.device == "GPU" and r.precision == "mixed_bfloat16"
    assert r.extra["jit_compile"] is True
    assert all(math.isfinite(loss) for loss in r.losses)


def test_run_says_what_of_the_settings_a_loops_model_does_not_train_with(
    script_folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """As for a fit: a model whose steps the script runs eagerly trains without XLA,
    whatever the settings say, and `run` says so in the loop's line."""
    (script_folder / "eager.py").write_text(
        "import numpy as np, keras\n"
        "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        'model.compile("sgd", "mse", run_eagerly=True)\n'
        "for _ in range(3):\n"
        '    model.train_on_batch(np.zeros((8, 4), "float32"), np.zeros((8, 1), "float32"))\n'
    )
    script = parse_command(["python", "eager.py"])
    assert run_script(script, Settings(precision="float32", xla="jit")) == 0
    (said,) = [line for line in capfd.readouterr().err.splitlines() if "train_on_batch" in line]
    assert said.startswith(
        "tfaccel: model.train_on_batch at eager.py:5 (Sequential): the settings apply "
        "through its compile; the batches are the script's own; its steps run eagerly"
    )
