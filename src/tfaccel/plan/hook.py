"""`tfaccel plan -- python train.py`: the memory estimate of an unmodified script's
model, from inside its own process. Installed by tfaccel's sitecustomize
(`tfaccel/script/inject`) where PLAN_ENV is set, it sets the precision policy when the
script imports Keras (so the script builds its model in it), trains the fit calls
before the chosen one a step each, and at that call traces the model's training step on
the call's own data (`plan.memory.estimate_memory`), says the result to the parent
(`plan.child`) and ends the process: nothing of the script's training runs."""

from __future__ import annotations

import inspect
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
            _answer(_estimate(lambda: fit_examples(fit, self, args, kwargs), self, request))

        keras.Model.fit = fit_planned
        if int(request.get("fit") or 1) == 1:  # a script's own loop, where it has no fit
            train_on_batch = keras.Model.train_on_batch

            def loop_planned(self: Any, *args: Any, **kwargs: Any) -> Any:
                if calls["n"]:
                    return train_on_batch(self, *args, **kwargs)
                _answer(_estimate_loop(train_on_batch, self, args, kwargs, request))

            keras.Model.train_on_batch = loop_planned
            _plan_step(keras, calls, request)
    except Exception as exc:
        say(f"could not hook keras.Model.fit: {exc}", "tfaccel plan")


def _estimate_loop(
    train_on_batch: Any, model: Any, args: Any, kwargs: Any, request: dict[str, Any]
) -> Any:
    """The estimate of the first model a script's own loop trains with train_on_batch
    (`script.loop`), on that call's batch, repeated."""
    import keras

    from tfaccel.script.loop import batch_rows
    from tfaccel.workloads.inputs import user_data

    def data() -> tuple[Any, int, int | None]:
        bound = inspect.signature(train_on_batch).bind(model, *args, **kwargs)
        given = bound.arguments
        packed = keras.utils.pack_x_y_sample_weight(
            given.get("x"), given.get("y"), given.get("sample_weight")
        )
        return user_data(packed, model).examples.repeat(), batch_rows(args, kwargs), None

    name = f"{request.get('name') or 'script'}: its loop's first train_on_batch model"
    return _estimate(data, model, request, "the data its first train_on_batch call gets", name)


def _plan_step(keras: Any, calls: dict[str, int], request: dict[str, Any]) -> None:
    """A script's own training step (`script.tape`), planned after its first call (one
    step, in this throwaway process): the first model it trains, on zeros shaped as
    that model's inputs in the step, at the step's rows."""
    from tfaccel.script.tape import StepFunctions, install, name_of, step_rows

    steps = StepFunctions()

    def planned(fn: Any, start: float, args: Any, kwargs: Any, out: Any) -> None:
        if fn is None or calls["n"]:
            return
        model = steps.models.get(id(fn))
        spec = steps.inputs.get(id(model))

        def data() -> tuple[Any, int, int | None]:
            from tfaccel._tf import import_tensorflow

            tf = import_tensorflow()
            if spec is None:
                raise ValueError(f"the step {name_of(fn)} trains no model called on tensors")
            zeros = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)
            rows = step_rows(name_of(fn), args, kwargs)
            return tf.data.Dataset.from_tensors(zeros).repeat(), rows, None

        name = f"{request.get('name') or 'script'}: the first model its training step trains"
        source = f"zeros shaped as its inputs in {name_of(fn)}"
        _answer(_estimate(data, model, request, source, name))

    install(keras, steps, planned)


def _estimate(
    data: Any,
    model: Any,
    request: dict[str, Any],
    source: str = "the data its fit call gets",
    name: str | None = None,
) -> Any:
    """The estimate of `model` trained on `data()` (its examples, the batch size it
    trains at, how many there are), as plan's child payload (with that batch size), or
    the failure in its words."""
    from tfaccel.plan.child import failed, to_dict
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads import Workload

    try:
        examples, batch, count = data()
        workload = Workload(
            name or request.get("name") or "script",
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
            f"their gradients) on {source}"
        )
        return failed(exc, "Tracing the script's model", expected)


def _answer(payload: dict[str, Any]) -> None:
    from tfaccel._child import emit, end_process
    from tfaccel.plan.child import MARK

    emit(MARK, payload)
    end_process()
