"""`tfaccel hw` and `tfaccel plan` through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.clitext import unboxed
from tests.fakes import FakeNvml
from tests.hardware.test_inventory import TopoNvml, h200
from tfaccel.cli import app
from tfaccel.hardware import inventory

runner = CliRunner()


@pytest.fixture
def two_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    real = inventory.read_inventory
    nvml = TopoNvml([h200(0, peer=1), h200(1, peer=0)])
    monkeypatch.setattr("tfaccel.cli.hw.read_inventory", lambda: real(nvml))


def test_hw_inventory_json(two_h200: None) -> None:
    result = runner.invoke(app, ["hw", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "tfaccel.hw/1"
    gpus = data["inventory"]["gpus"]
    assert [g["name"] for g in gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert data["inventory"]["topology"]["matrix"] == [["X", "NV18"], ["NV18", "X"]]
    assert data["tiers"][0]["overall"] == "extreme"


def test_hw_inventory_text(two_h200: None) -> None:
    result = runner.invoke(app, ["hw"])
    assert result.exit_code == 0
    assert "tier: extreme" in result.stdout and "NV18" in result.stdout
    # two identical GPUs: one card, and a table of what differs between them
    assert "GPU 0 (and 1, alike)" in result.stdout and "GPU 1\n" not in result.stdout
    assert "per GPU" in result.stdout and "2A:00.0" in result.stdout


def test_hw_gives_a_gpu_unlike_the_others_its_own_card(monkeypatch: pytest.MonkeyPatch) -> None:
    real = inventory.read_inventory
    capped = h200(1, nvmlDeviceGetEnforcedPowerLimit=400000)  # a lower power limit
    nvml = TopoNvml([h200(0), capped])
    monkeypatch.setattr("tfaccel.cli.hw.read_inventory", lambda: real(nvml))
    result = runner.invoke(app, ["hw"])
    assert result.exit_code == 0, result.output
    assert "alike" not in result.stdout and "per GPU" not in result.stdout
    assert "GPU 1" in result.stdout and "limit 400 W" in result.stdout


def test_hw_without_driver_exits_4(monkeypatch: pytest.MonkeyPatch) -> None:
    real = inventory.read_inventory
    monkeypatch.setattr(
        "tfaccel.cli.hw.read_inventory", lambda: real(FakeNvml(init_error="Driver Not Loaded"))
    )
    result = runner.invoke(app, ["hw"])
    assert result.exit_code == 4
    assert "tfaccel hw --compare" in result.output


def test_compare_and_its_errors() -> None:
    result = runner.invoke(app, ["hw", "--compare", "A100-80GB", "H200", "-f", "json"])
    assert result.exit_code == 0
    keys = [s["key"] for s in json.loads(result.stdout)["specs"]]
    assert keys == ["A100-80GB", "H200"]
    assert runner.invoke(app, ["hw", "--compare", "H200"]).exit_code == 2
    bad = runner.invoke(app, ["hw", "--compare", "H200", "X1"])
    assert bad.exit_code == 2 and "Unknown GPU 'X1'" in bad.output
    assert runner.invoke(app, ["hw", "H200"]).exit_code == 2


def test_rank_json() -> None:
    result = runner.invoke(app, ["hw", "--rank", "gpt2", "-f", "json"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)["rows"]
    assert rows[0]["key"] == "B200" and rows[0]["relative"] == 1.0
    assert runner.invoke(app, ["hw", "--rank", "chess"]).exit_code == 2


def test_plan_fit_on_a_spec_gpu() -> None:
    result = runner.invoke(app, ["plan", "tiny", "--spec", "T4", "--batch", "64", "-f", "json"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout)["fit"]
    assert fit["fits"] is True and fit["max_batch"] > 64
    assert fit["estimate"]["parameters"] == 545_098
    # on an H200 the tiny CNN fits about 300,000 images: memory is not the limit
    text = runner.invoke(app, ["plan", "tiny", "--spec", "H200"]).stdout
    assert "memory does not limit this model's batch size" in text


def test_plan_time_and_scenario() -> None:
    result = runner.invoke(
        app,
        [
            "plan",
            "--throughput",
            "5563",
            "--samples",
            "1.28e6",
            "--epochs",
            "90",
            "--scenario",
            "nlp",
            "--on",
            "H200",
            "--time-budget",
            "1d",
            "-f",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["time"]["rows"][0]["samples_per_s"] == 5563
    assert data["scenario"]["scenario"] == "nlp"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan"], "Nothing to plan"),
        (["plan", "tiny", "--precision", "fp8", "--spec", "T4"], "'fp8' is not one of"),
        (["plan", "--throughput", "10"], "--throughput needs --samples"),
        (
            ["plan", "--scenario", "vision", "--time-budget", "soon"],
            "'--time-budget': 'soon' is not a duration",
        ),
        (["plan", "tiny", "--spec", "H999"], "Unknown GPU"),
    ],
)
def test_plan_bad_input(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in unboxed(result.output)


def test_plan_reads_gpus_by_nvidia_smis_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """--gpu-index means nvidia-smi's numbers, as in monitor and power; of several GPUs
    the least free memory counts; by default the first GPU TensorFlow sees; a GPU that
    CUDA_VISIBLE_DEVICES hides is refused, not planned for."""
    from tests.fakes import FakeGpu
    from tfaccel.errors import InputError
    from tfaccel.plan.fit import capacity_from_local

    busy = FakeGpu(uuid="GPU-aaaa", memory_used=100_000 * 2**20)
    idle = FakeGpu(uuid="GPU-bbbb")
    nvml = FakeNvml([busy, idle])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert capacity_from_local(None, nvml).bytes == (143771 - 100_000) * 2**20
    assert capacity_from_local([1], nvml).bytes == 143771 * 2**20
    assert capacity_from_local([1, 0], nvml).bytes == (143771 - 100_000) * 2**20
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    cap = capacity_from_local(None, nvml)
    assert cap.bytes == 143771 * 2**20 and "local GPU 1" in cap.source
    with pytest.raises(InputError, match="GPU 0 is not one TensorFlow sees") as err:
        capacity_from_local([0], nvml)
    assert "CUDA_VISIBLE_DEVICES" in (err.value.hint or "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "tiny", "--gpu-index", "-1"], "Invalid value for '--gpu-index'"),
        (["plan", "tiny", "--gpus", "0"], "Invalid value for '--gpus'"),
        (["monitor", "--gpu-index", "a,b"], "Invalid value for '--gpu-index'"),
        (["power", "set", "300", "--gpu-index", "0,1", "--yes"], "one GPU at a time"),
        (["scale", "tiny", "--gpus", "0"], "Invalid value for '--gpus'"),
    ],
)
def test_gpu_flags_have_one_grammar(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in unboxed(result.output), result.output


def test_plan_shows_the_time_on_each_gpu_count() -> None:
    base = ["plan", "--throughput", "1000", "--samples", "1e6", "--epochs", "1", "-f", "json"]
    result = runner.invoke(app, [*base, "--gpus", "3,16"])
    assert result.exit_code == 0, result.output
    rows = [r["label"] for r in json.loads(result.stdout)["time"]["rows"]]
    assert any("on 3 GPUs" in r for r in rows) and any("on 16 GPUs" in r for r in rows)


@pytest.mark.parametrize(("cc", "mig"), [((10, 0), True), ((9, 0), True), ((7, 5), False)])
def test_plan_compares_compute_capabilities_as_numbers(
    monkeypatch: pytest.MonkeyPatch, cc: tuple[int, int], mig: bool
) -> None:
    """ "10.0" >= "8.0" is False as text: a Blackwell GPU is MIG-capable all the same."""
    from tests.fakes import FakeGpu

    real = inventory.read_inventory
    nvml = FakeNvml([FakeGpu(cc=cc, extra={"nvmlDeviceGetMigMode": (0, 0)})])
    monkeypatch.setattr(inventory, "read_inventory", lambda: real(nvml))
    result = runner.invoke(app, ["plan", "--scenario", "science", "-f", "json"])
    assert result.exit_code == 0, result.output
    recs = json.loads(result.stdout)["scenario"]["recommendations"]
    assert any(r["setting"] == "sharing" for r in recs) is mig


def test_plan_draws_peak_memory_against_batch_with_the_capacity(tmp_path: Path) -> None:
    out = tmp_path / "plan.png"
    result = runner.invoke(
        app, ["plan", "tiny", "--spec", "T4", "--batch", "64", "--plot", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = runner.invoke(app, ["plan", "tiny", "--spec", "T4", "--plot", str(out)])
    assert again.exit_code == 2 and "already exists" in unboxed(again.output)
    none = runner.invoke(app, ["plan", "--throughput", "10", "--samples", "100", "--plot", "p.png"])
    assert none.exit_code == 2 and "--plot draws a MODEL's memory" in unboxed(none.output)
