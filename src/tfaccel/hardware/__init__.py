"""GPU inventory, spec data and topology (NVML is reached only through `nvml`)."""

from __future__ import annotations
