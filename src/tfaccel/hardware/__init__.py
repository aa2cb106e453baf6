"""GPU inventory, spec data and topology (NVML is reached only through `nvml`)."""

from __future__ import annotations


def capability_at_least(compute_capability: str | None, minimum: float) -> bool:
    """Is this compute capability ("9.0") known and at least `minimum`? False for None
    and for a string that is not a number."""
    try:
        return compute_capability is not None and float(compute_capability) >= minimum
    except ValueError:
        return False
