"""The error model: one message shape, one exit code per kind."""

from __future__ import annotations

from tfaccel.errors import (
    ChecksFailed,
    ConfigFileError,
    DependencyMissingError,
    ExitCode,
    GpuError,
    InputError,
    TfaccelError,
    WorkloadError,
)


def test_message_shape() -> None:
    err = InputError(
        "Unknown precision.",
        expected="one of {'float32', 'mixed_float16'}",
        received="precision='fp8'",
        hint="tfaccel tune --help",
    )
    assert err.message == (
        "Unknown precision. Expected one of {'float32', 'mixed_float16'}. Received: precision='fp8'"
    )
    assert str(err) == err.message + " Hint: tfaccel tune --help"  # for the Python API
    assert err.hint == "tfaccel tune --help"
    assert str(InputError("No GPU", expected="a GPU")) == "No GPU. Expected a GPU."


def test_exit_codes_are_distinct() -> None:
    classes = [InputError, DependencyMissingError, GpuError, ChecksFailed, WorkloadError]
    codes = [c.exit_code for c in classes]
    assert len(set(codes)) == len(codes)
    assert ConfigFileError.exit_code is ExitCode.USAGE
    assert issubclass(ConfigFileError, InputError)
    assert all(issubclass(c, TfaccelError) for c in classes)
    assert ExitCode.OK == 0 and ExitCode.INTERRUPTED == 130
