"""At 80 columns (every pipe and CI log) nothing a user must type or copy is cut:
spec keys stay whole, shell commands stay one per line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tfaccel.cli import app
from tfaccel.hardware.specs import all_specs

runner = CliRunner()


@pytest.mark.parametrize("width", ["80", "60"])
def test_spec_keys_are_whole_at_narrow_widths(width: str) -> None:
    result = runner.invoke(app, ["hw", "--list-specs"], env={"COLUMNS": width})
    assert result.exit_code == 0
    words = set(result.stdout.split())
    assert all(s.key in words for s in all_specs())


def test_mps_commands_are_one_shell_line_each_in_a_pipe() -> None:
    result = runner.invoke(app, ["mps", "start"], env={"COLUMNS": "40"})
    lines = result.stdout.splitlines()
    exports = [line for line in lines if line.startswith("export ")]
    assert exports and all("CUDA_MPS_LOG_DIRECTORY=" in line for line in exports)
    assert "nvidia-cuda-mps-control -d" in lines
