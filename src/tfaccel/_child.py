"""One protocol for every child process tfaccel starts (trials, plan's tracer and
peak measurement, doctor's probes).

A child is a fresh Python: TensorFlow's GPU memory is given back only when a process
ends, an unknown XLA flag or a CUDA crash aborts only the child, and a hang is killed
at its timeout. The child prints one line, `MARK + json`, with its result; everything
else it prints is its log. The parent reads that line, or, when there is none, the
exit code and the end of the child's stderr.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from tfaccel._native import is_noise
from tfaccel.errors import InputError, TfaccelError

log = logging.getLogger("tfaccel")  # `tfaccel -v` shows its debug lines
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras bolds parts of its error messages
_RAISED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b.*$", re.MULTILINE)
_OWN = os.path.dirname(os.path.abspath(__file__))  # tfaccel's package directory
_IMPORTLIB = os.path.dirname(importlib.__file__)
# A process ended by SIGKILL: the kernel's OOM killer, most often (or a user's kill -9).
_KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)


@dataclass(frozen=True)
class ChildResult:
    """What a child left: its marked payload (None without one), exit code (None when
    it was killed at the timeout), its output and how long it ran."""

    payload: dict[str, Any] | None
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def killed(self) -> bool:
        """Ended by SIGKILL (out of memory, most likely), not by its own error."""
        return self.returncode in _KILLED

    def tail(self, lines: int = 15, sep: str = "\n") -> str:
        """The last `lines` lines of the child's stderr, without absl's chatter
        (TensorFlow's INFO lines at import would otherwise fill it)."""
        kept = [ln for ln in ANSI.sub("", self.stderr).strip().splitlines() if not is_noise(ln)]
        return sep.join(kept[-lines:])

    def raised(self) -> str | None:
        """The last Python exception line on the child's stderr ("ValueError: ..."), where
        it ended with an uncaught exception of its own."""
        found = _RAISED.findall(ANSI.sub("", self.stderr))
        return found[-1].strip()[:300] if found else None

    def required(self, what: str, timeout_s: float, error: type[TfaccelError]) -> dict[str, Any]:
        """The payload of a child that must answer: `error` (a TfaccelError type) when it
        ran past `timeout_s` or wrote none; the child's own error, when it wrote one
        ({"error", "expected", "received", "kind": "input" for an InputError, "hint"})."""
        if self.timed_out:
            raise error(
                f"{what} took longer than {timeout_s:.0f} s",
                expected="an answer",
                received="timeout",
            )
        if self.payload is None:
            raise error(
                f"{what} failed",
                expected="its answer on its output",
                received=f"{self.exit_text()}: {self.tail(3, ' | ')}",
            )
        if self.payload.get("error"):
            cls = InputError if self.payload.get("kind") == "input" else error
            raise cls(
                self.payload["error"],
                expected=self.payload.get("expected"),
                received=self.payload.get("received"),
                hint=self.payload.get("hint"),
            )
        return self.payload

    def exit_text(self) -> str:
        """'exited with code N', with the likely cause of a kill."""
        text = f"exited with code {self.returncode}"
        return text + (" (killed: out of memory?)" if self.killed else "")


def child_env(
    base: Mapping[str, str] | None = None,
    *,
    paths: Literal["cwd", "safe", "as_is"] = "cwd",
    quiet_tf: bool = True,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a child: `base` (this process's), TensorFlow's C++ log quiet
    unless the caller set it or tfaccel's log is at debug (`tfaccel -v`), and its import
    paths: "cwd" puts the current directory first on PYTHONPATH, so a `module:function`
    entry point of the user's is importable; "safe" leaves out even Python's own
    current-directory entry (PYTHONSAFEPATH, 3.11+), so a stray `keras.py` there does
    not shadow Keras; "as_is" keeps Python's own rules (a user's script imports the
    modules beside it).
    `overrides` last."""
    env = dict(os.environ if base is None else base)
    if quiet_tf and not log.isEnabledFor(logging.DEBUG):
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if paths == "cwd":
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    elif paths == "safe":
        env["PYTHONSAFEPATH"] = "1"
    env.update(overrides or {})
    return env


def run_child(
    args: Sequence[str],
    mark: str,
    env: Mapping[str, str],
    timeout_s: float,
) -> ChildResult:
    """`python ARGS` (this interpreter) with `env`; its last `mark` line parsed as JSON."""
    return run_command([sys.executable, *args], mark, env, timeout_s)


def run_command(
    argv: Sequence[str],
    mark: str,
    env: Mapping[str, str],
    timeout_s: float,
) -> ChildResult:
    """`argv` with `env`; its last `mark` line parsed as JSON.

    It runs in a process group of its own, its output captured in files, not pipes: a
    process it starts that inherits them (a TensorBoard, a GPU logger) cannot hold its
    result back, since it ends when its own process ends; and what it wrote is read
    whether it ended or was killed at the timeout. Then the group is killed, so nothing
    it started outlives it, and its temporary folder is removed."""
    start = time.perf_counter()
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory(prefix="tfaccel-child-") as tmp,
    ):
        # its temporary files (autograph's converted functions, which a process that
        # ends with os._exit never removes) go in a folder removed after it
        own_tmp = {"TMPDIR": tmp, "TEMP": tmp, "TMP": tmp}
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=err,
            env={**env, **own_tmp},
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            end_group(proc)
        stdout, stderr = _read(out), _read(err)
    wall = timeout_s if code is None else time.perf_counter() - start
    how = f"killed at its {timeout_s:.0f} s timeout" if code is None else f"exit {code}"
    _log_child(argv, f"{how} after {wall:.1f} s", stderr)
    return ChildResult(_payload(stdout, mark), code, stdout, stderr, wall)


# What a supervisor or a job scheduler sends to stop a process by its pid: passed on to
# the command a user runs through tfaccel.
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def run_attached(
    argv: Sequence[str],
    env: Mapping[str, str],
    timeout_s: float | None = None,
    stdout: int | None = None,
) -> int:
    """A command the user runs through tfaccel (`run --`, `profile --`), its output its
    own (`stdout`: a file descriptor for it instead). It dies with tfaccel, even by
    SIGKILL (Linux); the FORWARDED signals sent to tfaccel are passed on to it, so that
    stopping tfaccel by its pid stops the training (Ctrl-C at a terminal reaches both
    already, and is not sent twice). Its exit code, 128 + N where signal N ended it;
    subprocess.TimeoutExpired past `timeout_s`, with the command killed."""
    proc = subprocess.Popen(list(argv), env=dict(env), stdout=stdout, preexec_fn=_die_with_parent())

    def forward(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and _foreground():
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    main = threading.current_thread() is threading.main_thread()
    # A signal tfaccel was started ignoring (nohup: SIGHUP; a shell's background job:
    # SIGINT) the command ignores as well: left ignored, not forwarded.
    caught = [sig for sig in FORWARDED if signal.getsignal(sig) is not signal.SIG_IGN]
    old = {sig: signal.signal(sig, forward) for sig in caught} if main else {}
    try:
        code = proc.wait(timeout=timeout_s)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


def _foreground() -> bool:
    """Is this process in the foreground of a terminal (whose Ctrl-C reaches the whole
    process group, the command included)?"""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def end_group(proc: subprocess.Popen[Any]) -> None:
    """Kill the process group `proc` leads (it was started in a session of its own),
    with whatever it started, and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _read(f: Any) -> str:
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def _log_child(argv: Sequence[str], how: str, stderr: str) -> None:
    """A child's command line, how it ended and the end of its log, at debug level."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    command = shlex.join(argv)
    command = command if len(command) <= 300 else command[:300] + "..."
    log.debug("child %s: %s", command, how)
    if stderr.strip():
        log.debug("its log, last 4,000 characters:\n%s", stderr[-4000:].rstrip())


@functools.cache
def _die_with_parent() -> Callable[[], None] | None:
    """For the child, to run between fork and exec (Linux): the kernel kills it when
    tfaccel's process dies, even by SIGKILL, so a trial never outlives the tune that
    started it and keeps holding the GPU's memory. libc is loaded here, in the parent:
    the child, forked while other threads (a progress bar) may hold the import lock,
    must not import anything. None where prctl is not to be had."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return functools.partial(prctl, 1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _payload(stdout: str, mark: str) -> dict[str, Any] | None:
    found = None
    for line in stdout.splitlines():
        if line.startswith(mark):
            try:
                found = json.loads(line[len(mark) :])
            except json.JSONDecodeError:
                continue
    return found if isinstance(found, dict) else None


def emit(mark: str, payload: Mapping[str, Any]) -> None:
    """The child's side: print its one result line."""
    print(mark + json.dumps(dict(payload)), flush=True)


def end_process() -> NoReturn:
    """The child's side, once its result is out: end now, output flushed. The parent
    waits for the exit, and TensorFlow's teardown (the GPU context, a generator
    dataset's finalizers: 7.7 s of a stacked LSTM trial fed by a PyDataset, on a 2-core
    CPU) would be part of every trial's wall time for nothing."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def is_oom(exc: BaseException) -> bool:
    """Did TensorFlow run out of memory? By type (ResourceExhaustedError), and by
    XLA's status text, which reaches Python inside other error types."""
    tf = sys.modules.get("tensorflow")
    errors = getattr(tf, "errors", None)
    exhausted = getattr(errors, "ResourceExhaustedError", None)
    if isinstance(exhausted, type) and isinstance(exc, exhausted):
        return True
    text = str(exc)
    return (
        type(exc).__name__ == "ResourceExhaustedError"
        or "RESOURCE_EXHAUSTED" in text
        or "OOM when allocating" in text
        or "out of memory" in text.lower()
    )


# TensorFlow's graph errors open with "Graph execution error:", then the Python frames
# where each failing op was defined, then the root errors ("(0) INTERNAL:  Failed to
# ..."): the line a reader needs is the first root error, not the opening.
_FRAME_LINE = re.compile(
    r"^\s*($|File \"|Detected at node|Graph execution error:|\d+ root error\(s\) found"
    r"|\[\[|\d+ successful operations|\d+ derived errors)"
)
_ROOT_CODE = re.compile(r"^\s*\(\d+\)\s+[A-Z_]+:\s+")


def error_line(exc: BaseException, limit: int = 500) -> str:
    """The error in one line: its type and the first line of its message, or, for a
    TensorFlow graph error whose message opens with frames, its first root error."""
    lines = ANSI.sub("", str(exc)).splitlines()
    first = lines[0].strip() if lines else ""
    if first.startswith("Graph execution error") or not first:
        said = [ln for ln in lines if not _FRAME_LINE.match(ln)]
        first = _ROOT_CODE.sub("", said[0]).strip() if said else first
    return f"{type(exc).__name__}: {first}"[:limit] if first else type(exc).__name__


def failure(exc: BaseException) -> dict[str, Any]:
    """A trial's result for an exception: out of memory or an error, its line and the
    user's traceback."""
    return {
        "status": "oom" if is_oom(exc) else "error",
        "error": error_line(exc),
        "traceback": user_traceback(exc),
    }


def user_traceback(exc: BaseException, limit: int = 3000) -> str:
    """The traceback a user needs: where their code raised. When tfaccel wrapped the
    error (an entry point that raised while building the model), the wrapped error's
    own traceback comes first and tfaccel's one-line message after it; tfaccel's frames
    are left out, and a check of tfaccel's own (its error with no cause) is its message
    alone. The end is kept when it is long; terminal styling is removed."""
    cause = exc.__cause__
    if isinstance(exc, TfaccelError) and cause is None:
        text = f"{type(exc).__name__}: {exc}\n"
    elif isinstance(exc, TfaccelError) and cause is not None:
        first = str(exc).splitlines()[0] if str(exc) else ""
        text = _without_own_frames(cause) + f"{type(exc).__name__}: {first}\n"
    else:
        text = _without_own_frames(exc)
    return ANSI.sub("", text)[-limit:]


def user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of `exc`'s traceback that are the user's: not tfaccel's, nor Python's
    import machinery (a module that is not there has no frame of the user's)."""
    return [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith((_OWN, _IMPORTLIB, "<frozen importlib"))
    ]


def _without_own_frames(exc: BaseException) -> str:
    frames = user_frames(exc)
    head = "Traceback (most recent call last):\n" if frames else ""
    body = "".join(traceback.format_list(frames))
    return head + body + "".join(traceback.format_exception_only(type(exc), exc))
