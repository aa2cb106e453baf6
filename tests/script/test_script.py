"""Tuning and running unmodified training scripts (real scripts, real TensorFlow on
the CPU, through the command line)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("tensorflow")

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.errors import InputError
from tfaccel.optimize.settings import Settings
from tfaccel.script.command import Script, check_script, parse_command
from tfaccel.script.run import ScriptTrial, run_script
from tfaccel.trial.runner import StepPlan, run_trial

runner = CliRunner()
SMALL = StepPlan(warmup=2, windows=2, window=3)

# In the style of Keras' "simple MNIST convnet" example: numpy arrays, fit's batch_size.
NUMPY_SCRIPT = """
import numpy as np
import keras
from keras import layers

batch_size = 64
x = np.random.rand(512, 12, 12, 1).astype("float32")
y = keras.utils.to_categorical(np.random.randint(0, 10, 512), 10)
model = keras.Sequential([
    keras.Input(shape=(12, 12, 1)),
    layers.Conv2D(4, 3, activation="relu"),
    layers.Flatten(),
    layers.Dropout(0.5),
    layers.Dense(10, activation="softmax"),
])
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x, y, batch_size=batch_size, epochs=1, validation_split=0.1, verbose=0)
open("after_fit.txt", "w").write("the script went on after fit")
"""

# A tf.data pipeline of batches, a callback that writes a file, two fit calls.
DATASET_SCRIPT = """
import numpy as np
import tensorflow as tf
import keras

x = np.random.rand(256, 16).astype("float32")
y = np.random.randint(0, 3, 256)
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).batch(32)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(3)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
saver = keras.callbacks.ModelCheckpoint("users_model.keras")
model.fit(ds, epochs=1, callbacks=[saver], verbose=0)
model.fit(ds, epochs=1, verbose=0)
"""

NO_FIT = """
import keras
print("no training here")
"""

JAX_LINE = """
import os
os.environ["KERAS_BACKEND"] = "jax"
import keras
"""

EXITS_3 = NUMPY_SCRIPT + "\nraise SystemExit(3)\n"


@pytest.fixture
def here(script_folder: Path) -> Path:
    return script_folder


def _write(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(text)
    return folder / name


def test_tune_an_unmodified_script_end_to_end(here: Path) -> None:
    _write(here, "train.py", NUMPY_SCRIPT)
    args = ["tune", "--max-batch", "128", "--warmup", "2", "--windows", "2", "--window", "3"]
    result = runner.invoke(app, [*args, "--format", "json", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"] == "script: python train.py"
    trials = data["trials"]
    assert trials[0]["settings"]["batch_size"] == 64  # the script's own batch size
    assert all(t["status"] == "ok" for t in trials), trials
    assert trials[0]["extra"]["measured"] == "model.fit at train.py:17"
    assert trials[0]["extra"]["dropout_layers"] == 1
    assert trials[0]["extra"]["layer_norm_layers"] == 0  # cuDNN's layer norms: not tried
    assert trials[0]["extra"]["no_xla_layers"] == {}  # XLA can compile it
    assert trials[0]["extra"]["fit_data"] == "arrays"  # no tf.data setting reaches them
    assert not (here / "after_fit.txt").exists()  # what follows fit is not run
    written = json.loads((here / "tfaccel.json").read_text())
    assert written["workload"] == "script: python train.py"
    # the same command again resumes from the journal and replaces its own files
    again = runner.invoke(app, [*args, "--format", "json", "--", "python", "train.py"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["resumed"] == len(trials)


def test_a_dataset_script_is_timed_without_its_callbacks(here: Path) -> None:
    script = parse_command(["python", str(_write(here, "train.py", DATASET_SCRIPT))])
    facts = check_script(script)
    assert "calls fit at lines 12, 13: each trial times the first call made" in facts.notes[0]
    own = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert own.ok and own.extra["own_batch"] == 32, (own.error, own.traceback)
    assert "(--fit N times the N-th)" in facts.notes[0]
    r = run_trial(
        ScriptTrial(script), Settings(precision="float32", xla="off", batch_size=16), SMALL
    )
    assert r.ok, (r.error, r.traceback)
    assert r.extra["measured"] == "model.fit at train.py:12"
    assert r.extra["fit_data"] == "dataset"
    # the script's time to fit, from its start (TensorFlow's import at least: > 0.5 s)
    assert 0.5 < r.extra["setup_s"] < r.wall_s
    assert not (here / "users_model.keras").exists()  # the user's checkpoint untouched


def test_fit_chooses_which_fit_call_is_timed(here: Path) -> None:
    """A fine-tuning script's second fit: the first trains one step, without its
    callbacks; a script that makes fewer fit calls says so and ends the search."""
    from dataclasses import replace

    script = replace(
        parse_command(["python", str(_write(here, "train.py", DATASET_SCRIPT))]), fit=2
    )
    facts = check_script(script)
    assert "each trial times fit call 2 that train.py makes" in facts.notes[0]
    assert script.name.endswith("train.py (fit call 2)")  # its own journal keys
    r = run_trial(
        ScriptTrial(script), Settings(precision="float32", xla="off", batch_size=None), SMALL
    )
    assert r.ok, (r.error, r.traceback)
    assert r.extra["measured"] == "model.fit at train.py:13 (call 2)"
    assert r.extra["own_batch"] == 32
    assert not (here / "users_model.keras").exists()  # the first fit's callback not run
    r = run_trial(
        ScriptTrial(replace(script, fit=3)), Settings(precision="float32", xla="off"), SMALL
    )
    assert r.status == "error" and "ended before its fit call 3 (--fit 3)" in (r.error or "")
    assert r.extra.get("before_fit")


def test_fit_is_refused_for_an_entry_point(here: Path) -> None:
    result = runner.invoke(app, ["tune", "--fit", "2", "tiny"])
    assert result.exit_code == 2
    assert "--fit chooses which of a script's model.fit calls is timed" in result.output


def test_a_scripts_timing_stops_only_on_settled_windows(here: Path) -> None:
    """The user's own script with --min-windows: the plan reaches the hook inside the
    script, and a trial that stopped early did so on windows that had settled."""
    from tfaccel import stats

    script = parse_command(["python", str(_write(here, "train.py", NUMPY_SCRIPT))])
    steps = StepPlan(warmup=2, windows=6, window=3, min_windows=3)
    r = run_trial(
        ScriptTrial(script), Settings(precision="float32", xla="off", batch_size=16), steps
    )
    assert r.ok, (r.error, r.traceback)
    assert 3 <= len(r.windows) <= 6
    assert len(r.windows) == 6 or stats.settled(r.windows)


def test_a_script_imports_the_modules_beside_it_from_any_folder(here: Path) -> None:
    """The way users lay out a project: train.py imports its model from model.py."""
    project = here / "project"
    project.mkdir()
    _write(
        project,
        "model.py",
        "import keras\n\ndef build():\n"
        + textwrap.indent(
            "return keras.Sequential([keras.Input((16,)), keras.layers.Dense(3)])\n", "    "
        ),
    )
    _write(
        project,
        "train.py",
        "from model import build\n"
        + DATASET_SCRIPT.replace(
            "model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(3)])",
            "model = build()",
        ),
    )
    script = parse_command(["python", "project/train.py"])  # run from the folder above
    r = run_trial(
        ScriptTrial(script), Settings(precision="float32", xla="off", batch_size=16), SMALL
    )
    assert r.ok, (r.error, r.traceback)


def test_a_script_that_never_fits_says_so(here: Path) -> None:
    script = parse_command(["python", str(_write(here, "nofit.py", NO_FIT))])
    assert "has no .fit( call of its own" in check_script(script).notes[0]
    r = run_trial(ScriptTrial(script), Settings(batch_size=8), SMALL)
    assert r.status == "error" and r.error and "without calling keras.Model.fit" in r.error
    assert "tfaccel tune MODULE:FUNCTION" in r.error  # what to do instead
    assert r.extra["before_fit"]  # the search stops after the baseline (test_search.py)


# A user's bug before fit: a layer's call needs an argument Keras 3 does not pass.
FAILS_BEFORE_FIT = """
import keras

class Block(keras.layers.Layer):
    def call(self, inputs, training):
        return inputs

inputs = keras.Input((4,))
Block()(inputs)
"""


# The source suggests three sizes (the validation set's 256 first in a walk of its
# syntax tree, an option's default 16); the timed fit trains at the option's value given
# on the command line.
MISLEADING_SOURCE = """
import argparse
import numpy as np
import tensorflow as tf
import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bs", type=int, default=16)
args = parser.parse_args()
x = np.random.rand(256, 16).astype("float32")
y = np.random.randint(0, 3, 256)
val = tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(256)
train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).batch(args.bs).prefetch(2)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(3)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(train, validation_data=val, epochs=1, verbose=0)
"""


def test_a_scripts_own_batch_size_is_read_by_a_trial(here: Path) -> None:
    """The baseline (a trial at batch None) trains at the batches the timed fit gets and
    says which, whatever the source suggests; through the command line, the search
    starts there."""
    _write(here, "train.py", MISLEADING_SOURCE)
    script = parse_command(["python", "train.py", "--bs", "24"])
    r = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert r.ok and r.extra["own_batch"] == 24, (r.error, r.traceback)
    args = ["tune", "--max-batch", "32", "--warmup", "2", "--windows", "2", "--window", "3"]
    result = runner.invoke(app, [*args, "--format", "json", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["baseline"]["settings"]["batch_size"] == 16  # the option's default
    assert doc["keras_defaults"]["settings"]["batch_size"] == 16
    assert "starting at the script's own batch size, 16 (read in the baseline trial)" in (
        unboxed(result.output)
    )


# A process killed inside fit (as the kernel's OOM killer would): no answer, in fit.
DIES_IN_FIT = """
import os, signal
import numpy as np
import keras

class Dies(keras.layers.Layer):
    def call(self, x, training=None):
        if training:
            os.kill(os.getpid(), signal.SIGKILL)
        return x

model = keras.Sequential([keras.Input((4,)), Dies(), keras.layers.Dense(2)])
model.compile(loss="mse")
model.fit(np.zeros((64, 4)), np.zeros((64, 2)), verbose=0)
"""


def test_a_script_failing_before_fit_is_tuned_no_further(here: Path) -> None:
    """One trial, the user's own traceback, and exit 5 (nothing ran)."""
    _write(here, "train.py", FAILS_BEFORE_FIT)
    result = runner.invoke(app, ["tune", "--warmup", "1", "--", "python", "train.py"])
    assert result.exit_code == 5, result.output
    assert "trial float32 xla=off batch=own spe=1 failed:" in result.output  # one trial
    assert "starting at" not in result.output
    assert "the baseline ended before the script's timed fit" in result.output
    assert "missing a required argument: 'training'" in result.output
    assert 'train.py", line 9, in <module>\n    Block()(inputs)' in result.output
    in_fit = NUMPY_SCRIPT.replace("y = keras.utils.to_categorical(", "y = (")  # labels unfit
    script = parse_command(["python", str(_write(here, "in_fit.py", in_fit))])
    r = run_trial(ScriptTrial(script), Settings(batch_size=32), SMALL)
    assert r.status == "error" and "before_fit" not in r.extra
    script = parse_command(["python", str(_write(here, "dies.py", DIES_IN_FIT))])
    r = run_trial(ScriptTrial(script), Settings(batch_size=32), SMALL)  # no answer: killed in fit
    assert r.status == "oom" and "before_fit" not in r.extra, r


def test_another_keras_backend_is_refused(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Said in the script: refused before any trial. Chosen some other way: refused
    inside the script's process when Keras starts (faked here: this machine has no
    other backend's packages)."""
    import keras

    from tfaccel.script import hook
    from tfaccel.trial.protocol import TrialRequest

    _write(here, "jax.py", JAX_LINE)
    result = runner.invoke(app, ["tune", "--", "python", "jax.py"])
    assert result.exit_code == 2 and "selects Keras' jax backend (line 3)" in result.output
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    sent: list[dict[str, object]] = []
    monkeypatch.setattr("tfaccel._child.emit", lambda mark, payload: sent.append(payload))

    def ended() -> None:
        raise SystemExit(0)

    monkeypatch.setattr(hook, "_end", ended)
    with pytest.raises(SystemExit):
        hook._on_keras(TrialRequest("tune", {}))
    assert sent[0]["status"] == "error" and "its 'jax' backend" in str(sent[0]["error"])
    hook._on_keras(TrialRequest("run", {}))  # run: said, and the script goes on
    assert "the script runs without tfaccel's settings" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["bash", "train.sh"], "tfaccel runs Python training scripts"),
        (["python", "missing.py"], "The script missing.py does not exist"),
        (["python", "-c", "print(1)"], "No script to run"),
        (["python", "broken.py"], "broken.py is not valid Python"),
        (["python", "-m", "no_such_trainer.main"], "No module named no_such_trainer"),
    ],
)
def test_a_bad_command_exits_2_before_any_trial(
    here: Path, command: list[str], message: str
) -> None:
    _write(here, "broken.py", "def f(:\n")
    result = runner.invoke(app, ["tune", "--", *command])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (here / "tfaccel-tune.jsonl").exists()


def test_a_module_of_the_current_folder_or_the_environment_is_found_without_import(
    here: Path,
) -> None:
    """`python -m` looks in the current folder first: a package there is found (its
    __init__ not run: it would raise), as is one of the environment."""
    (here / "trainer").mkdir()
    _write(here / "trainer", "__init__.py", "raise RuntimeError('imported')\n")
    _write(here / "trainer", "main.py", NUMPY_SCRIPT)
    script = parse_command(["python", "-m", "trainer.main", "--epochs", "1"])
    assert script.path is None and script.args == ("trainer.main", "--epochs", "1")
    assert parse_command(["python", "-m", "json.tool"]).path is None


def _with_own_site(
    here: Path, monkeypatch: pytest.MonkeyPatch, site: str, script: str = NUMPY_SCRIPT
) -> Script:
    """The environment's own sitecustomize (`site`, in here/site on PYTHONPATH), and
    the command of a script (`script`) that runs with it."""
    own = here / "site"
    own.mkdir()
    _write(own, "sitecustomize.py", site)
    monkeypatch.setenv("PYTHONPATH", str(own))
    return parse_command(["python", str(_write(here, "train.py", script))])


def test_the_environments_own_sitecustomize_still_runs(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _with_own_site(here, monkeypatch, "open('site_ran.txt', 'w').write('yes')\n")
    r = run_trial(
        ScriptTrial(script), Settings(precision="float32", xla="off", batch_size=32), SMALL
    )
    assert r.ok, (r.error, r.traceback)
    assert (here / "site_ran.txt").read_text() == "yes"


def test_a_raising_sitecustomize_of_the_environment_is_shown_and_the_settings_apply(
    here: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    raising = "raise RuntimeError('the site is broken')\n"
    script = _with_own_site(here, monkeypatch, raising, EXITS_3)
    own = here / "site"
    assert run_script(script, Settings(precision="float32", xla="off")) == 3
    err = capfd.readouterr().err
    assert "RuntimeError: the site is broken" in err and "Traceback" in err
    assert f"sitecustomize ({own / 'sitecustomize.py'}) raised the error above" in err
    assert "tfaccel: float32 on the CPU: precision float32, xla off" in err  # applied


def test_run_trains_the_script_with_the_settings_and_keeps_its_exit_code(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = parse_command(["python", str(_write(here, "train.py", EXITS_3))])
    settings = Settings(precision="float32", xla="off", batch_size=128)
    assert run_script(script, settings) == 3
    err = capfd.readouterr().err
    assert "tfaccel: float32 on the CPU: precision float32, xla off" in err  # brief
    assert "model.fit call 1 at train.py:17: batch_size=128" in err
    assert "numpy arrays passed as they are (device_arrays is off)" in err
    assert (here / "after_fit.txt").exists()  # run mode runs the whole script


# A model loaded from a file keeps the dtype policy it was saved with.
LOADS_ITS_MODEL = """
import os
import numpy as np
import keras

if not os.path.exists("pre.keras"):
    keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)]).save("pre.keras")
model = keras.models.load_model("pre.keras")
model.compile("adam", "mse")
model.fit(np.zeros((256, 8)), np.zeros((256, 2)), batch_size=32, verbose=0)
"""


# A subclassed model, built inside fit, whose layers pin float32.
BUILT_IN_FIT = """
import numpy as np
import keras

class Model(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2, dtype="float32")

    def call(self, x):
        return self.dense(x)

model = Model()
model.compile("adam", "mse")
model.fit(np.zeros((256, 8)), np.zeros((256, 2)), batch_size=32, verbose=0)
"""


def test_a_16_bit_policy_that_does_not_reach_the_model_is_said(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A trial labelled mixed_bfloat16 would time float32: it fails, saying why, and
    run says the policy did not reach the model."""
    script = parse_command(["python", str(_write(here, "train.py", LOADS_ITS_MODEL))])
    assert run_script(script, Settings(precision="float32")) == 0  # saves pre.keras
    r = run_trial(ScriptTrial(script), Settings(precision="mixed_bfloat16", xla="off"), SMALL)
    assert r.status == "error" and r.error
    assert "mixed_bfloat16 not applied: every layer of the model computes in float32" in r.error
    assert run_script(script, Settings(precision="mixed_bfloat16")) == 0
    assert "mixed_bfloat16 not applied" in capfd.readouterr().err
    ok = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert ok.ok, ok.error
    lazy = parse_command(["python", str(_write(here, "lazy.py", BUILT_IN_FIT))])
    r = run_trial(ScriptTrial(lazy), Settings(precision="mixed_bfloat16", xla="off"), SMALL)
    assert r.status == "error" and "mixed_bfloat16 not applied" in (r.error or "")


# In the style of Keras' VAE example: its own train_step, and fit(x) without labels.
AUTOENCODER = """
import numpy as np
import tensorflow as tf
import keras

class AutoEncoder(keras.Model):
    def __init__(self):
        super().__init__()
        self.encode = keras.layers.Dense(4, activation="relu")
        self.decode = keras.layers.Dense(16)

    def call(self, x):
        return self.decode(self.encode(x))

    def train_step(self, data):
        with tf.GradientTape() as tape:
            pred = tf.cast(self(data, training=True), data.dtype)
            loss = tf.reduce_mean(tf.square(pred - data))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"loss": loss}

model = AutoEncoder()
model.compile(optimizer="adam")
model.fit(np.random.rand(256, 16).astype("float32"), epochs=1, batch_size=32, verbose=0)
"""


def test_a_script_fitting_inputs_alone_is_tuned_and_run(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = parse_command(["python", str(_write(here, "train.py", AUTOENCODER))])
    r = run_trial(
        ScriptTrial(script), Settings(precision="float32", xla="off", batch_size=64), SMALL
    )
    assert r.ok, (r.error, r.traceback)
    assert r.extra["fit_data"] == "arrays" and r.samples_per_s > 0
    assert run_script(script, Settings(precision="float32", batch_size=64)) == 0
    assert "batch_size=64" in capfd.readouterr().err


def test_an_own_train_step_that_does_not_scale_the_loss_is_not_timed_in_float16(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Under mixed_float16 Keras divides the gradients by the loss scale: a model's own
    train_step that does not scale its loss would learn from gradients 2**15 too small."""
    script = parse_command(["python", str(_write(here, "train.py", AUTOENCODER))])
    r = run_trial(ScriptTrial(script), Settings(precision="mixed_float16", xla="off"), SMALL)
    assert r.status == "error" and r.error
    assert "AutoEncoder.train_step does not scale its loss for mixed_float16" in r.error
    assert run_script(script, Settings(precision="mixed_float16")) == 0
    assert "does not scale its loss" in capfd.readouterr().err
    scaled = AUTOENCODER.replace(
        "tf.square(pred - data))",
        "tf.square(pred - data))\n            loss = self.optimizer.scale_loss(loss)",
    )
    assert "scale_loss" in scaled
    ok = parse_command(["python", str(_write(here, "scaled.py", scaled))])
    r = run_trial(ScriptTrial(ok), Settings(precision="mixed_float16", xla="off"), SMALL)
    assert r.ok, (r.error, r.traceback)


# A script that sets its own mixed precision, as many examples do.
OWN_POLICY = """
import numpy as np
import tensorflow as tf
import keras

tf.keras.mixed_precision.set_global_policy("mixed_float16")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
model.compile("adam", "mse")
model.fit(np.zeros((256, 8)), np.zeros((256, 2)), batch_size=32, verbose=0)
open("dtype.txt", "w").write(model.layers[0].compute_dtype)
"""


def test_the_scripts_own_dtype_policy_does_not_replace_the_trials(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Else every trial would train in the script's policy under its own label."""
    script = parse_command(["python", str(_write(here, "train.py", OWN_POLICY))])
    assert "sets its own dtype policy (line 6)" in " ".join(check_script(script).notes)
    assert run_script(script, Settings(precision="mixed_bfloat16")) == 0
    assert (here / "dtype.txt").read_text() == "bfloat16"
    err = capfd.readouterr().err
    assert "train.py:6: the script's dtype policy 'mixed_float16' left out" in err
    r = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), SMALL)
    assert r.ok and r.precision == "float32", (r.error, r.traceback)


def test_run_command_checks_its_config_first(here: Path) -> None:
    _write(here, "train.py", NUMPY_SCRIPT)
    missing = runner.invoke(app, ["run", "--config", "nope.json", "--", "python", "train.py"])
    assert missing.exit_code == 2 and "nope.json does not exist" in missing.output
    _write(here, "bad.json", '{"precision": "fp7"}')
    bad = runner.invoke(app, ["run", "--config", "bad.json", "--", "python", "train.py"])
    assert bad.exit_code == 2 and "Unknown precision" in bad.output
    assert not (here / "after_fit.txt").exists()


def test_a_scripts_own_arguments_are_kept_apart(here: Path) -> None:
    _write(here, "train.py", NUMPY_SCRIPT)
    script = parse_command(["python", "-u", "./train.py", "--batch-size", "8"])
    assert script.args == ("--batch-size", "8") and script.path == Path("train.py")
    # interpreter options that take a value: the value is not the script
    script = parse_command(["python3", "-W", "ignore", "-X", "dev", "-O", "train.py", "-v"])
    assert script.path == Path("train.py") and script.args == ("-v",)
    assert script.argv[1:] == ("-W", "ignore", "-X", "dev", "-O", "train.py", "-v")


def test_keras_backend_in_the_environment_is_refused(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    script = parse_command(["python", str(_write(here, "train.py", NUMPY_SCRIPT))])
    with pytest.raises(InputError, match="KERAS_BACKEND=jax") as caught:
        check_script(script)
    assert caught.value.hint == "unset KERAS_BACKEND (or export KERAS_BACKEND=tensorflow)"
    assert os.environ["KERAS_BACKEND"] == "jax"
    # keras.json's backend, as Keras reads it where KERAS_BACKEND is not set
    monkeypatch.delenv("KERAS_BACKEND")
    monkeypatch.setenv("KERAS_HOME", str(here))
    (here / "keras.json").write_text('{"backend": "torch", "floatx": "float32"}')
    with pytest.raises(InputError, match=r"keras\.json selects Keras' torch backend") as caught:
        check_script(script)
    assert caught.value.hint == f'set "backend": "tensorflow" in {here / "keras.json"}'
    # an entry point (a built-in too) before any trial, exit 2
    result = runner.invoke(app, ["tune", "tiny"])
    assert result.exit_code == 2 and "selects Keras' torch backend" in result.output


@pytest.mark.parametrize(
    ("source", "legacy", "refused"),
    [
        ("import tf_keras as keras\n", "", "it imports tf_keras (line 1)"),
        ("from tf_keras import layers\n", "", "it imports tf_keras (line 1)"),
        ("import tensorflow as tf\nm = tf.keras.Sequential()\n", "1", "TF_USE_LEGACY_KERAS"),
        ("from tensorflow import keras\n", "true", "TF_USE_LEGACY_KERAS"),
        ("from tensorflow.keras import layers\n", "1", "TF_USE_LEGACY_KERAS"),
        ("import tensorflow as tf\nm = tf.keras.Sequential()\n", "", None),  # Keras 3
        ("import keras\n", "1", None),  # Keras 3 whatever the variable
        ("from tensorflow.python.ops import math_ops\n", "1", None),
    ],
)
def test_a_script_on_keras_2_is_refused(
    here: Path, monkeypatch: pytest.MonkeyPatch, source: str, legacy: str, refused: str | None
) -> None:
    """tf_keras models never call Keras 3's compile and fit, where the settings apply:
    refused before any trial (exit 2), rather than "the script never calls fit"."""
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", legacy)
    script = parse_command(["python", str(_write(here, "train.py", source))])
    if refused is None:
        check_script(script)
        return
    with pytest.raises(InputError, match="trains with Keras 2 \\(tf_keras\\)") as caught:
        check_script(script)
    assert refused in str(caught.value)
    result = runner.invoke(app, ["tune", "--", "python", "train.py"])
    assert result.exit_code == 2 and "Keras 2" in result.output
    assert not (here / "tfaccel-tune.jsonl").exists()


def test_run_rebatches_a_scripts_dataset(here: Path, capfd: pytest.CaptureFixture[str]) -> None:
    script = parse_command(["python", str(_write(here, "train.py", DATASET_SCRIPT))])
    settings = Settings(precision="float32", xla="off", batch_size=64)
    assert run_script(script, settings) == 0
    err = capfd.readouterr().err
    assert "model.fit call 1 at train.py:12: batch 64 (re-batched from 32); tf.data settings" in err
    assert "Keras counts" not in err  # its length told again from the .batch(32)
    assert "model.fit call 2 at train.py:13" in err  # run mode runs every fit
    # where the pipeline cannot tell its count (a take after the batch), it is said
    _write(here, "train.py", DATASET_SCRIPT.replace(".batch(32)", ".batch(32).take(6)"))
    assert run_script(script, settings) == 0
    assert (
        "Keras counts the re-batched dataset's steps in its first epoch" in capfd.readouterr().err
    )


# keras-io's addition RNN: a fit of one epoch in a loop, and another fit between.
LOOP_SCRIPT = """
import numpy as np
import keras

x = np.random.rand(64, 4).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
for _ in range(4):
    model.fit(x, x[:, :1], batch_size=16, epochs=1, verbose=0)
    model.fit(x, x[:, :1], batch_size=8, epochs=1, verbose=0)
"""


def test_run_says_a_fit_in_a_loop_once_then_as_its_first_call(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = parse_command(["python", str(_write(here, "train.py", LOOP_SCRIPT))])
    assert run_script(script, Settings(precision="float32", xla="off")) == 0
    said = [line for line in capfd.readouterr().err.splitlines() if "model.fit call" in line]
    assert said[0].startswith("tfaccel: model.fit call 1 at train.py:9: batch_size=16 (the")
    assert said[1].startswith("tfaccel: model.fit call 2 at train.py:10: batch_size=8 (the")
    assert said[2:] == [
        "tfaccel: model.fit call 3 at train.py:9: as call 1 (its like not said again)",
        "tfaccel: model.fit call 4 at train.py:10: as call 2 (its like not said again)",
    ]


# An epoch of steps_per_epoch batches: a repeated dataset, a finite one, numpy arrays.
STEPS_SCRIPT = """
import json
import numpy as np
import tensorflow as tf
import keras

x = np.random.rand(256, 4).astype("float32")
y = np.random.rand(256, 1).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
seen = []
class Count(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        seen.append(0)
    def on_train_batch_end(self, batch, logs=None):
        seen[-1] += 1
repeated = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
model.fit(repeated, epochs=1, steps_per_epoch=8, callbacks=[Count()], verbose=0)
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(64), callbacks=[Count()], verbose=0)
model.fit(x, y, batch_size=16, steps_per_epoch=8, callbacks=[Count()], verbose=0)
json.dump(seen, open("steps.json", "w"))
"""


def test_run_keeps_the_examples_of_an_epoch(here: Path, capfd: pytest.CaptureFixture[str]) -> None:
    script = parse_command(["python", str(_write(here, "train.py", STEPS_SCRIPT))])
    assert run_script(script, Settings(precision="float32", xla="off", batch_size=64)) == 0
    err = capfd.readouterr().err
    assert "batch 64 (re-batched from 16); steps_per_epoch 8 -> 2" in err
    assert "batch 64 (the data's own); tf.data settings applied" in err
    assert "batch_size=64; steps_per_epoch 8 -> 2" in err
    assert "Keras counts" not in err  # the data's own batches keep its length
    assert json.loads((here / "steps.json").read_text()) == [2, 4, 2]


@pytest.mark.gpu
def test_run_keeps_a_scripts_arrays_in_gpu_memory(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """device_arrays on the GPU: run says the arrays were kept there, the script's fit
    (with its validation_split) trains and the script goes on."""
    script = parse_command(["python", str(_write(here, "train.py", NUMPY_SCRIPT))])
    settings = Settings(precision="float32", xla="off", device_arrays=True)
    assert run_script(script, settings) == 0
    err = capfd.readouterr().err
    assert "kept in GPU memory, each batch gathered there" in err
    assert (here / "after_fit.txt").exists()


@pytest.mark.gpu
def test_a_trial_times_a_scripts_arrays_kept_in_gpu_memory(here: Path) -> None:
    script = parse_command(["python", str(_write(here, "train.py", NUMPY_SCRIPT))])
    kept = Settings(precision="float32", xla="jit", device_arrays=True)
    r = run_trial(ScriptTrial(script), kept, SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.extra["fit_data"] == "arrays" and r.extra["device_arrays_blocker"] is None
    assert r.samples_per_s and r.samples_per_s > 0


def test_a_note_in_the_scripts_stderr_wraps_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fresh-clone walk at 80 columns: 'tfaccel: model.fit call 1 at train.py:11:
    batch_size=64; numpy arrays passed as they are ...' ran to 111 columns. On a
    terminal a note wraps at its width, words whole; into a log it stays one line."""
    import io

    from tfaccel.script.hook import say

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    text = (
        "model.fit call 1 at train.py:11: batch_size=64; numpy arrays passed as they are "
        "(device_arrays is off)"
    )
    monkeypatch.setenv("COLUMNS", "80")
    tty, log = Tty(), io.StringIO()
    monkeypatch.setattr("sys.stderr", tty)
    say(text)
    wrapped = tty.getvalue().splitlines()
    assert len(wrapped) == 2 and all(len(x) <= 80 for x in wrapped)
    assert (
        wrapped[1].startswith("  ") and " ".join(x.strip() for x in wrapped) == f"tfaccel: {text}"
    )
    monkeypatch.setattr("sys.stderr", log)
    say(text)
    assert log.getvalue().splitlines() == [f"tfaccel: {text}"]


OWN_COMPILE = """
import numpy as np
import keras

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
model.compile("adam", "mse", jit_compile=True, steps_per_execution=8)
model.fit(np.zeros((64, 8)), np.zeros((64, 2)), batch_size=32, verbose=0)
open("spe.txt", "w").write(str(model.steps_per_execution))
"""


def test_the_scripts_own_compile_choices_are_said_where_replaced(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Before the trials (no figure is the script's own compile), and in run."""
    script = parse_command(["python", str(_write(here, "train.py", OWN_COMPILE))])
    notes = " ".join(check_script(script).notes)
    assert "train.py compiles with jit_compile=True, steps_per_execution=8 (line 6)" in notes
    assert run_script(script, Settings(xla="off", steps_per_execution=25)) == 0
    from tfaccel import _compat

    spe = 25 if _compat.keras_needs("", *_compat.KERAS_SPE) is None else 1  # Keras 3.6: 1
    assert (here / "spe.txt").read_text() == str(spe)
    err = capfd.readouterr().err
    assert (
        "train.py:6: the script's compile(jit_compile=True, steps_per_execution=8) replaced "
        f"by the settings' jit_compile=False, steps_per_execution={spe}"
    ) in err


OWN_CHOICES = """
import os
import numpy as np
import keras

keras.mixed_precision.set_global_policy("mixed_float16")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
model.compile("adam", "mse", jit_compile=True, steps_per_execution=SPE)
seen = f"{model.jit_compile} {model.steps_per_execution} {model.layers[0].compute_dtype}"
open(os.environ["SEEN"], "a").write(seen + "\\n")
model.fit(np.random.rand(8192, 8), np.random.rand(8192, 2), batch_size=32, verbose=0)
"""


def test_the_script_as_written_keeps_its_own_compile_and_policy(here: Path) -> None:
    """tune's "as written" reference (`as_written` in the request): the script's own
    jit_compile, steps_per_execution and dtype policy stay; every other trial replaces
    them. (Keras 3.6 cannot time a longer execution: it trains other batches; said.)"""
    from tfaccel import _compat

    spe = 8 if _compat.keras_needs("", *_compat.KERAS_SPE) is None else 1
    source = OWN_CHOICES.replace("SPE", str(spe))
    script = parse_command(["python", str(_write(here, "train.py", source))])
    own = f"jit_compile=True, steps_per_execution={spe}"
    assert check_script(script).own == (own, "its dtype policy")
    seen = here / "seen.txt"
    env = {"SEEN": str(seen)}
    plain = Settings(precision="float32", xla="off")
    written = run_trial(
        ScriptTrial(script), plain, SMALL, extra={"as_written": True}, env_overrides=env
    )
    assert written.ok, (written.error, written.traceback)
    replaced = run_trial(ScriptTrial(script), plain, SMALL, env_overrides=env)
    assert replaced.ok, (replaced.error, replaced.traceback)
    assert seen.read_text().split("\n")[:2] == [f"True {spe} float16", "False 1 float32"]
    assert written.key != replaced.key  # the journal keeps both
    if spe == 1:  # on Keras 3.6 the script's own 8 is refused with why
        _write(here, "train.py", OWN_CHOICES.replace("SPE", "8"))
        r = run_trial(
            ScriptTrial(script), plain, SMALL, extra={"as_written": True}, env_overrides=env
        )
        assert r.status == "error" and "steps_per_execution=8 needs Keras >= 3.7" in (r.error or "")


# An epoch of 1,536 steps: a race of 1 s evaluates many times inside one epoch.
CLASS_WEIGHTED = """
import numpy as np
import keras

rng = np.random.default_rng(2)
x = rng.normal(size=(65536, 8)).astype("float32")
y = (x @ rng.normal(size=(8,)) > 0).astype("int32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1, activation="sigmoid")])
model.compile("sgd", "binary_crossentropy")
model.fit(x, y, batch_size=32, epochs=1, validation_split=0.25, class_weight=WEIGHTS)
"""


@pytest.mark.parametrize("race", [False, True])
def test_a_trial_and_a_race_train_with_the_scripts_class_weight(here: Path, race: bool) -> None:
    """Both classes weighted 0: every loss the trial reads (the race's training loss)
    is 0, as the script's own fit would log; weighted 1, it is not. The race evaluates
    many times inside its one epoch: each evaluation's validation loss was averaged
    into the training losses logged after it (0.44 here) until the metrics were kept
    across it."""
    extra = {"race": {"seconds": 1.0, "lr": None}} if race else None
    for weights, zero in (("{0: 0.0, 1: 0.0}", True), ("{0: 1.0, 1: 1.0}", False)):
        _write(here, "train.py", CLASS_WEIGHTED.replace("WEIGHTS", weights))
        script = ScriptTrial(parse_command(["python", "train.py"]))
        s = Settings(precision="float32", xla="off", batch_size=32)
        r = run_trial(script, s, SMALL, extra=extra)
        assert r.ok, (r.error, r.traceback)
        losses = [p[2] for p in r.extra["race"] if p[2] is not None] if race else r.losses
        assert losses and all((loss == 0.0) == zero for loss in losses), (weights, losses)


# keras-io's image classifiers augment inside the model: Keras runs a model holding
# RandomRotation (or, on a GPU, an LSTM on cuDNN) without XLA.
AUGMENTED_SCRIPT = """
import numpy as np
import keras

x = np.random.rand(96, 8, 8, 1).astype("float32")
y = (x[:, :4].mean(axis=(1, 2, 3)) > x[:, 4:].mean(axis=(1, 2, 3))).astype("float32")
model = keras.Sequential([
    keras.Input((8, 8, 1)),
    keras.layers.RandomRotation(0.1),
    keras.layers.Conv2D(4, 3, activation="relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile("adam", "binary_crossentropy")
model.fit(x, y, batch_size=16, epochs=1, verbose=0)
"""


def test_a_trial_says_which_layers_keep_keras_from_xla(here: Path) -> None:
    """Keras compiles no model with XLA that holds a layer it marks so: the trial names
    those layers, and a trial asking for XLA reports that it ran without."""
    script = parse_command(["python", str(_write(here, "train.py", AUGMENTED_SCRIPT))])
    r = run_trial(ScriptTrial(script), Settings(precision="float32", xla="jit"), SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.extra["no_xla_layers"] == {"RandomRotation": 1}
    assert r.extra["jit_compile"] is False


LSTM_SCRIPT = """
import numpy as np
import keras

x = np.random.randint(0, 50, (96, 12))
y = (x[:, :6].sum(axis=1) > x[:, 6:].sum(axis=1)).astype("float32")
model = keras.Sequential([
    keras.Input((12,), dtype="int32"),
    keras.layers.Embedding(50, 8),
    keras.layers.LSTM(8),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile("adam", "binary_crossentropy")
model.fit(x, y, batch_size=16, epochs=1, verbose=0)
"""


@pytest.mark.gpu
def test_a_trial_of_an_lstm_on_cudnn_names_it_and_runs_without_xla(here: Path) -> None:
    """On a GPU Keras runs an LSTM on cuDNN and compiles no model holding one with XLA
    (keras-io's bidirectional LSTM on an H100: every trial's jit_compile was false)."""
    script = parse_command(["python", str(_write(here, "train.py", LSTM_SCRIPT))])
    r = run_trial(ScriptTrial(script), Settings(precision="tf32", xla="jit"), SMALL)
    assert r.ok, (r.error, r.traceback)
    assert r.extra["no_xla_layers"] == {"LSTM": 1}
    assert r.extra["jit_compile"] is False


@pytest.mark.gpu
def test_run_of_an_lstm_on_cudnn_says_xla_was_not_applied(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`run` under settings with XLA, on a GPU, of a model holding an LSTM (cuDNN's):
    Keras compiles it without XLA, and `run` says so, naming the layer."""
    script = parse_command(["python", str(_write(here, "train.py", LSTM_SCRIPT))])
    capfd.readouterr()
    assert run_script(script, Settings(precision="tf32", xla="jit")) == 0
    err = " ".join(capfd.readouterr().err.split())
    said = "XLA not applied: Keras compiles no model with XLA that holds these layers: 1 LSTM"
    assert said in err


EAGER = """
import numpy as np
import keras
import tensorflow as tf

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
EAGER_LINE
model.fit(np.random.rand(2048, 8), np.random.rand(2048, 2), batch_size=32, verbose=0)
print("after fit", tf.config.functions_run_eagerly(), model.run_eagerly)
"""


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('model.compile("adam", "mse", run_eagerly=True)', "compile(run_eagerly=True)"),
        (
            'tf.config.run_functions_eagerly(True)\nmodel.compile("adam", "mse")',
            "tf.config.run_functions_eagerly(True)",
        ),
        (  # the deprecated name, which calls the other inside TensorFlow
            'tf.config.experimental_run_functions_eagerly(True)\nmodel.compile("adam", "mse")',
            "tf.config.run_functions_eagerly(True)",
        ),
    ],
)
def test_a_script_that_runs_eagerly_is_timed_so_and_in_graph_mode_on_request(
    here: Path, capfd: pytest.CaptureFixture[str], line: str, said: str
) -> None:
    """A trial says what makes the steps eager (tune then skips XLA and measures graph
    mode beside the baseline); the graph-mode request runs them in a graph, the script's
    own switch left out and said; `run` keeps the script's choice, and says so."""
    script = parse_command(
        ["python", str(_write(here, "train.py", EAGER.replace("EAGER_LINE", line)))]
    )
    plain = Settings(precision="float32", xla="off")
    eager = run_trial(ScriptTrial(script), plain, SMALL)
    assert eager.ok, (eager.error, eager.traceback)
    assert eager.extra["eager"] == said
    graph = run_trial(ScriptTrial(script), plain, SMALL, extra={"graph": True})
    assert graph.ok, (graph.error, graph.traceback)
    assert graph.extra["eager"] is None and graph.key != eager.key
    capfd.readouterr()
    assert run_script(script, plain) == 0
    out, err = capfd.readouterr()
    assert "after fit" in out  # the script went on, its choice kept
    assert f"its steps run eagerly, as the script's {said} says" in err


def test_a_script_under_op_determinism_is_timed_without_xla_and_said(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Keras compiles no model with XLA under TensorFlow's op determinism, whatever
    jit_compile says: a trial says what turned it on (tune then runs no XLA trial, whose
    label would name what did not run), and `run` under settings with XLA says it was
    not applied; the script's determinism is kept. Without it, nothing is said."""
    line = (
        "keras.utils.set_random_seed(1); tf.config.experimental.enable_op_determinism()\n"
        "model.compile('adam', 'mse')"
    )
    script = parse_command(
        ["python", str(_write(here, "train.py", EAGER.replace("EAGER_LINE", line)))]
    )
    xla = Settings(precision="float32", xla="jit")
    trial = run_trial(ScriptTrial(script), xla, SMALL)
    assert trial.ok, (trial.error, trial.traceback)
    from tfaccel import _compat

    refuses = _compat.keras_needs("", "3.7.0", "") is None  # 3.6 compiles it with XLA
    assert trial.extra["jit_compile"] is not refuses  # what Keras did with the trial's True
    turned = "the script's tf.config.experimental.enable_op_determinism()"
    assert trial.extra["determinism"] == (turned if refuses else None)
    capfd.readouterr()
    assert run_script(script, xla) == 0
    err = " ".join(capfd.readouterr().err.split())
    said = f"XLA not applied: TensorFlow's op determinism is on ({turned}), and Keras compiles"
    assert (said in err) is refuses
    plain = parse_command(
        ["python", str(_write(here, "plain.py", EAGER.replace("EAGER_LINE", line.split("\n")[1])))]
    )
    trial = run_trial(ScriptTrial(plain), xla, SMALL)
    assert trial.ok and trial.extra["determinism"] is None, (trial.error, trial.traceback)
    # tune's reference without it: the script's call left out, XLA compiled
    free = run_trial(ScriptTrial(script), xla, SMALL, extra={"nondeterministic": True})
    assert free.ok, (free.error, free.traceback)
    assert free.extra["determinism"] is None and free.extra["jit_compile"] is True


OPAQUE = """
class Opaque(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.supports_jit = False  # as Keras marks its cuDNN LSTM and GRU, lookups

    def call(self, x):
        return x


model = keras.Sequential([keras.Input((8,)), Opaque(), keras.layers.Dense(2)])
model.compile("adam", "mse")"""


def test_run_says_xla_was_not_applied_where_a_layer_keeps_keras_from_it(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Settings with XLA on a model holding a layer Keras compiles no model with XLA
    for (Keras warns and compiles it without): `run` says XLA was not applied and
    which layers kept it off, not only "xla jit" among what it applied; a model
    without one is told nothing of it."""
    script = parse_command(
        ["python", str(_write(here, "train.py", EAGER.replace("EAGER_LINE", OPAQUE)))]
    )
    xla = Settings(precision="float32", xla="jit")
    capfd.readouterr()
    assert run_script(script, xla) == 0
    err = " ".join(capfd.readouterr().err.split())
    assert "XLA not applied: Keras compiles no model with XLA that holds these layers: " in err
    assert "1 Opaque" in err
    plain = EAGER.replace("EAGER_LINE", 'model.compile("adam", "mse")')
    assert run_script(parse_command(["python", str(_write(here, "plain.py", plain))]), xla) == 0
    assert "XLA not applied" not in capfd.readouterr().err


def test_a_scripts_global_switches_are_said_before_the_trials(here: Path) -> None:
    """tf.data's debug mode and numeric checks, left from debugging, slow every step
    of every trial and of `run`; op determinism turns XLA off: tfaccel keeps them (they
    are the user's) and says so, naming the line; a script without them is told
    nothing of them."""
    source = (
        "import tensorflow as tf\nimport keras\n"
        "tf.data.experimental.enable_debug_mode()\n"
        "tf.debugging.enable_check_numerics()\n"
        "tf.config.experimental.enable_op_determinism()\nmodel.fit(x, y)\n"
    )
    script = parse_command(["python", str(_write(here, "train.py", source))])
    notes = check_script(script).notes
    assert (
        "train.py calls tf.data.experimental.enable_debug_mode() (line 3): tf.data then runs "
        "its functions eagerly, one element at a time, in every trial and under tfaccel run; "
        "a debugging setting that slows each step: remove it where you no longer debug"
    ) in notes
    assert any(
        n.startswith("train.py calls tf.debugging.enable_check_numerics() (line 4)") for n in notes
    )
    assert (
        "train.py calls tf.config.experimental.enable_op_determinism() (line 5): ops then "
        "run deterministically (on a GPU, cuDNN's deterministic algorithms, often slower) "
        "and Keras compiles no model with XLA, in every trial and under tfaccel run; kept "
        "for the reproducibility it gives"
    ) in " ".join(notes)
    switches = check_script(script).switches
    assert switches == tuple(n for n in notes if n.startswith("train.py calls tf."))
    assert len(switches) == 3
    _write(here, "train.py", "import keras\nmodel.fit(x, y)\n")
    assert not check_script(script).switches
