"""The trial processes' use of TensorFlow's persistent XLA cache (trial.xla_cache)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
