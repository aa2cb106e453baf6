"""Run the memory estimate in a child process, on the CPU.

The child never touches a GPU (CUDA_VISIBLE_DEVICES=-1): tracing needs no device, and
TensorFlow would otherwise reserve most of the GPU's memory in this process.
"""

from __future__ import annotations

import sys
from typing import Any

from tfaccel._child import child_env, emit, run_child
from tfaccel.errors import InputError, WorkloadError
from tfaccel.plan.memory import MemoryEstimate, StepTrace
from tfaccel.workloads import BUILTIN

_MARK = "TFACCEL_ESTIMATE "


def _to_dict(estimate: MemoryEstimate) -> dict[str, Any]:
    out = dict(estimate.__dict__)
    out["traces"] = [
        {key: value for key, value in trace.__dict__.items() if key != "curve"}
        for trace in estimate.traces
    ]
    return out


def _from_dict(fields: dict[str, Any]) -> MemoryEstimate:
    fields = dict(fields)
    fields["traces"] = tuple(StepTrace(**trace) for trace in fields["traces"])
    fields["step_lines"] = tuple(tuple(x) for x in fields["step_lines"])
    return MemoryEstimate(**fields)


def estimate_in_child(
    model: str, precision: str, optimizer: str | None = None, timeout_s: float = 600.0
) -> MemoryEstimate:
    """Trace `model` (built-in name or module:function) in a CPU-only child process."""
    env = child_env(overrides={"CUDA_VISIBLE_DEVICES": "-1"})
    args = ["-m", "tfaccel.plan.child", model, precision, optimizer or ""]
    out = run_child(args, _MARK, env, timeout_s)
    # A user's entry point that ended the process by itself (sys.exit, an uncaught
    # error at import) is bad input, as tune's check of the same entry point says.
    ended = out.payload is None and out.returncode is not None and out.returncode > 0
    error = InputError if ended and model not in BUILTIN else WorkloadError
    return _from_dict(out.required(f"Tracing {model!r}", timeout_s, error))


def _main(argv: list[str]) -> int:
    import traceback

    from tfaccel.errors import TfaccelError
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads import load_workload

    model, precision, optimizer = argv[0], argv[1], (argv[2] or None)
    try:
        est = estimate_memory(lambda: load_workload(model), precision, optimizer)
        emit(_MARK, _to_dict(est))
    except TfaccelError as exc:
        emit(
            _MARK,
            {
                "error": exc.problem,
                "expected": exc.expected,
                "received": None if exc.received is None else str(exc.received),
                "kind": "input" if isinstance(exc, InputError) else "run",
            },
        )
    except Exception as exc:
        frames = traceback.format_exc().strip().splitlines()
        emit(
            _MARK,
            {
                "error": f"Tracing {model!r} failed",
                "expected": "a Keras model whose training step traces",
                "received": f"{type(exc).__name__}: {exc}",
                "hint": " | ".join(frames[-4:]),
                "kind": "run",
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
