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
import sys
from collections.abc import Callable
from dataclasses import replace
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
            _plan_loop(keras, calls, request)
            _plan_step(keras, calls, request)
    except Exception as exc:
        say(f"could not hook keras.Model.fit: {exc}", "tfaccel plan")


LOOP_CALLS = 12  # one model's calls that end a loop's first round, where nothing else does


class _Round:
    """A loop's first round of train_on_batch calls. It ends at a call where each model
    the script compiled has made its first, or one calls again after another (a
    discriminator's step, then the combined model's, then the discriminator's), or one
    has made LOOP_CALLS."""

    def __init__(self) -> None:
        self.models: list[Any] = []  # in the order of their first calls
        self.compiled: list[Any] = []  # weak references
        self._last: Any = None
        self._calls: dict[int, int] = {}

    def call(self, model: Any) -> tuple[bool, bool]:
        """This call of `model`: is it the model's first, and does the round end at it
        (planned before it runs)?"""
        seen = any(model is m for m in self.models)
        calls = self._calls[id(model)] = self._calls.get(id(model), 0) + 1
        again, self._last = seen and self._last is not model, model
        if again or calls > LOOP_CALLS:
            return False, True
        if not seen:
            self.models.append(model)
        compiled = [ref() for ref in self.compiled]
        return not seen, all(any(c is m for m in self.models) for c in compiled if c is not None)


def _plan_loop(keras: Any, calls: dict[str, int], request: dict[str, Any]) -> None:
    """A script's own loop of train_on_batch calls (`script.loop`): each model traced at
    its first call, on that call's data, as the script has it then (which weights are
    trainable: a GAN's discriminator frozen inside its combined model); planned at the
    end of the first round (`_Round`), or at the script's exit, each model in a step of
    its own (`plan.memory.combined`). The calls before the end train as the script
    makes them, in this throwaway process."""
    import atexit
    import weakref

    compile_, train_on_batch = keras.Model.compile, keras.Model.train_on_batch
    round_ = _Round()
    parts: list[Any] = []  # each model's (estimate, rows), or why it failed

    def compile_noted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not any(ref() is self for ref in round_.compiled):
            round_.compiled.append(weakref.ref(self))
        return compile_(self, *args, **kwargs)

    def answer() -> None:
        _answer(_loop_payload(round_.models, parts, request))

    def at_exit() -> None:  # a script that failed: its own error is the answer
        if not crashed:
            answer()

    crashed: list[BaseException] = []
    excepthook = sys.excepthook

    def noted(kind: Any, error: Any, trace: Any) -> None:
        crashed.append(error)
        excepthook(kind, error, trace)

    def loop_planned(self: Any, *args: Any, **kwargs: Any) -> Any:
        if calls["n"]:  # a fit came first: it is the one planned
            return train_on_batch(self, *args, **kwargs)
        if not round_.models:  # a script whose loop ends within its first round
            atexit.register(at_exit)
            sys.excepthook = noted
        first, ends = round_.call(self)
        if first:
            try:
                data = _call_data(train_on_batch, self, args, kwargs)
                parts.append(_estimate_of(data, self, request, None))
            except Exception as exc:
                parts.append(exc)
        if ends:
            answer()
        return train_on_batch(self, *args, **kwargs)

    keras.Model.compile, keras.Model.train_on_batch = compile_noted, loop_planned


def _loop_payload(models: list[Any], parts: list[Any], request: dict[str, Any]) -> Any:
    """Plan's payload for the models a script's own loop trains with train_on_batch
    (`parts`: each one's estimate and rows), one step after another, at the first's
    batch; or the first failure."""
    from tfaccel.plan.child import failed, to_dict
    from tfaccel.plan.memory import combined

    named = ", ".join(model.name for model in models)
    count = "model" if len(models) == 1 else f"{len(models)} models"
    name = f"{request.get('name') or 'script'}: its loop's train_on_batch {count} ({named})"
    try:
        for part in parts:
            if isinstance(part, Exception):
                raise part
        estimates, rows = [e for e, _ in parts], [r for _, r in parts]
        estimate = (
            replace(estimates[0], workload=name)
            if len(parts) == 1
            else combined(estimates, models, name, rows)
        )
        return {**to_dict(estimate), "own_batch": rows[0]}
    except Exception as exc:
        return failed(exc, "Tracing the script's model", _expected("the data its calls get"))


def _call_data(train_on_batch: Any, model: Any, args: Any, kwargs: Any) -> Any:
    """The data of a train_on_batch call, as `_estimate_of` reads it: its examples,
    repeated, and its rows."""

    def data() -> tuple[Any, int, int | None]:
        import keras

        from tfaccel.script.loop import batch_rows
        from tfaccel.workloads.inputs import user_data

        given = inspect.signature(train_on_batch).bind(model, *args, **kwargs).arguments
        packed = keras.utils.pack_x_y_sample_weight(
            given.get("x"), given.get("y"), given.get("sample_weight")
        )
        return user_data(packed, model).examples.repeat(), batch_rows(args, kwargs), None

    return data


def _plan_step(keras: Any, calls: dict[str, int], request: dict[str, Any]) -> None:
    """A script's own training step (`script.tape`), planned after its first call (one
    step, in this throwaway process): each model it trains, with the optimizer that
    trains it, on zeros shaped as that model's inputs in the step, at the step's rows,
    added up (`plan.memory.combined`)."""
    from tfaccel.plan.child import failed, to_dict
    from tfaccel.plan.memory import combined
    from tfaccel.script.tape import StepFunctions, install, name_of, step_rows

    steps = StepFunctions()

    def planned(fn: Any, start: float, args: Any, kwargs: Any, out: Any) -> None:
        if fn is None or calls["n"]:
            return
        trained = _distinct(steps.trained.get(id(fn), []), steps.optimizers.get(id(fn), []))
        named = ", ".join(model.name for model, _ in trained)
        count = "the model" if len(trained) == 1 else f"the {len(trained)} models"
        name = f"{request.get('name') or 'script'}: {count} its training step trains ({named})"
        try:
            if not trained:
                raise ValueError(f"the step {name_of(fn)} trains no model called on tensors")
            rows = step_rows(name_of(fn), args, kwargs)
            parts = [
                _estimate_of(_zeros(steps, fn, m, rows), m, request, name, o)[0] for m, o in trained
            ]
            estimate = (
                parts[0] if len(parts) == 1 else combined(parts, [m for m, _ in trained], name)
            )
            payload = {**to_dict(estimate), "own_batch": rows}
        except Exception as exc:
            source = f"zeros shaped as its inputs in {name_of(fn)}"
            payload = failed(exc, "Tracing the script's model", _expected(source))
        _answer(payload)

    install(keras, steps, planned)


def _zeros(steps: Any, fn: Any, model: Any, rows: int) -> Callable[[], Any]:
    """The data of `model` in the step `fn`: zeros shaped as its inputs there, `rows` a
    batch."""

    def data() -> tuple[Any, int, int | None]:
        from tfaccel._tf import import_tensorflow
        from tfaccel.script.tape import name_of

        tf = import_tensorflow()
        spec = steps.inputs.get(id(model))
        if spec is None:
            raise ValueError(f"{name_of(fn)} calls {model.name} on no tensors")
        zero = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)
        return tf.data.Dataset.from_tensors(zero).repeat(), rows, None

    return data


def _distinct(models: list[Any], optimizers: list[Any]) -> list[tuple[Any, Any]]:
    """The models a step trains, each once, with the optimizer that first trains it (a
    model inside another, a discriminator in a combined model, stays: its optimizer's
    slots and its own pass are its own; `combined` counts the weights they share once)."""
    pairs: list[tuple[Any, Any]] = []
    for model, optimizer in zip(models, optimizers, strict=False):
        if model is not None and not any(model is m for m, _ in pairs):
            pairs.append((model, optimizer))
    return pairs


def _estimate(data: Any, model: Any, request: dict[str, Any]) -> Any:
    """The estimate of the model a fit call trains, on `data()`, as plan's child payload
    (with the batch size it trains at), or the failure in its words."""
    from tfaccel.plan.child import failed, to_dict

    try:
        estimate, batch = _estimate_of(data, model, request, None)
        return {**to_dict(estimate), "own_batch": batch}
    except Exception as exc:
        return failed(exc, "Tracing the script's model", _expected("the data its fit call gets"))


def _estimate_of(
    data: Any, model: Any, request: dict[str, Any], name: str | None, optimizer: Any = None
) -> tuple[Any, int]:
    """The memory estimate of `model` trained on `data()` (its examples, the batch size
    it trains at, how many there are) with `optimizer` (else its compiled one), and
    that batch size."""
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads import Workload

    examples, batch, count = data()
    workload = Workload(
        name or request.get("name") or "script",
        model,
        loss=getattr(model, "loss", None),
        optimizer=optimizer or getattr(model, "optimizer", None) or "adam",
        dataset=examples,
        batch_size=batch,
        examples=count,
    )
    estimate = estimate_memory(lambda: workload, request["precision"], request.get("optimizer"))
    return estimate, batch


def _expected(source: str) -> str:
    return (
        "a Keras model whose training step traces (its forward pass, its compiled loss, "
        f"their gradients) on {source}"
    )


def _answer(payload: dict[str, Any]) -> None:
    from tfaccel._child import emit, end_process
    from tfaccel.plan.child import MARK

    emit(MARK, payload)
    end_process()
