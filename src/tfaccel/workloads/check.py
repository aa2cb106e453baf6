"""Check a user's entry point before any trial: in a child on the CPU, in seconds.

    python -m tfaccel.workloads.check 'module:function'

The child imports the module, builds the workload (`load_workload`), reads one batch
of its data (and so learns the size of the user's batches, where it comes in batches)
and calls the model on it (or on synthetic inputs), so that a typo, an
import error, a model that does not build or data that does not fit the model ends
the command with exit 2 before a trial, a journal or a GPU is touched. The GPU stays
hidden from the child: TensorFlow would reserve its memory.
"""

from __future__ import annotations

import sys
from typing import Any

from tfaccel._child import child_env, emit, run_child, user_frames, user_traceback
from tfaccel.errors import InputError
from tfaccel.workloads import BUILTIN, _import_callable

MARK = "TFACCEL_CHECK "


def check_entry_point(spec: str, timeout_s: float = 300.0) -> int | None:
    """Raise InputError when `spec` is no workload tfaccel can run (built-ins pass);
    else the size of the batches its data comes in (None: examples, or no data)."""
    from tfaccel.environment import require_tensorflow_backend

    require_tensorflow_backend()
    if spec in BUILTIN:
        return None
    if ":" not in spec:
        _import_callable(spec)  # raises, with the built-in names and a close match
    env = child_env(overrides={"CUDA_VISIBLE_DEVICES": ""})
    out = run_child(["-m", "tfaccel.workloads.check", spec], MARK, env, timeout_s)
    found = out.required(f"Checking the entry point {spec!r}", timeout_s, InputError)
    return found.get("batch_size")


def _sample(workload: Any) -> Any:
    """Two examples of the workload's inputs: its own data's, or synthetic ones."""
    if workload.dataset is not None:
        from tfaccel.workloads.synthetic import rebatched

        return next(iter(rebatched(workload.dataset, 2)))[0]
    from tfaccel.workloads.synthetic import synthetic_inputs

    return synthetic_inputs(workload.model, 2)


def _check_names(workload: Any) -> None:
    """A loss or optimizer named by a string Keras does not know fails at the first
    trial's `fit`; here it fails at once."""
    import keras

    losses = workload.loss.values() if isinstance(workload.loss, dict) else workload.loss
    for name in losses if isinstance(losses, (list, tuple)) else [losses]:
        _known(name, keras.losses.get, "loss")
    _known(workload.optimizer, keras.optimizers.get, "optimizer")


def _known(name: Any, get: Any, what: str) -> None:
    if not isinstance(name, str):
        return
    try:
        get(name)
    except ValueError as exc:
        raise InputError(
            f"Unknown {what} {name!r}",
            expected=f"a {what} Keras knows by name, or a {what} object",
            received=repr(name),
        ) from exc


def main(argv: list[str]) -> int:
    from tfaccel.workloads import load_workload

    spec = argv[0]
    try:
        workload = load_workload(spec, peek=True)
        _check_names(workload)
        workload.model(_sample(workload), training=False)
        facts = {
            "parameters": int(workload.model.count_params()),
            "batch_size": workload.batch_size,
        }
        emit(MARK, {"ok": True, **facts})
    except InputError as exc:
        cause = exc.__cause__
        traceback_text = user_traceback(exc) if cause is not None and user_frames(cause) else None
        error = {"error": exc.problem, "expected": exc.expected, "received": str(exc.received)}
        emit(MARK, {**error, "kind": "input", "hint": traceback_text or exc.hint})
    except Exception as exc:
        emit(
            MARK,
            {
                "error": f"The model of {spec!r} cannot be called on its data",
                "expected": "a model whose inputs match its data (or its declared inputs)",
                "received": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                "kind": "input",
                "hint": user_traceback(exc),
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
