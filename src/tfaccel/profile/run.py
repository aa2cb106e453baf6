"""`tfaccel profile -- python train.py`: profile a window of an unmodified script."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tfaccel._child import hooked_env
from tfaccel.errors import InputError, WorkloadError


def run_profiled(
    command: Sequence[str],
    logdir: Path,
    start: int = 10,
    steps: int = 10,
    timeout_s: float | None = None,
    stdout_to_stderr: bool = False,
) -> int:
    """Run `command` with tfaccel's fit hook on PYTHONPATH; returns its exit code.

    With `stdout_to_stderr` the command's own output goes to stderr, so that stdout
    carries only tfaccel's report (`--format json`).
    """
    if not command:
        raise InputError(
            "No command to profile",
            expected="tfaccel profile -- python train.py ...",
            received="nothing after --",
        )
    env = hooked_env()
    env.update(
        TFACCEL_PROFILE_LOGDIR=str(logdir),
        TFACCEL_PROFILE_START=str(start),
        TFACCEL_PROFILE_STEPS=str(steps),
    )
    cmd = list(command)
    if cmd[0] in ("python", "python3"):
        cmd[0] = sys.executable
    try:
        stdout = 2 if stdout_to_stderr else None  # fd 2: this process's stderr
        return subprocess.run(
            cmd, env=env, timeout=timeout_s, check=False, stdout=stdout
        ).returncode
    except FileNotFoundError as exc:
        raise InputError(
            f"Cannot run {cmd[0]!r}", expected="a command on PATH", received=str(exc)
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise WorkloadError(
            "The profiled command timed out", expected=f"under {timeout_s} s", received="timeout"
        ) from exc
