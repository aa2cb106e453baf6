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


def evaluate(g: GpuSample, t: Thresholds) -> list[Alert]:
    """Every alert one sample raises."""
    if g.error:
        return [
            Alert(
                g.index,
                "lost",
                f"GPU {g.index} does not answer: {g.error} (look for "
                "Xid errors: dmesg | grep -i xid)",
                "critical",
            )
        ]
    out: list[Alert] = []
    if g.temp_c is not None and g.temp_c >= t.temp_c:
        edge = f", slowdown at {g.temp_slowdown_c:.0f} C" if g.temp_slowdown_c else ""
        out.append(
            Alert(
                g.index,
                "temperature",
                f"GPU {g.index} at {g.temp_c:.0f} C (threshold {t.temp_c:.0f} C{edge})",
                "critical" if g.temp_slowdown_c and g.temp_c >= g.temp_slowdown_c else "warning",
            )
        )
    bad = harmful(g.throttle)
    if bad:
        out.append(
            Alert(g.index, "throttle", f"GPU {g.index} clocks held down by {', '.join(bad)}")
        )
    pct = g.mem_pct
    if pct is not None and pct >= t.mem_pct:
        out.append(
            Alert(
                g.index,
                "memory",
                f"GPU {g.index} memory {pct:.0f}% full (threshold {t.mem_pct:.0f}%)",
            )
        )
    if g.ecc_uncorrected:
        out.append(
            Alert(
                g.index,
                "ecc",
                f"GPU {g.index} has {g.ecc_uncorrected} uncorrected "
                "ECC error(s) since the driver loaded",
                "critical",
            )
        )
    return out
