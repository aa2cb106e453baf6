"""A script that trains with a step of its own: a `tf.function` whose body applies an
optimizer's gradients (a `tf.GradientTape`'s, as TensorFlow's guide "Writing a training
loop from scratch" writes it), called from the script's own loop, with neither `fit` nor
`train_on_batch`.

Such a function is found as it traces: the function called from the script (the
outermost, not one it calls inside) during whose trace a Keras optimizer's `apply`
runs, outside Keras' own train step. In a trial its calls are timed as the loop makes
them (`TimedStep`, on `script.loop`'s machinery: `LoopModel` chooses among several such
functions, a GAN's two steps), its samples counted in its first argument's rows. The
settings that reach it are those set before the script builds its model (the precision
policy, the allocator, TF32); its XLA is its own `tf.function(jit_compile=...)`, which
tfaccel does not rewrite, and nothing of fit's search applies (`TAPE_FACTS`). A step
that runs eagerly (no `tf.function` around it) is not timed: the trial says why.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from tfaccel.script.loop import TimedLoop
from tfaccel.trial.protocol import FIT_STARTED

# What a trial of such a step says for the search (`script.loop.LOOP_FACTS`' twin).
TAPE_FACTS = {
    "fit_data": "train_step",
    "spe_blocker": "the script's own training step runs one step a call, whatever "
    "steps_per_execution says",
    "no_race": "the script trains with a step of its own on the batches its loop makes: "
    "tfaccel cannot run it at another batch size",
    "xla_blocker": "the script's training step is a tf.function of its own, whose XLA is "
    "its own jit_compile (tf.function(jit_compile=True) compiles it), which tfaccel "
    "does not rewrite",
}

EAGER_STEP = (
    "the script's training step runs eagerly (its optimizer applies the gradients outside "
    "any tf.function): each step runs as Python, op by op, and tfaccel times a step "
    "compiled as a tf.function (decorate the step with @tf.function: most of its time "
    "is likely there)"
)
# `run`'s words for it: nothing is timed there
EAGER_STEP_RUN = (
    "the script's training step runs eagerly (its optimizer applies the gradients outside "
    "any tf.function): each step runs as Python, op by op, and the settings' XLA cannot "
    "reach it (decorate the step with @tf.function: most of its time is likely there)"
)

EAGER_STEPS = 3  # eager applies that make an eager loop, not a script's set-up

# Keras' own train step, where its optimizer is applied inside fit and train_on_batch.
_KERAS_TRAINER = ("keras/src/backend/tensorflow/trainer.py", "keras/src/trainers/trainer.py")


class StepFunctions:
    """The script's training steps, as they trace: for each tf.function (by id) the
    Keras model it trains (of those it calls, the one whose weights the optimizer
    updates) and the optimizer. `outer` is the function being called from the script
    now: a plain list, not a context variable, since a distribution strategy traces
    its replicas' steps in threads of its own."""

    def __init__(self) -> None:
        self.outer: list[Any] = []
        self.models: dict[int, Any] = {}
        self.optimizers: dict[int, list[Any]] = {}  # each apply's, in its trace's order
        self.trained: dict[int, list[Any]] = {}  # the model of each
        self._called: dict[int, list[Any]] = {}
        self.eager = 0  # the optimizers' eager applies outside Keras' step
        self.traced: set[int] = set()  # the functions whose first call ended
        self.inputs: dict[int, Any] = {}  # by model: a first call's inputs, one example's

    def called(self, model: Any, inputs: Any) -> None:
        """A Keras model called on `inputs` inside the outer function's trace (their
        shapes kept: `plan` traces the model on zeros of them)."""
        if self.outer:
            seen = self._called.setdefault(id(self.outer[-1]), [])
            if not any(model is m for m in seen):
                seen.append(model)
                self.inputs.setdefault(id(model), _specs(inputs))

    def applied(self, optimizer: Any, variables: Any) -> str | None:
        """An optimizer's `apply`: its outer function is a training step from now on.
        EAGER_STEP at the third that runs eagerly outside Keras' own step before any
        step function was found (one or two are a script's set-up: building the
        optimizer's slots before it loads a checkpoint), else None."""
        if _in_keras_trainer():
            return None
        if not self.outer:
            from tfaccel._tf import import_tensorflow

            if import_tensorflow().executing_eagerly() and not self.models:
                self.eager += 1
                return EAGER_STEP if self.eager == EAGER_STEPS else None
            return None
        fn = self.outer[-1]
        if id(fn) in self.traced:  # traced again (a new input shape): known already
            return None
        updated = {id(v) for v in variables}
        model = max(
            self._called.get(id(fn), []),
            key=lambda m: len(updated & {id(w) for w in m.trainable_weights}),
            default=None,
        )
        self.models.setdefault(id(fn), model)  # the first it trains labels the trial
        applied = self.optimizers.setdefault(id(fn), [])
        if not any(optimizer is o for o in applied):  # (a first call may trace twice)
            applied.append(optimizer)
            self.trained.setdefault(id(fn), []).append(model)
        return None

    def is_step(self, fn: Any) -> bool:
        """Is `fn`, whose call just ended, a training step? (Its first trace is then
        complete.)"""
        self.traced.add(id(fn))
        return id(fn) in self.models


def _specs(inputs: Any) -> Any:
    """One example's shapes and dtypes of a model call's inputs (None where they do not
    say: a model called on Python values)."""
    from tfaccel._tf import import_tensorflow

    tf = import_tensorflow()
    try:
        return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), inputs)
    except Exception:
        return None


def _in_keras_trainer() -> bool:
    """Is this apply Keras' own train step's (fit, train_on_batch; a model's own
    train_step inside them), not a step of the script's?"""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith(_KERAS_TRAINER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _scaling(optimizer: Any) -> Any:
    """The LossScaleOptimizer that applies `optimizer` (its inner one) where one does,
    else `optimizer`: the one the script trains with."""
    frame = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            break
        if frame.f_code.co_filename.endswith("loss_scale_optimizer.py"):
            return frame.f_locals.get("self", optimizer)
        frame = frame.f_back  # type: ignore[assignment]
    return optimizer


def name_of(fn: Any) -> str:
    """A step function's name as the script wrote it."""
    python = getattr(fn, "python_function", None)
    return str(getattr(python, "__name__", None) or getattr(fn, "__name__", "tf.function"))


class TimedStep(TimedLoop):
    """A trial's timing of the script's training step (`TimedLoop` keyed by the step's
    tf.function, its model the one the step trains)."""

    facts = TAPE_FACTS
    call_word, calls_of = "call", "of its training step"

    def __init__(self, steps: StepFunctions, *args: Any) -> None:
        super().__init__(*args)
        self.steps = steps

    @property
    def model(self) -> Any:
        return self.steps.models.get(id(self.choice.model))

    @property
    def measured(self) -> str:
        return f"{name_of(self.choice.model)} (a tf.function of the script's) at {self.where}"

    def _rows(self, args: Any, kwargs: Any) -> int:
        return step_rows(name_of(self.choice.model), args, kwargs)

    def failed(self, error: str) -> None:
        """The script's loop cannot be timed (an eager step): the trial ends with
        `error`, in the loop, not before it."""
        print(FIT_STARTED, flush=True)
        self._end({"status": "error", "error": error})

    def _payload(self) -> dict[str, Any]:
        fn = self.choice.model
        if self.model is None:
            raise ValueError(
                f"the script's training step {name_of(fn)} applies gradients to no "
                "keras.Model that it calls: tfaccel reads the model it trains to label "
                "the trial"
            )
        unscaled = unscaled_step(self.steps.optimizers.get(id(fn), []), self.report.precision)
        if unscaled:
            raise ValueError(unscaled)
        out = super()._payload()
        out["jit_compile"] = bool(getattr(fn, "_jit_compile", False))
        return out


def step_rows(name: str, args: Any, kwargs: Any) -> int:
    """The examples a call of a training step trains on: its first argument's rows, or
    a tf.data iterator's static batch size (`drop_remainder=True`); else why they
    cannot be counted."""
    from tfaccel._tf import import_tensorflow
    from tfaccel.script.loop import batch_rows

    tf = import_tensorflow()
    first = args[0] if args else next(iter(kwargs.values()), None)
    try:
        return batch_rows((first,), {})
    except Exception:
        spec = getattr(first, "element_spec", None)
        shapes = [s.shape for s in tf.nest.flatten(spec) if hasattr(s, "shape")]
        if shapes and shapes[0].rank and shapes[0][0] is not None:
            return int(shapes[0][0])
    given = "nothing" if first is None else f"a {type(first).__name__}"
    raise ValueError(
        f"the script's training step {name} is given {given}, whose rows tfaccel cannot "
        "count: it counts a step's examples in its first argument's first dimension, or "
        "in the batch of a tf.data iterator batched with drop_remainder=True"
    )


def unscaled_step(optimizers: list[Any], precision: str) -> str | None:
    """Under mixed_float16 a step of the script's own that does not scale its loss
    (Keras' LossScaleOptimizer) learns from float16 gradients that underflow to zero:
    why the trial would not train as its label says, or None."""
    import keras

    unscaled = [
        type(optimizer).__name__
        for optimizer in optimizers
        if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    ]
    if precision != "mixed_float16" or not unscaled:
        return None
    return (
        "mixed_float16 needs the loss scaled (keras.optimizers.LossScaleOptimizer), and the "
        f"script's own training step applies {' and '.join(unscaled)}'s gradients "
        "unscaled: small float16 gradients would underflow to zero (mixed_bfloat16 needs "
        "no scaling)"
    )


def install(keras: Any, steps: StepFunctions, on_step: Callable[..., None]) -> None:
    """Find the script's training steps as they trace (`StepFunctions`) and call
    `on_step(fn, start, args, kwargs, out)` after each call of one; an eager step's
    reason goes to `on_step(None, ...)` with the reason as `out`."""
    from tfaccel._tf import import_tensorflow

    function = type(import_tensorflow().function(lambda: None))
    call, model_call = function.__call__, keras.Model.__call__
    apply = keras.optimizers.Optimizer.apply

    def call_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        if steps.outer:  # called inside another's trace: part of that one
            return call(self, *args, **kwargs)
        steps.outer.append(self)
        start = time.perf_counter()
        try:
            out = call(self, *args, **kwargs)
        finally:
            steps.outer.pop()
        if steps.is_step(self):
            on_step(self, start, args, kwargs, out)
        return out

    def apply_step(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
        given = trainable_variables
        if given is None:  # the optimizer's own, from its build
            given = getattr(self, "_trainable_variables", [])
        eager = steps.applied(_scaling(self), given)
        out = apply(self, grads, trainable_variables)
        if eager:
            on_step(None, 0.0, (), {}, eager)
        return out

    def model_called(self: Any, *args: Any, **kwargs: Any) -> Any:
        steps.called(self, args[0] if args else kwargs.get("inputs"))
        return model_call(self, *args, **kwargs)

    function.__call__ = call_step
    keras.optimizers.Optimizer.apply = apply_step
    keras.Model.__call__ = model_called


def hook(
    keras: Any,
    report: Any,
    request: Any,
    started: float,
    caller: Callable[[], str],
    say: Callable[[str], None],
) -> TimedStep | None:
    """Install the finding of the script's training steps: in a trial they are timed
    (the TimedStep returned), under `run` each is said once (`say_step`)."""
    steps = StepFunctions()
    if request.mode != "tune":
        spoken: set[int] = set()

        def said(fn: Any, start: float, args: Any, kwargs: Any, out: Any) -> None:
            if id(fn) in spoken:
                return
            spoken.add(id(fn))
            try:  # what is said never breaks the user's training
                say(EAGER_STEP_RUN if fn is None else say_step(fn, steps, report, caller()))
            except Exception as exc:
                say(f"could not say what reaches the script's training step: {exc}")

        install(keras, steps, said)
        return None
    timed = TimedStep(steps, report, request, started, caller)

    def step(fn: Any, start: float, args: Any, kwargs: Any, out: Any) -> None:
        if fn is None:
            timed.failed(out)
        elif timed.timing(fn):
            timed.ended(start, args, kwargs, out)

    install(keras, steps, step)
    return timed


def say_step(fn: Any, steps: StepFunctions, report: Any, where: str) -> str:
    """What `run` does to a training step of the script's own, said once a step."""
    optimizers = steps.optimizers.get(id(fn), [])
    pairs = zip(steps.trained.get(id(fn), []), optimizers, strict=True)
    trains = " and ".join(
        f"{type(m).__name__ if m is not None else 'variables'} with {type(o).__name__}"
        for m, o in pairs
    )
    jit = bool(getattr(fn, "_jit_compile", False))
    notes = [
        f"trains {trains}",
        "the precision reaches it through the dtype policy, set before the script built its models",
        f"its XLA is its own (jit_compile={jit})",
        "steps_per_execution and the batches are the script's own",
    ]
    unscaled = unscaled_step(optimizers, report.precision)
    return f"{name_of(fn)} (a tf.function of the script's) at {where}: " + "; ".join(
        [*notes, *([unscaled] if unscaled else [])]
    )
