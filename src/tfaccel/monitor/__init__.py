"""`tfaccel monitor`: live GPU health, alerts, logs, Prometheus, and a Keras callback.

`GpuMonitorCallback` is imported on first use (it needs Keras); the rest needs only NVML.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GpuMonitorCallback"]


def __getattr__(name: str) -> Any:
    if name == "GpuMonitorCallback":
        from tfaccel.monitor.callback import GpuMonitorCallback

        return GpuMonitorCallback
    raise AttributeError(name)
