"""The NVML layer with a fake pynvml at its boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import FakeGpu, FakeNvml
from tfaccel.errors import ExitCode, GpuError
from tfaccel.hardware.nvml import Nvml, cuda_version_text, driver_info


def test_driver_info_reads_every_gpu() -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu(name="NVIDIA A100-SXM4-80GB", cc=(8, 0))])
    info = driver_info(nvml)
    assert info.available and info.error is None
    assert info.driver_version == "580.159.03" and info.cuda_version == "13.0"
    assert [g.name for g in info.gpus] == ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]
    assert info.gpus[0].compute_capability == "9.0"
    assert info.gpus[0].memory_total_mib == 143771
    assert nvml.shutdowns == 1


def test_unsupported_query_is_none_not_a_crash() -> None:
    nvml = FakeNvml([FakeGpu(unsupported=("nvmlDeviceGetMemoryInfo",))])
    gpu = driver_info(nvml).gpus[0]
    assert gpu.memory_total_mib is None and gpu.name == "NVIDIA H200"


def test_init_failure_is_reported_not_raised() -> None:
    info = driver_info(FakeNvml(init_error="Driver Not Loaded"))
    assert not info.available
    assert info.error == "FakeNVMLError: Driver Not Loaded"


def _pci(root: Path, *vendors: str) -> str:
    """A sysfs PCI folder with one display device per vendor id."""
    for i, vendor in enumerate(vendors):
        device = root / f"0000:0{i}:00.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text("0x030200\n")
    return str(root)


def test_session_raises_gpu_error_with_hint(tmp_path: Path) -> None:
    """With an NVIDIA GPU on the PCI bus, NVML failing is the driver's fault: the hint
    checks it. With none, there is no driver to fix: the hint says so and names what
    works from spec data (a no-GPU machine was told to run nvidia-smi)."""
    with_gpu = _pci(tmp_path / "gpu", "0x10de")
    with (
        pytest.raises(GpuError) as caught,
        Nvml(FakeNvml(init_error="Driver Not Loaded"), with_gpu),
    ):
        pass
    assert caught.value.exit_code is ExitCode.GPU
    assert "Expected a loaded NVIDIA driver" in caught.value.message
    assert caught.value.hint and caught.value.hint.startswith("nvidia-smi")
    without = _pci(tmp_path / "cpu", "0x8086")
    with pytest.raises(GpuError) as caught, Nvml(FakeNvml(init_error="not found"), without):
        pass
    assert caught.value.hint and "no NVIDIA GPU (none on its PCI bus)" in caught.value.hint
    assert "nvidia-smi" not in caught.value.hint and "--spec" in caught.value.hint


def test_get_and_try_call() -> None:
    with Nvml(FakeNvml()) as nv:
        assert nv.get("nvmlDeviceGetCount") == 1
        assert nv.get("nvmlNoSuchFunction", default="n/a") == "n/a"
        value, err = nv.try_call("nvmlDeviceGetHandleByIndex", 5)
        assert value is None and err is not None and "IndexError" in err


def test_cuda_version_text() -> None:
    assert cuda_version_text(12040) == "12.4"
    assert cuda_version_text(13000) == "13.0"
    assert cuda_version_text(None) is None
