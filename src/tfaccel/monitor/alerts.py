"""Alerts: temperature, harmful throttling, memory, ECC errors, a GPU that is lost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tfaccel.monitor.metrics import GpuSample, harmful


@dataclass(frozen=True)
class Thresholds:
    temp_c: float = 85.0  # junction guidance: keep under 85 C
    mem_pct: float = 95.0


AlertKind = Literal["temperature", "throttle", "memory", "ecc", "lost"]
Severity = Literal["warning", "critical"]


@dataclass(frozen=True)
class Alert:
    gpu: int
    kind: AlertKind
    message: str
    severity: Severity = "warning"


def evaluate(gpu: GpuSample, limits: Thresholds) -> list[Alert]:
    """Every alert one sample raises."""
    if gpu.error:
        return [
            Alert(
                gpu.index,
                "lost",
                f"GPU {gpu.index} does not answer: {gpu.error} (look for "
                "Xid errors: dmesg | grep -i xid)",
                "critical",
            )
        ]
    out: list[Alert] = []
    if gpu.temp_c is not None and gpu.temp_c >= limits.temp_c:
        edge = f", slowdown at {gpu.temp_slowdown_c:.0f} C" if gpu.temp_slowdown_c else ""
        out.append(
            Alert(
                gpu.index,
                "temperature",
                f"GPU {gpu.index} at {gpu.temp_c:.0f} C (threshold {limits.temp_c:.0f} C{edge})",
                "critical"
                if gpu.temp_slowdown_c and gpu.temp_c >= gpu.temp_slowdown_c
                else "warning",
            )
        )
    bad = harmful(gpu.throttle)
    if bad:
        out.append(
            Alert(gpu.index, "throttle", f"GPU {gpu.index} clocks held down by {', '.join(bad)}")
        )
    pct = gpu.mem_pct
    if pct is not None and pct >= limits.mem_pct:
        out.append(
            Alert(
                gpu.index,
                "memory",
                f"GPU {gpu.index} memory {pct:.0f}% full (threshold {limits.mem_pct:.0f}%)",
            )
        )
    if gpu.ecc_uncorrected:
        out.append(
            Alert(
                gpu.index,
                "ecc",
                f"GPU {gpu.index} has {gpu.ecc_uncorrected} uncorrected "
                "ECC error(s) since the driver loaded",
                "critical",
            )
        )
    return out
