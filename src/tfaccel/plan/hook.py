"""`tfaccel plan -- python train.py`: the memory estimate of an unmodified script's
model, from inside its own process. Installed by tfaccel's sitecustomize
(`tfaccel/script/inject`) where PLAN_ENV is set, it sets the precision policy when the
script imports Keras (so the script builds its model in it), trains the fit calls
before the chosen one a step each, and at that call traces the model's training step on
the call's own data (`plan.memory.estimate_memory`), says the result to the parent
(`plan.child`) and ends the process: nothing of the script's training runs."""

from __future__ import annotations

import json
import os
from typing import Any

from tfaccel.script import file_caches
from tfaccel.script.hook import fit_examples, one_step_fit, say, when_keras_imported
from tfaccel.trial.protocol import PLAN_ENV


def install() -> None:
    request = json.loads(os.environ[PLAN_ENV])
    file_caches.install()  # the process ends at the chosen fit
    when_keras_imported(lambda: _patch(request))


def _patch(request: dict[str, Any]) -> None:
    try:
        import keras

        keras.mixed_precision.set_global_policy(request["precision"])
        fit = keras.Model.fit
        calls = {"n": 0}

        def fit_planned(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] < int(request.get("fit") or 1):
                return one_step_fit(fit, self, args, kwargs)
            _answer(_estimate(fit, self, args, kwargs, request))

        keras.Model.fit = fit_planned
    except Exception as exc:
        say(f"could not hook keras.Model.fit: {exc}", "tfaccel plan")


def _estimate(fit: Any, model: Any, args: Any, kwargs: Any, request: dict[str, Any]) -> Any:
    """The estimate of `model` trained as this fit call trains it, as plan's child
    payload (with the batch size the call trains at), or the failure in its words."""
    from tfaccel.plan.child import failed, to_dict
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads import Workload

    try:
        examples, batch, count = fit_examples(fit, model, args, kwargs)
        workload = Workload(
            request.get("name") or "script",
            model,
            loss=getattr(model, "loss", None),
            optimizer=getattr(model, "optimizer", None) or "adam",
            dataset=examples,
            batch_size=batch,
            examples=count,
        )
        estimate = estimate_memory(lambda: workload, request["precision"], request.get("optimizer"))
        return {**to_dict(estimate), "own_batch": batch}
    except Exception as exc:
        expected = (
            "a Keras model whose training step traces (its forward pass, its compiled loss, "
            "their gradients) on the data its fit call gets"
        )
        return failed(exc, "Tracing the script's model", expected)


def _answer(payload: dict[str, Any]) -> None:
    from tfaccel._child import emit, end_process
    from tfaccel.plan.child import MARK

    emit(MARK, payload)
    end_process()
