"""The one child protocol: payload, exit codes, kills, timeouts, and a child that dies
with its parent."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfaccel._child import child_env, error_line, is_oom, run_child


def test_payload_exit_codes_and_timeouts() -> None:
    env = child_env()
    out = run_child(["-c", "print('noise'); print('M {\"a\": 1}')"], "M ", env, 30)
    assert out.payload == {"a": 1} and out.returncode == 0 and not out.killed
    out = run_child(
        ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], "M ", env, 30
    )
    assert out.payload is None and out.killed and "out of memory?" in out.exit_text()
    out = run_child(["-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], "M ", env, 30)
    assert out.returncode == 3 and out.tail() == "boom"
    absl = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n"
        "I0000 00:00:1796304394.900666    3266 cudart_stub.cc:31] Could not find cuda drivers\\n"
    )
    code = f"import sys; sys.stderr.write('{absl}ValueError: bad\\n{absl}'); sys.exit(1)"
    out = run_child(["-c", code], "M ", env, 30)
    assert out.tail() == "ValueError: bad"  # TensorFlow's chatter at import is left out
    assert out.raised() == "ValueError: bad"
    code = "class Scale: pass\nScale().factor"
    out = run_child(["-c", code], "M ", env, 30)
    assert out.raised() == "AttributeError: 'Scale' object has no attribute 'factor'"
    bold = run_child(["-c", "import sys; sys.stderr.write('\\x1b[1mbold\\x1b[0m')"], "M ", env, 30)
    assert bold.tail() == "bold" and bold.raised() is None  # Keras bolds its messages
    out = run_child(["-c", "import time; time.sleep(30)"], "M ", env, 0.5)
    assert out.timed_out and out.payload is None


def test_is_oom_by_type_and_by_xlas_text() -> None:
    assert is_oom(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate"))
    assert not is_oom(ValueError("shapes do not match"))


class InternalError(Exception):
    """Named as TensorFlow's, whose graph errors open with their frames."""


# As an H200 trial of float8 under XLA raised it (frames shortened).
TWO_ROOTS = """Graph execution error:

Detected at node while/cond/StatefulPartitionedCall defined at (most recent call last):
  File "/tmp/repo/text_classification_with_transformer.py", line 116, in <module>

  File "/tmp/site/keras/src/backend/tensorflow/trainer.py", line 399, in fit

2 root error(s) found.
  (0) INTERNAL:  Failed to capture gpu graph: RET_CHECK failure (cuda_blas_lt.cc:388) workspace
\t [[{{node while/cond/StatefulPartitionedCall}}]]
  (1) INTERNAL:  Failed to capture gpu graph: RET_CHECK failure (cuda_blas_lt.cc:388) workspace
0 successful operations.
0 derived errors ignored. [Op:__inference_multi_step_on_iterator_6693]"""

ONE_ROOT = """Graph execution error:

Detected at node embedding/GatherV2 defined at (most recent call last):
  File "train.py", line 40, in <module>

indices[3,0] = 20000 is not in [0, 20000)
\t [[{{node embedding/GatherV2}}]] [Op:__inference_one_step_on_iterator_812]"""


def test_an_error_in_one_line_names_tensorflows_root_error() -> None:
    assert error_line(InternalError(TWO_ROOTS)) == (
        "InternalError: Failed to capture gpu graph: RET_CHECK failure (cuda_blas_lt.cc:388) "
        "workspace"
    )
    assert error_line(InternalError(ONE_ROOT)) == (
        "InternalError: indices[3,0] = 20000 is not in [0, 20000)"
    )
    assert (
        error_line(ValueError("\x1b[1mshapes\x1b[0m differ\nmore")) == "ValueError: shapes differ"
    )
    assert error_line(KeyError()) == "KeyError"
    assert len(error_line(ValueError("x" * 900))) == 500


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_with_its_parent(tmp_path: Path) -> None:
    """kill -9 of the parent (a tune) must not leave its trial running."""
    pid_file = tmp_path / "child.pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    parent = (
        "from tfaccel._child import child_env, run_child\n"
        f"run_child(['-c', {child!r}], 'M ', child_env(), 120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the child outlived its parent")


def test_at_debug_level_each_child_is_logged_and_tensorflow_speaks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`tfaccel -v`: the child's command, how it ended and the end of its log; and no
    TF_CPP_MIN_LOG_LEVEL forced on it, so TensorFlow's C++ lines reach that log."""
    base = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    assert child_env(base)["TF_CPP_MIN_LOG_LEVEL"] == "3"  # quiet by default
    caplog.set_level(logging.DEBUG, logger="tfaccel")
    env = child_env(base)
    assert "TF_CPP_MIN_LOG_LEVEL" not in env
    run_child(["-c", "import sys; print('from the child', file=sys.stderr)"], "M ", env, 30)
    text = caplog.text
    assert "exit 0 after" in text and "from the child" in text and "print(" in text


def test_the_verbose_flag_turns_the_debug_log_on_for_one_command_only() -> None:
    from typer.testing import CliRunner

    from tfaccel.cli import app

    log = logging.getLogger("tfaccel")
    CliRunner().invoke(app, ["-v", "hw", "--list-specs"])
    assert log.level == logging.DEBUG
    CliRunner().invoke(app, ["hw", "--list-specs"])
    assert log.level == logging.NOTSET and not log.handlers


def _alive(pid: int) -> bool:
    """Is `pid` a process that has not ended (a zombie has ended) within 5 s (a
    SIGKILL is delivered asynchronously)?"""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def _helper_pid(path: Path) -> int:
    for _ in range(100):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the helper never started")


# A child that starts a helper inheriting its stdout and stderr (as a script starts a
# TensorBoard or a GPU logger), writes its pid, then its result line, and ends.
HELPER = """
import subprocess, sys
p = subprocess.Popen(["sleep", "611"])
open(sys.argv[1], "w").write(str(p.pid))
print('M {"a": 1}', flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, /proc")
def test_a_helper_holding_the_output_neither_holds_the_result_nor_outlives_the_child(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "helper.pid"
    start = time.perf_counter()
    out = run_child(["-c", HELPER, str(pid_file)], "M ", child_env(), 60)
    assert time.perf_counter() - start < 30  # not the helper's 611 s, nor the timeout
    assert out.payload == {"a": 1} and out.returncode == 0
    assert not _alive(_helper_pid(pid_file))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, /proc")
def test_a_result_written_before_the_timeout_is_kept(tmp_path: Path) -> None:
    """A child that wrote its result and then hung (its teardown, a helper it waits
    for): killed at the timeout, its result still read, nothing left running."""
    pid_file = tmp_path / "helper.pid"
    hangs = HELPER + "import time; time.sleep(60)\n"
    out = run_child(["-c", hangs, str(pid_file)], "M ", child_env(), 3)
    assert out.timed_out and out.payload == {"a": 1}
    assert not _alive(_helper_pid(pid_file))


def test_a_child_that_ends_with_os_exit_leaves_no_temporary_files(tmp_path: Path) -> None:
    """As a trial ends (os._exit, after its result), autograph's temporary files stay
    where its process put them: in a folder of its own, removed after it."""
    code = (
        "import json, os, tempfile\n"
        "fd, path = tempfile.mkstemp(suffix='.py')\n"
        "print('M ' + json.dumps({'path': path}), flush=True)\n"
        "os._exit(0)\n"
    )
    out = run_child(["-c", code], "M ", child_env(), 30)
    assert out.payload is not None
    left = Path(out.payload["path"])
    assert left.name.endswith(".py") and not left.exists() and not left.parent.exists()
