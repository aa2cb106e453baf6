"""The error model: a small exception hierarchy, one exit code per kind.

Every message has one shape: what is wrong, what was expected, what was received,
and a hint line naming the command or URL that helps.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Process exit codes of the `tfaccel` command (documented in README.md)."""

    OK = 0
    FINDINGS = 1  # a check failed or a threshold was not met
    USAGE = 2  # bad flags, values, files or entry points
    MISSING_DEPENDENCY = 3  # TensorFlow, the NVIDIA driver or another package is absent
    GPU = 4  # the GPU or NVML could not be used
    RUNTIME = 5  # a workload, trial or subprocess failed
    INTERRUPTED = 130  # Ctrl-C


class TfaccelError(Exception):
    """Base class of every error tfaccel raises on purpose."""

    exit_code: ExitCode = ExitCode.RUNTIME

    def __init__(
        self,
        problem: str,
        *,
        expected: str | None = None,
        received: Any = None,
        hint: str | None = None,
    ) -> None:
        self.problem = problem.rstrip(".")
        self.expected = expected
        self.received = received
        self.hint = hint
        # str() carries the hint too, for callers of the Python API (the CLI prints the
        # message and the hint on lines of their own)
        super().__init__(self.message + (f" Hint: {hint}" if hint else ""))

    @property
    def message(self) -> str:
        parts = [self.problem + "."]
        if self.expected is not None:
            parts.append(f"Expected {self.expected.rstrip('.')}.")
        if self.received is not None:
            parts.append(f"Received: {self.received}")
        return " ".join(parts)


class InputError(TfaccelError):
    """Bad input from the user: a flag, a value, a file or a model entry point."""

    exit_code = ExitCode.USAGE


class ConfigFileError(InputError):
    """A configuration or result file that cannot be read or does not match its schema."""


class DependencyMissingError(TfaccelError):
    """A package or system component the command needs is not installed."""

    exit_code = ExitCode.MISSING_DEPENDENCY


class GpuError(TfaccelError):
    """The GPU, its driver or NVML failed or is not present."""

    exit_code = ExitCode.GPU


class ChecksFailed(TfaccelError):
    """A check or a gate failed; the report says which."""

    exit_code = ExitCode.FINDINGS


class WorkloadError(TfaccelError):
    """A workload, trial or helper subprocess failed."""

    exit_code = ExitCode.RUNTIME


class WriteError(TfaccelError):
    """A file could not be written during the work (the disk filled, the folder turned
    read-only); the files written before it are whole."""

    exit_code = ExitCode.RUNTIME

    @classmethod
    def of(cls, exc: OSError) -> WriteError:
        where = exc.filename or "the output"
        return cls(
            f"Cannot write {where}: {exc.strerror or exc}",
            hint="free some space, or give the command another path",
        )
