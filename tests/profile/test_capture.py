"""Capturing with real TensorFlow on the CPU: start/stop, the callback window, run mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
pytest.importorskip("xprof")

from tests.script.test_loop import WARM_UP_LOOP  # noqa: E402
from tests.script.test_tape import FROM_ITERATOR, TAPE  # noqa: E402
from tfaccel.cli import app  # noqa: E402
from tfaccel.profile import capture  # noqa: E402
from tfaccel.profile.analyze import analyze  # noqa: E402

SCRIPT = """
import numpy as np, keras
m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
m.compile("sgd", "mse")
m.fit(np.zeros((16 * 12, 8), "float32"), np.zeros((16 * 12, 4), "float32"), batch_size=16,
      verbose=0)
"""


def test_double_start_and_stray_stop_are_clear_errors(tmp_path: Path) -> None:
    with capture.trace(tmp_path / "a"):
        with pytest.raises(capture.ProfilerStateError, match="already being captured"):
            capture.start(tmp_path / "b")
        tf.reduce_sum(tf.ones((4, 4)))
    with pytest.raises(capture.ProfilerStateError, match="No profile is being captured"):
        capture.stop()
    assert list((tmp_path / "a").rglob("*.xplane.pb"))


def test_callback_profiles_its_window_with_step_markers(tmp_path: Path) -> None:
    import numpy as np

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    model.compile("sgd", "mse")
    cb = capture.ProfileCallback(tmp_path / "p", start_step=3, steps=5, batch_size=16)
    model.fit(
        np.zeros((16 * 12, 8), "float32"),
        np.zeros((16 * 12, 4), "float32"),
        batch_size=16,
        verbose=0,
        callbacks=[cb],
    )
    assert cb.captured
    r = analyze(tmp_path / "p")
    assert 3 <= len(r.steps) <= 5  # XProf drops partial steps at the window's edges
    assert r.samples_per_step == 16
    assert r.samples_per_s == pytest.approx(16 / r.step_ms_avg * 1000)  # type: ignore[operator]


def test_run_mode_profiles_an_unmodified_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app,
        ["profile", "--start", "2", "--steps", "6", "--format", "json", "--", "python", "train.py"],
    )
    assert result.exit_code == 0, result.output
    assert '"schema": "tfaccel.profile/1"' in result.stdout
    assert list((tmp_path / "tfaccel-profile").rglob("*.xplane.pb"))
    # fit's batch_size reached the report, so diffs compare samples/s, not step times
    assert '"samples_per_step": 16' in result.stdout
    # A command that fails writes no new run: the earlier capture is not reported as its.
    (tmp_path / "fails.py").write_text("raise SystemExit(3)\n")
    failed = CliRunner().invoke(app, ["profile", "--", "python", "fails.py"])
    assert failed.exit_code == 5 and "finished without writing a profile" in failed.output
    assert "the command failed" in failed.output


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["python", "missing_script.py"], "The script missing_script.py does not exist"),
        (["python", "missing.py", "-c", "x"], "The script missing.py does not exist"),
        (["broken.py"], "broken.py is not valid Python"),
        (["no-such-program", "x"], "Cannot run 'no-such-program'"),
    ],
)
def test_a_command_that_cannot_run_is_refused_before_its_trace_folder_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], said: str
) -> None:
    """As tune and run refuse them: exit 2, and no empty tfaccel-profile left behind."""
    (tmp_path / "broken.py").write_text("def broken(:\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["profile", "--", *command])
    assert result.exit_code == 2 and said in result.output, result.output
    assert not (tmp_path / "tfaccel-profile").exists()


def test_inline_python_code_is_profiled_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -c CODE` has no file to check first: it runs (here it trains nothing,
    and says so), as a launcher on PATH does."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["profile", "--", "python", "-u", "-c", "print('hi')"])
    assert result.exit_code == 5 and "finished without writing a profile" in result.output


def test_stop_ends_the_script_after_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A long training need not run to its end for the report; without --stop the run
    goes on, and says so once."""
    (tmp_path / "train.py").write_text(SCRIPT + "open('after.txt', 'w').write('ran')\n")
    monkeypatch.chdir(tmp_path)
    args = ["profile", "--start", "2", "--steps", "3", "--format", "json"]
    result = CliRunner().invoke(app, [*args, "--stop", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert '"schema": "tfaccel.profile/1"' in result.stdout
    assert not (tmp_path / "after.txt").exists()
    assert "steps 2-4 captured; the script ends here (--stop)" in capfd.readouterr().err
    result = CliRunner().invoke(app, [*args, "--", "python", "train.py"])
    assert result.exit_code == 0 and (tmp_path / "after.txt").exists()
    assert capfd.readouterr().err.count("the run goes on to its end") == 1


def test_one_trace_a_script_of_the_fit_call_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script of two fit calls (16, then 8 samples a step): the first that runs past
    the window is profiled, not both (the report reads the newest run); --fit 2 the
    second, as tune --fit times it."""
    fit_8 = 'm.fit(np.zeros((96, 8), "float32"), np.zeros((96, 4), "float32"), batch_size=8)\n'
    (tmp_path / "train.py").write_text(SCRIPT + fit_8)
    monkeypatch.chdir(tmp_path)
    args = ["profile", "--start", "2", "--steps", "3", "--format", "json"]
    for fit, per_step in ((None, 16), (2, 8)):
        logdir = tmp_path / f"p{fit}"
        chosen = ["--fit", str(fit)] if fit else []
        result = CliRunner().invoke(
            app, [*args, "--logdir", str(logdir), *chosen, "--", "python", "train.py"]
        )
        assert result.exit_code == 0, result.output
        assert len({p.parent for p in logdir.rglob("*.xplane.pb")}) == 1
        assert f'"samples_per_step": {per_step}' in result.stdout
    result = CliRunner().invoke(app, [*args, "--fit", "3", "--", "python", "train.py"])
    assert result.exit_code == 5 and "as the script's fit call 3" in result.output


# A loop of its own: the first model's calls (16 rows each) are the steps, the second
# model's call and 20 ms of host work between them.
LOOP = """
import sys, time
import numpy as np, keras
first = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
second = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
first.compile("sgd", "mse")
second.compile("sgd", "mse")
for step in range(int(sys.argv[1])):
    first.train_on_batch(np.zeros((16, 8), "float32"), np.zeros((16, 4), "float32"))
    second.train_on_batch(np.zeros((8, 8), "float32"), np.zeros((8, 4), "float32"))
    time.sleep(0.02)
open("after.txt", "w").write("ran")
"""


def test_a_loop_of_train_on_batch_calls_is_profiled_from_call_to_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A step runs from one call of the first model to its next, so that it holds what
    the loop does between them, as its training does; --stop ends the script after the
    window, and a loop that ends inside the window still leaves its trace."""
    import json

    (tmp_path / "train.py").write_text(LOOP)
    monkeypatch.chdir(tmp_path)
    args = ["profile", "--start", "2", "--steps", "4", "--format", "json"]
    result = CliRunner().invoke(app, [*args, "--stop", "--", "python", "train.py", "20"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["report"]
    assert report["samples_per_step"] == 16  # the first model's rows, one step a call
    assert report["step_ms_avg"] >= 20  # the loop's other work between its calls
    assert not (tmp_path / "after.txt").exists()
    assert "steps 2-5 captured; the script ends here (--stop)" in capfd.readouterr().err
    short = tmp_path / "short"
    result = CliRunner().invoke(
        app, [*args, "--logdir", str(short), "--", "python", "train.py", "4"]
    )
    assert result.exit_code == 0, result.output
    assert list(short.rglob("*.xplane.pb")) and (tmp_path / "after.txt").exists()


@pytest.mark.parametrize("script", ["warm_up_loop", "tape", "iterator"])
def test_a_loop_is_profiled_in_what_it_trains_as_tune_times_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str
) -> None:
    """A warm-up call of one model (8 rows) before a loop that trains another (16 rows a
    call): the window moves to the model the loop trains. A tf.function step of the
    script's own (`script.tape`, batches of 16): the window counts its calls, and its
    rows as tune counts them (given an iterator: its static batch)."""
    import json

    static = FROM_ITERATOR.replace(".batch(16)", ".batch(16, drop_remainder=True)")
    scripts = {"warm_up_loop": WARM_UP_LOOP, "tape": TAPE, "iterator": static}
    (tmp_path / "train.py").write_text(scripts[script])
    monkeypatch.chdir(tmp_path)
    args = ["profile", "--start", "2", "--steps", "3", "--format", "json", "--stop"]
    result = CliRunner().invoke(app, [*args, "--", "python", "train.py", "10"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["report"]["samples_per_step"] == 16


def test_a_loop_after_a_fit_is_left_alone_when_another_model_takes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fit first (too short for the window), then the warm-up loop: the loop is not
    profiled (the fit came first), and its second model taking over breaks nothing."""
    fit_first = WARM_UP_LOOP.replace(
        "warm.train_on_batch(",
        'main.fit(np.zeros((16, 4), "float32"), np.zeros((16, 2), "float32"), verbose=0)\n'
        "warm.train_on_batch(",
    )
    assert "main.fit(" in fit_first
    (tmp_path / "train.py").write_text(fit_first + 'open("after.txt", "w").write("ran")\n')
    monkeypatch.chdir(tmp_path)
    args = ["profile", "--start", "50", "--steps", "3", "--logdir", str(tmp_path / "logs")]
    result = CliRunner().invoke(app, [*args, "--", "python", "train.py", "10"])
    assert (tmp_path / "after.txt").exists(), result.output  # the script ran to its end
    assert result.exit_code == 5 and "without writing a profile" in result.output


def test_a_bad_run_meta_file_is_ignored(tmp_path: Path) -> None:
    from tfaccel.profile.load import _read_meta

    (tmp_path / "tfaccel.json").write_text("__import__('os').system('echo no')")
    assert _read_meta(tmp_path) == {}
    (tmp_path / "tfaccel.json").write_text('{"samples_per_step": -3}')
    assert _read_meta(tmp_path) == {}
    (tmp_path / "tfaccel.json").write_text('{"samples_per_step": 512}')
    assert _read_meta(tmp_path) == {"samples_per_step": 512}


def test_run_mode_without_a_fit_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nothing.py").write_text("print('no training here')\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["profile", "--", "python", "nothing.py"])
    assert result.exit_code == 5
    assert "finished without writing a profile" in result.output


def test_json_mode_keeps_the_commands_output_off_stdout(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from tfaccel.profile.run import run_profiled

    code, why = run_profiled(
        ["python", "-c", "print('epoch 1/1 - loss: 2.3')"], tmp_path / "p", stdout_to_stderr=True
    )
    out, err = capfd.readouterr()
    assert code == 0 and why is None and "loss" not in out and "epoch 1/1 - loss: 2.3" in err


def test_a_failing_capture_never_breaks_the_users_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The script turns its log folder into a file before fit: the profiler cannot write
    # its trace. The training must still finish, and tfaccel say why there is no profile.
    script = (
        "import os, shutil\n"
        "shutil.rmtree('tfaccel-profile'); open('tfaccel-profile', 'w').write('x')\n"
        + SCRIPT
        + "print('training finished')\n"
    )
    (tmp_path / "train.py").write_text(script)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["profile", "--start", "2", "--steps", "3", "--", "python", "train.py"]
    )
    text = " ".join(result.output.split())
    out, err = capfd.readouterr()  # the script's own output, on the real descriptors
    assert result.exit_code == 5
    assert "the capture failed: FailedPreconditionError" in text
    assert "training finished" in out and "Traceback" not in err
    assert "tfaccel profile: no profile (FailedPreconditionError" in err


def test_profile_adds_no_warnings_of_its_own_to_the_scripts_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """TensorFlow's default levels go without options: passed as options, TF 2.21 logs
    'device_tracer_level expects an i value' and three more on the script's stderr."""
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["profile", "--start", "2", "--steps", "6", "--", "python", "train.py"]
    )
    assert result.exit_code == 0, result.output
    err = capfd.readouterr().err
    assert "tracer_level expects" not in err and "delay_ms" not in err
