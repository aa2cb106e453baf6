"""Real trials in child processes on the CPU, and the tune command end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fakes import needs_keras_for
from tfaccel import _compat

pytest.importorskip("tensorflow")

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.optimize.settings import Settings
from tfaccel.trial.runner import StepPlan, run_trial

SMALL = StepPlan(warmup=2, windows=2, window=3)
runner = CliRunner()

BROKEN = """
import keras
def _loss(y, p):
    raise RuntimeError("the loss broke at run time")

def crashes_in_fit():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    return {"model": m, "loss": _loss}

def unknown_loss():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    return {"model": m, "loss": "no_such_loss"}

def raises():
    import json
    json.loads("{")
"""


def _user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    """Write the user's module `name` into tmp_path, the working directory and path."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


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
    _user_module(tmp_path, monkeypatch, "enc", ENCODER)
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


def test_window_bounds() -> None:
    from tfaccel.trial.child import shrink_window, warmup_step_s

    assert shrink_window(20, 1, step_s=0.5, window_s=3.0) == 6
    assert shrink_window(20, 1, step_s=0.05, window_s=3.0) == 20  # fits: unchanged
    assert shrink_window(20, 10, step_s=0.5, window_s=3.0) == 10  # whole executions
    assert shrink_window(20, 10, step_s=1.0, window_s=0.1) == 10  # at least one
    # Marks: (last step of the execution, time, loss); the first one compiles.
    marks = [(0, 30.0, 1.0), (1, 30.5, 1.0), (2, 31.0, 1.0), (3, 31.5, 1.0)]
    assert warmup_step_s(marks) == pytest.approx(0.5)
    assert warmup_step_s(marks[:2]) is None


def test_timing_stops_once_the_windows_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """With min_windows 3 of 5, fit stops after the third window when the windows so far
    are steady (a spread under half the noise floor), and runs all five when not."""
    import types

    from tfaccel.trial import child

    def run(step_s: list[float]) -> tuple[int, child.Plan]:
        now = [0.0]
        monkeypatch.setattr(child.time, "perf_counter", lambda: now[0])
        steps = {"warmup": 2, "windows": 5, "window": 4, "min_windows": 3}
        plan = child.Plan.of(steps, spe=1)
        ran = [0]

        def fit(ds: object, steps_per_epoch: int, callbacks: list, **_: object) -> None:
            (cb,) = callbacks
            cb.set_model(types.SimpleNamespace(stop_training=False))
            for i in range(steps_per_epoch):
                now[0] += step_s[i % len(step_s)]
                cb.on_train_batch_end(i, {"loss": 1.0})
                ran[0] += 1
                if cb.model.stop_training:
                    break

        _, out = child._fit_marks(fit, None, plan, batch=8)
        return ran[0], out

    ran, plan = run([0.1])  # steady: windows of equal time
    assert (ran, plan.windows) == (2 + 3 * 4, 3)
    ran, plan = run([0.1] * 6 + [0.12] * 4 + [0.1] * 12)  # the second window slower
    assert (ran, plan.windows) == (2 + 5 * 4, 5)
    without = child.Plan.of({"warmup": 2, "windows": 5, "window": 4}, spe=1)
    assert without.min_windows is None
    assert without.settled_after(13, {i: 0.1 * i for i in range(14)}, 8) is None


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
    _user_module(tmp_path, monkeypatch, "slow_exit", SLOW_TEARDOWN)
    r = run_trial(
        "slow_exit:build", Settings(precision="float32", xla="off", batch_size=4), SMALL, 180
    )
    assert r.status == "ok", (r.error, r.traceback)
    assert r.wall_s < 30  # the 30-s teardown did not run: the process ended at its result
    assert not (tmp_path / "teardown-ran").exists()


def test_a_failing_trial_shows_its_own_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _user_module(tmp_path, monkeypatch, "broken_models", BROKEN)
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

    _user_module(tmp_path, monkeypatch, "fails_to_build", BUILD_FAILS)
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


@pytest.mark.slow
def test_tune_command_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = [
        "tune",
        "tiny",
        "--batch",
        "32",
        "--max-batch",
        "64",
        "--warmup",
        "2",
        "--windows",
        "2",
        "--window",
        "3",
    ]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "tfaccel.tune/1" and data["best"]["status"] == "ok"
    written = json.loads((tmp_path / "tfaccel.json").read_text())
    assert written["settings"]["batch_size"] in (32, 64)
    assert (tmp_path / "tfaccel-tune.png").stat().st_size > 1000
    lines = (tmp_path / "tfaccel-tune.jsonl").read_text().splitlines()
    assert len(lines) == len(data["trials"])
    # The baseline counted the model's FLOPs: the tiny CNN's dense layers are 8.6 % of
    # its products (its two convolutions the rest).
    from tfaccel.environment import machine_id

    assert {json.loads(x)["machine"] for x in lines} == {machine_id()}
    baseline = json.loads(lines[0])["result"]
    assert baseline["extra"]["gemm_flop_share"] == pytest.approx(0.0858, abs=1e-3)
    # The same command again resumes entirely from the journal and replaces the files
    # this tune wrote ...
    again = runner.invoke(app, [*args, "--format", "json"])
    assert again.exit_code == 0, again.output
    finished = [x for x in lines if json.loads(x)["result"]["status"] != "error"]
    assert json.loads(again.stdout)["resumed"] == len(finished)  # errors run again
    after = (tmp_path / "tfaccel-tune.jsonl").read_text().splitlines()
    assert len(after) == len(lines) + len(lines) - len(finished)
    # ... but not a file of the user's, nor another workload's settings, without --force.
    (tmp_path / "mine.json").write_text('{"my": "notes"}')
    refused = runner.invoke(app, [*args, "--output", "mine.json"])
    assert refused.exit_code == 2 and "mine.json already exists" in refused.output
    assert (tmp_path / "mine.json").read_text() == '{"my": "notes"}'
    other = runner.invoke(app, ["tune", "resnet50", "--output", "tfaccel.json"])
    assert other.exit_code == 2 and "tfaccel.json already exists" in other.output
    # The settings load back into configure().
    import tfaccel

    try:
        report = tfaccel.configure.from_file(tmp_path / "tfaccel.json")
        assert report.settings.batch_size == written["settings"]["batch_size"]
    finally:
        tfaccel.configure.reset()


def test_tune_keeps_an_earlier_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine-tune.png").write_bytes(b"the user's plot")
    result = runner.invoke(app, ["tune", "tiny", "--output", "mine.json"])
    assert result.exit_code == 2 and "mine-tune.png already exists" in result.output
    assert (tmp_path / "mine-tune.png").read_bytes() == b"the user's plot"
    assert not (tmp_path / "tfaccel-tune.jsonl").exists()  # refused before any trial


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tune", "tiny", "--batch", "0"], "Invalid value for '--batch'"),
        (["tune", "tiny", "--batch", "64", "--max-batch", "32"], "--max-batch is below --batch"),
        (["tune", "tiny", "--time-budget", "0"], "'--time-budget': '0' is not a duration above 0"),
        (["tune", "tiny", "--confirm", "-1"], "Invalid value for '--confirm'"),
        (["tune", "tiny", "--precisions", "fp8"], "Unknown precision in --precisions"),
        (["tune", "tiny", "--precisions", "bfloat16"], "bfloat16 (weights in bf16) is for"),
        (["tune", "tiny", "--skip", "float8,float9"], "Unknown knob in --skip"),
        (["tune", "tiny", "--skip", ","], "Unknown knob in --skip"),
        (["tune", "tiny", "--journal", "/nonexistent/j.jsonl"], "/nonexistent does not exist"),
        (["tune", "tiny", "--output", "/nonexistent/t.json"], "/nonexistent does not exist"),
    ],
)
def test_tune_bad_flags(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in unboxed(result.output)


def test_max_batch_alone_caps_the_start() -> None:
    """`--max-batch 16` without `--batch` starts at 16, not at an error about a --batch
    the user never gave."""
    from tfaccel.cli.tune import _options
    from tfaccel.tune import Target, start_batch

    options = _options(None, 16, StepPlan(), "600s", None, None, None, 0)
    started, _ = start_batch(options, Target("tiny", None))
    assert (started.batch_size, started.max_batch) == (16, 16)


def test_the_python_api_starts_a_script_at_its_own_batch_size(tmp_path: Path) -> None:
    """`tfaccel.tune.run([...])` decides the batch size as the command line does: the
    script's own (here `fit(batch_size=128)` in its source), not Keras' 32."""
    from tfaccel import tune as tune_lib
    from tfaccel.trial.runner import TrialResult, label_of, settings_key
    from tfaccel.tune.result import Hardware

    script = tmp_path / "train.py"
    script.write_text("import keras\nmodel.fit(x, y, batch_size=128, epochs=2)\n")
    tgt = tune_lib.prepare(["python", str(script)])
    seen: list[int | None] = []

    def runner(subject: Any, s: Any, p: StepPlan, t: float, **_: Any) -> TrialResult:
        seen.append(s.batch_size)
        key = settings_key(subject.name, s, p)
        return TrialResult(key, label_of(s), s.to_dict(), "ok", 100.0, 0.0, (100.0, 100.0))

    target = tune_lib.Target(tgt.subject, None, batch_size=tgt.batch_size, runner=runner)
    out = tune_lib.Outputs(tmp_path / "t.json", tmp_path / "t.png", tmp_path / "t.jsonl")
    options = tune_lib.TuneOptions(steps=StepPlan(1, 1, 1), max_batch=128)
    res = tune_lib.run(target, options, out, hw=Hardware(0, None))
    assert seen[0] == 128 and res.best_settings is not None
    assert res.best_settings.batch_size == 128


def test_tune_of_a_model_that_never_runs_exits_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _user_module(tmp_path, monkeypatch, "broken_models", BROKEN)
    result = runner.invoke(
        app,
        [
            "tune",
            "broken_models:crashes_in_fit",
            "--warmup",
            "1",
            "--windows",
            "1",
            "--window",
            "1",
            "--max-batch",
            "32",
        ],
    )
    assert result.exit_code == 5, result.output
    assert "the loss broke" in result.output and not (tmp_path / "tfaccel.json").exists()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("resnet5O", "did you mean resnet50?"),
        ("broken_models:unknown_loss", "Unknown loss 'no_such_loss'"),
        ("broken_models:raises", "JSONDecodeError"),
        ("broken_models:nothing_here", "has no callable 'nothing_here'"),
        ("no_such_module:build", "Cannot import module 'no_such_module'"),
    ],
)
def test_a_bad_entry_point_exits_2_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    _user_module(tmp_path, monkeypatch, "broken_models", BROKEN)
    result = runner.invoke(app, ["tune", target])
    assert result.exit_code == 2, result.output
    assert message in result.output
    if target.endswith(":raises"):  # the user's own traceback, where their code raised
        assert 'broken_models.py", line' in result.output and "tfaccel/" not in result.output
    assert not (tmp_path / "tfaccel-tune.jsonl").exists()  # no journal: nothing ran


BATCHES_OF_24 = """
import numpy as np
import keras
import tensorflow as tf

def build():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    x, y = np.ones((24, 8), "float32"), np.zeros(24, "int32")
    return model, tf.data.Dataset.from_tensors((x, y)).repeat()
"""


def test_an_entry_point_is_tuned_from_the_size_of_its_own_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keras' defaults are measured at the batch the user's data comes in."""
    _user_module(tmp_path, monkeypatch, "batches_of_24", BATCHES_OF_24)
    steps = ["--warmup", "1", "--windows", "1", "--window", "2", "--time-budget", "1s"]
    result = runner.invoke(app, ["tune", "batches_of_24:build", *steps, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "starting at its data's batch size, 24" in result.stderr
    trials = json.loads(result.stdout)["trials"]
    assert trials and trials[0]["settings"]["batch_size"] == 24


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


def test_tune_counts_only_the_gpus_its_trials_see(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfaccel.hardware.nvml import DriverInfo, GpuBrief
    from tfaccel.tune import hardware_of

    two = DriverInfo(
        True,
        None,
        "580.159.04",
        "13.0",
        (
            GpuBrief(0, "NVIDIA H200", "GPU-a", "9.0", 143771),
            GpuBrief(1, "NVIDIA H200", "GPU-b", "9.0", 143771),
        ),
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert hardware_of(two).gpus == 1  # so the 1-GPU knobs (device prefetch) are tried
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert hardware_of(two).gpus == 2


def test_a_builtin_trial_ignores_a_keras_py_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a user's own entry point is imported from the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keras.py").write_text("raise ImportError('the project keras.py')\n")
    r = run_trial("tiny", Settings(precision="float32", xla="off", batch_size=8), SMALL, 180)
    assert r.ok, (r.error, r.traceback)
