"""Run the memory estimate in a child process, on the CPU.

The child never touches a GPU (CUDA_VISIBLE_DEVICES=-1): tracing needs no device, and
TensorFlow would otherwise reserve most of the GPU's memory in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tfaccel.errors import InputError, WorkloadError
from tfaccel.plan.memory import MemoryEstimate, StepTrace

_MARK = "TFACCEL_ESTIMATE "


def _to_dict(e: MemoryEstimate) -> dict[str, Any]:
    d = dict(e.__dict__)
    d["traces"] = [{k: v for k, v in t.__dict__.items() if k != "curve"} for t in e.traces]
    return d


def _from_dict(d: dict[str, Any]) -> MemoryEstimate:
    d = dict(d)
    d["traces"] = tuple(StepTrace(**t) for t in d["traces"])
    d["step_lines"] = tuple(tuple(x) for x in d["step_lines"])
    return MemoryEstimate(**d)


def estimate_in_child(
    model: str, precision: str, optimizer: str | None = None, timeout_s: float = 600.0
) -> MemoryEstimate:
    """Trace `model` (built-in name or module:function) in a CPU-only child process."""
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = "-1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "tfaccel.plan.child", model, precision, optimizer or ""]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise WorkloadError(
            f"Tracing {model!r} took longer than {timeout_s:.0f} s",
            expected="a model that builds and traces in time",
            received="timeout",
        ) from exc
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            payload = json.loads(line[len(_MARK) :])
            if "error" in payload:
                cls = InputError if payload.get("kind") == "input" else WorkloadError
                err = cls(
                    payload["error"],
                    expected=payload.get("expected"),
                    received=payload.get("received"),
                )
                err.hint = payload.get("traceback_tail")
                raise err
            return _from_dict(payload)
    tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
    raise WorkloadError(
        f"The tracing process for {model!r} failed",
        expected="a JSON estimate on its output",
        received=f"exit code {proc.returncode}: {tail}",
    )


def _main(argv: list[str]) -> int:
    import traceback

    from tfaccel.errors import TfaccelError
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads import load_workload

    model, precision, optimizer = argv[0], argv[1], (argv[2] or None)
    try:
        est = estimate_memory(lambda: load_workload(model), precision, optimizer)
        print(_MARK + json.dumps(_to_dict(est)), flush=True)
    except TfaccelError as exc:
        print(
            _MARK
            + json.dumps(
                {
                    "error": exc.problem,
                    "expected": exc.expected,
                    "received": None if exc.received is None else str(exc.received),
                    "kind": "input" if isinstance(exc, InputError) else "run",
                }
            )
        )
    except Exception as exc:
        tb = traceback.format_exc().strip().splitlines()
        print(
            _MARK
            + json.dumps(
                {
                    "error": f"Tracing {model!r} failed",
                    "expected": "a Keras model whose training step traces",
                    "received": f"{type(exc).__name__}: {exc}",
                    "traceback_tail": " | ".join(tb[-4:]),
                    "kind": "run",
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
