"""The only module that imports `pynvml` (the `nvidia-ml-py` package).

Every query goes through `Nvml.get`, which returns a default ("not available") instead
of raising when a GPU does not support a call, so callers show "n/a" rather than crash.
Tests inject a fake module with the same function names at this boundary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any

from tfaccel.errors import DependencyMissingError, GpuError
from tfaccel.hardware.pci import PCI_DEVICES, nvidia_pci_devices

_NVML_HINT = "nvidia-smi  (if it fails too, the NVIDIA driver is not installed or not loaded)"
_NO_GPU_HINT = (
    "this machine has no NVIDIA GPU (none on its PCI bus), so there is no driver to fix; "
    "tfaccel hw --compare and tfaccel plan --spec work from spec data"
)


def nvml_hint(pci_root: str = PCI_DEVICES) -> str:
    """What to do when NVML cannot start: check the driver, unless the machine has no
    NVIDIA GPU at all (then nothing is broken)."""
    return _NO_GPU_HINT if nvidia_pci_devices(pci_root) == 0 else _NVML_HINT


def load_pynvml() -> ModuleType:
    """Import the NVML bindings or raise DependencyMissingError with the pip command."""
    from tfaccel._deps import require

    return require("pynvml", "nvidia-ml-py", "The NVML bindings")


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class Nvml:
    """An NVML session: `with Nvml() as nv: nv.get("nvmlDeviceGetCount")`."""

    def __init__(self, lib: ModuleType | Any | None = None, pci_root: str = PCI_DEVICES) -> None:
        self.lib = lib if lib is not None else load_pynvml()
        self._open = False
        self._pci_root = pci_root

    def __enter__(self) -> Nvml:
        try:
            self.lib.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise GpuError(
                "NVML could not start, so the NVIDIA driver cannot be queried",
                expected="a loaded NVIDIA driver with libnvidia-ml.so.1",
                received=f"{type(exc).__name__}: {_text(str(exc))}",
                hint=nvml_hint(self._pci_root),
            ) from exc
        self._open = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._open:
            with contextlib.suppress(Exception):
                self.lib.nvmlShutdown()
            self._open = False

    def get(self, fn: str, *args: Any, default: Any = None) -> Any:
        """Call `pynvml.<fn>(*args)`; return `default` if unsupported, missing or failing."""
        func: Callable[..., Any] | None = getattr(self.lib, fn, None)
        if func is None:
            return default
        try:
            return _text(func(*args))
        except Exception:
            return default

    def try_call(self, fn: str, *args: Any) -> tuple[Any, str | None]:
        """Call `pynvml.<fn>(*args)`; return (value, None) or (None, error text)."""
        func: Callable[..., Any] | None = getattr(self.lib, fn, None)
        if func is None:
            return None, f"{fn} is not in this version of nvidia-ml-py"
        try:
            return _text(func(*args)), None
        except Exception as exc:
            return None, f"{type(exc).__name__}: {_text(str(exc))}"


@dataclass(frozen=True)
class GpuBrief:
    """What the doctor needs to know about one GPU."""

    index: int
    name: str | None
    uuid: str | None
    compute_capability: str | None  # "9.0"
    memory_total_mib: int | None
    error: str | None = None


@dataclass(frozen=True)
class DriverInfo:
    """The NVIDIA driver as NVML reports it; `available` is False when NVML cannot start."""

    available: bool
    error: str | None
    driver_version: str | None
    cuda_version: str | None  # the newest CUDA the driver supports, "12.4"
    gpus: tuple[GpuBrief, ...] = ()


def cuda_version_text(value: int | None) -> str | None:
    """NVML encodes CUDA 12.4 as 12040."""
    if not value:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def driver_info(lib: ModuleType | Any | None = None) -> DriverInfo:
    """Query the driver and every GPU; never raises."""
    try:
        session = Nvml(lib)
    except DependencyMissingError as exc:
        return DriverInfo(False, exc.message, None, None)
    try:
        with session as nvml:
            driver = nvml.get("nvmlSystemGetDriverVersion")
            cuda = nvml.get("nvmlSystemGetCudaDriverVersion_v2") or nvml.get(
                "nvmlSystemGetCudaDriverVersion"
            )
            count, err = nvml.try_call("nvmlDeviceGetCount")
            gpus: list[GpuBrief] = []
            if err is not None:
                return DriverInfo(
                    True, f"nvmlDeviceGetCount failed: {err}", driver, cuda_version_text(cuda)
                )
            for i in range(int(count or 0)):
                handle, herr = nvml.try_call("nvmlDeviceGetHandleByIndex", i)
                if herr is not None:
                    gpus.append(GpuBrief(i, None, None, None, None, error=herr))
                    continue
                capability = nvml.get("nvmlDeviceGetCudaComputeCapability", handle)
                mem = nvml.get("nvmlDeviceGetMemoryInfo", handle)
                gpus.append(
                    GpuBrief(
                        index=i,
                        name=nvml.get("nvmlDeviceGetName", handle),
                        uuid=nvml.get("nvmlDeviceGetUUID", handle),
                        compute_capability=f"{capability[0]}.{capability[1]}"
                        if capability
                        else None,
                        memory_total_mib=int(mem.total) // 2**20 if mem is not None else None,
                    )
                )
            return DriverInfo(True, None, driver, cuda_version_text(cuda), tuple(gpus))
    except GpuError as exc:
        return DriverInfo(False, str(exc.received or exc.problem), None, None)
