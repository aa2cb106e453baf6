"""The doctor's result types."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Status(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, what was found, how to fix it, how to see it."""

    id: str
    title: str
    status: Status
    finding: str
    fix: str | None = None
    see: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DoctorReport:
    """Every check, in order, and a summary of the environment they ran in."""

    checks: tuple[Check, ...]
    environment: dict[str, Any]
    seconds: float

    def count(self, status: Status) -> int:
        return sum(1 for check in self.checks if check.status is status)

    @property
    def failed(self) -> bool:
        return any(check.status is Status.FAIL for check in self.checks)

    @property
    def verdict(self) -> str:
        gpu = next((check for check in self.checks if check.id == "tf.gpus"), None)
        if gpu is not None and gpu.status is Status.OK:
            return "TensorFlow can use the GPU" + (
                ", with warnings" if self.count(Status.WARN) else ""
            )
        if gpu is not None and gpu.status is Status.SKIP and "no NVIDIA GPU" in gpu.finding:
            return (
                gpu.finding[:1].upper()
                + gpu.finding[1:]
                + (": see the failed checks" if self.failed else "")
            )
        if self.failed:
            return "TensorFlow cannot use a GPU here: see the failed checks"
        return "No failures, but TensorFlow's use of the GPU was not confirmed"
