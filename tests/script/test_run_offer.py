"""`tfaccel run` and the batch offer: the script's own batch size unless the user opts in,
only an offer whose race passed, and then with its learning-rate rule and warm-up
(real scripts, real TensorFlow on the CPU, through the command line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("tensorflow")

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.results import SCHEMAS

runner = CliRunner()

# Records each epoch's steps and the learning rate at the end.
SCRIPT = """
import json
import numpy as np
import keras

x = np.random.rand(2048, 4).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 2).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="binary_crossentropy")
steps = []
class Steps(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        steps.append(self.params["steps"])
model.fit(x, y, batch_size=64, epochs=3, verbose=0, callbacks=[Steps()])
json.dump({"steps": steps, "lr": float(model.optimizer.learning_rate)}, open("seen.json", "w"))
"""


def _settings_file(folder: Path, verdict: str = "passed", answer: bool = True) -> Path:
    """A settings file as tune writes it: the same-training answer at batch 64, and a
    batch offer of 256 with the linear rule (SGD) and a warm-up of 4 steps."""
    doc: dict[str, Any] = {
        "schema": SCHEMAS["settings"],
        "workload": "script: python train.py",
        "settings": {"precision": "float32", "xla": "off", "batch_size": 64},
        "batch_offer": {
            "batch_size": 256,
            "from_batch_size": 64,
            "learning_rate": {
                "rule": "linear",
                "scale": 4.0,
                "warmup_steps": 4,
                "optimizer": "SGD",
                "note": "learning rate x4 (SGD: linear rule), warmed up over 4 steps",
            },
            "verdict": verdict,
            "why": "reaches the validation loss 0.3 of the same-training run 2.10x sooner"
            if verdict == "passed"
            else "more samples per second, but it reaches the validation loss later",
        },
    }
    if answer:
        doc["answer"] = "same_training"
    else:  # an older tune's file: its batch size chosen for samples per second alone
        doc["settings"]["batch_size"] = 1024
        del doc["batch_offer"]
    path = folder / "tfaccel.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def here(script_folder: Path) -> Path:
    (script_folder / "train.py").write_text(SCRIPT)
    return script_folder


def _seen(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "seen.json").read_text()))


def test_run_keeps_the_scripts_batch_size_without_the_opt_in(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _settings_file(here)
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert _seen(here) == {"steps": [32, 32, 32], "lr": pytest.approx(0.01)}
    assert "batch size: the script's own, as it trains (the same training)" in unboxed(
        result.output
    )
    err = capfd.readouterr().err
    assert "model.fit call 1 at train.py:14: batch_size=64 (the script's own)" in err
    assert "measured at batch" not in err  # tuned at the batch it trains at


def test_run_says_a_debugging_switch_the_script_turns_on(here: Path) -> None:
    """Numeric checks left on: run keeps them (the script's own) and says so, with the
    line, before the script starts."""
    source = SCRIPT.replace("import keras\n", "import keras\nimport tensorflow as tf\n")
    (here / "train.py").write_text(source + "tf.debugging.enable_check_numerics()\n")
    _settings_file(here)
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    said = unboxed(result.output)
    assert "train.py calls tf.debugging.enable_check_numerics() (line 17)" in said
    assert "remove it where you no longer debug" in said


def test_the_same_training_keeps_the_batch_the_script_trains_at_now(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """tfaccel.json's batch was the script's for the command tune ran (or misread): the
    same-training answer never re-batches, whatever number the file holds."""
    path = _settings_file(here)
    doc = json.loads(path.read_text())
    doc["settings"]["batch_size"] = 256
    path.write_text(json.dumps(doc))
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert _seen(here)["steps"] == [32, 32, 32]  # 2,048 examples at the script's 64
    assert "tfaccel.json's settings were measured at batch 256, this fit trains at 64" in (
        capfd.readouterr().err
    )


def test_a_file_that_sets_a_knob_tune_withholds_keeps_it_and_says_why(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A tfaccel.json of an older tune whose answer holds cuDNN's persistent RNN
    algorithm (tune no longer tries it): run applies it as the file asks, and says why
    tune no longer chooses it; a file without it says nothing of it."""
    path = _settings_file(here)
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert "no longer tries" not in capfd.readouterr().err + result.output
    doc = json.loads(path.read_text())
    doc["settings"]["rnn_algorithm"] = "persist_dynamic"
    path.write_text(json.dumps(doc))
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    said = unboxed(capfd.readouterr().err + result.output)
    assert "rnn_algorithm=persist_dynamic kept as the file asks, though tune no longer" in said
    assert "validated worse" in said


def test_run_applies_a_passed_offer_with_its_learning_rate_when_asked(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _settings_file(here)
    result = runner.invoke(app, ["run", "--batch-offer", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert _seen(here) == {"steps": [8, 8, 8], "lr": pytest.approx(0.04)}
    assert "batch offer applied: batch 256 (from 64)" in unboxed(result.output)
    err = capfd.readouterr().err
    assert "batch_size=256; steps_per_epoch" not in err  # arrays: no steps to scale
    assert "learning rate x4 (SGD: linear rule), warmed up over 4 steps: 0.01 -> 0.04" in err


def test_the_offer_can_be_asked_for_in_the_file(here: Path) -> None:
    path = _settings_file(here)
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "apply_batch_offer": True}))
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert _seen(here)["steps"] == [8, 8, 8]


def test_an_offer_that_did_not_pass_is_refused_before_the_script_runs(here: Path) -> None:
    _settings_file(here, verdict="failed")
    result = runner.invoke(app, ["run", "--batch-offer", "--", "python", "train.py"])
    assert result.exit_code == 2
    out = unboxed(result.output)
    assert "batch offer did not pass its race" in out and "verdict 'failed'" in out
    assert not (here / "seen.json").exists()


def test_a_file_without_an_offer_says_why_the_tune_offered_none(here: Path) -> None:
    path = _settings_file(here)
    doc = json.loads(path.read_text())
    why = "no larger batch ran faster beyond the noise"
    path.write_text(json.dumps({**doc, "batch_offer": None, "batch_note": why}))
    result = runner.invoke(app, ["run", "--batch-offer", "--", "python", "train.py"])
    assert result.exit_code == 2
    out = unboxed(result.output)
    assert "holds no batch offer to apply" in out and f"batch_offer: null ({why})" in out
    assert not (here / "seen.json").exists()


@pytest.mark.parametrize(
    ("learning_rate", "said"),
    [
        ({"rule": "linear", "scale": "four", "warmup_steps": 4, "note": ""}, "scale 'four'"),
        ({"rule": "cubic", "scale": 4.0, "warmup_steps": -1, "note": ""}, "rule 'cubic'"),
        ({"rule": "linear", "scale": 4.0, "warmup_steps": 4, "note": "", "lr": 1}, "key 'lr'"),
    ],
)
def test_a_malformed_learning_rate_is_refused_before_the_script_runs(
    here: Path, learning_rate: dict[str, Any], said: str
) -> None:
    path = _settings_file(here)
    doc = json.loads(path.read_text())
    doc["batch_offer"]["learning_rate"] = learning_rate
    path.write_text(json.dumps(doc))
    result = runner.invoke(app, ["run", "--batch-offer", "--", "python", "train.py"])
    assert result.exit_code == 2, result.output
    out = unboxed(result.output)
    assert "batch offer is malformed" in out and said in out and "warmup_steps: an" in out
    assert "Traceback" not in out and not (here / "seen.json").exists()


def test_an_older_files_speed_only_batch_is_not_applied(here: Path) -> None:
    _settings_file(here, answer=False)
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert _seen(here)["steps"] == [32, 32, 32]  # the script's own 64, not 1024
    assert "from an older tune, which chose batch 1024" in unboxed(result.output)


def test_an_offer_raced_from_another_batch_is_not_applied_to_this_fit(
    here: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The script run with other options than the tune's (here its fit at 128, the
    offer raced from 64): the offer's batch and learning-rate scale were proven for
    64, so this fit keeps its own, and says so."""
    (here / "train.py").write_text(SCRIPT.replace("batch_size=64", "batch_size=128"))
    _settings_file(here)
    result = runner.invoke(app, ["run", "--batch-offer", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert _seen(here) == {"steps": [16, 16, 16], "lr": pytest.approx(0.01)}
    assert (
        "batch offer not applied to this fit: its race started from batch 64, and this "
        "fit trains at 128"
    ) in capfd.readouterr().err


# Two fits, each recording its epochs' steps and the rate it ended at; between them
# BETWEEN (a fine-tuning script compiles again with a new optimizer at a lower rate).
TWO_FITS = (
    SCRIPT[: SCRIPT.index("steps = []")]  # SCRIPT's data, model and compile
    + """seen = []
class Steps(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        seen.append({"steps": []})
    def on_epoch_end(self, epoch, logs=None):
        seen[-1]["steps"].append(self.params["steps"])
    def on_train_end(self, logs=None):
        seen[-1]["lr"] = float(self.model.optimizer.learning_rate)
model.fit(x, y, batch_size=FIRST, epochs=2, verbose=0, callbacks=[Steps()])
BETWEEN
model.fit(x, y, batch_size=64, epochs=2, verbose=0, callbacks=[Steps()])
json.dump(seen, open("seen.json", "w"))
"""
)
RECOMPILED = 'model.compile(optimizer=keras.optimizers.SGD(0.001), loss="binary_crossentropy")'


def _two_fits(folder: Path, first: int, between: str) -> tuple[Any, str]:
    """TWO_FITS under `tfaccel run --batch-offer` (the offer of `_settings_file`): what
    each fit saw, and run's notes on stderr (`capfd`'s, read by the caller)."""
    (folder / "train.py").write_text(
        TWO_FITS.replace("FIRST", str(first)).replace("BETWEEN", between)
    )
    _settings_file(folder)
    result = runner.invoke(app, ["run", "--batch-offer", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    return json.loads((folder / "seen.json").read_text()), unboxed(result.output)


def test_a_model_compiled_again_keeps_its_own_batch_and_rate(
    script_folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Fine-tuning after a frozen phase: the offer's race trained the first fit's
    optimizer; the second fit's is new (compiled again, at its own rate), which no race
    trained, so that fit keeps its batch 64 and its rate 0.001, and says why."""
    seen, _ = _two_fits(script_folder, 64, RECOMPILED)
    assert seen == [
        {"steps": [8, 8], "lr": pytest.approx(0.04)},
        {"steps": [32, 32], "lr": pytest.approx(0.001)},
    ]
    err = capfd.readouterr().err
    assert (
        "model.fit call 2 at train.py:20: batch offer not applied to this fit: it trains "
        "another optimizer than the fit that took it"
    ) in err


def test_fits_that_train_on_with_one_optimizer_all_take_the_offer(
    script_folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A loop of fits, one optimizer: the rate is scaled once, at the first, and the
    second trains on from it at the offer's batch."""
    seen, _ = _two_fits(script_folder, 64, "")
    assert seen == [
        {"steps": [8, 8], "lr": pytest.approx(0.04)},
        {"steps": [8, 8], "lr": pytest.approx(0.04)},
    ]
    assert "learning rate as the first fit left it" in capfd.readouterr().err


def _run_offer_raced_at(folder: Path, raced_fit: Any) -> Any:
    """`run --batch-offer` of train.py with a settings file whose offer names
    `raced_fit` as the fit it was raced on."""
    path = _settings_file(folder)
    doc = json.loads(path.read_text())
    doc["batch_offer"]["raced_fit"] = raced_fit
    path.write_text(json.dumps(doc))
    return runner.invoke(app, ["run", "--batch-offer", "--", "python", "train.py"])


# TWO_FITS' data, model and callback, its fits made by a helper that compiles and fits,
# called for two phases: two fit calls at one line.
ONE_SITE = (
    TWO_FITS[: TWO_FITS.index("model.fit(x, y, batch_size=FIRST")]
    + """def phase(rate):
    model.compile(optimizer=keras.optimizers.SGD(rate), loss="binary_crossentropy")
    model.fit(x, y, batch_size=64, epochs=2, verbose=0, callbacks=[Steps()])
phase(0.01)
phase(0.001)
json.dump(seen, open("seen.json", "w"))
"""
)


@pytest.mark.parametrize(
    ("script", "raced", "not_applied"),
    [
        (
            TWO_FITS.replace("FIRST", "64").replace("BETWEEN", RECOMPILED),
            "train.py:20",
            "model.fit call 1 at train.py:18: batch offer not applied to this fit: its race "
            "ran the fit at train.py:20",
        ),
        (
            ONE_SITE,
            "train.py:20 (call 2)",
            "model.fit call 1 at train.py:20: batch offer not applied to this fit: its race "
            "ran the fit at train.py:20 (call 2)",
        ),
    ],
    ids=["another line", "a helper's second call"],
)
def test_the_offer_applies_at_the_fit_it_was_raced_on(
    script_folder: Path,
    capfd: pytest.CaptureFixture[str],
    script: str,
    raced: str,
    not_applied: str,
) -> None:
    """A file that names the raced fit (tune --fit 2: the fine-tuning fit, compiled
    again at 0.001), at another line than the first fit's or the same line's second
    call (a helper that compiles and fits, called for two phases): the fit before it,
    at the same batch, keeps its own batch and rate; the raced one takes the offer with
    its new optimizer's rate scaled."""
    (script_folder / "train.py").write_text(script)
    result = _run_offer_raced_at(script_folder, raced)
    assert result.exit_code == 0, result.output
    seen = json.loads((script_folder / "seen.json").read_text())
    assert seen == [
        {"steps": [32, 32], "lr": pytest.approx(0.01)},
        {"steps": [8, 8], "lr": pytest.approx(0.004)},
    ]
    err = capfd.readouterr().err
    assert not_applied in err and "0.001 -> 0.004" in err


def test_a_raced_fit_that_is_not_text_is_refused(here: Path) -> None:
    result = _run_offer_raced_at(here, 20)
    assert result.exit_code == 2, result.output
    out = unboxed(result.output)
    assert "batch offer is malformed" in out and "raced_fit 20" in out
    assert not (here / "seen.json").exists()


def test_the_rate_is_scaled_at_the_first_fit_that_takes_the_offer(
    script_folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A first fit at another batch (a warm-up at 16) does not take the offer, raced
    from 64; the fit at 64 after it takes it with its rate scaled (it used to be left
    "as the first fit left it": unscaled, at four times the batch)."""
    seen, _ = _two_fits(script_folder, 16, "")
    assert seen == [
        {"steps": [128, 128], "lr": pytest.approx(0.01)},
        {"steps": [8, 8], "lr": pytest.approx(0.04)},
    ]
    err = capfd.readouterr().err
    assert "batch offer not applied to this fit: its race started from batch 64" in err
    assert "0.01 -> 0.04" in err


# Seeded, as a user who wants a run repeated seeds it: an LSTM on shuffled arrays with a
# validation split, its losses written at each epoch's end.
SEEDED = """
import json
import numpy as np
import keras

keras.utils.set_random_seed(1)
rng = np.random.default_rng(0)
x = rng.integers(0, 50, (320, 12))
y = (rng.choice([-1.0, 1.0], 50)[x].sum(axis=1) > 0).astype("float32")
inputs = keras.Input((12,), dtype="int32")
h = keras.layers.Bidirectional(keras.layers.LSTM(8))(keras.layers.Embedding(50, 8)(inputs))
model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(h))
model.compile("adam", "binary_crossentropy")
history = model.fit(x, y, batch_size=32, epochs=2, validation_split=0.2, verbose=0)
json.dump(history.history, open("seen.json", "w"))
"""


def _plain_then_run(folder: Path, script: str, settings: dict[str, Any]) -> tuple[Any, Any]:
    """A seeded script's history under plain `python`, then under `tfaccel run` with the
    same-training answer `settings`."""
    import subprocess
    import sys

    (folder / "train.py").write_text(script)
    subprocess.run([sys.executable, "train.py"], check=True, capture_output=True)
    plain = _seen(folder)
    doc = {"schema": SCHEMAS["settings"], "answer": "same_training", "settings": settings}
    (folder / "tfaccel.json").write_text(json.dumps(doc))
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    return plain, _seen(folder)


@pytest.mark.parametrize("spe", [1, 25])
def test_the_same_training_trains_the_very_same_model(script_folder: Path, spe: int) -> None:
    """The same-training answer changes how fast the steps run, not what they compute:
    on the CPU, where TensorFlow's kernels are deterministic, a seeded script's losses
    under `tfaccel run` are plain `python`'s to the last bit (on a GPU, where cuDNN's
    are not, the test below turns on op determinism)."""
    settings = {"precision": "float32", "xla": "off", "steps_per_execution": spe, "batch_size": 32}
    plain, run = _plain_then_run(script_folder, SEEDED, settings)
    assert run == plain and len(plain["val_loss"]) == 2


def test_a_larger_validation_batch_leaves_the_training_as_it_was(
    script_folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`validation_batch_size` changes how the validation is evaluated, not what the
    steps compute: the seeded script's training losses are plain `python`'s to the
    last bit, its validation losses the same up to the order of a mean's sum."""
    settings = {"precision": "float32", "xla": "off", "batch_size": 32}
    plain, run = _plain_then_run(script_folder, SEEDED, {**settings, "validation_batch_size": 64})
    assert run["loss"] == plain["loss"] and len(plain["val_loss"]) == 2
    assert run["val_loss"] == pytest.approx(plain["val_loss"], rel=1e-5)
    err = capfd.readouterr().err
    assert "validation_batch_size=64 (evaluation only: the training is the same)" in err


@pytest.mark.gpu
@pytest.mark.parametrize(("spe", "validation_batch"), [(1, None), (25, None), (25, 64)])
def test_on_a_gpu_the_same_training_trains_the_very_same_model_under_op_determinism(
    script_folder: Path, spe: int, validation_batch: int | None
) -> None:
    """The GPU's counterpart of the tests above, where cuDNN trains the LSTM: with
    TensorFlow's op determinism on (as a user who wants a run repeated turns it on), the
    answer at Keras' own math (TF32, XLA as Keras decides) trains to plain `python`'s
    bits, so that what separates a same-wall pair of `run` and plain is cuDNN's
    nondeterminism and the answer's arithmetic, not `run` itself (an H200, 2026-12-05,
    `steps_per_execution` 1 and 25); with the validation at a larger batch too, as in
    keras-io's LSTM script's answer, its validation losses up to the order of a sum."""
    seeded = SEEDED.replace(
        "keras.utils.set_random_seed(1)",
        "keras.utils.set_random_seed(1)\n"
        "import tensorflow as tf\ntf.config.experimental.enable_op_determinism()",
    )
    settings = {"precision": "tf32", "xla": "auto", "steps_per_execution": spe, "batch_size": 32}
    if validation_batch:
        settings["validation_batch_size"] = validation_batch
    plain, run = _plain_then_run(script_folder, seeded, settings)
    assert run["loss"] == plain["loss"] and len(plain["val_loss"]) == 2
    assert run["val_loss"] == (
        pytest.approx(plain["val_loss"], rel=1e-5) if validation_batch else plain["val_loss"]
    )


PYDATASET_SCRIPT = """
import numpy as np
import keras

class Batches(keras.utils.PyDataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        x = np.random.rand(16, 4).astype("float32")
        return x, x.sum(axis=1, keepdims=True)

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(Batches(), epochs=1, verbose=0)
"""


def test_run_says_what_it_does_to_a_fit_of_a_pydataset(
    script_folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A fit of the script's own PyDataset (or generator) keeps its batches: said, not a
    line that ends in a colon."""
    (script_folder / "train.py").write_text(PYDATASET_SCRIPT)
    _settings_file(script_folder)
    result = runner.invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    err = capfd.readouterr().err
    assert (
        "model.fit call 1 at train.py:14: the batches the script's Batches makes "
        "(the same training)" in err
    ), err
