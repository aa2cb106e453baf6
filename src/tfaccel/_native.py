"""What native code (TensorFlow's C++, XProf's converters) writes to the process's
stderr, held apart from the terminal, and the one rule for which of it is noise."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# absl's INFO and WARNING lines ("I0000 00:00:1796.317 23845 port.cc:153] ...") and its
# banner for the lines written before absl::InitializeLog: TensorFlow 2.21 prints them at
# import whatever TF_CPP_MIN_LOG_LEVEL says. Errors (E/F lines) are never noise.
_NOISE = re.compile(
    r"^(?:[IW]\d{4} [\d:.]+\s+\d+ \S+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called)"
)


def is_noise(line: str) -> bool:
    """Is this stderr line absl's INFO/WARNING chatter rather than something to read?"""
    return bool(_NOISE.match(line))


@contextlib.contextmanager
def native_log() -> Iterator[list[str]]:
    """Hold what native code writes to the process's stderr (file descriptor 2) in a
    temporary file; the list receives it when the block ends, however it ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    held: list[str] = []
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            held.append(tmp.read().decode("utf-8", "replace"))


@contextlib.contextmanager
def quiet_native() -> Iterator[None]:
    """Run the block with absl's noise kept off the terminal: TF_CPP_MIN_LOG_LEVEL=3 while
    it runs (unless the user set it; the environment is restored, so child processes
    keep the user's), and of what it wrote to stderr only the lines that are not noise."""
    unset = "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    if unset:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    try:
        with native_log() as held:
            yield
    finally:
        if unset:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        kept = [ln for ln in "".join(held).splitlines(keepends=True) if not is_noise(ln)]
        sys.stderr.write("".join(kept))
