"""What the monitor samples: one table of metrics feeding every output format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# NVML's clock event (throttle) reasons: bit -> (name, benign). Benign reasons do not
# slow a busy GPU down: an idle GPU clocks down, and application clocks are a setting.
THROTTLE_REASONS: dict[int, tuple[str, bool]] = {
    0x1: ("gpu_idle", True),
    0x2: ("applications_clocks_setting", True),
    0x4: ("sw_power_cap", False),
    0x8: ("hw_slowdown", False),
    0x10: ("sync_boost", False),
    0x20: ("sw_thermal_slowdown", False),
    0x40: ("hw_thermal_slowdown", False),
    0x80: ("hw_power_brake_slowdown", False),
    0x100: ("display_clock_setting", True),
}


def decode_throttle(mask: int | None) -> tuple[str, ...]:
    """NVML's reason bitmask -> reason names (unknown bits as hex)."""
    if not mask:
        return ()
    names = [name for bit, (name, _) in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(hex(unknown))
    return tuple(names)


def harmful(reasons: tuple[str, ...]) -> tuple[str, ...]:
    benign = {name for name, ok in THROTTLE_REASONS.values() if ok}
    return tuple(reason for reason in reasons if reason not in benign)


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment. Unsupported readings are None."""

    time: float  # time.time()
    index: int
    name: str | None = None
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None  # total since driver load
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    throttle: tuple[str, ...] = ()
    pcie_tx_mbs: float | None = None
    pcie_rx_mbs: float | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    processes: tuple[tuple[int, str, float | None], ...] = ()  # (pid, name, MiB)
    error: str | None = None  # the GPU stopped answering

    @property
    def mem_pct(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib


@dataclass(frozen=True)
class Snapshot:
    time: float
    gpus: tuple[GpuSample, ...]
    alerts: tuple[Any, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Metric:
    """attribute, column label with its unit, Prometheus name and help."""

    attr: str
    label: str
    prom: str
    help: str


METRICS: tuple[Metric, ...] = (
    Metric(
        "util_gpu_pct",
        "GPU util %",
        "tfaccel_gpu_utilization_percent",
        "Percent of time a kernel was running (NVML)",
    ),
    Metric(
        "util_mem_pct",
        "mem util %",
        "tfaccel_gpu_memory_utilization_percent",
        "Percent of time device memory was read or written",
    ),
    Metric("mem_used_mib", "mem used MiB", "tfaccel_gpu_memory_used_mib", "Memory used"),
    Metric("mem_total_mib", "mem total MiB", "tfaccel_gpu_memory_total_mib", "Memory total"),
    Metric("temp_c", "temp C", "tfaccel_gpu_temperature_celsius", "GPU temperature"),
    Metric("power_w", "power W", "tfaccel_gpu_power_watts", "Power draw"),
    Metric("power_limit_w", "limit W", "tfaccel_gpu_power_limit_watts", "Enforced power limit"),
    Metric(
        "energy_j", "energy J", "tfaccel_gpu_energy_joules_total", "Energy since the driver loaded"
    ),
    Metric("sm_clock_mhz", "SM MHz", "tfaccel_gpu_sm_clock_mhz", "SM clock"),
    Metric("mem_clock_mhz", "mem MHz", "tfaccel_gpu_memory_clock_mhz", "Memory clock"),
    Metric(
        "pcie_tx_mbs",
        "PCIe tx MB/s",
        "tfaccel_gpu_pcie_tx_megabytes_per_second",
        "PCIe transmit throughput",
    ),
    Metric(
        "pcie_rx_mbs",
        "PCIe rx MB/s",
        "tfaccel_gpu_pcie_rx_megabytes_per_second",
        "PCIe receive throughput",
    ),
    Metric(
        "ecc_uncorrected",
        "ECC uncorr.",
        "tfaccel_gpu_ecc_uncorrected_errors",
        "Volatile uncorrected ECC errors",
    ),
)
