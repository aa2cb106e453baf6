"""Power limits: read them, set them (root and explicit confirmation), sweep them.

Setting a limit changes a shared machine's behaviour for everyone on it: it needs root,
an explicit `yes=True`, a value inside the GPU's allowed range, and a sweep always puts
the original limit back, even when interrupted or when a step fails.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tfaccel.errors import GpuError, InputError
from tfaccel.hardware.nvml import Nvml


@dataclass(frozen=True)
class PowerInfo:
    index: int
    name: str | None
    limit_w: float | None
    default_limit_w: float | None
    min_limit_w: float | None
    max_limit_w: float | None
    draw_w: float | None
    energy_j: float | None


def _w(value: Any) -> float | None:
    return round(float(value) / 1000.0, 1) if value is not None else None


def _info(nvml: Nvml, i: int) -> PowerInfo:
    count = nvml.get("nvmlDeviceGetCount")
    if isinstance(count, int) and not 0 <= i < count:  # as monitor says it
        raise InputError(
            f"GPU index {i} does not exist",
            expected=f"0..{count - 1}" if count else "a machine with an NVIDIA GPU",
            received=i,
        )
    handle, err = nvml.try_call("nvmlDeviceGetHandleByIndex", i)
    if err is not None:
        raise GpuError(
            f"GPU {i} cannot be reached", expected="a GPU that answers NVML", received=err
        )
    cons = nvml.get("nvmlDeviceGetPowerManagementLimitConstraints", handle)
    return PowerInfo(
        i,
        nvml.get("nvmlDeviceGetName", handle),
        _w(nvml.get("nvmlDeviceGetPowerManagementLimit", handle)),
        _w(nvml.get("nvmlDeviceGetPowerManagementDefaultLimit", handle)),
        _w(cons[0]) if cons else None,
        _w(cons[1]) if cons else None,
        _w(nvml.get("nvmlDeviceGetPowerUsage", handle)),
        _w(nvml.get("nvmlDeviceGetTotalEnergyConsumption", handle)),
    )


def read_power(lib: Any = None) -> list[PowerInfo]:
    with Nvml(lib) as nvml:
        count = int(nvml.get("nvmlDeviceGetCount", default=0) or 0)
        return [_info(nvml, i) for i in range(count)]


def _check_allowed(yes: bool, is_root: bool | None) -> None:
    if not yes:
        raise InputError(
            "Changing the GPU power limit needs explicit confirmation",
            expected="--yes (or yes=True)",
            received="no confirmation",
            hint="the limit applies to every process on this GPU until reset",
        )
    root = (os.geteuid() == 0) if is_root is None and hasattr(os, "geteuid") else bool(is_root)
    if not root:
        raise GpuError(
            "Changing the GPU power limit needs root",
            expected="running as root",
            received=f"uid {os.getuid()}" if hasattr(os, "getuid") else "not root",
            hint="sudo tfaccel power set WATTS --yes",
        )


def set_power_limit(
    index: int, watts: float, *, yes: bool, lib: Any = None, is_root: bool | None = None
) -> tuple[float | None, float]:
    """Set GPU `index`'s limit to `watts`; returns (previous limit, new limit)."""
    _check_allowed(yes, is_root)
    with Nvml(lib) as nvml:
        info = _info(nvml, index)
        lowest, highest = info.min_limit_w, info.max_limit_w
        if lowest is not None and highest is not None and not lowest <= watts <= highest:
            raise InputError(
                f"{watts:g} W is outside GPU {index}'s allowed power range",
                expected=f"{lowest:g} to {highest:g} W",
                received=f"{watts:g} W",
            )
        handle = nvml.get("nvmlDeviceGetHandleByIndex", index)
        _, err = nvml.try_call("nvmlDeviceSetPowerManagementLimit", handle, round(watts * 1000))
        if err is not None:
            raise GpuError(
                f"NVML refused the power limit for GPU {index}",
                expected="a settable limit (root, not in a VM that forbids it)",
                received=err,
            )
        return info.limit_w, watts


def reset_power_limit(
    index: int, *, yes: bool, lib: Any = None, is_root: bool | None = None
) -> tuple[float | None, float]:
    """Put GPU `index` back to its default limit."""
    _check_allowed(yes, is_root)  # before NVML is even asked
    infos = read_power(lib)
    if index >= len(infos):
        raise InputError(
            f"GPU index {index} does not exist", expected=f"0..{len(infos) - 1}", received=index
        )
    default = infos[index].default_limit_w
    if default is None:
        raise GpuError(
            "The default power limit is not available",
            expected="a GPU that reports its default limit",
            received="n/a",
        )
    return set_power_limit(index, default, yes=yes, lib=lib, is_root=is_root)


def check_limits(info: PowerInfo, limits: list[float]) -> None:
    """An InputError naming the first limit that is not a number of watts within the
    GPU's allowed range."""
    lowest, highest = info.min_limit_w, info.max_limit_w
    for watts in limits:
        finite = math.isfinite(watts) and watts > 0
        if not finite or (
            lowest is not None and highest is not None and not lowest <= watts <= highest
        ):
            raise InputError(
                f"{watts:g} W is outside GPU {info.index}'s allowed power range",
                expected=f"{lowest:g} to {highest:g} W"
                if lowest is not None and highest is not None
                else "> 0 W",
                received=f"{watts:g} W (of {', '.join(f'{limit:g}' for limit in limits)})",
                hint="nothing was changed: every limit is checked before the first is set",
            )


@dataclass(frozen=True)
class SweepPoint:
    limit_w: float
    samples_per_s: float | None
    power_mean_w: float | None
    samples_per_j: float | None
    temp_max_c: float | None
    error: str | None = None


@dataclass(frozen=True)
class SweepResult:
    index: int
    original_limit_w: float | None
    restored: bool
    restore_error: str | None
    points: tuple[SweepPoint, ...]


Measure = Callable[[float], tuple[float | None, float | None, float | None]]


def sweep(
    index: int,
    limits: list[float],
    measure: Measure,
    *,
    yes: bool,
    lib: Any = None,
    is_root: bool | None = None,
) -> SweepResult:
    """For each limit: set it, run `measure(limit)` -> (samples/s, mean W, max C).

    The original limit is restored in a `finally`, so Ctrl-C or a failing step still
    leaves the GPU as it was; the result says whether the restore worked.
    """
    if not limits:
        raise InputError(
            "No power limits to sweep", expected="--limits 300,400,500", received="nothing"
        )
    _check_allowed(yes, is_root)
    infos = read_power(lib)
    if index >= len(infos):
        raise InputError(
            f"GPU index {index} does not exist", expected=f"0..{len(infos) - 1}", received=index
        )
    check_limits(infos[index], limits)  # all of them, before the first is set
    original = infos[index].limit_w
    points: list[SweepPoint] = []
    restored, restore_error = False, None
    try:
        for watts in limits:
            set_power_limit(index, watts, yes=yes, lib=lib, is_root=is_root)
            try:
                rate, power, temp = measure(watts)
                per_j = rate / power if rate and power else None
                points.append(SweepPoint(watts, rate, power, per_j, temp))
            except Exception as exc:  # one bad step does not lose the others
                points.append(
                    SweepPoint(watts, None, None, None, None, error=f"{type(exc).__name__}: {exc}")
                )
    finally:
        if original is not None:
            try:
                set_power_limit(index, original, yes=yes, lib=lib, is_root=is_root)
                restored = True
            except Exception as exc:
                restore_error = f"{type(exc).__name__}: {exc}"
    return SweepResult(index, original, restored, restore_error, tuple(points))
