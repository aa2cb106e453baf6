"""`tfaccel monitor` and `tfaccel power` through the command line, NVML faked."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.clitext import unboxed
from tests.monitor.fake_nvml import MonitorNvml
from tfaccel.cli import app

runner = CliRunner()


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> MonitorNvml:
    fake = MonitorNvml(n=2)
    monkeypatch.setattr("tfaccel.hardware.nvml.load_pynvml", lambda: fake)
    return fake


def test_once_json_and_exit_codes(nvml: MonitorNvml) -> None:
    result = runner.invoke(app, ["monitor", "--once", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "tfaccel.monitor/1" and len(data["gpus"]) == 2
    nvml.state[1]["temp"] = 87
    hot = runner.invoke(app, ["monitor", "--once", "--gpu-index", "1"])
    assert hot.exit_code == 1 and "GPU 1 at 87 C" in hot.stdout


def test_once_text_shows_throttle_and_processes(nvml: MonitorNvml) -> None:
    nvml.state[0]["reasons"] = 0x4
    result = runner.invoke(app, ["monitor", "--once"])
    assert "sw_power_cap" in result.stdout and "python3" in result.stdout


def test_a_narrow_terminal_gets_the_compact_view(nvml: MonitorNvml) -> None:
    from rich.console import Console

    from tfaccel.hardware.nvml import driver_info
    from tfaccel.monitor.sampler import Sampler
    from tfaccel.render.monitor import snapshot_view

    nvml.state[0]["reasons"] = 0x4
    with Sampler() as sampler:
        snap = sampler.sample_once()
    for width, full in ((80, False), (160, True)):
        console = Console(record=True, width=width)
        console.print(snapshot_view(snap, width))
        text = console.export_text()
        assert "sw_power_cap" in text  # the throttle reason whole, at either width
        assert ("PCIe tx/rx" in text) is full and ("mem clock" in text) is full
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    assert driver_info().gpus[0].name in text


def test_live_json_lines_for_a_duration(nvml: MonitorNvml, tmp_path: object) -> None:
    result = runner.invoke(
        app, ["monitor", "--interval", "0.1", "--duration", "0.5", "--format", "json"]
    )
    assert result.exit_code == 0
    lines = [json.loads(x) for x in result.stdout.splitlines() if x.strip()]
    assert len(lines) >= 2 and all(len(x["gpus"]) == 2 for x in lines)


def test_bad_gpu_list(nvml: MonitorNvml) -> None:
    result = runner.invoke(app, ["monitor", "--once", "--gpu-index", "zero"])
    assert result.exit_code == 2 and "Invalid value for '--gpu-index'" in unboxed(result.output)
    result = runner.invoke(app, ["monitor", "--once", "--gpu-index", "5"])
    assert result.exit_code == 2 and "GPU index 5 does not exist" in result.output


def test_power_show_and_refusals(nvml: MonitorNvml) -> None:
    shown = runner.invoke(app, ["power", "--format", "json"])
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["gpus"][0]["max_limit_w"] == 700
    no_yes = runner.invoke(app, ["power", "set", "300"])
    assert no_yes.exit_code == 2 and "needs explicit confirmation" in no_yes.output
    assert nvml.set_calls == []


def test_power_sweep_command_restores_and_plots(
    nvml: MonitorNvml, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    monkeypatch.setattr("os.geteuid", lambda: 0)
    trained: list[str] = []

    def measure(workload: str, gpu: int, batch: int) -> tuple[float, float, float]:
        trained.append(workload)
        return 1000.0, 300.0, 61.0

    monkeypatch.setattr("tfaccel.monitor.sweep.measure_workload", measure)
    plot = Path(str(tmp_path)) / "sweep.png"
    result = runner.invoke(
        app, ["power", "sweep", "tiny", "--limits", "300,500", "--yes", "--plot", str(plot)]
    )
    assert result.exit_code == 0, result.output
    assert trained == ["tiny", "tiny"]  # the workload is positional, as in every command
    assert "original limit 700 W restored" in result.stdout
    assert nvml.state[0]["limit_mw"] == 700_000 and plot.stat().st_size > 1000
    assert [mw for _, mw in nvml.set_calls] == [300_000, 500_000, 700_000]
    refused = runner.invoke(app, ["power", "sweep", "--limits", "300"])
    assert refused.exit_code == 2 and "needs explicit confirmation" in refused.output
    calls = len(nvml.set_calls)
    kept = runner.invoke(
        app, ["power", "sweep", "--limits", "300", "--yes", "--plot", str(plot)]
    )  # the plot of the first sweep is the user's now
    assert kept.exit_code == 2 and "already exists" in kept.output
    assert len(nvml.set_calls) == calls  # refused before any limit changed


def test_a_very_narrow_terminal_shows_an_ellipsis_not_a_cut_number(nvml: MonitorNvml) -> None:
    from rich.console import Console

    from tfaccel.monitor.sampler import Sampler
    from tfaccel.render.monitor import snapshot_view

    with Sampler() as sampler:
        snap = sampler.sample_once()
    console = Console(record=True, width=40)
    console.print(snapshot_view(snap, 40))
    text = console.export_text()
    assert "…" in text
    temps = [c for line in text.splitlines() for c in line.split() if c.endswith("C")]
    assert all(c[:-1].strip().isdigit() or c.endswith("…C") for c in temps)
