"""`tfaccel run` stopped by its pid stops the training script: SIGTERM passed on (exit
128 + 15), SIGKILL of tfaccel kills the script too; nothing left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl, /proc")

# A script that says its pid and trains "forever" (no Keras: the hook waits for it).
SCRIPT = """
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(120)
"""


# tfaccel run's start (imports, its hook's set-up) on a 2-core machine that other test
# processes load: seconds alone, up to tens under load.
STARTUP_S = 90.0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _start(tmp_path: Path, ignored: tuple[int, ...] = ()) -> tuple[subprocess.Popen[bytes], int]:
    """`tfaccel run` of SCRIPT, and the script's pid once it runs; `ignored`: signals
    `tfaccel run` starts ignoring (every other forwarded one at its default)."""
    (tmp_path / "train.py").write_text(SCRIPT)
    settings = {"schema": "tfaccel.settings/1", "settings": {"precision": "float32"}}
    (tmp_path / "tfaccel.json").write_text(json.dumps(settings))
    pid_file = tmp_path / "script.pid"
    run = subprocess.Popen(
        [sys.executable, "-m", "tfaccel", "run", "--", "python", "train.py", str(pid_file)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,  # not a terminal's foreground: signals come by pid
        start_new_session=True,
        # as from a terminal or a scheduler, whatever this test was started under (nohup
        # or a shell's background job leave SIGHUP or SIGINT ignored, and so the script)
        preexec_fn=lambda: [
            signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
        ],
    )
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline and run.poll() is None:
        if pid_file.exists() and pid_file.read_text().strip():
            return run, int(pid_file.read_text())
        time.sleep(0.05)
    run.kill()
    raise AssertionError(f"the script never started (tfaccel run's exit: {run.poll()})")


def _gone(pid: int) -> bool:
    for _ in range(100):
        if not _alive(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_run_stops_the_script_and_run_exits_128_plus_it(
    tmp_path: Path, sig: signal.Signals
) -> None:
    run, script = _start(tmp_path)
    os.kill(run.pid, sig)
    code = run.wait(timeout=STARTUP_S)
    assert _gone(script), "the script outlived tfaccel run"
    # SIGINT: the script's KeyboardInterrupt, which Python ends by SIGINT: 130 too
    assert code == 128 + sig


def test_run_killed_outright_takes_the_script_with_it(tmp_path: Path) -> None:
    run, script = _start(tmp_path)
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=STARTUP_S)
    assert _gone(script), "the script outlived tfaccel run"


def test_a_signal_run_was_started_ignoring_stays_ignored(tmp_path: Path) -> None:
    """Under nohup (SIGHUP ignored) a hangup stops neither tfaccel run nor the script, as
    it would stop neither without tfaccel; SIGTERM still stops both."""
    run, script = _start(tmp_path, ignored=(signal.SIGHUP,))
    os.kill(run.pid, signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        run.wait(timeout=1)
    assert _alive(script)
    os.kill(run.pid, signal.SIGTERM)
    assert run.wait(timeout=STARTUP_S) == 128 + signal.SIGTERM
    assert _gone(script)
