"""The trial processes' use of TensorFlow's persistent XLA cache (trial.xla_cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tfaccel.optimize.settings import Settings
from tfaccel.trial import xla_cache

# One process's training, by another path to it each time: `detour` traces other
# functions first and evaluates before it trains (as a race does), so TensorFlow's
# function counter stands elsewhere when Keras traces the train step.
SCRIPT = textwrap.dedent(
    """
    import sys
    import keras, numpy as np, tensorflow as tf
    from tfaccel.trial import xla_cache
    if sys.argv[1] == "steady":
        xla_cache.prepare(())
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, "relu"),
                              keras.layers.Dense(1)])
    model.compile("adam", "mse", jit_compile=True)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = x[:, :1] * x[:, 1:2]
    if sys.argv[2] == "detour":
        for _ in range(3):
            tf.function(lambda t: t + 1)(tf.constant(1.0))
        model.evaluate(x, y, verbose=0)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    """
)


def _train(cache: Path, names: str, path: str, gpu: bool = False) -> set[str]:
    env = {
        **os.environ,
        "TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={cache}",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, names, path],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {p.name for p in cache.glob("*.pb")}


def _steady_and_as_named(tmp_path: Path, gpu: bool) -> None:
    steady = tmp_path / "steady"
    trial = _train(steady, "steady", "straight", gpu)
    race = _train(steady, "steady", "detour", gpu)
    assert len(trial) == 1  # the train step
    assert trial < race and len(race) == 2  # + the test step, nothing else
    if gpu:
        assert all("XLA_GPU_JIT" in name for name in race), race

    as_named = tmp_path / "as-named"
    trial = _train(as_named, "as-named", "straight", gpu)
    race = _train(as_named, "as-named", "detour", gpu)
    assert len(trial) == 1 and len(race) == 3  # the train step compiled twice


@pytest.mark.slow
def test_the_same_train_step_reached_by_another_path_loads_the_first_ones_executable(
    tmp_path: Path,
) -> None:
    """A race's run of a trial's settings trains the trial's program: with the names
    steadied it loads the trial's executable and compiles only its test step; as
    TensorFlow names them, it compiled the train step again."""
    _steady_and_as_named(tmp_path, gpu=False)


@pytest.mark.gpu
def test_on_a_gpu_the_same_train_step_by_another_path_loads_the_first_ones_executable(
    tmp_path: Path,
) -> None:
    _steady_and_as_named(tmp_path, gpu=True)


def test_a_trial_with_xla_options_keeps_its_executables_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keys an executable by its program, not by XLA's flags."""
    flags = f"--tf_xla_auto_jit=2 --tf_xla_persistent_cache_directory={tmp_path}"
    monkeypatch.setenv("TF_XLA_FLAGS", flags)
    xla_cache.own_executable_cache(())
    assert os.environ["TF_XLA_FLAGS"] == flags
    xla_cache.own_executable_cache(("cublaslt",))
    own = tmp_path / "xla-options-cublaslt"
    assert own.is_dir()
    assert os.environ["TF_XLA_FLAGS"] == (
        f"--tf_xla_auto_jit=2 --tf_xla_persistent_cache_directory={own}"
    )


def test_a_keras_without_the_trainer_it_patches_leaves_the_names_as_they_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure to steady the names costs a cache miss, never the trial."""

    def missing() -> None:
        raise ImportError("No module named 'keras.src.backend.tensorflow.trainer'")

    monkeypatch.setenv("TF_XLA_FLAGS", f"--tf_xla_persistent_cache_directory={tmp_path}")
    monkeypatch.setattr(xla_cache, "steady_names", missing)
    xla_cache.prepare(())  # no error


def test_run_leaves_a_tune_folder_it_cannot_use_and_the_users_own_cache_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Either way the settings still apply: only the loading is given up, and said."""
    monkeypatch.setattr(xla_cache, "steady_names", lambda: None)
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=2")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder for XLA options would go")
    why = xla_cache.load(str(blocked), ("cublaslt",))
    assert why is not None and why.startswith("the tune's folder cannot be used")
    assert os.environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2"
    assert xla_cache.load(str(tmp_path), ()) is None
    assert os.environ["TF_XLA_FLAGS"].endswith(f"--tf_xla_persistent_cache_directory={tmp_path}")
    mine = f"--tf_xla_persistent_cache_directory={tmp_path / 'mine'}"
    monkeypatch.setenv("TF_XLA_FLAGS", mine)
    assert "a persistent XLA cache of your own" in (xla_cache.load(str(tmp_path), ()) or "")
    assert os.environ["TF_XLA_FLAGS"] == mine


def test_a_scripts_trial_prepares_the_cache_and_its_run_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script hook's trials share compiled programs as the built-ins' do (with XLA
    options apart); `tfaccel run` leaves the user's flags as they are."""
    import types

    import tfaccel.optimize
    from tfaccel.script import hook
    from tfaccel.trial.protocol import TrialRequest

    seen: list[tuple[str, ...]] = []
    report = types.SimpleNamespace(brief=lambda: [], precision="float32")
    monkeypatch.setattr(tfaccel.optimize, "configure", lambda settings: report)
    monkeypatch.setattr(xla_cache, "prepare", lambda options: seen.append(options))
    monkeypatch.setattr(hook, "_patch", lambda *args: None)
    monkeypatch.setattr(hook, "_keep_policy", lambda *args: None)
    settings = {"precision": "float32", "xla_options": ["cublaslt"]}
    for mode in ("tune", "run"):
        hook._on_keras(TrialRequest(mode, settings))
    assert seen == [("cublaslt",)]


RUN_SCRIPT = """
import numpy as np
import keras
keras.utils.set_random_seed(1)
x = np.random.default_rng(0).normal(size=(2048, 8)).astype("float32")
y = x[:, :1] * x[:, 1:2]
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(1)])
model.compile("adam", "mse")
model.fit(x, y, batch_size=32, epochs=2, verbose=2)
"""


@pytest.mark.slow
def test_run_loads_the_program_the_tunes_trial_compiled(
    script_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings file names the trials' cache: `tfaccel run` trains with the trial's
    executable, loaded (the file neither rewritten nor joined by another), and says so."""
    from typer.testing import CliRunner

    from tfaccel.cli import app
    from tfaccel.optimize.settings import Settings
    from tfaccel.script.command import parse_command
    from tfaccel.script.run import ScriptTrial
    from tfaccel.trial.runner import StepPlan, compile_cache_env, executables_in, run_trial
    from tfaccel.tune.output import SETTINGS_SCHEMA, settings_document

    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    (script_folder / "train.py").write_text(RUN_SCRIPT)
    cache = script_folder / "cache"
    s = Settings(precision="float32", xla="jit", steps_per_execution=1, batch_size=32)
    trial = ScriptTrial(parse_command(["python", "train.py"]))
    r = run_trial(trial, s, StepPlan(2, 2, 4), 300, env_overrides=compile_cache_env(cache))
    assert r.ok, r.error
    compiled = {p: p.stat().st_mtime_ns for p in executables_in(cache).rglob("*.pb")}
    assert len(compiled) == 1
    doc = settings_document(_result_of(s), None, str(cache))
    assert doc["schema"] == SETTINGS_SCHEMA and doc["compiled"]["xla_cache"]
    (script_folder / "tfaccel.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(app, ["run", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert "compiled programs: those the tune compiled are loaded from" in result.output
    after = {p: p.stat().st_mtime_ns for p in executables_in(cache).rglob("*.pb")}
    assert after == compiled


def _result_of(settings: Any) -> Any:
    from tfaccel.trial.runner import TrialResult
    from tfaccel.tune.result import Hardware, TuneResult

    best = TrialResult("k", "k", settings.to_dict(), "ok", samples_per_s=1.0, windows=(1.0,))
    return TuneResult(
        "script: python train.py", Hardware(0, None), best=best, best_settings=settings
    )


def test_run_loads_the_tunes_programs_only_for_this_tensorflow_and_these_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reason not to load them is said; a malformed entry is refused."""
    from tfaccel.errors import ConfigFileError
    from tfaccel.tune import output
    from tfaccel.tune.output import Answer, with_compiled

    monkeypatch.setattr(output, "_gpus", lambda: "NVIDIA H200")
    monkeypatch.setattr("tfaccel._tf.installed_version", lambda: "2.21.0")
    answer = Answer(Settings(precision="float32"))
    folder = str(tmp_path)

    def entry(**changes: str) -> dict[str, Any]:
        return {
            "compiled": {
                "xla_cache": folder,
                "tensorflow": "2.21.0",
                "gpus": "NVIDIA H200",
                **changes,
            }
        }

    loaded = with_compiled(tmp_path / "tfaccel.json", entry(), answer)
    assert loaded.xla_cache == folder and "are loaded from" in loaded.notes[-1]
    cases = {
        "is gone": entry(xla_cache=str(tmp_path / "gone")),
        "TensorFlow 2.20.0's, this is 2.21.0's": entry(tensorflow="2.20.0"),
        "compiled for NVIDIA H100 80GB HBM3: not loaded on NVIDIA H200": entry(
            gpus="NVIDIA H100 80GB HBM3"
        ),
    }
    for why, doc in cases.items():
        refused = with_compiled(tmp_path / "tfaccel.json", doc, answer)
        assert refused.xla_cache is None and why in refused.notes[-1], refused.notes
    assert with_compiled(tmp_path / "f.json", {}, answer) == answer
    with pytest.raises(ConfigFileError, match="compiled entry is malformed"):
        with_compiled(tmp_path / "f.json", {"compiled": {"xla_cache": 3}}, answer)
