"""Run the memory estimate in a child process, on the CPU.

The child never touches a GPU (CUDA_VISIBLE_DEVICES=-1): tracing needs no device, and
TensorFlow would otherwise reserve most of the GPU's memory in this process.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import TYPE_CHECKING, Any

from tfaccel._child import child_env, emit, run_child, run_command
from tfaccel.errors import InputError, WorkloadError
from tfaccel.plan.memory import MemoryEstimate, StepTrace
from tfaccel.trial.protocol import PLAN_ENV
from tfaccel.workloads import BUILTIN

if TYPE_CHECKING:
    from tfaccel.script.command import Script

MARK = "TFACCEL_ESTIMATE "


def to_dict(estimate: MemoryEstimate) -> dict[str, Any]:
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


def estimate_script_in_child(
    script: Script, precision: str, optimizer: str | None = None, timeout_s: float = 600.0
) -> tuple[MemoryEstimate, int | None]:
    """Trace the model of a user's script (`tfaccel plan -- python train.py`) in its own
    process, on the CPU (`plan.hook`), as its `script.fit`-th fit call trains it; the
    estimate and the batch size that call trains at."""
    from tfaccel.script.run import hooked_env

    request = {
        "precision": precision,
        "optimizer": optimizer,
        "fit": script.fit,
        "name": script.name,
    }
    overrides = {PLAN_ENV: json.dumps(request), "CUDA_VISIBLE_DEVICES": "-1"}
    env = child_env(hooked_env(), paths="as_is", overrides=overrides)
    out = run_command(script.argv, MARK, env, timeout_s)
    shown = " ".join(script.shown)
    if out.payload is None and not out.timed_out and out.returncode == 0:
        raise InputError(
            f"{shown} ended before its model.fit call {script.fit}",
            expected="a script whose model.fit call trains the model to plan, or without one "
            "its first train_on_batch call or its training step (a tf.function that applies "
            "a Keras optimizer's gradients); one that trains with Keras 2's tf_keras has "
            "none of them; --fit N counts the fit calls as the script makes them",
            received=f"{shown}: exit 0, no model.fit call {script.fit}",
        )
    what = f"{shown}, run up to its model.fit call {script.fit},"
    payload = dict(out.required(what, timeout_s, InputError))
    own = payload.pop("own_batch", None)
    return _from_dict(payload), own


def estimate_in_child(
    model: str, precision: str, optimizer: str | None = None, timeout_s: float = 600.0
) -> MemoryEstimate:
    """Trace `model` (built-in name or module:function) in a CPU-only child process."""
    env = child_env(overrides={"CUDA_VISIBLE_DEVICES": "-1"})
    args = ["-m", "tfaccel.plan.child", model, precision, optimizer or ""]
    out = run_child(args, MARK, env, timeout_s)
    # A user's entry point that ended the process by itself (sys.exit, an uncaught
    # error at import) is bad input, as tune's check of the same entry point says.
    ended = out.payload is None and out.returncode is not None and out.returncode > 0
    error = InputError if ended and model not in BUILTIN else WorkloadError
    return _from_dict(out.required(f"Tracing {model!r}", timeout_s, error))


def failed(exc: Exception, what: str, expected: str) -> dict[str, Any]:
    """The child's payload for an error while tracing (`what` failed, `expected` what
    it needed): a tfaccel error as it was said, anything else with its last frames."""
    from tfaccel.errors import TfaccelError

    if isinstance(exc, TfaccelError):
        return {
            "error": exc.problem,
            "expected": exc.expected,
            "received": None if exc.received is None else str(exc.received),
            "kind": "input" if isinstance(exc, InputError) else "run",
        }
    frames = "".join(traceback.format_exception(exc)).strip().splitlines()
    return {
        "error": f"{what} failed",
        "expected": expected,
        "received": f"{type(exc).__name__}: {exc}",
        "hint": " | ".join(frames[-4:]),
        "kind": "run",
    }


def _main(argv: list[str]) -> int:
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads import load_workload

    model, precision, optimizer = argv[0], argv[1], (argv[2] or None)
    try:
        est = estimate_memory(lambda: load_workload(model), precision, optimizer)
        emit(MARK, to_dict(est))
    except Exception as exc:
        expected = "a Keras model whose training step traces"
        emit(MARK, failed(exc, f"Tracing {model!r}", expected))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
