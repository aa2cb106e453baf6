"""TensorFlow's C++ chatter at import (absl's INFO lines and its InitializeLog banner,
which TF_CPP_MIN_LOG_LEVEL does not silence in TF 2.21) stays off the terminal of a
tfaccel command; errors and Python's own lines still get through."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tfaccel._native import is_noise, quiet_native


@pytest.mark.parametrize(
    ("line", "noise"),
    [
        ("WARNING: All log messages before absl::InitializeLog() is called are written", True),
        ("I0000 00:00:1796278596.317098   23845 port.cc:153] oneDNN custom operations", True),
        ("W1203 05:36:44.317441   23845 gpu_device.cc:2342] Cannot dlopen some GPU", True),
        ("E0000 00:00:1796278599.617558   23845 cuda_platform.cc:52] failed call to cuInit", False),
        ("UserWarning: something the user should read", False),
        ("I0000 is how this line starts, but it is not absl's", False),
    ],
)  # fmt: skip
def test_the_noise_rule(line: str, noise: bool) -> None:
    assert is_noise(line) is noise


def test_quiet_native_keeps_what_is_not_noise(capfd: pytest.CaptureFixture[str]) -> None:
    with quiet_native():
        os.write(2, b"I0000 00:00:1.5 7 port.cc:153] chatter\n")
        os.write(2, b"E0000 00:00:1.5 7 cuda.cc:52] an error\n")
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
    err = capfd.readouterr().err
    assert "chatter" not in err and "an error" in err
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ  # children keep the user's environment


def _import_stderr(quiet: bool) -> str:
    code = textwrap.dedent(f"""
        import sys
        from tfaccel import _tf
        _tf.QUIET_IMPORT["on"] = {quiet}
        _tf.import_tensorflow()
        print("imported", file=sys.stderr)
    """)
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    ).stderr


def test_tensorflows_import_is_quiet_under_the_command_line() -> None:
    pytest.importorskip("tensorflow")
    loud = _import_stderr(quiet=False)
    quiet = _import_stderr(quiet=True)
    assert "imported" in quiet
    assert not any(is_noise(line) for line in quiet.splitlines()), quiet
    if not any(is_noise(line) for line in loud.splitlines()):
        pytest.skip("this TensorFlow prints no absl lines at import: nothing to hold back")
