"""What the PCI bus shows (sysfs), without a driver: whether a machine has an NVIDIA GPU
at all, so that a failure of NVML is told apart from a machine with nothing to drive."""

from __future__ import annotations

import glob
import os
from pathlib import Path

PCI_DEVICES = "/sys/bus/pci/devices"


def read_or_empty(path: str) -> str:
    """A small system file's text ("" where it cannot be read: sysfs, procfs)."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def nvidia_pci_devices(root: str = PCI_DEVICES) -> int | None:
    """How many NVIDIA GPUs (vendor 0x10de, display class 0x03) the PCI bus shows; None
    where the bus cannot be read (not Linux, a sandbox)."""
    devices = glob.glob(os.path.join(root, "*"))
    if not devices:
        return None
    return sum(
        read_or_empty(os.path.join(device, "vendor")).strip().lower() == "0x10de"
        and read_or_empty(os.path.join(device, "class")).strip().lower().startswith("0x03")
        for device in devices
    )
