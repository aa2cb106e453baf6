"""The command line: wiring, formats, exit codes, and no TensorFlow import at start-up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.clitext import unboxed
from tfaccel import __version__
from tfaccel.cli import app
from tfaccel.doctor import Check, DoctorReport, Status

runner = CliRunner()


def _fake_report(status: Status) -> DoctorReport:
    return DoctorReport((Check("x", "x", status, "finding x"),), {"tfaccel": "0"}, 0.1)


@pytest.fixture
def fake_doctor(monkeypatch: pytest.MonkeyPatch) -> list[Status]:
    statuses = [Status.OK]

    def fake_run(ctx: object = None, progress: object = None) -> DoctorReport:
        return _fake_report(statuses[0])

    monkeypatch.setattr("tfaccel.cli.doctor.run_doctor", fake_run)
    return statuses


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"tfaccel {__version__}"


def test_help_lists_doctor() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "doctor" in result.stdout


@pytest.mark.parametrize(
    ("status", "strict", "code"),
    [
        (Status.OK, False, 0),
        (Status.WARN, False, 0),
        (Status.WARN, True, 1),
        (Status.FAIL, False, 1),
    ],
)
def test_doctor_exit_codes(
    fake_doctor: list[Status], status: Status, strict: bool, code: int
) -> None:
    fake_doctor[0] = status
    args = ["doctor", "--format", "json"] + (["--strict"] if strict else [])
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["checks"][0]["status"] == status.value


def test_doctor_markdown(fake_doctor: list[Status]) -> None:
    result = runner.invoke(app, ["doctor", "-f", "markdown"])
    assert result.exit_code == 0 and result.stdout.startswith("### tfaccel doctor")


def test_bad_format_is_a_usage_error() -> None:
    result = runner.invoke(app, ["doctor", "--format", "yaml"])
    assert result.exit_code == 2
    assert "yaml" in result.output


def test_bad_timeout_is_a_clear_error(fake_doctor: list[Status]) -> None:
    result = runner.invoke(app, ["doctor", "--timeout", "-1"])
    assert result.exit_code == 2
    assert "Invalid value for '--timeout': '-1' is not a duration above 0" in unboxed(result.output)


def test_startup_does_not_import_tensorflow_or_nvml() -> None:
    code = (
        "import sys; from tfaccel.cli import app; "
        "bad = [m for m in ('tensorflow', 'keras', 'pynvml') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_help_and_doctor_work_without_tensorflow(tmp_path: object) -> None:
    # A meta-path hook makes `import tensorflow` fail as it does where TF is absent.
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'tensorflow': raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import tfaccel._tf as t; t.tf_package_dir = lambda: None\n"
        "from tfaccel.cli import main\n"
        "sys.argv = ['tfaccel', 'doctor', '--format', 'json', '--no-import']\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    install = next(c for c in data["checks"] if c["id"] == "tf.install")
    assert install["status"] == "fail"
    assert data["verdict"]


def test_python_dash_m_runs_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tfaccel", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == f"tfaccel {__version__}"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["tune", "resnet5O", "--format", "json"], 2),
        (["plan", "--throughput", "5", "--format", "json"], 2),
        (["scale", "tiny", "--cpu-replicas", "2", "--engine", "warp", "--format", "json"], 2),
    ],
)
def test_a_failing_command_in_json_mode_writes_one_json_error(args: list[str], code: int) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == code
    data = json.loads(result.stdout)
    assert data["exit_code"] == code and data["error"]["problem"]


def test_quiet_keeps_results_and_errors_and_drops_the_notes(tmp_path: object) -> None:
    from pathlib import Path

    out = Path(str(tmp_path)) / "p.png"
    loud = runner.invoke(app, ["plan", "tiny", "--spec", "T4", "--plot", str(out)])
    assert loud.exit_code == 0 and f"wrote {out}" in " ".join(loud.output.split())
    out.unlink()
    quiet = runner.invoke(app, ["-q", "plan", "tiny", "--spec", "T4", "--plot", str(out)])
    assert quiet.exit_code == 0 and "wrote" not in quiet.output and out.exists()
    assert "largest batch" in quiet.stdout  # the result itself stays
    failed = runner.invoke(app, ["-q", "tune", "resnet5O"])
    assert failed.exit_code == 2 and "error:" in failed.output


def test_the_tune_progress_shows_the_budget_left() -> None:
    from rich.progress import Progress

    from tfaccel.render.tune import BudgetLeft

    column = BudgetLeft(125.0)
    with Progress(column) as progress:
        task = progress.add_task("x", total=1)
        text = column.render(progress.tasks[task]).plain
    assert text in ("2:05 left", "2:04 left")


def test_the_tune_progress_shows_how_long_the_trial_in_flight_has_run() -> None:
    import time

    from rich.progress import Progress

    from tfaccel.render.tune import TrialElapsed

    column = TrialElapsed()
    with Progress(column) as progress:
        task = progress.add_task("x", total=1, trial_start=time.monotonic() - 125.5)
        running = column.render(progress.tasks[task]).plain
        progress.update(task, advance=1, trial_start=None)
        between = column.render(progress.tasks[task]).plain
    assert running in ("trial 2:05", "trial 2:06") and between == ""
