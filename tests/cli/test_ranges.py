"""Numbers out of their range are usage errors, found by the parser before any work:
no GPU query, no trial, no file. The ranges show in --help, and --format json gets the
error as JSON on stdout like every other failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.cli._common import json_requested

runner = CliRunner()

# Each one was once accepted and ran (or failed later, for another reason).
OUT_OF_RANGE = [
    ("bench tiny --batch 0", "--batch"),
    ("plan tiny --throughput inf --samples 1000", "--throughput"),
    ("plan tiny --throughput nan --samples 1000", "--throughput"),
    ("plan tiny --gpus -2", "--gpus"),
    ("plan tiny --gpus 0", "--gpus"),
    ("plan tiny --margin 2", "--margin"),
    ("plan tiny --samples 0", "--samples"),
    ("plan tiny --epochs -1", "--epochs"),
    ("plan tiny --gpu-index -1", "--gpu-index"),
    ("monitor --prometheus 0", "--prometheus"),
    ("monitor --prometheus 70000", "--prometheus"),
    ("monitor --interval nan", "--interval"),
    ("monitor --temp-threshold inf", "--temp-threshold"),
    ("monitor --mem-threshold 101", "--mem-threshold"),
    ("monitor --duration -1", "--duration"),
    ("power set -- -5 --yes", "watts"),
    ("power reset --gpu-index -1 --yes", "--gpu-index"),
    ("profile --start -5 -- python -c pass", "--start"),
    ("profile --steps 0 -- python -c pass", "--steps"),
    ("scale tiny --cpu-replicas -1", "--cpu-replicas"),
    ("scale tiny --index -1", "--index"),
    ("tune tiny --timeout 0", "--timeout"),
    ("tune tiny --timeout -1", "--timeout"),
    ("tune tiny --time-budget nan", "--time-budget"),
    ("tune tiny --window-seconds inf", "--window-seconds"),
    ("doctor --timeout nan", "--timeout"),
]


@pytest.mark.parametrize(("line", "flag"), OUT_OF_RANGE)
def test_a_number_out_of_range_is_refused_before_any_work(
    line: str, flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, line.split())
    assert result.exit_code == 2
    assert f"Invalid value for '{flag}'" in unboxed(result.output)
    assert list(tmp_path.iterdir()) == []  # no journal, no output, no plot


def test_a_usage_error_in_json_mode_is_one_json_object_on_stdout() -> None:
    result = runner.invoke(app, ["tune", "tiny", "--timeout", "0", "--format", "json"])
    assert result.exit_code == 2
    first = result.stdout[: result.stdout.index("\n}") + 2]
    data = json.loads(first)
    assert data["exit_code"] == 2 and data["error"]["kind"] == "UsageError"
    assert "--timeout" in data["error"]["problem"] and "not a duration" in data["error"]["problem"]


def test_a_usage_error_without_json_writes_no_json() -> None:
    result = runner.invoke(app, ["tune", "tiny", "--timeout", "0"])
    assert result.exit_code == 2 and '"exit_code"' not in result.output


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["tune", "x", "--format", "json"], True),
        (["tune", "x", "-f", "JSON"], True),
        (["tune", "x", "--format=json"], True),
        (["tune", "x", "-fjson"], True),
        (["tune", "x", "--format", "text"], False),
        (["tune", "x", "--format"], False),
        (["tune", "--", "python", "t.py", "-f"], False),
    ],
)
def test_json_requested(argv: list[str], wanted: bool) -> None:
    assert json_requested(argv) is wanted


def test_help_shows_the_ranges() -> None:
    text = unboxed(runner.invoke(app, ["tune", "--help"], env={"COLUMNS": "200"}).output)
    assert "x>=1" in text  # --batch, --windows ...
    assert "Time before a trial is killed: 600 (s), 10m." in text


@pytest.mark.parametrize(
    ("text", "unit", "value"),
    [("90s", "m", 1.5), ("10", "m", 10.0), ("1.5h", "m", 90.0), ("2d", "h", 48.0),
     ("600", "s", 600.0), ("10m", "s", 600.0), (None, "s", None)],
)  # fmt: skip
def test_a_time_flag_takes_its_unit_or_a_suffix(text: str | None, unit: str, value: float) -> None:
    from tfaccel.cli._common import in_unit

    assert in_unit(text, unit) == value
