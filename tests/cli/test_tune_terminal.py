"""tune's live display in a real terminal (a pseudo-terminal) of 80 and 120 columns: no
line of it wraps, the per-trial lines included, and the bar's count ends complete."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

# cursor moves, colours, erasing: what a live display writes besides its text
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")


def _in_terminal(argv: list[str], columns: int, cwd: Path) -> str:
    """`argv` with a pseudo-terminal of `columns` x 40 as its stdout and stderr; all it
    wrote there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(master)
    return out.decode("utf-8", "replace")


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_the_live_display_fits_the_terminal(columns: int, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "tfaccel", "tune", "tiny", "--max-batch", "64"]
    argv += ["--warmup", "2", "--windows", "2", "--window", "3", "--output", "t.json"]
    text = _in_terminal(argv, columns, tmp_path)
    assert (tmp_path / "t.json").exists(), text[-2000:]
    pieces = [p for line in _CONTROL.sub("", text).split("\n") for p in line.split("\r")]
    too_long = [p for p in pieces if len(p.rstrip()) > columns]
    assert not too_long, too_long[:5]
    assert any("spread" in p for p in pieces)  # the per-trial lines were shown
    counts = re.findall(r"(\d+)/(\d+) trials", text)  # and the live line's count
    assert counts and counts[-1][0] == counts[-1][1], counts[-3:]  # ends complete
