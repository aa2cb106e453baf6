"""trial.runner: one trial in a fresh process, of a built-in workload or an entry
point, on the CPU with TensorFlow for real: what it measures, how it fails, how it ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import BROKEN, needs_keras_for, user_module
from tfaccel import _compat

pytest.importorskip("tensorflow")

from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, run_trial

SMALL = StepPlan(warmup=2, windows=2, window=3)


def test_a_real_trial_reports_throughput_compile_and_losses() -> None:
    r = run_trial("tiny", Settings(precision="float32", xla="off", batch_size=16), SMALL, 180)
    assert r.status == "ok", (r.error, r.traceback)
    assert r.samples_per_s and r.samples_per_s > 0
    assert len(r.windows) == 2 and r.compile_s is not None
    assert r.losses and all(x == x for x in r.losses)  # finite, not NaN
    assert r.extra["float_inputs"] is True  # images: input_cast may apply
    # the time to fit (TensorFlow's import, the build) is reported apart, within the wall
    assert 0 < r.extra["setup_s"] < r.wall_s - (r.compile_s or 0)
    assert r.device == "CPU"


@needs_keras_for("gradient_checkpointing", True)
@pytest.mark.parametrize("extra", [None, {"logical_cpus": 2}], ids=["fit", "tfaccel step"])
def test_checkpointing_trains_the_same_under_bf16_and_xla(extra: dict[str, int] | None) -> None:
    """Keras' fit and tfaccel's data-parallel step, each with and without checkpointing:
    the same losses (it once failed under a mixed policy, and dropped other units)."""
    base = Settings(precision="mixed_bfloat16", xla="jit", batch_size=8)
    if extra:
        base = base.replace(strategy="mirrored")
    plain, remat = (
        run_trial("tiny", base.replace(gradient_checkpointing=g), SMALL, 180, extra=extra)
        for g in (False, True)
    )
    assert plain.status == remat.status == "ok", (remat.error, remat.traceback)
    assert remat.losses == pytest.approx(plain.losses, rel=1e-3)


ENCODER = """
import keras
def encoder():
    x = keras.Input((16, 64))
    h = keras.layers.MultiHeadAttention(8, 8, dropout=0.1)(x, x)
    h = keras.layers.Dropout(0.1)(keras.layers.Dense(128, activation="gelu")(h))
    h = keras.layers.GlobalAveragePooling1D()(keras.layers.Dense(64)(h))
    return keras.Model(x, keras.layers.Dense(4)(h))
"""


@needs_keras_for("float8", True)
@needs_keras_for("attention", "cudnn")
def test_trials_report_dropout_and_attention_layers_and_train_with_each_knob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model with dropout (two layers, and the attention's own) and matrix products,
    trained under XLA with Keras' masks, philox16's, float8 products, and
    attention="cudnn" (Keras' own without a GPU): every trial trains (finite losses);
    the trials count the dropout and attention layers, the layers in float8 (the
    attention's four projections and two Dense layers, not the 4-class head) and the
    attention calls traced through cuDNN."""
    user_module(tmp_path, monkeypatch, "enc", ENCODER)
    base = Settings(precision="mixed_bfloat16", xla="jit", batch_size=8)
    runs = {
        name: run_trial("enc:encoder", s, SMALL, 180)
        for name, s in (
            ("keras", base),
            ("philox16", base.replace(dropout="philox16")),
            ("float8", base.replace(float8=True)),
            ("attention", base.replace(attention="cudnn")),
        )
    }
    for name, r in runs.items():
        assert r.status == "ok", (name, r.error, r.traceback)
        assert r.losses and all(x == x for x in r.losses), name
        assert r.extra["dropout_layers"] == 2
        assert r.extra["attention_layers"] == 1
        assert r.extra["attention_dropout_layers"] == 1
    assert runs["philox16"].label.endswith("dropout=philox16")
    assert runs["float8"].extra["float8_layers"] == 6
    assert "float8_layers" not in runs["keras"].extra
    # No GPU: configure keeps Keras' attention, and the trial says none went to cuDNN.
    assert runs["attention"].extra["cudnn_attention_calls"] == 0
    assert "cudnn_attention_calls" not in runs["keras"].extra


@pytest.mark.skipif(
    _compat.keras_needs("timing", *_compat.KERAS_TUNE_SPE) is not None,
    reason="steps_per_execution > 1 is timed from Keras 3.11 (tfaccel._compat)",
)
def test_a_slow_trial_times_shorter_windows() -> None:
    """Windows of 40 steps bounded to a few milliseconds: the trial shrinks them to
    whole executions after the warm-up, and stops early."""
    s = Settings(precision="float32", xla="off", batch_size=16, steps_per_execution=2)
    r = run_trial("tiny", s, StepPlan(warmup=6, windows=2, window=40, window_s=1e-3), 180)
    assert r.status == "ok", (r.error, r.traceback)
    assert r.extra["window"] == 2  # one execution of 2 steps per window
    assert len(r.windows) == 2


SLOW_TEARDOWN = """
import atexit, pathlib, time
import keras

def _teardown():  # as a dataset's finalizers or a GPU context can be, at exit
    time.sleep(30)
    pathlib.Path("teardown-ran").write_text("yes")

atexit.register(_teardown)

def build():
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
"""


def test_a_trial_ends_once_its_result_is_out_without_the_teardown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_module(tmp_path, monkeypatch, "slow_exit", SLOW_TEARDOWN)
    r = run_trial(
        "slow_exit:build", Settings(precision="float32", xla="off", batch_size=4), SMALL, 180
    )
    assert r.status == "ok", (r.error, r.traceback)
    assert r.wall_s < 30  # the 30-s teardown did not run: the process ended at its result
    assert not (tmp_path / "teardown-ran").exists()


def test_a_failing_trial_shows_its_own_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_module(tmp_path, monkeypatch, "broken_models", BROKEN)
    r = run_trial("broken_models:crashes_in_fit", Settings(batch_size=4), SMALL, 180)
    assert r.status == "error"
    assert r.error and "the loss broke at run time" in r.error
    assert r.traceback and "Traceback" in r.traceback


BUILD_FAILS = """
def build():
    return helper()

def helper():
    raise ValueError("\\x1b[1mmy layer is broken\\x1b[0m")
"""


def test_a_model_that_fails_to_build_shows_the_users_frames_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from tfaccel._child import user_traceback as trial_traceback
    from tfaccel.render.tune import tune_text
    from tfaccel.trial.runner import TrialResult
    from tfaccel.tune.result import Hardware, TuneResult
    from tfaccel.workloads import load_workload

    user_module(tmp_path, monkeypatch, "fails_to_build", BUILD_FAILS)
    try:
        load_workload("fails_to_build:build")
    except Exception as exc:  # the InputError that wraps the user's ValueError
        text = trial_traceback(exc)
    assert 'fails_to_build.py", line 6, in helper' in text
    assert "ValueError: my layer is broken" in text and "\x1b" not in text
    assert "raise InputError" not in text  # the wrapping frames are left out
    assert text.rstrip().splitlines()[-1].startswith("InputError: The entry point")
    from tfaccel.errors import InputError

    own = trial_traceback(InputError("A model with 2 outputs", expected="a dataset"))
    assert own == "InputError: A model with 2 outputs. Expected a dataset.\n"
    trials = [
        TrialResult(k, k, {}, "error", error="InputError", traceback=text) for k in ("a", "b")
    ]
    console = Console(record=True, width=200)
    tune_text(TuneResult("fails_to_build:build", Hardware(0, None), trials=trials), console)
    out = console.export_text()
    assert out.count("in helper") == 1 and "2 trials (a; b) failed:" in out
    assert "on the CPU: no GPU visible, tfaccel doctor says why" in " ".join(out.split())


def test_a_hanging_trial_is_killed_at_its_timeout() -> None:
    r = run_trial("tiny", Settings(batch_size=8), StepPlan(2, 2, 2), timeout_s=0.5)
    assert r.status == "timeout" and "killed after" in (r.error or "")


@pytest.mark.skipif(
    _compat.xla_flag_floor("--xla_gpu_per_fusion_autotune_cache_dir") is not None,
    reason="this TensorFlow's XLA does not know the autotuning cache flag",
)
def test_xla_cache_flags_keep_the_users_xla_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfaccel.trial.runner import compile_cache_env

    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=2")
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    monkeypatch.delenv("CUDA_CACHE_MAXSIZE", raising=False)
    env = compile_cache_env(tmp_path / "cache")
    assert env["XLA_FLAGS"] == (
        "--xla_gpu_autotune_level=2 "
        f"--xla_gpu_per_fusion_autotune_cache_dir={tmp_path / 'cache' / 'autotune'}"
    )
    assert env["TF_XLA_FLAGS"] == (
        f"--tf_xla_persistent_cache_directory={tmp_path / 'cache' / 'executables'}"
    )
    assert env["CUDA_CACHE_MAXSIZE"] == str(4 * 2**30)  # the driver's largest
    assert (tmp_path / "cache" / "autotune").is_dir()
    monkeypatch.setenv("XLA_FLAGS", env["XLA_FLAGS"])
    monkeypatch.setenv("TF_XLA_FLAGS", env["TF_XLA_FLAGS"])
    monkeypatch.setenv("CUDA_CACHE_MAXSIZE", "1000")
    assert compile_cache_env(tmp_path / "other") == {}  # the user's own settings win


def test_trials_share_compiled_xla_programs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorFlow accepts the flags, and a second identical trial finds the executable."""
    from tfaccel.trial.runner import compile_cache_env

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    env = compile_cache_env(tmp_path / "c")
    s = Settings(precision="float32", xla="jit", batch_size=8)
    r = run_trial("tiny", s, StepPlan(1, 1, 2), timeout_s=120, env_overrides=env)
    assert r.ok, r.error
    assert list((tmp_path / "c" / "executables").glob("*.pb"))


def test_a_builtin_trial_ignores_a_keras_py_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a user's own entry point is imported from the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keras.py").write_text("raise ImportError('the project keras.py')\n")
    r = run_trial("tiny", Settings(precision="float32", xla="off", batch_size=8), SMALL, 180)
    assert r.ok, (r.error, r.traceback)
