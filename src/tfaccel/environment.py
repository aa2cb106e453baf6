"""The environment a measurement ran in, recorded with every result file."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import sys
from typing import Any


def environment() -> dict[str, Any]:
    """GPU, driver, Python and package versions (never raises; missing parts are None)."""
    versions: dict[str, str | None] = {}
    for dist in ("tfaccel", "tensorflow", "keras", "keras-hub", "nvidia-ml-py"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = None
    gpus: list[dict[str, Any]] = []
    driver = cuda = None
    try:
        from tfaccel.hardware.nvml import driver_info

        info = driver_info()
        driver, cuda = info.driver_version, info.cuda_version
        gpus = [
            {
                "name": g.name,
                "compute_capability": g.compute_capability,
                "memory_total_mib": g.memory_total_mib,
            }
            for g in info.gpus
        ]
    except Exception:
        pass
    return {
        "gpus": gpus,
        "driver": driver,
        "driver_cuda": cuda,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        # XLA's options in effect (tfaccel's xla_options write them here)
        "xla_flags": os.environ.get("XLA_FLAGS") or None,
        **versions,
    }


def machine_id() -> str:
    """This machine as it is now: host name, boot and the GPUs a child process sees.

    Two measurements compare only where this is the same: the same GPU model on another
    host, or on the same host after a reboot, can run a model 4-5 % apart. A tune
    journal records it with each trial.
    """
    boot = ""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
    except OSError:
        pass
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible if visible is not None else "all"
    return f"{platform.node()}/{boot or 'unknown-boot'}/gpus={gpus}"
