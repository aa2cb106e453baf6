"""`tfaccel profile -- python train.py`: profile a window of an unmodified script."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from tfaccel._child import run_attached
from tfaccel.errors import InputError, WorkloadError
from tfaccel.script.run import hooked_env
from tfaccel.trial import protocol


class ProfiledRun(NamedTuple):
    exit_code: int
    no_profile: str | None  # why the hook captured nothing, if it said so


def run_profiled(
    command: Sequence[str],
    logdir: Path,
    start: int = 10,
    steps: int = 10,
    timeout_s: float | None = None,
    stdout_to_stderr: bool = False,
    stop: bool = False,
    fit: int | None = None,
) -> ProfiledRun:
    """Run `command` with tfaccel's fit hook on PYTHONPATH.

    With `stdout_to_stderr` the command's own output goes to stderr, so that stdout
    carries only tfaccel's report (`--format json`). With `stop` the script ends once
    the window is captured (exit code 0). `fit` profiles that call of the script's
    `model.fit` calls alone (default: the first that runs past the window).
    """
    if not command:
        raise InputError(
            "No command to profile",
            expected="tfaccel profile -- python train.py ...",
            received="nothing after --",
        )
    cmd = list(command)
    if cmd[0] in ("python", "python3"):
        cmd[0] = sys.executable
    with tempfile.TemporaryDirectory(prefix="tfaccel-profile-") as tmp:
        status = Path(tmp) / "status"
        env = hooked_env()
        env.update(
            {
                protocol.PROFILE_LOGDIR_ENV: str(logdir),
                protocol.PROFILE_START_ENV: str(start),
                protocol.PROFILE_STEPS_ENV: str(steps),
                protocol.PROFILE_STATUS_ENV: str(status),
                protocol.PROFILE_STOP_ENV: "1" if stop else "",
                protocol.PROFILE_FIT_ENV: str(fit or ""),
            }
        )
        code = _run(cmd, env, timeout_s, stdout_to_stderr)
        said = status.read_text(encoding="utf-8").strip() if status.exists() else ""
    return ProfiledRun(code, said.splitlines()[0] if said else None)


def _run(
    cmd: list[str], env: dict[str, str], timeout_s: float | None, stdout_to_stderr: bool
) -> int:
    try:
        stdout = 2 if stdout_to_stderr else None  # fd 2: this process's stderr
        return run_attached(cmd, env, timeout_s, stdout)
    except FileNotFoundError as exc:
        raise InputError(
            f"Cannot run {cmd[0]!r}", expected="a command on PATH", received=str(exc)
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise WorkloadError(
            "The profiled command timed out", expected=f"under {timeout_s} s", received="timeout"
        ) from exc
