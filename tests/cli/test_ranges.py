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
    ("monitor --interval 2h", "--interval"),
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
    assert "Time before a trial is killed: 600 (seconds), 10m." in text


@pytest.mark.parametrize(
    ("text", "value"),
    [("90s", 90.0), ("10", 10.0), ("1.5h", 5400.0), ("2d", 172800.0), ("10m", 600.0),
     (" 2M ", 120.0), (None, None)],
)  # fmt: skip
def test_one_duration_grammar_a_bare_number_is_seconds(text: str | None, value: float) -> None:
    from tfaccel.cli._common import seconds_of

    assert seconds_of(text) == value


@pytest.mark.parametrize("text", ["0", "-5", "nan", "inf", "5x", "m", ""])
def test_a_bad_duration_says_the_grammar(text: str) -> None:
    import typer

    from tfaccel.cli._common import seconds_of

    with pytest.raises(typer.BadParameter, match="a bare number is seconds"):
        seconds_of(text)


# Every flag that takes a time, with a value in each form and what it reads as.
TIME_FLAGS = [
    (["tune", "tiny", "--timeout"], "--timeout"),
    (["tune", "tiny", "--race"], "--race"),
    (["tune", "tiny", "--time-budget"], "--time-budget"),
    (["doctor", "--timeout"], "--timeout"),
    (["plan", "--scenario", "vision", "--time-budget"], "--time-budget"),
    (["monitor", "--interval"], "--interval"),
    (["monitor", "--duration"], "--duration"),
]


@pytest.mark.parametrize(("args", "flag"), TIME_FLAGS)
def test_every_time_flag_takes_units_and_says_a_bare_number_is_seconds(
    args: list[str], flag: str
) -> None:
    """One grammar on every command: --help says what a bare number is, and a value
    with a unit that is not one is refused with the grammar."""
    result = runner.invoke(app, [*args, "5x"])
    assert result.exit_code == 2 and "90s, 10m, 1.5h" in result.output, result.output
    wide = runner.invoke(app, [args[0], "--help"], env={"COLUMNS": "250"}).output
    line = next(x for x in wide.splitlines() if f"{flag} " in x)  # the flag's own row
    assert "(seconds)" in line or "bare number is seconds" in line, line


@pytest.mark.parametrize("flag", ["--time-budget"])
@pytest.mark.parametrize("command", [["tune", "tiny"], ["plan", "--scenario", "vision"]])
def test_a_small_bare_budget_is_refused_as_ambiguous(command: list[str], flag: str) -> None:
    """`--time-budget 10` once meant ten minutes: a bare number under a minute is
    refused, naming both readings, instead of running a 10-second tune."""
    result = runner.invoke(app, [*command, flag, "10"])
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and "write 10s if you mean it, 10m for minutes" in out


@pytest.mark.parametrize(
    ("value", "in_seconds"), [("10m", 600.0), ("90s", 90.0), ("1.5h", 5400.0), ("900", 900.0)]
)
def test_tune_reads_its_time_budget_in_seconds(
    value: str, in_seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfaccel.cli import tune as tune_cli
    from tfaccel.errors import InputError

    seen = {}
    real = tune_cli._options

    def spy(*args: object, **kwargs: object) -> None:
        seen["options"] = real(*args, **kwargs)  # type: ignore[arg-type]
        raise InputError("stopped before any trial", expected="-", received="-")

    monkeypatch.setattr(tune_cli, "_options", spy)
    result = runner.invoke(app, ["tune", "tiny", "--time-budget", value])
    assert result.exit_code == 2 and "stopped before any trial" in result.output
    assert seen["options"].time_budget_s == in_seconds


@pytest.mark.parametrize("command", ["run", "scale"])
def test_config_is_spelled_alike_where_it_is_taken(command: str) -> None:
    """--config and its short -c on each command that reads a settings file."""
    wide = runner.invoke(app, [command, "--help"], env={"COLUMNS": "250"}).output
    line = next(x for x in wide.splitlines() if "--config" in x)
    assert "-c" in line.replace("--config", "")
