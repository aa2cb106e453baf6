"""An NVML fake whose readings a test can change while a sampler runs."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from tests.fakes import FakeGpu, FakeNvml, FakeNVMLError


class LiveGpu(FakeGpu):
    pass


class MonitorNvml(FakeNvml):
    """Readings come from `self.state[i]`, a dict a test may change at any time."""

    def __init__(self, n: int = 1, **state: Any) -> None:
        super().__init__([FakeGpu() for _ in range(n)])
        base = {
            "util": 10,
            "mem_util": 5,
            "used": 1 * 2**30,
            "temp": 40,
            "power_mw": 80000,
            "limit_mw": 700000,
            "default_mw": 700000,
            "min_mw": 200000,
            "max_mw": 700000,
            "energy_mj": 0,
            "reasons": 0x1,
            "ecc": 0,
            "sm": 345,
            "lost": False,
            "slow_s": 0.0,
            "set_error": None,
        }
        self.state = [dict(base, **state) for _ in range(n)]
        self.set_calls: list[tuple[int, int]] = []

    def _s(self, h: int) -> dict[str, Any]:
        st = self.state[h]
        if st["lost"]:
            raise FakeNVMLError("GPU is lost")
        if st["slow_s"]:
            time.sleep(st["slow_s"])
        return st

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if self.state[i]["lost"]:
            raise FakeNVMLError("GPU is lost")
        return i

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        s = self._s(h)
        return SimpleNamespace(gpu=s["util"], memory=s["mem_util"])

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        s = self._s(h)
        total = 143771 * 2**20
        return SimpleNamespace(total=total, used=s["used"], free=total - s["used"])

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._s(h)["temp"])

    def nvmlDeviceGetTemperatureThreshold(self, h: int, kind: int) -> int:
        return {0: 95, 1: 90}[kind]

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self._s(h)["power_mw"])

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return int(self._s(h)["limit_mw"])

    nvmlDeviceGetPowerManagementLimit = nvmlDeviceGetEnforcedPowerLimit

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return int(self._s(h)["default_mw"])

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h: int) -> tuple[int, int]:
        s = self._s(h)
        return s["min_mw"], s["max_mw"]

    def nvmlDeviceSetPowerManagementLimit(self, h: int, mw: int) -> None:
        s = self._s(h)
        if s["set_error"]:
            raise FakeNVMLError(s["set_error"])
        self.set_calls.append((h, mw))
        s["limit_mw"] = mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return int(self._s(h)["energy_mj"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._s(h)["reasons"])

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return int(self._s(h)["sm"]) if kind == 1 else 3201

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1980 if kind == 1 else 3201

    def nvmlDeviceGetPcieThroughput(self, h: int, kind: int) -> int:
        return 2048 if kind == 0 else 1024  # KB/s

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int:
        return int(self._s(h)["ecc"]) if kind == 1 else 0

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=4242, usedGpuMemory=512 * 2**20)]

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:
        return b"python3"
